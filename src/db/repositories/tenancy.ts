import type { Db } from '../database.js';
import type { Role } from '../schema.js';

export function findWorkspace(db: Db, workspaceId: string) {
  return db.selectFrom('workspaces').selectAll().where('id', '=', workspaceId).executeTakeFirst();
}

export async function findMemberRole(db: Db, workspaceId: string, userId: string): Promise<Role | null> {
  const row = await db
    .selectFrom('workspace_members')
    .select('role')
    .where('workspace_id', '=', workspaceId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return row?.role ?? null;
}

export function findUser(db: Db, userId: string) {
  return db.selectFrom('users').selectAll().where('id', '=', userId).executeTakeFirst();
}

export async function enabledModelIds(db: Db, workspaceId: string): Promise<string[]> {
  const rows = await db
    .selectFrom('workspace_models')
    .select('model_id')
    .where('workspace_id', '=', workspaceId)
    .execute();
  return rows.map((r) => r.model_id);
}
