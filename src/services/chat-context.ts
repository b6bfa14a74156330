import type { Db } from '../db/database.js';
import type { ProjectTable } from '../db/schema.js';
import { retrieveForTurn, TURN_LIMITS, type TurnLimits, type TurnSource } from '../knowledge/retrieval.js';
import type { ProjectContext } from '../models/context.js';
import type { ConversationMessage } from './chat-messages.js';

/** A latest message of fewer words than this ("and the second one?") is searched with the one before. */
const SHORT_QUERY_WORDS = 4;
/** Search queries are at most this long (the search endpoint's own limit). */
const QUERY_MAX_CHARS = 1_000;

function textOf(message: ConversationMessage): string {
  return message.parts
    .map((part) => (part.type === 'text' && typeof part.text === 'string' ? part.text : ''))
    .join(' ')
    .replace(/\s+/g, ' ')
    .trim();
}

/**
 * What a turn searches the project for: the latest user message, and the user message before
 * it when the latest is very short, since a follow-up like "and for Linux?" names no subject.
 */
export function turnQuery(conversation: ConversationMessage[]): string {
  const asked = conversation.filter((message) => message.role === 'user').map(textOf);
  const latest = asked.at(-1) ?? '';
  const words = latest.split(' ').filter(Boolean).length;
  // The latest first: the query is cut to its length and to its first words, and what is cut
  // must be the earlier message's tail, never the follow-up's own words.
  const query = words < SHORT_QUERY_WORDS && asked.length > 1 ? `${latest} ${asked.at(-2)}` : latest;
  return query.slice(0, QUERY_MAX_CHARS).trim();
}

/** The project part of a turn's system prompt, and the sources the reply may cite. */
export interface ProjectTurn {
  context: ProjectContext;
  sources: TurnSource[];
}

/**
 * The project's instructions and memory, and its files as the index holds them: never read
 * from object storage on a turn (spec/knowledge.md).
 */
export async function projectTurn(
  db: Db,
  project: Pick<ProjectTable, 'id' | 'workspace_id' | 'instructions' | 'memory'>,
  conversation: ConversationMessage[],
  limits: TurnLimits = TURN_LIMITS,
): Promise<ProjectTurn> {
  const knowledge = await retrieveForTurn(db, project, turnQuery(conversation), limits);
  return {
    context: {
      instructions: project.instructions,
      memory: project.memory,
      files: knowledge.files,
      unlisted: knowledge.unlisted,
      excerpts: knowledge.excerpts,
    },
    sources: knowledge.sources,
  };
}
