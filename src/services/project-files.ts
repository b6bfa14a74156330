import mime from 'mime-types';
import type { Db } from '../db/database.js';
import { jsonDataBody, jsonObjectText } from '../db/json-page.js';
import { listingCache } from '../db/listing-cache.js';
import { caseInsensitiveSortKey, compareCodePoints } from '../db/sort-key.js';
import {
  deleteProjectFileIfUnchanged,
  deleteProjectFileRow,
  findPathClash,
  findProjectFile,
  insertProjectFilesIfAbsent,
  listProjectFileRows,
  liveUploadReservations,
  listProjectFilesJson,
  markProjectFilesSynced,
  recordObjectModifiedAt,
  type NewProjectFileRow,
  type ProjectFileRow,
  registeredFileSizes,
  reserveUpload,
  updateProjectFileContent,
} from '../db/repositories/project-files.js';
import { findProject, lockProject } from '../db/repositories/projects.js';
import { mapConcurrently } from '../concurrency.js';
import type { IndexStatus } from '../db/schema.js';
import { ApiError, errors, type ValidationIssue } from '../errors.js';
import { type Clock, isoNow, newId } from '../ids.js';
import { notifyIndexWork } from '../knowledge/indexer.js';
import { MAX_FILE_BYTES, MAX_PROJECT_BYTES, MAX_PROJECT_FILES, megabytes } from '../limits.js';
import { escapedName, type NameFault, nameFault, refusedCharacter } from '../path-names.js';
import { isValidMediaType } from '../storage/media-type.js';
import { NO_VISIBLE_CHARACTER } from '../text.js';
import type { ObjectInfo, ObjectStore } from '../storage/object-store.js';
import { retryOnConflict } from '../db/conflict-retry.js';

/** decisions.md "Project files" and spec §8. */
export const PROJECT_FILE_LIMITS = {
  maxFileBytes: MAX_FILE_BYTES,
  maxFiles: MAX_PROJECT_FILES,
  maxProjectBytes: MAX_PROJECT_BYTES,
  maxNameLength: 255,
  maxFolderDepth: 10,
  uploadUrlSeconds: 15 * 60,
  downloadUrlSeconds: 4 * 60 * 60,
} as const;

const MAX_KEY_BYTES = 1024;

export interface ProjectFileDeps {
  db: Db;
  store: ObjectStore;
  clock: Clock;
  /** The body deadline of a PUT (docs/files.md "Slow links"), for upload URLs (left out by sync-only callers). */
  config?: { http: { bodyTimeoutMs: number; bodyMinBytesPerSecond: number } };
}

/** The latest a PUT begun before its URL expired can still be writing, in seconds after signing. */
function reservationSeconds(deps: ProjectFileDeps, sizeBytes: number): number {
  const http = deps.config?.http;
  const deadline = http ? Math.ceil(http.bodyTimeoutMs / 1000 + sizeBytes / http.bodyMinBytesPerSecond) : 0;
  return PROJECT_FILE_LIMITS.uploadUrlSeconds + deadline + 60;
}

/** Every object of a project lives under this prefix; nothing else does. */
export function projectStoragePrefix(workspaceId: string, projectId: string): string {
  return `projects/${workspaceId}/${projectId}/`;
}

export interface ProjectFileView {
  id: string;
  projectId: string;
  name: string;
  path: string;
  mimeType: string;
  sizeBytes: number;
  type: string;
  createdAt: string;
  updatedAt: string;
  syncedAt: string;
  /** Where indexing of the file stands (spec/knowledge.md "What files show"). */
  indexStatus: IndexStatus;
  /** Why indexing failed (or the file is unsupported), else null. */
  indexError: string | null;
}

export function projectFileView(row: ProjectFileRow): ProjectFileView {
  return {
    id: row.id,
    projectId: row.project_id,
    name: row.name,
    path: row.path,
    mimeType: row.mime_type,
    sizeBytes: Number(row.size_bytes),
    type: row.type,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    syncedAt: row.synced_at,
    indexStatus: row.index_status,
    indexError: row.index_error,
  };
}

