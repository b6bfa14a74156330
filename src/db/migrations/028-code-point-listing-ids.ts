import { type Kysely, SqliteAdapter, sql } from 'kysely';

/**
 * The project list breaks ties of one `updated_at` by id in code point order on both engines
 * (sort-key.ts, idInCodePointOrder): on PostgreSQL by `id collate "C"`, which an index on `id`
 * in the database's collation cannot serve, so every page was sorted again after the index scan.
 * The listing index holds the id in the `C` collation, as 024 did for agents and skills.
 * SQLite compares ids byte by byte already: nothing to do there. (The other listings that break
 * ties by id, chats, files, keys and runs, have no id in their indexes, and sort their ties on
 * both collations alike.)
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (isSqlite(db)) return;
  await db.schema.dropIndex('projects_listing_idx').execute();
  await sql`create index projects_listing_idx on projects (workspace_id, archived, updated_at, id collate "C")`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (isSqlite(db)) return;
  await db.schema.dropIndex('projects_listing_idx').execute();
  await sql`create index projects_listing_idx on projects (workspace_id, archived, updated_at, id)`.execute(
    db,
  );
}

function isSqlite(db: Kysely<unknown>): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}
