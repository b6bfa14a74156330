import { type Kysely, SqliteAdapter, sql } from 'kysely';
import { caseInsensitiveSortKey } from '../sort-key.js';

/** Rows read per statement while their keys are written. */
const BATCH = 500;

/**
 * The agent list (by title) and the skill list (by name) are ordered case-insensitively. They
 * were ordered by `lower(…)`, which SQLite applies to ASCII only and PostgreSQL by the
 * database's locale (its collation ordering the result), so `Éb` came before `éa` on SQLite
 * and after it on a PostgreSQL database with a UTF-8 locale. Each row now stores its key
 * (`caseInsensitiveSortKey`, computed in JavaScript when the row is written), compared byte by
 * byte on both engines: SQLite's default `BINARY`, PostgreSQL's `C` collation declared on the
 * column, so an `order by` of the column needs no `collate` and the index serves it. The listing indexes (workspace, key, id) keep each page an index range scan; the
 * skill list had none, and sorted every visible skill of the workspace for each page.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const keyType = isSqlite(db) ? sql`text` : sql`text collate "C"`;
  // The default fills the rows of before until they get their keys below; every writer of this
  // version sets it. (A process of the version before, still running during a rolling restart,
  // writes its new rows with this empty key: they are listed first until renamed.)
  await db.schema
    .alterTable('agents')
    .addColumn('title_sort_key', keyType, (c) => c.notNull().defaultTo(''))
    .execute();
  await db.schema
    .alterTable('skills')
    .addColumn('name_sort_key', keyType, (c) => c.notNull().defaultTo(''))
    .execute();
  await writeSortKeys(db, 'agents', 'title', 'title_sort_key');
  await writeSortKeys(db, 'skills', 'name', 'name_sort_key');

  // Ties of one key are broken by id in code point order too (sort-key.ts, idInCodePointOrder).
  const id = isSqlite(db) ? sql`id` : sql`id collate "C"`;
  await db.schema.dropIndex('agents_listing_idx').execute();
  await sql`create index agents_listing_idx on agents (workspace_id, title_sort_key, ${id})`.execute(db);
  await sql`create index skills_listing_idx on skills (workspace_id, name_sort_key, ${id})`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('skills_listing_idx').execute();
  await db.schema.dropIndex('agents_listing_idx').execute();
  await sql`create index agents_listing_idx on agents (workspace_id, lower(title), id)`.execute(db);
  await db.schema.alterTable('skills').dropColumn('name_sort_key').execute();
  await db.schema.alterTable('agents').dropColumn('title_sort_key').execute();
}

/** Every row's key, written in batches by id (the table is not read whole into memory). */
async function writeSortKeys(
  db: Kysely<unknown>,
  table: 'agents' | 'skills',
  nameColumn: 'title' | 'name',
  keyColumn: 'title_sort_key' | 'name_sort_key',
): Promise<void> {
  let after = '';
  for (;;) {
    const { rows } = await sql<{ id: string; name: string }>`
      select id, ${sql.ref(nameColumn)} as name from ${sql.table(table)}
      where id > ${after} order by id limit ${BATCH}`.execute(db);
    if (rows.length === 0) break;
    after = rows[rows.length - 1]!.id;
    for (const row of rows) {
      await sql`update ${sql.table(table)} set ${sql.ref(keyColumn)} = ${caseInsensitiveSortKey(row.name)}
        where id = ${row.id}`.execute(db);
    }
  }
}

function isSqlite(db: Kysely<unknown>): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}