async function requireProject(db: Db, workspaceId: string, projectId: string) {
  const project = await findProject(db, workspaceId, projectId);
  if (!project) throw errors.notFound('Project');
  return project;
}

// ---------------------------------------------------------------------------------------------
// Names and folders

const NAME_FAULT_MESSAGES: Record<Exclude<NameFault, 'nul' | 'control'>, string> = {
  empty: 'must not be empty',
  backslash: 'must not contain "\\"',
  slash: 'must not contain "/"',
  dot: 'must not be "." or ".."',
  'dot-dot': 'must not be "." or ".."',
  // Spaces, zero-width characters or blank fillers alone: a name no list could show.
  invisible: NO_VISIBLE_CHARACTER,
  'too-many-characters': `must be at most ${PROJECT_FILE_LIMITS.maxNameLength} characters`,
  'too-many-bytes': 'must be at most 255 bytes in UTF-8 on this storage',
};

function nameProblem(name: string, store: ObjectStore): string | undefined {
  const fault = nameFault(name, {
    maxCharacters: PROJECT_FILE_LIMITS.maxNameLength,
    // Local file systems cap one name at 255 bytes; S3 keys have no such per-segment cap.
    maxBytes: store.kind === 'fs' ? 255 : undefined,
  });
  if (fault === 'nul' || fault === 'control') {
    // Named by code point: a bidirectional control shown in the answer would be invisible there too.
    return `must not contain control, bidirectional or line separator characters (found ${refusedCharacter(name)})`;
  }
  return fault ? NAME_FAULT_MESSAGES[fault] : undefined;
}

/** `"/docs/specs/"` → `["docs", "specs"]`, or the problem with it. */
export function parseFolder(
  folder: string,
  store: ObjectStore,
): { segments: string[] } | { problem: string } {
  const trimmed = folder.replace(/^\/+|\/+$/g, '');
  if (trimmed === '') return { segments: [] };
  const segments = trimmed.split('/');
  if (segments.length > PROJECT_FILE_LIMITS.maxFolderDepth) {
    return { problem: `must be at most ${PROJECT_FILE_LIMITS.maxFolderDepth} folders deep` };
  }
  for (const segment of segments) {
    if (segment === '') return { problem: 'must not contain empty segments ("//")' };
    const problem = nameProblem(segment, store);
    if (problem) return { problem: `segment "${escapedName(segment.slice(0, 50))}" ${problem}` };
  }
  return { segments };
}

/** A path found in storage that Atrium could have written; anything else is left unregistered. */
function isAcceptablePath(path: string, store: ObjectStore): boolean {
  const segments = path.split('/');
  if (segments.length > PROJECT_FILE_LIMITS.maxFolderDepth + 1) return false;
  return segments.every((segment) => nameProblem(segment, store) === undefined);
}

/**
 * The objects under a project's prefix that sync can turn into file records, by path below the
 * prefix. The others (an S3 folder marker `docs/`, a name with a backslash, a path deeper than
 * 10 folders: only someone writing to storage directly makes them) are ignored by sync and by the
 * quota alike: the API could never list or delete them, so they must not take a project's room.
 */
async function* registrableObjects(store: ObjectStore, prefix: string): AsyncIterable<[string, ObjectInfo]> {
  for await (const info of store.list(prefix)) {
    const path = info.key.slice(prefix.length);
    if (isAcceptablePath(path, store)) yield [path, info];
  }
}

export interface UploadRequest {
  filename: string;
  contentType: string;
  sizeBytes: number;
  folder?: string;
}

/**
 * Names in Unicode NFC, as skill names are: `é` typed as one character and as `e` + U+0301 (what
 * macOS file pickers give) look alike and are one name, so they name one path, which a second
 * upload replaces, rather than two files no list can tell apart.
 */
