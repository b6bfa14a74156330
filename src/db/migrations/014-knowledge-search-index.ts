import { type Kysely, SqliteAdapter, sql } from 'kysely';

/**
 * SQLite search keeps a project's chunks among the FTS5 matches by looking each match up by id.
 * In the table itself that lookup lands on a row of ~1.5 KB of chunk text, so a term found in
 * tens of thousands of chunks reads most of the table (330 ms at 100,000 chunks). This index
 * holds only id, project and workspace: the same lookups read a few hundred small pages (70 ms),
 * and a search ranks no more than a few thousand of them (knowledge/search.ts).
 * PostgreSQL filters GIN matches on the heap rows it already reads: nothing to add there.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (!isSqlite(db)) return;
  await sql`create index knowledge_chunks_scope_idx on knowledge_chunks (id, project_id, workspace_id)`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (!isSqlite(db)) return;
  await sql`drop index knowledge_chunks_scope_idx`.execute(db);
}

function isSqlite(db: Kysely<unknown>): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}
