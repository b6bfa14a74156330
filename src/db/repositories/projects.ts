import type { Db } from '../database.js';
import type { ProjectTable } from '../schema.js';

export type ProjectRow = ProjectTable;

export async function insertProject(db: Db, project: ProjectRow): Promise<void> {
  await db.insertInto('projects').values(project).execute();
}

/** The columns a project listing shows; instructions and memory can be large and stay behind. */
const LISTED_COLUMNS = [
  'id',
  'name',
  'description',
  'color',
  'icon',
  'archived',
  'created_at',
  'updated_at',
] as const;

/** Active projects, most recently updated first (then id, so equal times keep a stable order). */
export function listActiveProjects(db: Db, workspaceId: string) {
  return db
    .selectFrom('projects')
    .select(LISTED_COLUMNS)
    .where('workspace_id', '=', workspaceId)
    .where('archived', '=', 0)
    .orderBy('updated_at', 'desc')
    .orderBy('id', 'desc')
    .execute();
}

/** A project of the workspace (archived ones included), or undefined. */
export function findProject(db: Db, workspaceId: string, projectId: string) {
  return db
    .selectFrom('projects')
    .selectAll()
    .where('id', '=', projectId)
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
}

/**
 * Locks the project's row until the transaction ends (a row lock on PostgreSQL, the write lock
 * on SQLite): what serializes the operations that read storage and the file records together
 * (sync, delete). The update changes nothing; false when the project does not exist.
 */
export async function lockProject(trx: Db, workspaceId: string, projectId: string): Promise<boolean> {
  const result = await trx
    .updateTable('projects')
    .set((eb) => ({ updated_at: eb.ref('updated_at') }))
    .where('id', '=', projectId)
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}
