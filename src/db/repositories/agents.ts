import { sql } from 'kysely';
import type { Db, Executor } from '../database.js';
import type { AgentTable } from '../schema.js';

const LISTED_VISIBILITIES = ['workspace', 'organization'] as const;

/**
 * Listed agents: not deleted, not private; ordered by title (case-insensitive), then id, which
 * the listing index serves without a sort. (A window count would force one; a count is cheaper.)
 */
export async function listListedAgents(
  db: Db,
  workspaceId: string,
  limit: number,
  offset: number,
  /** A session token limited to some agents lists only those. */
  onlyIds?: string[] | null,
) {
  let base = db
    .selectFrom('agents')
    .where('workspace_id', '=', workspaceId)
    .where('deleted_at', 'is', null)
    .where('visibility', 'in', LISTED_VISIBILITIES);
  if (onlyIds) base = onlyIds.length > 0 ? base.where('id', 'in', onlyIds) : base.where(sql<boolean>`1 = 0`);
  const rows = await base
    .select([
      'id',
      'title',
      'description',
      'image',
      'category',
      'visibility',
      'model',
      'created_at',
      'updated_at',
    ])
    .orderBy(sql`lower(title)`)
    .orderBy('id')
    .limit(limit)
    .offset(offset)
    .execute();
  const count = await base.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow();
  return { rows, total: Number(count.total) };
}

/** A live (not deleted) agent of the workspace, or undefined. */
export function findAgent(db: Db, workspaceId: string, agentId: string) {
  return db
    .selectFrom('agents')
    .selectAll()
    .where('id', '=', agentId)
    .where('workspace_id', '=', workspaceId)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
}

/** Where a live agent lives, whatever the caller may see; access is decided by the caller. */
export function findAgentLocation(db: Db, agentId: string) {
  return db
    .selectFrom('agents')
    .innerJoin('workspaces', 'workspaces.id', 'agents.workspace_id')
    .select(['agents.workspace_id as workspaceId', 'workspaces.organization_id as organizationId'])
    .where('agents.id', '=', agentId)
    .where('agents.deleted_at', 'is', null)
    .executeTakeFirst();
}

export type AgentRow = AgentTable;

/** A live agent wherever it is, for the management routes (access is decided by the caller). */
export function findLiveAgent(db: Executor, agentId: string) {
  return db
    .selectFrom('agents')
    .selectAll()
    .where('id', '=', agentId)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
}

/** A live agent of the workspace with this exact title, other than `exceptId`. */
export function findLiveAgentByTitle(db: Executor, workspaceId: string, title: string, exceptId?: string) {
  let query = db
    .selectFrom('agents')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('title', '=', title)
    .where('deleted_at', 'is', null);
  if (exceptId) query = query.where('id', '!=', exceptId);
  return query.executeTakeFirst();
}

/** Which of `agentIds` are live agents of the workspace. */
export async function liveAgentIdsIn(db: Executor, workspaceId: string, agentIds: string[]) {
  if (agentIds.length === 0) return new Set<string>();
  const rows = await db
    .selectFrom('agents')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('id', 'in', agentIds)
    .where('deleted_at', 'is', null)
    .execute();
  return new Set(rows.map((row) => row.id));
}

export async function insertAgent(db: Executor, agent: AgentRow): Promise<void> {
  await db.insertInto('agents').values(agent).execute();
}

export async function updateAgent(
  db: Executor,
  agentId: string,
  changes: Partial<Omit<AgentRow, 'id' | 'workspace_id'>>,
): Promise<void> {
  await db.updateTable('agents').set(changes).where('id', '=', agentId).execute();
}

/** A live agent with its workspace in one query (the hot path of `/chat` and runs). */
export async function findAgentWithWorkspace(db: Executor, agentId: string) {
  const row = await db
    .selectFrom('agents')
    .innerJoin('workspaces', 'workspaces.id', 'agents.workspace_id')
    .selectAll('agents')
    .select([
      'workspaces.organization_id as ws_organization_id',
      'workspaces.default_model as ws_default_model',
      'workspaces.monthly_tokens as ws_monthly_tokens',
      'workspaces.monthly_cost_usd as ws_monthly_cost_usd',
      'workspaces.chat_spend_cap_usd as ws_chat_spend_cap_usd',
    ])
    .where('agents.id', '=', agentId)
    .where('agents.deleted_at', 'is', null)
    .executeTakeFirst();
  if (!row) return undefined;
  const {
    ws_organization_id,
    ws_default_model,
    ws_monthly_tokens,
    ws_monthly_cost_usd,
    ws_chat_spend_cap_usd,
    ...agent
  } = row;
  return {
    agent,
    workspace: {
      id: agent.workspace_id,
      organization_id: ws_organization_id,
      default_model: ws_default_model,
      monthly_tokens: ws_monthly_tokens,
      monthly_cost_usd: ws_monthly_cost_usd,
      chat_spend_cap_usd: ws_chat_spend_cap_usd,
    },
  };
}