function validateUploadRequest(request: UploadRequest, store: ObjectStore) {
  const input = {
    ...request,
    filename: request.filename.normalize('NFC'),
    folder: request.folder?.normalize('NFC'),
  };
  const issues: ValidationIssue[] = [];
  const filenameProblem = nameProblem(input.filename, store);
  if (filenameProblem) issues.push({ path: 'body.filename', message: filenameProblem });
  if (!isValidMediaType(input.contentType)) {
    issues.push({ path: 'body.contentType', message: 'must be a valid MIME type such as "text/plain"' });
  }
  if (
    !Number.isInteger(input.sizeBytes) ||
    input.sizeBytes < 0 ||
    input.sizeBytes > PROJECT_FILE_LIMITS.maxFileBytes
  ) {
    issues.push({
      path: 'body.sizeBytes',
      message: `must be an integer from 0 to ${PROJECT_FILE_LIMITS.maxFileBytes}`,
    });
  }
  const folder = parseFolder(input.folder ?? '', store);
  if ('problem' in folder) issues.push({ path: 'body.folder', message: folder.problem });
  if (issues.length > 0 || 'problem' in folder) {
    throw errors.badRequest(`${issues[0]!.path} ${issues[0]!.message}`, issues);
  }
  return { path: [...folder.segments, input.filename].join('/') };
}

// ---------------------------------------------------------------------------------------------
// Upload URL

function quotaError(kind: 'files' | 'bytes', details: Record<string, unknown>) {
  return errors.quotaExceeded(
    kind === 'files'
      ? `A project holds at most ${PROJECT_FILE_LIMITS.maxFiles} files`
      : `A project holds at most ${PROJECT_FILE_LIMITS.maxProjectBytes} bytes (${megabytes(PROJECT_FILE_LIMITS.maxProjectBytes)})`,
    {
      limit: kind,
      maxFiles: PROJECT_FILE_LIMITS.maxFiles,
      maxBytes: PROJECT_FILE_LIMITS.maxProjectBytes,
      ...details,
    },
  );
}

/**
 * Step 1 of an upload: checks the request against the rules and quotas (declared size), then
 * returns a URL bound to the storage path, content type, size and a 15-minute expiry.
 * Uploading to a registered path replaces that file.
 */
