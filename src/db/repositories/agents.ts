import { sql } from 'kysely';
import type { Db } from '../database.js';

const LISTED_VISIBILITIES = ['workspace', 'organization'] as const;

/**
 * Listed agents: not deleted, not private; ordered by title (case-insensitive), then id, which
 * the listing index serves without a sort. (A window count would force one; a count is cheaper.)
 */
export async function listListedAgents(db: Db, workspaceId: string, limit: number, offset: number) {
  const base = db
    .selectFrom('agents')
    .where('agents.workspace_id', '=', workspaceId)
    .where('agents.deleted_at', 'is', null)
    .where('agents.visibility', 'in', LISTED_VISIBILITIES);
  const rows = await base
    // The agent's own model only counts when the workspace enables it (the rule chats follow).
    .leftJoin('workspace_models', (join) =>
      join
        .onRef('workspace_models.workspace_id', '=', 'agents.workspace_id')
        .onRef('workspace_models.model_id', '=', 'agents.model'),
    )
    .select([
      'agents.id',
      'agents.title',
      'agents.description',
      'agents.image',
      'agents.category',
      'agents.visibility',
      'agents.model',
      'workspace_models.model_id as enabled_model',
      'agents.created_at',
      'agents.updated_at',
    ])
    .orderBy(sql`lower(agents.title)`)
    .orderBy('agents.id')
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
