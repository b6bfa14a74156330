import type { Db } from '../database.js';

export function findWorkspace(db: Db, workspaceId: string) {
  return db.selectFrom('workspaces').selectAll().where('id', '=', workspaceId).executeTakeFirst();
}

/** A workspace with the given user's role in it (null when not a member), in one query. */
export function findWorkspaceWithRole(db: Db, workspaceId: string, userId: string) {
  return db
    .selectFrom('workspaces')
    .leftJoin('workspace_members', (join) =>
      join
        .onRef('workspace_members.workspace_id', '=', 'workspaces.id')
        .on('workspace_members.user_id', '=', userId),
    )
    .select([
      'workspaces.id',
      'workspaces.organization_id',
      'workspaces.default_model',
      'workspaces.rate_limit_per_minute',
      'workspace_members.role',
    ])
    .where('workspaces.id', '=', workspaceId)
    .executeTakeFirst();
}

/** The roles of each of `userIds` in the workspaces of an organization, one row per membership. */
export function findOrganizationRoles(db: Db, organizationId: string, userIds: string[]) {
  return db
    .selectFrom('workspace_members')
    .innerJoin('workspaces', 'workspaces.id', 'workspace_members.workspace_id')
    .select(['workspace_members.user_id', 'workspace_members.workspace_id', 'workspace_members.role'])
    .where('workspaces.organization_id', '=', organizationId)
    .where('workspace_members.user_id', 'in', userIds)
    .execute();
}

export function findUser(db: Db, userId: string) {
  return db.selectFrom('users').selectAll().where('id', '=', userId).executeTakeFirst();
}
