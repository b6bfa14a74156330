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
    .where('workspace_id', '=', workspaceId)
    .where('deleted_at', 'is', null)
    .where('visibility', 'in', LISTED_VISIBILITIES);
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
