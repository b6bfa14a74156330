import { type Kysely, SqliteAdapter, sql } from 'kysely';

/**
 * The model registry's entries are kept in memory with their provider (src/db/repositories/models.ts:
 * base URL and API key), and that cache is emptied by writes to `providers` too. Migration 016
 * gave every other cached table its change trigger but not `providers`: on PostgreSQL a provider
 * changed by another process (`atrium apply` rotating an API key or moving a base URL, `psql`)
 * reached no running `atrium serve`, which kept calling the old address with the old key until
 * some other cached table changed. The same trigger as 016's, on `providers`; the processes read
 * which tables notify from the database, so they take it up without a restart. SQLite needs none
 * (PRAGMA data_version covers every table).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (isSqlite(db)) return;
  await sql`
    create trigger atrium_changes after insert or update or delete or truncate on providers
    for each statement execute function atrium_notify_change()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (isSqlite(db)) return;
  await sql`drop trigger atrium_changes on providers`.execute(db);
}

function isSqlite(db: Kysely<unknown>): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}