export async function createUploadUrl(
  deps: ProjectFileDeps,
  workspaceId: string,
  projectId: string,
  input: UploadRequest,
) {
  const { path } = validateUploadRequest(input, deps.store);
  const storagePath = projectStoragePrefix(workspaceId, projectId) + path;
  if (Buffer.byteLength(storagePath) > MAX_KEY_BYTES) {
    // S3 keys are at most 1,024 bytes; the same cap on every backend keeps them interchangeable.
    throw errors.badRequest('folder and filename together are too long for storage', [
      { path: 'body.folder', message: `the storage path would exceed ${MAX_KEY_BYTES} bytes` },
    ]);
  }
  await requireProject(deps.db, workspaceId, projectId);
  const clash = await findPathClash(deps.db, workspaceId, projectId, path);
  if (clash) {
    // A file registered before names were held to today's rules may hold any character.
    const existing = escapedName(clash.path);
    throw errors.badRequest(`"${path}" clashes with the existing file or folder "${existing}"`, [
      { path: 'body.filename', message: `clashes with "${existing}"` },
    ]);
  }
  // What the project holds: every path registered, in storage (an upload never synced too) or
  // promised to an upload URL that has not expired, each at the largest of its sizes. Storage is
  // listed before the lock, as sync does: an object written meanwhile had its URL reserved.
  const prefix = projectStoragePrefix(workspaceId, projectId);
  const stored = new Map<string, number>();
  for await (const [storedPath, info] of registrableObjects(deps.store, prefix))
    stored.set(storedPath, info.size);
  await deps.db.transaction().execute(async (trx) => {
    if (!(await lockProject(trx, workspaceId, projectId))) throw errors.notFound('Project');
    // Read once the lock is held: the reservation must not lapse before the URL signed after it.
    const now = deps.clock();
    const reserved = await liveUploadReservations(trx, workspaceId, projectId, now.toISOString());
    const held = largestSizes([await registeredFileSizes(trx, workspaceId, projectId), stored, reserved]);
    const before = { files: held.size, bytes: sumOf(held) };
    // The new content replaces what the path holds, but an earlier URL for it that has not
    // expired still works: the path keeps the larger of the two while that URL's reservation lasts.
    held.set(path, Math.max(input.sizeBytes, reserved.get(path) ?? 0));
    if (held.size > PROJECT_FILE_LIMITS.maxFiles) throw quotaError('files', { files: before.files });
    if (sumOf(held) > PROJECT_FILE_LIMITS.maxProjectBytes) {
      throw quotaError('bytes', { bytes: before.bytes, requestedBytes: input.sizeBytes });
    }
    // This URL's own size and lifetime; the earlier URL's reservation keeps its own (reserveUpload).
    await reserveUpload(trx, {
      project_id: projectId,
      workspace_id: workspaceId,
      path,
      size_bytes: input.sizeBytes,
      // Until a PUT begun just before the URL's expiry has had its whole body deadline, and a
      // minute more: the URL is signed after this commits.
      expires_at: new Date(now.getTime() + reservationSeconds(deps, input.sizeBytes) * 1000).toISOString(),
    });
  });
  const uploadUrl = await deps.store.createUploadUrl(storagePath, {
    contentType: input.contentType,
    sizeBytes: input.sizeBytes,
    expiresInSeconds: PROJECT_FILE_LIMITS.uploadUrlSeconds,
  });
  return { uploadUrl, storagePath };
}

/** Every path of the maps, at the largest size any of them gives it. */
function largestSizes(maps: Array<Map<string, number>>): Map<string, number> {
  const largest = new Map<string, number>();
  for (const map of maps)
    for (const [path, size] of map) largest.set(path, Math.max(size, largest.get(path) ?? 0));
  return largest;
}

function sumOf(sizes: Map<string, number>): number {
  let sum = 0;
  for (const size of sizes.values()) sum += size;
  return sum;
}

// ---------------------------------------------------------------------------------------------
// Sync

export interface SyncResult {
  added: number;
  removed: number;
  updated: number;
}

async function mediaTypeOf(store: ObjectStore, info: ObjectInfo, name: string): Promise<string> {
  const known = info.contentType ?? (await store.head(info.key))?.contentType;
  if (known && isValidMediaType(known)) return known;
  return mime.lookup(name) || 'application/octet-stream';
}

/**
 * How a listed object compares with its record: `changed` when its content (etag, size) or its
 * media type differ, with the new `mediaType` when that was read. S3 lists no content type, and
 * its ETag is the MD5 of the bytes, so the same bytes stored again with another type list as
 * before but for their last-modified time, which S3 keeps to the second. So the type is read
 * again (a HEAD) when that time is not the one recorded, and, for every sync, while an upload URL
 * for the path is live (`uploading`): an upload a second after the last one has the same time.
 * A time is recorded only once no URL is live, so a re-upload always meets a time older than its
 * own or none. `objectModifiedAt` is what to record when it moved.
 */
