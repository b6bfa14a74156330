import type { Db, Executor } from '../database.js';
import type { AgentRunTable } from '../schema.js';
import { idInCodePointOrder } from '../sort-key.js';

/**
 * Stores a run. Its response and error (and a sub-agent run's input) are a model's words, which
 * may hold NUL characters:
 * PostgreSQL text cannot, so they are stored as U+FFFD on both engines (requests with NUL are
 * refused before they get here).
 */
export async function insertAgentRun(db: Executor, run: AgentRunTable): Promise<void> {
  await db
    .insertInto('agent_runs')
    .values({
      ...run,
      // A sub-agent run's input is the lead model's tool argument: a model's words too.
      input: withoutNul(run.input),
      response: withoutNul(run.response),
      error: run.error === null ? null : withoutNul(run.error),
    })
    .execute();
}

function withoutNul(text: string): string {
  return text.replaceAll('\u0000', '\uFFFD');
}

export function findAgentRun(db: Executor, workspaceId: string, runId: string) {
  return db
    .selectFrom('agent_runs')
    .selectAll()
    .where('id', '=', runId)
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
}

export interface RunPageQuery {
  limit: number;
  /** The last run of the previous page: the page holds runs strictly older in (created_at, id). */
  after?: { createdAt: string; id: string };
  /** Only runs made with this user's keys (members). */
  userId?: string;
}

/** A page of an agent's runs, newest first, one more than asked to tell whether more follow. */
export function listAgentRuns(db: Db, workspaceId: string, agentId: string, page: RunPageQuery) {
  let query = db
    .selectFrom('agent_runs')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('agent_id', '=', agentId);
  if (page.userId) query = query.where('user_id', '=', page.userId);
  // Ids in code point order in the cursor as in the order (sort-key.ts), whatever the database's locale.
  const id = idInCodePointOrder(db);
  const after = page.after;
  if (after) {
    query = query.where((eb) =>
      eb.or([
        eb('created_at', '<', after.createdAt),
        eb.and([eb('created_at', '=', after.createdAt), eb(id, '<', after.id)]),
      ]),
    );
  }
  return query
    .orderBy('created_at', 'desc')
    .orderBy(id, 'desc')
    .limit(page.limit + 1)
    .execute();
}
