import { type Kysely, SqliteAdapter, sql } from 'kysely';
import { insertSqliteChunkWordsOf019 } from './sqlite-chunk-words-frozen.js';

/** Chunks re-indexed per statement while the FTS5 table is filled again. */
const BATCH = 500;

/**
 * SQLite's FTS5 table indexed the chunks' own text with `unicode61 remove_diacritics 2`, which
 * folds Latin accents only, while queries were folded by knowledge/fold.ts (every combining
 * mark, compatibility forms, Hangul to jamo): a Hindi or Korean word, or `ﬁrewall` written with
 * a ligature, was never found. PostgreSQL already indexed the folded text. Now SQLite does too:
 * the FTS5 table becomes contentless (`content=''`, it keeps no text, only the index) and is
 * written with each chunk's searchable words by the repository (a trigger cannot fold), with
 * `contentless_delete=1` so a trigger still removes a deleted chunk's row by id. Existing
 * chunks are indexed again here with their searchable words, as the repository wrote them then
 * (027 adds a column, and writes every row again).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (!isSqlite(db)) return;
  await dropFtsTable(db);
  await sql`create virtual table knowledge_chunks_fts using fts5(
    heading, text, content='', contentless_delete=1,
    tokenize='unicode61 remove_diacritics 2')`.execute(db);
  await createVocabulary(db);
  await sql`create trigger knowledge_chunks_ad after delete on knowledge_chunks begin
    delete from knowledge_chunks_fts where rowid = OLD.id;
  end`.execute(db);
  let after = -1;
  for (;;) {
    const result = await sql<{ id: number; heading: string | null; text: string }>`
      select id, heading, text from knowledge_chunks where id > ${after} order by id limit ${BATCH}`.execute(
      db,
    );
    if (result.rows.length === 0) break;
    await insertSqliteChunkWordsOf019(db, result.rows);
    after = result.rows[result.rows.length - 1].id;
  }
}

/** Back to 011's external-content table kept by triggers, rebuilt from the chunks' own text. */
export async function down(db: Kysely<unknown>): Promise<void> {
  if (!isSqlite(db)) return;
  await dropFtsTable(db);
  await sql`create virtual table knowledge_chunks_fts using fts5(
    heading, text, content='knowledge_chunks', content_rowid='id',
    tokenize='unicode61 remove_diacritics 2')`.execute(db);
  await createVocabulary(db);
  await sql`create trigger knowledge_chunks_ai after insert on knowledge_chunks begin
    insert into knowledge_chunks_fts (rowid, heading, text) values (NEW.id, NEW.heading, NEW.text);
  end`.execute(db);
  await sql`create trigger knowledge_chunks_ad after delete on knowledge_chunks begin
    insert into knowledge_chunks_fts (knowledge_chunks_fts, rowid, heading, text)
      values ('delete', OLD.id, OLD.heading, OLD.text);
  end`.execute(db);
  await sql`create trigger knowledge_chunks_au after update on knowledge_chunks begin
    insert into knowledge_chunks_fts (knowledge_chunks_fts, rowid, heading, text)
      values ('delete', OLD.id, OLD.heading, OLD.text);
    insert into knowledge_chunks_fts (rowid, heading, text) values (NEW.id, NEW.heading, NEW.text);
  end`.execute(db);
  await sql`insert into knowledge_chunks_fts (knowledge_chunks_fts) values ('rebuild')`.execute(db);
}

async function dropFtsTable(db: Kysely<unknown>) {
  for (const trigger of ['knowledge_chunks_ai', 'knowledge_chunks_ad', 'knowledge_chunks_au']) {
    await sql`drop trigger if exists ${sql.raw(trigger)}`.execute(db);
  }
  await sql`drop table if exists knowledge_chunks_vocab`.execute(db);
  await sql`drop table knowledge_chunks_fts`.execute(db);
}

async function createVocabulary(db: Kysely<unknown>) {
  await sql`create virtual table knowledge_chunks_vocab using fts5vocab(knowledge_chunks_fts, row)`.execute(
    db,
  );
}

function isSqlite(db: Kysely<unknown>): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}