async function compareWithRecord(
  store: ObjectStore,
  row: ProjectFileRow,
  info: ObjectInfo,
  uploading: boolean,
): Promise<{ changed: boolean; mediaType?: string; objectModifiedAt?: string | null }> {
  if (listedOtherBytes(row, info)) return { changed: true };
  if (info.contentType !== undefined) {
    const mediaType = await mediaTypeOf(store, info, row.name);
    return mediaType === row.mime_type ? { changed: false } : { changed: true, mediaType };
  }
  const modifiedAt = objectModifiedAt(info, uploading);
  if (!uploading && row.object_modified_at === modifiedAt) return { changed: false };
  const mediaType = await mediaTypeOf(store, info, row.name);
  if (mediaType !== row.mime_type) return { changed: true, mediaType };
  return { changed: false, objectModifiedAt: row.object_modified_at === modifiedAt ? undefined : modifiedAt };
}

/** Whether a listed object holds other bytes than its record says (the first test of compareWithRecord). */
function listedOtherBytes(row: ProjectFileRow, info: ObjectInfo): boolean {
  return info.etag !== row.etag || info.size !== Number(row.size_bytes);
}

/** The time to record for an object (see {@link compareWithRecord}): none while it is uploading. */
function objectModifiedAt(info: ObjectInfo, uploading: boolean): string | null {
  return uploading ? null : info.lastModified.toISOString();
}

/**
 * Step 2 of an upload, and the repair of any drift: reconciles the records of a project with
 * the objects under its storage prefix. New objects are `added`, records without an object
 * `removed`, changed content `updated` (same id). A second run changes nothing.
 *
 * Storage is listed first, without a lock. Then one transaction takes the project's lock (the
 * one a delete holds while it removes the object and then the record), reads the records, and
 * looks again at every path whose object and record disagree before it adds or removes
 * anything. So a sync never acts on an object from before a delete and the records from after
 * it (which brought a deleted file back under a new id), and the lock is held for the short
 * part only, not for the listing. Concurrent syncs of one project queue on the lock, so they
 * never duplicate a record or count a change twice; every write stays conditional all the same.
 * New objects beyond the file or byte quota are left unregistered: 409 with the counts and the
 * paths left out.
 */
export async function syncProjectFiles(
  deps: ProjectFileDeps,
  workspaceId: string,
  projectId: string,
): Promise<SyncResult> {
  const { db, store } = deps;
  await requireProject(db, workspaceId, projectId);
  const prefix = projectStoragePrefix(workspaceId, projectId);
  const listed = new Map<string, ObjectInfo>();
  for await (const [path, info] of registrableObjects(store, prefix)) listed.set(path, info);
  // On PostgreSQL the indexer's batch of files, settled in one transaction, can lock some of these
  // rows in another order than this sync's updates: the database ends one of the two with a
  // deadlock, and this whole transaction (which kept nothing) runs again.
  const { result, refused, clashing, bytes } = await retryOnConflict(() =>
    db.transaction().execute(async (trx) => {
      if (!(await lockProject(trx, workspaceId, projectId))) throw errors.notFound('Project');
      return reconcileProjectFiles({ ...deps, db: trx }, workspaceId, projectId, listed);
    }),
  );
  // Added and updated files were marked `pending` in the same writes: indexing starts now.
  if (result.added + result.updated > 0) notifyIndexWork();
  if (refused.length > 0 || bytes > PROJECT_FILE_LIMITS.maxProjectBytes) {
    throw new ApiError(
      'quota_exceeded',
      `${refused.length} object(s) in storage were not registered: the project holds ${bytes} bytes and would exceed ${PROJECT_FILE_LIMITS.maxFiles} files or ${megabytes(PROJECT_FILE_LIMITS.maxProjectBytes)}`,
      {
        ...result,
        notRegistered: refused.slice(0, 100),
        notRegisteredCount: refused.length,
        maxFiles: PROJECT_FILE_LIMITS.maxFiles,
        maxBytes: PROJECT_FILE_LIMITS.maxProjectBytes,
        bytes,
        ...(clashing.length > 0 ? { clashing: clashing.slice(0, 100) } : {}),
      },
    );
  }
  if (clashing.length > 0) {
    throw errors.conflict(
      `${clashing.length} object(s) in storage were not registered: each is a file where another file needs a folder of that name, or the reverse; delete one of the two`,
      { ...result, notRegistered: clashing.slice(0, 100), notRegisteredCount: clashing.length },
    );
  }
  return result;
}

