import { SqliteAdapter, sql, type Updateable } from 'kysely';
import { PG_SEARCH_CONFIG, searchableText } from '../../knowledge/fold.js';
import type { Db } from '../database.js';
import type { IndexStatus, ProjectFileTable } from '../schema.js';
import { INDEX_PENDING } from './project-files.js';
import type { TextChunk } from '../../knowledge/types.js';
import { retryOnConflict } from '../conflict-retry.js';
import { inCodePointOrder } from '../sort-key.js';

/** SQLite or PostgreSQL, told by the executor's adapter (works inside a transaction too). */
export function isSqliteDb(db: Db): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}

/** SQLite's default limit is 32,766 bound values; 10 columns × 500 rows stays far below it. */
const CHUNK_INSERT_BATCH = 500;

// ---------------------------------------------------------------------------------------------
// The indexer's queue: claims are leases on project_files rows

export interface ClaimedFile {
  id: string;
  workspace_id: string;
  project_id: string;
  path: string;
  name: string;
  mime_type: string;
  size_bytes: number;
  etag: string;
  index_attempts: number;
}

const CLAIMED_COLUMNS = [
  'id',
  'workspace_id',
  'project_id',
  'path',
  'name',
  'mime_type',
  'size_bytes',
  'etag',
  'index_attempts',
] as const;

/**
 * Claims one file to index, atomically: a `pending` file whose retry time has come, or an
 * `indexing` one whose lease ran out (its process died). The claim counts as an attempt, so a
 * file that kills every process that reads it still ends `failed`. PostgreSQL skips rows another
 * transaction is claiming (`FOR UPDATE SKIP LOCKED`); SQLite serializes writers.
 */
export async function claimNextFile(
  db: Db,
  claim: { processId: string; now: string; leaseUntil: string },
): Promise<ClaimedFile | undefined> {
  return (await claimFiles(db, claim, 1))[0];
}

/**
 * Claims up to `limit` files of at most `maxBytes` each, as {@link claimNextFile} does: the
 * indexer takes small files several at a time and stores them in one transaction.
 */
export async function claimSmallFiles(
  db: Db,
  claim: { processId: string; now: string; leaseUntil: string },
  limit: number,
  maxBytes: number,
): Promise<ClaimedFile[]> {
  return claimFiles(db, claim, limit, maxBytes);
}

async function claimFiles(
  db: Db,
  claim: { processId: string; now: string; leaseUntil: string },
  limit: number,
  maxBytes?: number,
): Promise<ClaimedFile[]> {
  let claimable = db
    .selectFrom('project_files')
    .select('id')
    .where((eb) =>
      eb.or([
        eb.and([
          eb('index_status', '=', 'pending'),
          eb.or([eb('index_retry_at', 'is', null), eb('index_retry_at', '<=', claim.now)]),
        ]),
        eb.and([eb('index_status', '=', 'indexing'), eb('index_lease_until', '<', claim.now)]),
      ]),
    )
    .orderBy('index_attempts')
    .orderBy('updated_at')
    .limit(limit);
  if (maxBytes !== undefined) claimable = claimable.where('size_bytes', '<=', maxBytes);
  const rows = await db
    .updateTable('project_files')
    .set((eb) => ({
      index_status: 'indexing',
      index_claimed_by: claim.processId,
      index_lease_until: claim.leaseUntil,
      index_attempts: eb('index_attempts', '+', 1),
    }))
    .where('id', 'in', isSqliteDb(db) ? claimable : claimable.forUpdate().skipLocked())
    .returning(CLAIMED_COLUMNS)
    .execute();
  return rows.map((row) => ({ ...row, size_bytes: Number(row.size_bytes) }));
}

/**
 * Writes `changes` to the file only while `processId` still holds the indexing claim on this
 * version of it; false when the claim was lost (file changed, deleted or taken over).
 */
