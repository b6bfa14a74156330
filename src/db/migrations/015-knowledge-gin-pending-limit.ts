import { type Kysely, SqliteAdapter, sql } from 'kysely';

/**
 * PostgreSQL's GIN index on chunk words buffers new entries in a pending list (up to
 * `gin_pending_list_limit`, 4 MB by default) that every search scans linearly until a vacuum or
 * a full list merges it. While it is long the planner also prices the index so high that it
 * filters every chunk of the project instead: 97 ms for a 4-word question at 10,000 chunks after
 * the indexer had written them, against about 1 ms once merged. A 256 kB list keeps most of
 * the batching (turning the list off made indexing twice as slow) while bounding what a search
 * scans. What is pending now is merged.
 * SQLite's FTS5 has no such list: nothing to do there.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (isSqlite(db)) return;
  await sql`alter index knowledge_chunks_tsv_idx set (gin_pending_list_limit = 256)`.execute(db);
  await sql`select gin_clean_pending_list('knowledge_chunks_tsv_idx'::regclass)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (isSqlite(db)) return;
  await sql`alter index knowledge_chunks_tsv_idx reset (gin_pending_list_limit)`.execute(db);
}

function isSqlite(db: Kysely<unknown>): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}