/**
 * The writes of a sync, inside its transaction (`deps.db`) and the project's lock; `refused`
 * are the paths left out for the quota.
 */
async function reconcileProjectFiles(
  deps: ProjectFileDeps,
  workspaceId: string,
  projectId: string,
  listed: Map<string, ObjectInfo>,
): Promise<{ result: SyncResult; refused: string[]; clashing: string[]; bytes: number }> {
  const { db, store } = deps;
  const prefix = projectStoragePrefix(workspaceId, projectId);
  const rows = await listProjectFileRows(db, workspaceId, projectId);
  const registered = new Set(rows.map((row) => row.path));
  // An object listed without a record may have been deleted since (its record with it), a
  // record whose object was not listed may have got one since, and a record whose object listed
  // other bytes may have been brought up to date since by another sync (with a replacement the
  // listing came too early for): what storage says now decides.
  const objects = new Map(listed);
  const disputed = [
    ...rows
      .filter((row) => !listed.has(row.path) || listedOtherBytes(row, listed.get(row.path)!))
      .map((row) => row.path),
    ...[...listed.keys()].filter((path) => !registered.has(path)),
  ];
  await mapConcurrently(disputed, 16, async (path) => {
    // With what was listed: a store may confirm an object unchanged since cheaper than it reads it.
    const info = await store.head(prefix + path, listed.get(path));
    if (info) objects.set(path, info);
    else objects.delete(path);
  });
  const now = isoNow(deps.clock);

  let removed = 0;
  const gone = rows.filter((row) => !objects.has(row.path));
  for (const row of gone) if (await deleteProjectFileIfUnchanged(db, row)) removed++;

  const present = rows.filter((row) => objects.has(row.path));
  const uploading = await liveUploadReservations(db, workspaceId, projectId, now);
  const compared = await mapConcurrently(present, 16, async (row) => ({
    row,
    ...(await compareWithRecord(store, row, objects.get(row.path)!, uploading.has(row.path))),
  }));
  const changed = compared.filter((c) => c.changed).map((c) => c.row);
  const mediaTypes = new Map(compared.flatMap((c) => (c.mediaType ? [[c.row.id, c.mediaType]] : [])));
  const unchanged = compared.filter((c) => !c.changed);
  await markProjectFilesSynced(
    db,
    workspaceId,
    projectId,
    unchanged.map((c) => c.row.id),
    now,
  );
  for (const { row, objectModifiedAt } of unchanged) {
    if (objectModifiedAt !== undefined) await recordObjectModifiedAt(db, row, objectModifiedAt);
  }
  // Replacements are applied whatever the quota: their bytes have replaced the old ones in
  // storage already, and a record must describe the object it names (a record kept at the old
  // version could not even be downloaded). Upload URLs asked for together were each checked
  // against the files registered then, so together they can take the project past its quota:
  // the sync then says so (409), and new objects and upload URLs are refused until files are
  // deleted.
  const refused: string[] = [];
  const updates = await mapConcurrently(changed, 16, async (row) => {
    const info = objects.get(row.path)!;
    return updateProjectFileContent(db, row, {
      etag: info.etag,
      size_bytes: info.size,
      mime_type: mediaTypes.get(row.id) ?? (await mediaTypeOf(store, info, row.name)),
      object_modified_at: objectModifiedAt(info, uploading.has(row.path)),
      updated_at: now,
      synced_at: now,
    });
  });
  const updated = updates.filter(Boolean).length;

  // Quota for new objects: what the project holds once removals and updates are in.
  let files = present.length;
  let bytes = present.reduce((sum, row) => sum + objects.get(row.path)!.size, 0);
  const candidates = [...objects.entries()]
    .filter(([path]) => !registered.has(path))
    .sort(([pa, a], [pb, b]) => a.lastModified.getTime() - b.lastModified.getTime() || (pa < pb ? -1 : 1));
  const accepted: [string, ObjectInfo][] = [];
  // A file where another file needs a folder of that name, or the reverse: on S3 both objects can
  // exist (URLs asked for together were each checked against registered files only); the older
  // one is registered, the other is not.
  const paths = new PathSet(present.map((row) => row.path));
  const clashing: string[] = [];
  for (const [path, info] of candidates) {
    if (paths.clashes(path)) {
      clashing.push(path);
      continue;
    }
    if (files + 1 > PROJECT_FILE_LIMITS.maxFiles || bytes + info.size > PROJECT_FILE_LIMITS.maxProjectBytes) {
      refused.push(path);
      continue;
    }
    accepted.push([path, info]);
    paths.add(path);
    files++;
    bytes += info.size;
  }
  const newRows = await mapConcurrently(accepted, 16, async ([path, info]): Promise<NewProjectFileRow> => {
    const name = path.slice(path.lastIndexOf('/') + 1);
    return {
      id: newId('fil'),
      workspace_id: workspaceId,
      project_id: projectId,
      name,
      path,
      mime_type: await mediaTypeOf(store, info, name),
      object_modified_at: objectModifiedAt(info, uploading.has(path)),
      size_bytes: info.size,
      etag: info.etag,
      type: 'uploaded',
      created_at: now,
      updated_at: now,
      synced_at: now,
    };
  });
  const added = await insertProjectFilesIfAbsent(db, newRows);
  return { result: { added, removed, updated }, refused, clashing, bytes };
}

