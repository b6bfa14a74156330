import { type Kysely, SqliteAdapter, sql } from 'kysely';

/**
 * Search now keeps at most a few chunks of one file while it ranks (knowledge/search.ts), so it
 * needs each match's file beside its project. SQLite reads both from the narrow scope index of
 * 014 (not from the chunk rows, ~1.5 KB each): the index now holds the file too. PostgreSQL
 * ranks the heap rows it already reads: nothing to add there.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (!isSqlite(db)) return;
  await sql`drop index knowledge_chunks_scope_idx`.execute(db);
  await sql`create index knowledge_chunks_scope_idx on knowledge_chunks (id, project_id, workspace_id, file_id)`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (!isSqlite(db)) return;
  await sql`drop index knowledge_chunks_scope_idx`.execute(db);
  await sql`create index knowledge_chunks_scope_idx on knowledge_chunks (id, project_id, workspace_id)`.execute(
    db,
  );
}

function isSqlite(db: Kysely<unknown>): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}
