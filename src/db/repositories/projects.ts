import { sql } from 'kysely';
import { type Db, dialectOf } from '../database.js';
import { selectInChunks } from '../in-chunks.js';
import { type JsonField, jsonArray } from '../json-page.js';
import { preparedSelect } from '../prepared.js';
import { idInCodePointOrder } from '../sort-key.js';
import type { ProjectTable } from '../schema.js';

export type ProjectRow = ProjectTable;

export async function insertProject(db: Db, project: ProjectRow): Promise<void> {
  await db.insertInto('projects').values(project).execute();
}

/**
 * Active (or, when asked, archived) projects as the listing's JSON array, most recently updated
 * first (then id in code point order, so equal times keep one order on both engines). Instructions and memory can be large and
 * stay behind.
 */
export async function listProjectsJson(db: Db, workspaceId: string, archived = false): Promise<string> {
  return (await projectsPage(db, { workspaceId, archived }))[0]!.page;
}

const projectsPage = preparedSelect(
  (db, { workspaceId, archived }: { workspaceId: string; archived: boolean }) => {
    const rows = db
      .selectFrom('projects')
      .select([
        'id',
        'name',
        'description',
        'color',
        'icon',
        'archived',
        'created_at as createdAt',
        'updated_at as updatedAt',
      ])
      .where('workspace_id', '=', workspaceId)
      .where('archived', '=', archived ? 1 : 0)
      .orderBy('updated_at', 'desc')
      .orderBy(idInCodePointOrder(db), 'desc');
    return db.selectNoFrom(jsonArray(dialectOf(db), rows, PROJECT_FIELDS).as('page'));
  },
);

/** The fields of a listed project, in the response's order (`projectView`). */
const PROJECT_FIELDS: Record<string, JsonField> = {
  id: 'value',
  name: 'value',
  description: 'value',
  color: 'value',
  icon: 'value',
  archived: 'boolean',
  createdAt: 'value',
  updatedAt: 'value',
};

/** A project of the workspace (archived ones included), or undefined. */
export function findProject(db: Db, workspaceId: string, projectId: string) {
  return db
    .selectFrom('projects')
    .selectAll()
    .where('id', '=', projectId)
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
}

export async function updateProject(
  db: Db,
  projectId: string,
  changes: Partial<Omit<ProjectRow, 'id' | 'workspace_id'>>,
): Promise<void> {
  await db.updateTable('projects').set(changes).where('id', '=', projectId).execute();
}

/** Which of `ids` are projects of the workspace (any state). */
export async function findExistingProjectIds(
  db: Db,
  workspaceId: string,
  ids: string[],
): Promise<Set<string>> {
  const rows = await selectInChunks(ids, (chunk) =>
    db
      .selectFrom('projects')
      .select('id')
      .where('workspace_id', '=', workspaceId)
      .where('id', 'in', chunk)
      .execute(),
  );
  return new Set(rows.map((row) => row.id));
}

/**
 * Deletes the project and its file records in one transaction; its chats stay, detached (the
 * foreign key would do it too, but not on a SQLite connection without foreign keys enforced).
 */
export async function deleteProjectRows(db: Db, workspaceId: string, projectId: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    // The project's lock first, as sync and file deletes take it before the file records: taken
    // after them, a sync holding it and writing records deadlocked the delete on PostgreSQL.
    if (!(await lockProject(trx, workspaceId, projectId))) return;
    await trx
      .updateTable('chats')
      .set({ project_id: null })
      .where('workspace_id', '=', workspaceId)
      .where('project_id', '=', projectId)
      .execute();
    await trx.deleteFrom('project_files').where('project_id', '=', projectId).execute();
    await trx
      .deleteFrom('projects')
      .where('id', '=', projectId)
      .where('workspace_id', '=', workspaceId)
      .execute();
  });
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

/**
 * Appends a note to a project's memory in one statement, so that concurrent `remember` calls
 * never lose each other's notes nor together pass `maxLength` characters (both engines'
 * `length` counts characters). Notes are separated by a blank line (the memory is markdown).
 */
export async function appendProjectMemory(
  db: Db,
  workspaceId: string,
  projectId: string,
  note: string,
  { now, maxLength }: { now: string; maxLength: number },
): Promise<'appended' | 'full' | 'missing'> {
  const separated = `\n\n${note}`;
  const result = await db
    .updateTable('projects')
    .set({
      memory: sql<string>`case when memory = '' then ${note} else memory || ${separated} end`,
      updated_at: now,
    })
    .where('id', '=', projectId)
    .where('workspace_id', '=', workspaceId)
    .where(
      sql<boolean>`case when memory = '' then ${[...note].length} else length(memory) + ${[...separated].length} end <= ${maxLength}`,
    )
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) > 0) return 'appended';
  return (await findProject(db, workspaceId, projectId)) ? 'full' : 'missing';
}