/** File paths, and the folders they make: whether a new path would be both a file and a folder. */
class PathSet {
  private readonly files = new Set<string>();
  private readonly folders = new Set<string>();

  constructor(paths: string[]) {
    for (const path of paths) this.add(path);
  }

  add(path: string): void {
    this.files.add(path);
    for (const folder of parentFolders(path)) this.folders.add(folder);
  }

  clashes(path: string): boolean {
    return this.folders.has(path) || parentFolders(path).some((folder) => this.files.has(folder));
  }
}

/** `a/b/c.txt` → `a`, `a/b`. */
function parentFolders(path: string): string[] {
  const segments = path.split('/');
  return segments.slice(0, -1).map((_, i) => segments.slice(0, i + 1).join('/'));
}

// ---------------------------------------------------------------------------------------------
// List and tree

/**
 * A page of a project's files: the listing's response body (its UTF-8 bytes), its `data` built by the database (each
 * file as `projectFileView`).
 */
export async function listProjectFiles(
  db: Db,
  workspaceId: string,
  projectId: string,
  page: { limit?: number; offset?: number },
  /** The data_version the request read at authentication (`Principal.dataVersion`). */
  dataVersion?: number,
): Promise<Buffer> {
  const offset = page.offset ?? 0;
  const key = JSON.stringify([workspaceId, projectId, page.limit ?? null, offset]);
  return fileListings(
    db,
    key,
    async () => {
      const found = await listProjectFilesJson(db, workspaceId, projectId, { limit: page.limit, offset });
      if (!found) throw errors.notFound('Project');
      return jsonDataBody(
        jsonObjectText({
          files: found.page,
          pagination: JSON.stringify({ total: found.total, limit: page.limit ?? found.total, offset }),
        }),
      );
    },
    dataVersion,
  );
}

/** Kept while none of the project's files changes, nor the project (src/db/listing-cache.ts). */
const fileListings = listingCache(['project_files', 'projects']);

export type TreeNode =
  { kind: 'folder'; name: string; path: string; children: TreeNode[] } | ({ kind: 'file' } & ProjectFileView);

/**
 * Case-insensitively as every listing orders names (docs/api.md: NFC, lower-cased, compared code
 * point by code point), ties (names that differ in case only) by code point.
 */