async function updateWhileClaimed(
  db: Db,
  file: { id: string; etag: string },
  processId: string,
  changes: Updateable<ProjectFileTable>,
): Promise<boolean> {
  const result = await db
    .updateTable('project_files')
    .set(changes)
    .where('id', '=', file.id)
    .where('etag', '=', file.etag)
    .where('index_status', '=', 'indexing')
    .where('index_claimed_by', '=', processId)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** Extends a claim still held; false when it was lost (file changed, deleted or taken over). */
export async function renewClaim(
  db: Db,
  file: { id: string; etag: string },
  processId: string,
  leaseUntil: string,
): Promise<boolean> {
  return updateWhileClaimed(db, file, processId, { index_lease_until: leaseUntil });
}

/** Ends a claim still held with `changes`; false when the claim was lost meanwhile. */
async function settleClaim(
  db: Db,
  file: { id: string; etag: string },
  processId: string,
  changes: {
    index_status: IndexStatus;
    index_error: string | null;
    index_attempts?: number;
    index_retry_at?: string | null;
    indexed_etag?: string | null;
  },
): Promise<boolean> {
  return updateWhileClaimed(db, file, processId, {
    ...changes,
    index_claimed_by: null,
    index_lease_until: null,
  });
}

/** A chunk to store: as chunking makes it (text, heading path, pages, offsets). */
export type NewChunk = TextChunk;

export type IndexOutcome =
  | { status: 'indexed'; format: string; text: string; chunks: NewChunk[] }
  | { status: 'unsupported'; reason: string };

/**
 * Stores what indexing a file version produced, in ONE transaction: the claim is ended (only
 * if still held on the same version, so a file replaced or deleted meanwhile keeps its newer
 * state and the stale result is dropped), the file's old chunks and text are replaced by the new
 * ones. Until it commits, searches see the old chunks; after, only the new ones.
 * Returns false when the result was dropped.
 */
export async function storeIndexOutcome(
  db: Db,
  file: ClaimedFile,
  processId: string,
  outcome: IndexOutcome,
  now: string,
): Promise<boolean> {
  const [stored] = await storeIndexOutcomes(db, [{ file, outcome }], processId, now);
  return stored!;
}

/**
 * {@link storeIndexOutcome} for several files in one transaction (a commit per file costs more
 * than storing a small file): each file's result is kept or dropped on its own claim, all of
 * them become visible together. Returns, per file, whether its result was kept.
 */
export async function storeIndexOutcomes(
  db: Db,
  results: Array<{ file: ClaimedFile; outcome: IndexOutcome }>,
  processId: string,
  now: string,
): Promise<boolean[]> {
  // A sync updating the same files in another order can deadlock with this batch on PostgreSQL:
  // the ended transaction kept nothing and runs again (each file's write stays conditional).
  return retryOnConflict(() =>
    db.transaction().execute(async (trx) => {
      const kept: boolean[] = [];
      for (const { file, outcome } of results) {
        const held = await settleClaim(trx, file, processId, {
          index_status: outcome.status,
          index_error: outcome.status === 'unsupported' ? outcome.reason : null,
          index_attempts: 0,
          index_retry_at: null,
          indexed_etag: file.etag,
        });
        kept.push(held);
      }
      const ids = results.filter((_, i) => kept[i]).map(({ file }) => file.id);
      if (ids.length === 0) return kept;
      await trx.deleteFrom('knowledge_chunks').where('file_id', 'in', ids).execute();
      await trx.deleteFrom('knowledge_texts').where('file_id', 'in', ids).execute();
      const indexed = results.flatMap(({ file, outcome }, i) =>
        kept[i] && outcome.status === 'indexed' ? [{ file, outcome }] : [],
      );
      if (indexed.length === 0) return kept;
      await trx
        .insertInto('knowledge_texts')
        .values(
          indexed.map(({ file, outcome }) => ({
            file_id: file.id,
            workspace_id: file.workspace_id,
            project_id: file.project_id,
            etag: file.etag,
            format: outcome.format,
            text: outcome.text,
            chars: outcome.text.length,
            indexed_at: now,
          })),
        )
        .execute();
      await insertChunksOfFiles(
        trx,
        indexed.map(({ file, outcome }) => ({ file, chunks: outcome.chunks })),
      );
      return kept;
    }),
  );
}

/**
 * Inserts chunks of a file with their searchable words (knowledge/fold.ts): on PostgreSQL the
 * `tsvector` (the heading as weight A), on SQLite a row of the FTS5 table under the chunk's id.
 * The FTS5 table holds no text of its own (019-knowledge-folded-search-text), so it is written
 * here and not by a trigger: SQL cannot fold text as {@link searchableText} does. Chunks are
 * only ever inserted and deleted, never updated; a delete trigger removes their FTS5 rows.
 */
export async function insertChunks(
  db: Db,
  file: { id: string; workspace_id: string; project_id: string },
  chunks: NewChunk[],
): Promise<void> {
  await insertChunksOfFiles(db, [{ file, chunks }]);
}

/** Chunks of several files, as {@link insertChunks}, in as few statements as the batch allows. */
export async function insertChunksOfFiles(
  db: Db,
  files: Array<{ file: { id: string; workspace_id: string; project_id: string }; chunks: NewChunk[] }>,
): Promise<void> {
  const sqlite = isSqliteDb(db);
  const rows = files.flatMap(({ file, chunks }) =>
    chunks.map((chunk) => ({
      workspace_id: file.workspace_id,
      project_id: file.project_id,
      file_id: file.id,
      ordinal: chunk.ordinal,
      text: chunk.text,
      heading: chunk.heading,
      pages: chunk.pages ? JSON.stringify(chunk.pages) : null,
      start_offset: chunk.start,
      end_offset: chunk.end,
      ...(sqlite ? {} : { tsv: postgresChunkWords(chunk) }),
    })),
  );
  for (let i = 0; i < rows.length; i += CHUNK_INSERT_BATCH) {
    const batch = rows.slice(i, i + CHUNK_INSERT_BATCH);
    if (!sqlite) {
      await db.insertInto('knowledge_chunks').values(batch).execute();
      continue;
    }
    // RETURNING gives rows in no promised order: matched back by file and ordinal.
    const inserted = await db
      .insertInto('knowledge_chunks')
      .values(batch)
      .returning(['id', 'file_id', 'ordinal'])
      .execute();
    const byChunk = new Map(batch.map((row) => [`${row.file_id}\0${row.ordinal}`, row]));
    await insertSqliteChunkWords(
      db,
      inserted.map(({ id, file_id, ordinal }) => {
        const row = byChunk.get(`${file_id}\0${ordinal}`)!;
        return { id, project_id: row.project_id, heading: row.heading, text: row.text };
      }),
    );
  }
}

/** A chunk's `tsvector`: its searchable words, the heading's weighing more (weight A). */
export function postgresChunkWords(chunk: { heading: string | null; text: string }) {
  return sql<string>`setweight(to_tsvector(${PG_SEARCH_CONFIG}::regconfig, ${searchableText(chunk.heading ?? '')}), 'A')
    || to_tsvector(${PG_SEARCH_CONFIG}::regconfig, ${searchableText(chunk.text)})`;
}

/**
 * The FTS5 rows of SQLite chunks: their searchable words under the chunk's id, and their
 * project's token in the `scope` column (migration 027), which search matches with its words so
 * FTS5 intersects the project's doclist with theirs instead of walking every tenant's matches.
 */
export async function insertSqliteChunkWords(
  db: Db,
  chunks: Array<{ id: number; project_id: string; heading: string | null; text: string }>,
): Promise<void> {
  if (chunks.length === 0) return;
  const values = chunks.map(
    (chunk) =>
      sql`(${chunk.id}, ${searchableText(chunk.heading ?? '')}, ${searchableText(chunk.text)}, ${sqliteProjectToken(chunk.project_id)})`,
  );
  await sql`insert into knowledge_chunks_fts (rowid, heading, text, scope) values ${sql.join(values)}`.execute(
    db,
  );
}

/**
 * A project's one word in the FTS5 `scope` column: its id in hex (letters and digits only, so
 * `unicode61` keeps it one token whatever the id holds, and no two ids share one), after `p`.
 */
export function sqliteProjectToken(projectId: string): string {
  return `p${Buffer.from(projectId, 'utf8').toString('hex')}`;
}

/**
 * Records a failed attempt: back to `pending` with a retry time, or `failed` (with `error`) once
 * `attempts` reached the limit. Chunks of an earlier version stay searchable either way until a
 * new version is indexed or the file is deleted. False when the claim was lost meanwhile.
 */
export async function recordIndexFailure(
  db: Db,
  file: ClaimedFile,
  processId: string,
  failure: { error: string; retryAt: string | null },
): Promise<boolean> {
  return settleClaim(
    db,
    file,
    processId,
    failure.retryAt === null
      ? { index_status: 'failed', index_error: failure.error }
      : { index_status: 'pending', index_error: failure.error, index_retry_at: failure.retryAt },
  );
}

/** Hands a claim back untried (shutdown): `pending` again, for any process, without an attempt counted. */
export async function releaseClaim(db: Db, file: ClaimedFile, processId: string) {
  return settleClaim(db, file, processId, {
    index_status: 'pending',
    index_error: null,
    index_attempts: Math.max(0, file.index_attempts - 1),
  });
}

/** Claims whose attempts are used up are ended as `failed` (see claimNextFile). */
export async function failClaim(db: Db, file: ClaimedFile, processId: string, error: string) {
  return settleClaim(db, file, processId, { index_status: 'failed', index_error: error });
}

/** Marks every file of a project for indexing again; indexed chunks stay until replaced. */
export async function markProjectForReindex(db: Db, workspaceId: string, projectId: string): Promise<number> {
  const result = await db
    .updateTable('project_files')
    .set(INDEX_PENDING)
    .where('workspace_id', '=', workspaceId)
    .where('project_id', '=', projectId)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** Whether any file waits for indexing or is being indexed (in any project, or in one). */
export async function hasIndexWork(db: Db, projectId?: string): Promise<boolean> {
  let query = db
    .selectFrom('project_files')
    .select('id')
    .where('index_status', 'in', ['pending', 'indexing']);
  if (projectId) query = query.where('project_id', '=', projectId);
  return (await query.limit(1).executeTakeFirst()) !== undefined;
}

// ---------------------------------------------------------------------------------------------
// Reads

export interface IndexSummaryCounts {
  files: Record<IndexStatus, number>;
  chunks: number;
}

/** Files by index status and chunk count of a project (GET …/index). */
export async function indexSummaryCounts(
  db: Db,
  workspaceId: string,
  projectId: string,
): Promise<IndexSummaryCounts> {
  const [statuses, chunks] = await Promise.all([
    db
      .selectFrom('project_files')
      .select((eb) => ['index_status', eb.fn.countAll<number>().as('count')])
      .where('workspace_id', '=', workspaceId)
      .where('project_id', '=', projectId)
      .groupBy('index_status')
      .execute(),
    db
      .selectFrom('knowledge_chunks')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('workspace_id', '=', workspaceId)
      .where('project_id', '=', projectId)
      .executeTakeFirstOrThrow(),
  ]);
  const files: Record<IndexStatus, number> = {
    pending: 0,
    indexing: 0,
    indexed: 0,
    failed: 0,
    unsupported: 0,
  };
  for (const row of statuses) files[row.index_status] = Number(row.count);
  return { files, chunks: Number(chunks.count) };
}

export interface IndexedText {
  fileId: string;
  path: string;
  name: string;
  mediaType: string;
  format: string;
  text: string;
}

/**
 * The extracted text of one indexed file, from the database (a turn never reads storage), or
 * undefined when the file is not in the project or has no indexed text.
 */
export async function readIndexedText(
  db: Db,
  where: { workspaceId?: string; projectId: string; fileId: string },
): Promise<IndexedText | undefined> {
  let query = db
    .selectFrom('knowledge_texts as t')
    .innerJoin('project_files as f', 'f.id', 't.file_id')
    .select(['t.file_id as fileId', 'f.path', 'f.name', 'f.mime_type as mediaType', 't.format', 't.text'])
    .where('t.project_id', '=', where.projectId)
    .where('t.file_id', '=', where.fileId);
  if (where.workspaceId) query = query.where('t.workspace_id', '=', where.workspaceId);
  return query.executeTakeFirst();
}

/** Total characters of a project's indexed text (the small-project whole-file rule). */
export async function indexedTextSize(db: Db, projectId: string, workspaceId?: string): Promise<number> {
  let query = db
    .selectFrom('knowledge_texts')
    .select((eb) => eb.fn.sum<number | null>('chars').as('chars'))
    .where('project_id', '=', projectId);
  if (workspaceId) query = query.where('workspace_id', '=', workspaceId);
  const row = await query.executeTakeFirstOrThrow();
  return Number(row.chars ?? 0);
}

/**
 * Every indexed file of a project with its text, in path order (the whole-file rule), code point
 * by code point as listProjectFilesByPath.
 */
export async function listIndexedTexts(
  db: Db,
  projectId: string,
  workspaceId?: string,
): Promise<IndexedText[]> {
  let query = db
    .selectFrom('knowledge_texts as t')
    .innerJoin('project_files as f', 'f.id', 't.file_id')
    .select(['t.file_id as fileId', 'f.path', 'f.name', 'f.mime_type as mediaType', 't.format', 't.text'])
    .where('t.project_id', '=', projectId);
  if (workspaceId) query = query.where('t.workspace_id', '=', workspaceId);
  return query.orderBy(inCodePointOrder(db, 'f.path')).execute();
}
