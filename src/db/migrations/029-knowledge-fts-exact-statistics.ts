import { type Kysely, SqliteAdapter, sql } from 'kysely';
import { insertSqliteChunkWordsOf027 } from './sqlite-chunk-words-frozen.js';

/** Chunks re-indexed per statement while the FTS5 table is filled again. */
const BATCH = 500;

/**
 * SQLite's FTS5 table was contentless (`content=''`, `contentless_delete=1`): a deleted row's
 * tokens leave the index, but FTS5 cannot lower its totals without the row's words, so the row
 * count and the total length that bm25 weighs words by kept every chunk ever indexed. After
 * files were deleted, replaced or rebuilt, every word weighed more than over the chunks indexed
 * now, and rare words stood out less (30 of 36 files deleted, the rest replaced: a rare word's
 * score 4.7 times that of a fresh index; `optimize` does not correct it). The table now keeps
 * its own content (each chunk's searchable words, as indexed), so the trigger's delete takes
 * the row's words out of the totals too. A table's content option cannot be changed: it is
 * made again and every chunk written again, as 027 did, with the same columns and words (so
 * the repository's writer and the trigger are unchanged). PostgreSQL's ranking has no such
 * totals. The migrator's list runs it in one transaction (index.ts): stopped part way, it leaves
 * the old table as it was.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (!isSqlite(db)) return;
  await remakeFtsTable(db, '');
  await rewriteChunks(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (!isSqlite(db)) return;
  await remakeFtsTable(db, "content='', contentless_delete=1,");
  await rewriteChunks(db);
}

async function remakeFtsTable(db: Kysely<unknown>, contentOptions: string) {
  await sql`drop trigger if exists knowledge_chunks_ad`.execute(db);
  await sql`drop table if exists knowledge_chunks_vocab`.execute(db);
  await sql`drop table knowledge_chunks_fts`.execute(db);
  await sql`create virtual table knowledge_chunks_fts using fts5(
    heading, text, scope, ${sql.raw(contentOptions)}
    tokenize='unicode61 remove_diacritics 2')`.execute(db);
  await sql`create virtual table knowledge_chunks_vocab using fts5vocab(knowledge_chunks_fts, row)`.execute(
    db,
  );
  await sql`create trigger knowledge_chunks_ad after delete on knowledge_chunks begin
    delete from knowledge_chunks_fts where rowid = OLD.id;
  end`.execute(db);
}

type ChunkRow = { id: number; project_id: string; heading: string | null; text: string };

async function rewriteChunks(db: Kysely<unknown>) {
  let after = -1;
  for (;;) {
    const { rows } = await sql<ChunkRow>`
      select id, project_id, heading, text from knowledge_chunks where id > ${after} order by id limit ${BATCH}`.execute(
      db,
    );
    if (rows.length === 0) break;
    await insertSqliteChunkWordsOf027(db, rows);
    after = rows[rows.length - 1]!.id;
  }
}

function isSqlite(db: Kysely<unknown>): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}