const byName = (a: { name: string }, b: { name: string }) =>
  compareCodePoints(caseInsensitiveSortKey(a.name), caseInsensitiveSortKey(b.name)) ||
  compareCodePoints(a.name, b.name);

/** Files as nested folders; in each folder, folders first, then files, each by name (case-insensitive). */
export function buildFileTree(files: ProjectFileView[]): TreeNode[] {
  type Folder = Extract<TreeNode, { kind: 'folder' }>;
  const root: Folder = { kind: 'folder', name: '', path: '', children: [] };
  const folders = new Map<string, Folder>([['', root]]);
  const folderFor = (path: string): Folder => {
    const known = folders.get(path);
    if (known) return known;
    const cut = path.lastIndexOf('/');
    const parent = folderFor(cut < 0 ? '' : path.slice(0, cut));
    const folder: Folder = { kind: 'folder', name: path.slice(cut + 1), path, children: [] };
    parent.children.push(folder);
    folders.set(path, folder);
    return folder;
  };
  for (const file of files) {
    const cut = file.path.lastIndexOf('/');
    folderFor(cut < 0 ? '' : file.path.slice(0, cut)).children.push({ kind: 'file', ...file });
  }
  const sort = (nodes: TreeNode[]) => {
    nodes.sort((a, b) => (a.kind === b.kind ? byName(a, b) : a.kind === 'folder' ? -1 : 1));
    for (const node of nodes) if (node.kind === 'folder') sort(node.children);
  };
  sort(root.children);
  return root.children;
}

export async function projectFileTree(db: Db, workspaceId: string, projectId: string) {
  await requireProject(db, workspaceId, projectId);
  const rows = await listProjectFileRows(db, workspaceId, projectId);
  return buildFileTree(rows.map(projectFileView));
}

// ---------------------------------------------------------------------------------------------
// Download and delete

async function requireFile(db: Db, workspaceId: string, projectId: string, fileId: string) {
  await requireProject(db, workspaceId, projectId);
  const row = await findProjectFile(db, workspaceId, projectId, fileId);
  if (!row) throw errors.notFound('File');
  return row;
}

/** A signed URL (4 hours) that serves this version of the file's bytes, with its name and type. */
export async function createDownloadUrl(
  deps: ProjectFileDeps,
  workspaceId: string,
  projectId: string,
  fileId: string,
) {
  const row = await requireFile(deps.db, workspaceId, projectId, fileId);
  const downloadUrl = await deps.store.createDownloadUrl(
    projectStoragePrefix(workspaceId, projectId) + row.path,
    {
      filename: row.name,
      contentType: row.mime_type,
      // The version the record describes: a later upload to the same path is another file.
      etag: row.etag,
      expiresInSeconds: PROJECT_FILE_LIMITS.downloadUrlSeconds,
    },
  );
  return { downloadUrl, filename: row.name, contentType: row.mime_type, sizeBytes: Number(row.size_bytes) };
}

/**
 * Removes the object, then the record, in one transaction holding the project's lock (the one
 * sync takes), so no sync can see the object before the delete and miss the record after it.
 * A file already deleted is not found. A crash between the two steps leaves a record without
 * its object, which the next sync removes; never an object a sync would bring back.
 */
export async function deleteProjectFile(
  deps: ProjectFileDeps,
  workspaceId: string,
  projectId: string,
  fileId: string,
) {
  await deps.db.transaction().execute(async (trx) => {
    if (!(await lockProject(trx, workspaceId, projectId))) throw errors.notFound('Project');
    const row = await findProjectFile(trx, workspaceId, projectId, fileId);
    if (!row) throw errors.notFound('File');
    await deps.store.delete(projectStoragePrefix(workspaceId, projectId) + row.path);
    await deleteProjectFileRow(trx, workspaceId, projectId, fileId);
  });
  return { deleted: true as const };
}
