import { sql } from 'kysely';
import { type Db, dialectOf, type Executor } from '../database.js';
import { type JsonField, jsonArray } from '../json-page.js';
import { preparedSelect } from '../prepared.js';
import { rowCache } from '../row-cache.js';
import type { AgentTable } from '../schema.js';
import { caseInsensitiveSortKey, idInCodePointOrder } from '../sort-key.js';

const LISTED_VISIBILITIES = ['workspace', 'organization'] as const;

/** Listed agents: not deleted, not private; a session token limited to some agents sees only those. */
function listedAgents(db: Db, workspaceId: string, onlyIds?: string[] | null) {
  const base = db
    .selectFrom('agents')
    .where('workspace_id', '=', workspaceId)
    .where('deleted_at', 'is', null)
    .where('visibility', 'in', LISTED_VISIBILITIES);
  if (!onlyIds) return base;
  return onlyIds.length > 0 ? base.where('id', 'in', onlyIds) : base.where(sql<boolean>`1 = 0`);
}

/**
 * Listed agents ordered by title (case-insensitive: `caseInsensitiveSortKey`), then id, which
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
  const rows = await listedAgents(db, workspaceId, onlyIds)
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
    .orderBy('title_sort_key')
    .orderBy(idInCodePointOrder(db))
    .limit(limit)
    .offset(offset)
    .execute();
  return { rows };
}

/** The fields of a listed agent, in the response's order (`agentView`). */
const AGENT_FIELDS: Record<string, JsonField> = {
  id: 'value',
  title: 'value',
  description: 'value',
  image: 'value',
  model: 'value',
  visibility: 'value',
  category: 'value',
  createdAt: 'value',
  updatedAt: 'value',
};

/**
 * One page of listed agents as the listing's JSON array, in the order of listListedAgents, with
 * how many there are in all. `model` is the model the agent runs on, by the rule chats follow
 * (`ModelRegistry.resolveForWorkspace`): its own model when the workspace enables it as a chat
 * model, else `fallback`.
 */
export async function listListedAgentsJson(
  db: Db,
  page: { workspaceId: string; limit: number; offset: number; onlyIds?: string[] | null; fallback: string },
): Promise<{ page: string; total: number }> {
  const [row] = await listedAgentsPage(db, page);
  return { page: row!.page, total: Number(row!.total) };
}

type ListedAgentsPage = Parameters<typeof listListedAgentsJson>[1];

const listedAgentsPage = preparedSelect((db, page: ListedAgentsPage) => {
  const base = listedAgents(db, page.workspaceId, page.onlyIds);
  const rows = base
    .select((eb) => [
      'id',
      'title',
      'description',
      'image',
      eb
        .case()
        .when(
          eb.and([
            eb('agents.model', 'is not', null),
            eb.or([
              eb('agents.model', '=', page.fallback),
              eb.exists(
                eb
                  .selectFrom('workspace_models')
                  .leftJoin('models', 'models.id', 'workspace_models.model_id')
                  .select(sql.lit(1).as('one'))
                  .whereRef('workspace_models.workspace_id', '=', 'agents.workspace_id')
                  .whereRef('workspace_models.model_id', '=', 'agents.model')
                  .where((inner) =>
                    inner.or([inner('models.kind', 'is', null), inner('models.kind', '=', 'chat')]),
                  ),
              ),
            ]),
          ]),
        )
        .then(eb.ref('agents.model'))
        .else(page.fallback)
        .end()
        .as('model'),
      'visibility',
      'category',
      'created_at as createdAt',
      'updated_at as updatedAt',
    ])
    .orderBy('title_sort_key')
    .orderBy(idInCodePointOrder(db))
    .limit(page.limit)
    .offset(page.offset);
  const total = base.select((eb) => eb.fn.countAll<number>().as('total'));
  return db.selectNoFrom([jsonArray(dialectOf(db), rows, AGENT_FIELDS).as('page'), total.as('total')]);
});

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

/** An agent's fields; the title's sort key is the repository's to derive, never passed in. */
export type AgentRow = Omit<AgentTable, 'title_sort_key'>;

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
export function liveAgentIdsIn(db: Executor, workspaceId: string, agentIds: string[]) {
  return agentIdsIn(db, workspaceId, agentIds, 'live');
}

/**
 * Which of `agentIds` are agents of the workspace with a visibility the agent list shows members
 * (deleted ones included: for reports of past usage, where a private agent stays unnamed).
 */
export function memberVisibleAgentIdsIn(db: Executor, workspaceId: string, agentIds: string[]) {
  return agentIdsIn(db, workspaceId, agentIds, 'listed');
}

async function agentIdsIn(db: Executor, workspaceId: string, agentIds: string[], which: 'live' | 'listed') {
  if (agentIds.length === 0) return new Set<string>();
  const query = db
    .selectFrom('agents')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('id', 'in', agentIds);
  const rows = await (
    which === 'live'
      ? query.where('deleted_at', 'is', null)
      : query.where('visibility', 'in', LISTED_VISIBILITIES)
  ).execute();
  return new Set(rows.map((row) => row.id));
}

export async function insertAgent(db: Executor, agent: AgentRow): Promise<void> {
  await db
    .insertInto('agents')
    .values({ ...agent, title_sort_key: caseInsensitiveSortKey(agent.title) })
    .execute();
}

export async function updateAgent(
  db: Executor,
  agentId: string,
  changes: Partial<Omit<AgentRow, 'id' | 'workspace_id'>>,
): Promise<void> {
  const sortKey =
    changes.title === undefined ? {} : { title_sort_key: caseInsensitiveSortKey(changes.title) };
  await db
    .updateTable('agents')
    .set({ ...changes, ...sortKey })
    .where('id', '=', agentId)
    .execute();
}

const agentsWithWorkspaces = rowCache<NonNullable<Awaited<ReturnType<typeof readAgentWithWorkspace>>>>([
  'agents',
]);

/**
 * A live agent with its workspace in one query (the hot path of `/chat` and runs), from memory
 * while neither changed (src/db/row-cache.ts; `version`: the request's `Principal.dataVersion`).
 * The objects are shared: not to be changed.
 */
export function findAgentWithWorkspace(db: Executor, agentId: string, version?: number) {
  return agentsWithWorkspaces(db, agentId, () => readAgentWithWorkspace(db, agentId), version);
}

async function readAgentWithWorkspace(db: Executor, agentId: string) {
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
      'workspaces.rate_limit_per_minute as ws_rate_limit_per_minute',
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
    ws_rate_limit_per_minute,
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
      rate_limit_per_minute: ws_rate_limit_per_minute,
    },
  };
}
