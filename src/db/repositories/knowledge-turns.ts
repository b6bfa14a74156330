import type { Db } from '../database.js';
import type { IndexStatus } from '../schema.js';
import { inCodePointOrder } from '../sort-key.js';

/** A project within its workspace: every read below is limited to both. */
export interface ProjectScope {
  workspaceId: string;
  projectId: string;
}

/** A project file as a turn lists it. */
export interface ProjectFileListing {
  id: string;
  name: string;
  path: string;
  mediaType: string;
  sizeBytes: number;
  indexStatus: IndexStatus;
}

const LISTING_COLUMNS = [
  'project_files.id',
  'project_files.name',
  'project_files.path',
  'project_files.mime_type',
  'project_files.size_bytes',
  'project_files.index_status',
] as const;

function listing(row: {
  id: string;
  name: string;
  path: string;
  mime_type: string;
  size_bytes: number | string;
  index_status: IndexStatus;
}): ProjectFileListing {
  return {
    id: row.id,
    name: row.name,
    path: row.path,
    mediaType: row.mime_type,
    sizeBytes: Number(row.size_bytes),
    indexStatus: row.index_status,
  };
}

/**
 * The first `limit` files of a project in path order, code point by code point on both engines
 * (`README.md` before `api.md`), so a turn names the same files on each. PostgreSQL's
 * (project_id, path) key holds paths in the database's collation and so cannot serve this
 * order: it finds the project's files (at most 500), which are then sorted.
 */
export async function listProjectFilesByPath(
  db: Db,
  scope: ProjectScope,
  limit: number,
): Promise<ProjectFileListing[]> {
  const rows = await db
    .selectFrom('project_files')
    .select(LISTING_COLUMNS)
    .where('project_id', '=', scope.projectId)
    .where('workspace_id', '=', scope.workspaceId)
    .orderBy(inCodePointOrder(db, 'path'))
    .limit(limit)
    .execute();
  return rows.map(listing);
}

export async function countProjectFiles(db: Db, scope: ProjectScope): Promise<number> {
  const row = await db
    .selectFrom('project_files')
    .select((eb) => eb.fn.countAll<number | string>().as('files'))
    .where('project_id', '=', scope.projectId)
    .where('workspace_id', '=', scope.workspaceId)
    .executeTakeFirstOrThrow();
  return Number(row.files);
}

/** A file of the project by id or path, with its extracted text (null when it has none yet). */
export async function findIndexedText(
  db: Db,
  scope: ProjectScope,
  file: { fileId: string } | { path: string },
): Promise<(ProjectFileListing & { text: string | null }) | undefined> {
  let query = db
    .selectFrom('project_files')
    .leftJoin('knowledge_texts', 'knowledge_texts.file_id', 'project_files.id')
    .select([...LISTING_COLUMNS, 'knowledge_texts.text'])
    .where('project_files.project_id', '=', scope.projectId)
    .where('project_files.workspace_id', '=', scope.workspaceId);
  query =
    'fileId' in file
      ? query.where('project_files.id', '=', file.fileId)
      : query.where('project_files.path', '=', file.path);
  const row = await query.executeTakeFirst();
  return row ? { ...listing(row), text: row.text } : undefined;
}

/** Media types of some files of the project, by id. */
export async function fileMediaTypes(
  db: Db,
  scope: ProjectScope,
  fileIds: string[],
): Promise<Map<string, string>> {
  if (fileIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('project_files')
    .select(['id', 'mime_type'])
    .where('project_id', '=', scope.projectId)
    .where('workspace_id', '=', scope.workspaceId)
    .where('id', 'in', [...new Set(fileIds)])
    .execute();
  return new Map(rows.map((row) => [row.id, row.mime_type]));
}
