import { type Kysely, SqliteAdapter, sql } from 'kysely';
import { insertSqliteChunkWordsOf019, insertSqliteChunkWordsOf027 } from './sqlite-chunk-words-frozen.js';

/** Chunks re-indexed per statement while the FTS5 table is filled again. */
const BATCH = 500;

/**
 * SQLite search looked for a project's matches among every tenant's FTS5 matches (narrowed to
 * the project's smallest and largest chunk id, which chunks of projects indexed over time
 * interleave) and checked each one's project: 2 chunks of a project with 100,000 of other
 * tenants' in between made a query of 20 common words walk 2 million matches, seconds with the
 * event loop blocked. The FTS5 table gains a `scope` column holding one word per project
 * (`sqliteProjectToken`), which search ANDs with the query's words: FTS5 then steps through the
 * project's doclist and the words' doclists together, skipping other tenants' rows, so the work
 * follows the project's own chunks. An FTS5 table cannot gain a column: it is made again and
 * every chunk written again, as 019 did. PostgreSQL searches by project already.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (!isSqlite(db)) return;
  await remakeFtsTable(db, 'heading, text, scope');
  await rewriteChunks(db, (rows) => insertSqliteChunkWordsOf027(db, rows));
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (!isSqlite(db)) return;
  await remakeFtsTable(db, 'heading, text');
  await rewriteChunks(db, (rows) => insertSqliteChunkWordsOf019(db, rows));
}

async function remakeFtsTable(db: Kysely<unknown>, columns: string) {
  await sql`drop trigger if exists knowledge_chunks_ad`.execute(db);
  await sql`drop table if exists knowledge_chunks_vocab`.execute(db);
  await sql`drop table knowledge_chunks_fts`.execute(db);
  await sql`create virtual table knowledge_chunks_fts using fts5(
    ${sql.raw(columns)}, content='', contentless_delete=1,
    tokenize='unicode61 remove_diacritics 2')`.execute(db);
  await sql`create virtual table knowledge_chunks_vocab using fts5vocab(knowledge_chunks_fts, row)`.execute(
    db,
  );
  await sql`create trigger knowledge_chunks_ad after delete on knowledge_chunks begin
    delete from knowledge_chunks_fts where rowid = OLD.id;
  end`.execute(db);
}

type ChunkRow = { id: number; project_id: string; heading: string | null; text: string };

async function rewriteChunks(db: Kysely<unknown>, write: (rows: ChunkRow[]) => Promise<void>) {
  let after = -1;
  for (;;) {
    const { rows } = await sql<ChunkRow>`
      select id, project_id, heading, text from knowledge_chunks where id > ${after} order by id limit ${BATCH}`.execute(
      db,
    );
    if (rows.length === 0) break;
    await write(rows);
    after = rows[rows.length - 1]!.id;
  }
}

function isSqlite(db: Kysely<unknown>): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}
