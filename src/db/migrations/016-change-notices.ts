import { type Kysely, SqliteAdapter, sql } from 'kysely';

/**
 * PostgreSQL tells every `atrium serve` which tables changed, so that what they keep in memory
 * (src/db/exact-cache.ts) stays exact there too (src/db/pg-change-signals.ts, issue 16):
 * - each write statement to a table read by a cache notifies `atrium_changes` with the table's
 *   schema and name (a trigger, so writes from psql or an older process count as well; PostgreSQL
 *   delivers it at commit, in commit order);
 * - `cache_peers` lists the processes allowed to answer from memory, each until its lease ends.
 *   A writer waits for every one of them to confirm that it has seen its change.
 * SQLite needs neither: PRAGMA data_version tells the same synchronously.
 */
const NOTIFYING_TABLES = [
  'organizations',
  'users',
  'workspaces',
  'workspace_members',
  'api_keys',
  'models',
  'workspace_models',
  'agents',
  'projects',
  'project_files',
  'chats',
  'messages',
  'skills',
];

export async function up(db: Kysely<unknown>): Promise<void> {
  if (isSqlite(db)) return;
  await sql`create table cache_peers (process_id text primary key, lease_until timestamptz not null)`.execute(
    db,
  );
  await sql`
    create function atrium_notify_change() returns trigger language plpgsql as $$
    begin
      perform pg_notify('atrium_changes', 'change ' || TG_TABLE_SCHEMA || ' ' || TG_TABLE_NAME);
      return null;
    end $$`.execute(db);
  for (const table of NOTIFYING_TABLES) {
    await sql`
      create trigger atrium_changes after insert or update or delete or truncate on ${sql.table(table)}
      for each statement execute function atrium_notify_change()`.execute(db);
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (isSqlite(db)) return;
  for (const table of NOTIFYING_TABLES) {
    await sql`drop trigger atrium_changes on ${sql.table(table)}`.execute(db);
  }
  await sql`drop function atrium_notify_change()`.execute(db);
  await sql`drop table cache_peers`.execute(db);
}

function isSqlite(db: Kysely<unknown>): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}
