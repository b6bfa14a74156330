import { type Insertable, type Selectable, sql } from 'kysely';
import { type Db, dialectOf } from '../database.js';
import { type JsonField, jsonArray } from '../json-page.js';
import { preparedSelect } from '../prepared.js';
import type { ProjectFileTable, UploadReservationTable } from '../schema.js';
import { idInCodePointOrder } from '../sort-key.js';

export type ProjectFileRow = Selectable<ProjectFileTable>;
export type NewProjectFileRow = Insertable<ProjectFileTable>;

/**
 * What marks a file for indexing (spec/knowledge.md): a new claim may start at once, and a claim
 * in progress on the old content loses its hold, so its result is thrown away (indexer.ts).
 */
export const INDEX_PENDING = {
  index_status: 'pending',
  index_error: null,
  index_attempts: 0,
  index_retry_at: null,
  index_claimed_by: null,
  index_lease_until: null,
} as const;

/** SQLite's default limit is 32,766 bound values; 12 columns × 200 rows stays far below it. */
const INSERT_BATCH = 200;
const ID_BATCH = 500;

/**
 * Files of a project, newest `updated_at` first, then id in code point order (the same on both
 * engines); all of them when limit is undefined.
 */
export function listProjectFileRows(
  db: Db,
  workspaceId: string,
  projectId: string,
  page: { limit?: number; offset?: number } = {},
) {
  const query = db
    .selectFrom('project_files')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('project_id', '=', projectId)
    .orderBy('updated_at', 'desc')
    .orderBy(idInCodePointOrder(db), 'desc');
  if (page.limit === undefined) {
    // No limit: every file from offset on (a project holds at most 500, so slicing here is cheap
    // and avoids dialect-specific "LIMIT ALL" spellings).
    return query.execute().then((rows) => rows.slice(page.offset ?? 0));
  }
  return query
    .limit(page.limit)
    .offset(page.offset ?? 0)
    .execute();
}

/** The fields of a listed file, in the response's order (`projectFileView`). */
const FILE_FIELDS: Record<string, JsonField> = {
  id: 'value',
  projectId: 'value',
  name: 'value',
  path: 'value',
  mimeType: 'value',
  sizeBytes: 'value',
  type: 'value',
  createdAt: 'value',
  updatedAt: 'value',
  syncedAt: 'value',
  indexStatus: 'value',
  indexError: 'value',
};

/** Far above any project's file count: the spelling of "no limit" both engines accept. */
const NO_LIMIT = 2 ** 31 - 1;

/**
 * One page of a project's files as the listing's JSON array (order of listProjectFileRows),
 * with how many files the project has, in one statement; undefined when the workspace has no
 * such project.
 */
export async function listProjectFilesJson(
  db: Db,
  workspaceId: string,
  projectId: string,
  page: { limit?: number; offset: number },
): Promise<{ page: string; total: number } | undefined> {
  const [row] = await projectFilesPage(db, {
    workspaceId,
    projectId,
    limit: page.limit ?? NO_LIMIT,
    offset: page.offset,
  });
  return row!.project ? { page: row!.page, total: Number(row!.total) } : undefined;
}

interface ProjectFilesPage {
  workspaceId: string;
  projectId: string;
  limit: number;
  offset: number;
}

const projectFilesPage = preparedSelect((db, { workspaceId, projectId, limit, offset }: ProjectFilesPage) => {
  const files = db
    .selectFrom('project_files')
    .where('workspace_id', '=', workspaceId)
    .where('project_id', '=', projectId);
  const rows = files
    .select([
      'id',
      'project_id as projectId',
      'name',
      'path',
      'mime_type as mimeType',
      'size_bytes as sizeBytes',
      'type',
      'created_at as createdAt',
      'updated_at as updatedAt',
      'synced_at as syncedAt',
      'index_status as indexStatus',
      'index_error as indexError',
    ])
    .orderBy('updated_at', 'desc')
    .orderBy(idInCodePointOrder(db), 'desc')
    .limit(limit)
    .offset(offset);
  const project = db
    .selectFrom('projects')
    .select('id')
    .where('id', '=', projectId)
    .where('workspace_id', '=', workspaceId);
  return db.selectNoFrom((eb) => [
    jsonArray(dialectOf(db), rows, FILE_FIELDS).as('page'),
    files.select(eb.fn.countAll<number>().as('total')).as('total'),
    project.as('project'),
  ]);
});

/** The project's files, scoped to its workspace (tenant isolation), to narrow further. */
function filesOfProject(db: Db, workspaceId: string, projectId: string) {
  return db
    .selectFrom('project_files')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('project_id', '=', projectId);
}

export function findProjectFile(db: Db, workspaceId: string, projectId: string, fileId: string) {
  return filesOfProject(db, workspaceId, projectId).where('id', '=', fileId).executeTakeFirst();
}

/**
 * A registered file that clashes with `path` as a folder: one of path's parent folders is a
 * file, or path itself is a folder that holds files.
 */
export function findPathClash(db: Db, workspaceId: string, projectId: string, path: string) {
  const segments = path.split('/');
  const parents = segments.slice(0, -1).map((_, i) => segments.slice(0, i + 1).join('/'));
  const asFolder = `${path}/`;
  return db
    .selectFrom('project_files')
    .select(['id', 'path'])
    .where('workspace_id', '=', workspaceId)
    .where('project_id', '=', projectId)
    .where((eb) =>
      eb.or([
        ...(parents.length > 0 ? [eb('path', 'in', parents)] : []),
        // Both engines' substr counts characters (code points), not JavaScript's UTF-16 units.
        eb(sql<string>`substr(${sql.ref('path')}, 1, ${[...asFolder].length})`, '=', asFolder),
      ]),
    )
    .executeTakeFirst();
}

