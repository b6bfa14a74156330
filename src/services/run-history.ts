import type { Db } from '../db/database.js';
import { findAgentRun, listAgentRuns } from '../db/repositories/agent-runs.js';
import { findLiveAgent } from '../db/repositories/agents.js';
import { errors } from '../errors.js';
import { isStorableText } from '../text.js';
import { isStoredTimestamp } from '../ids.js';
import { accessAgentWorkspace, isManager, type Principal } from './access.js';
import { runView } from './agent-runs.js';

export const RUN_PAGE = { defaultLimit: 20, maxLimit: 100 } as const;

/** The cursor is opaque to clients: the (created_at, id) of the last run of the page. */
export function encodeRunCursor(run: { created_at: string; id: string }): string {
  return Buffer.from(JSON.stringify([run.created_at, run.id])).toString('base64url');
}

export function decodeRunCursor(cursor: string): { createdAt: string; id: string } {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (
      Array.isArray(value) &&
      value.length === 2 &&
      isStoredTimestamp(value[0]) &&
      isStorableText(value[1])
    ) {
      return { createdAt: value[0] as string, id: value[1] as string };
    }
  } catch {
    // Falls through to the one answer for every malformed cursor.
  }
  throw errors.badRequest('query.cursor is not a cursor this API gave out', [
    { path: 'query.cursor', message: 'must be a nextCursor from a previous page' },
  ]);
}

async function agentInScope(db: Db, principal: Principal, agentId: string) {
  const access = await accessAgentWorkspace(db, principal, agentId);
  const agent = await findLiveAgent(db, agentId);
  // A private agent, and so its runs, is the owners' and admins' only, as in its detail.
  if (!agent || (agent.visibility === 'private' && !isManager(access))) throw errors.notFound('Agent');
  // Members see the runs made with their user's keys; owners and admins every run.
  return { access, agent, userId: isManager(access) ? undefined : principal.userId };
}

export async function listRuns(
  db: Db,
  principal: Principal,
  agentId: string,
  query: { limit?: number; cursor?: string },
) {
  const after = query.cursor !== undefined ? decodeRunCursor(query.cursor) : undefined;
  const { access, agent, userId } = await agentInScope(db, principal, agentId);
  const limit = Math.min(query.limit ?? RUN_PAGE.defaultLimit, RUN_PAGE.maxLimit);
  const rows = await listAgentRuns(db, access.workspaceId, agentId, { limit, after, userId });
  const hasMore = rows.length > limit;
  const page = rows.slice(0, limit);
  return {
    runs: page.map((run) => runView(run, agent.title)),
    pagination: { limit, hasMore, nextCursor: hasMore ? encodeRunCursor(page[page.length - 1]!) : null },
  };
}

export async function getRun(db: Db, principal: Principal, agentId: string, runId: string) {
  const { access, agent, userId } = await agentInScope(db, principal, agentId);
  const run = await findAgentRun(db, access.workspaceId, runId);
  if (!run || run.agent_id !== agentId || (userId && run.user_id !== userId)) throw errors.notFound('Run');
  return runView(run, agent.title);
}