/**
 * Inserts rows whose (project_id, path) is not registered yet; a row a concurrent caller
 * registered first is left alone. Returns how many rows this call inserted.
 */
export async function insertProjectFilesIfAbsent(db: Db, rows: NewProjectFileRow[]): Promise<number> {
  let inserted = 0;
  for (let i = 0; i < rows.length; i += INSERT_BATCH) {
    const result = await db
      .insertInto('project_files')
      .values(rows.slice(i, i + INSERT_BATCH))
      .onConflict((oc) => oc.columns(['project_id', 'path']).doNothing())
      .returning('id')
      .execute();
    inserted += result.length;
  }
  return inserted;
}

/**
 * Records new content for a file, only if nobody changed it since it was read (its etag), and
 * marks it for indexing.
 */
export async function updateProjectFileContent(
  db: Db,
  row: Pick<ProjectFileRow, 'id' | 'etag' | 'workspace_id'>,
  change: Pick<
    ProjectFileRow,
    'etag' | 'size_bytes' | 'mime_type' | 'object_modified_at' | 'updated_at' | 'synced_at'
  >,
): Promise<boolean> {
  const result = await db
    .updateTable('project_files')
    .set({ ...change, ...INDEX_PENDING })
    .where('id', '=', row.id)
    .where('workspace_id', '=', row.workspace_id)
    .where('etag', '=', row.etag)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export async function markProjectFilesSynced(
  db: Db,
  workspaceId: string,
  projectId: string,
  ids: string[],
  syncedAt: string,
) {
  for (let i = 0; i < ids.length; i += ID_BATCH) {
    await db
      .updateTable('project_files')
      .set({ synced_at: syncedAt })
      .where('workspace_id', '=', workspaceId)
      .where('project_id', '=', projectId)
      .where('id', 'in', ids.slice(i, i + ID_BATCH))
      .execute();
  }
}

/**
 * Records the last-modified time of an object whose content and type are unchanged, while the
 * record still has the content it was read with.
 */
export async function recordObjectModifiedAt(
  db: Db,
  row: Pick<ProjectFileRow, 'id' | 'etag' | 'workspace_id'>,
  objectModifiedAt: string | null,
) {
  await db
    .updateTable('project_files')
    .set({ object_modified_at: objectModifiedAt })
    .where('id', '=', row.id)
    .where('workspace_id', '=', row.workspace_id)
    .where('etag', '=', row.etag)
    .execute();
}

/** Deletes a file record, only while it still has the content it was read with. */
export async function deleteProjectFileIfUnchanged(
  db: Db,
  row: Pick<ProjectFileRow, 'id' | 'etag' | 'workspace_id'>,
) {
  const result = await db
    .deleteFrom('project_files')
    .where('id', '=', row.id)
    .where('workspace_id', '=', row.workspace_id)
    .where('etag', '=', row.etag)
    .executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

export async function deleteProjectFileRow(db: Db, workspaceId: string, projectId: string, fileId: string) {
  const result = await db
    .deleteFrom('project_files')
    .where('id', '=', fileId)
    .where('workspace_id', '=', workspaceId)
    .where('project_id', '=', projectId)
    .executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/**
 * The project's upload URLs that have not expired, by path, with the most bytes one of them may
 * still bring; expired ones are removed first. Run in the transaction that holds the project's lock.
 */
export async function liveUploadReservations(
  trx: Db,
  workspaceId: string,
  projectId: string,
  now: string,
): Promise<Map<string, number>> {
  await trx
    .deleteFrom('upload_reservations')
    .where('project_id', '=', projectId)
    .where('expires_at', '<=', now)
    .execute();
  const rows = await trx
    .selectFrom('upload_reservations')
    .select(['path', 'size_bytes'])
    .where('workspace_id', '=', workspaceId)
    .where('project_id', '=', projectId)
    .execute();
  const largest = new Map<string, number>();
  for (const row of rows) largest.set(row.path, Math.max(Number(row.size_bytes), largest.get(row.path) ?? 0));
  return largest;
}

/**
 * Records an upload URL for `path` beside the earlier ones for it: each URL holds its own size
 * until its own expiry (a path asked for again holds the larger size only while the URL that
 * may bring it can still write, docs/files.md "Quota"). An earlier reservation the new one
 * covers (no larger, ending no later) is dropped, and the new one is not recorded when an
 * earlier one covers it, so repeated asks for a path leave few rows. Run under the project's lock.
 */
export async function reserveUpload(trx: Db, reservation: UploadReservationTable): Promise<void> {
  const covering = await trx
    .selectFrom('upload_reservations')
    .select('path')
    .where('project_id', '=', reservation.project_id)
    .where('path', '=', reservation.path)
    .where('size_bytes', '>=', reservation.size_bytes)
    .where('expires_at', '>=', reservation.expires_at)
    .executeTakeFirst();
  if (covering) return;
  await trx
    .deleteFrom('upload_reservations')
    .where('project_id', '=', reservation.project_id)
    .where('path', '=', reservation.path)
    .where('size_bytes', '<=', reservation.size_bytes)
    .where('expires_at', '<=', reservation.expires_at)
    .execute();
  await trx.insertInto('upload_reservations').values(reservation).execute();
}

/** Every registered file's path and size. */
export async function registeredFileSizes(
  db: Db,
  workspaceId: string,
  projectId: string,
): Promise<Map<string, number>> {
  const rows = await db
    .selectFrom('project_files')
    .select(['path', 'size_bytes'])
    .where('workspace_id', '=', workspaceId)
    .where('project_id', '=', projectId)
    .execute();
  return new Map(rows.map((row) => [row.path, Number(row.size_bytes)]));
}
