import { type Kysely, SqliteAdapter, sql } from 'kysely';
import { hasCjkText } from '../../knowledge/fold.js';
import { postgresChunkWords } from '../repositories/knowledge.js';
import { insertSqliteChunkWordsOf019 } from './sqlite-chunk-words-frozen.js';

/** Chunks read per statement while looking for Chinese and Japanese text. */
const BATCH = 500;

/**
 * Chinese and Japanese text is now split into words before it is indexed (knowledge/fold.ts,
 * `Intl.Segmenter`): a word inside an unspaced run was never found. The chunks already indexed
 * that hold such text get their searchable words again, through the same functions the
 * repository writes new chunks with: the FTS5 row on SQLite (deleted, then written), the
 * `tsvector` on PostgreSQL. Other chunks' words do not change. The text is looked for here, in
 * batches by id, as neither engine's SQL has the script classes the check needs.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const sqlite = db.getExecutor().adapter instanceof SqliteAdapter;
  let after = 0;
  for (;;) {
    const { rows } = await sql<{ id: number; heading: string | null; text: string }>`
      select id, heading, text from knowledge_chunks where id > ${after} order by id limit ${BATCH}`.execute(
      db,
    );
    if (rows.length === 0) break;
    after = Number(rows[rows.length - 1]!.id);
    const cjk = rows.filter((row) => hasCjkText(row.text) || hasCjkText(row.heading ?? ''));
    if (cjk.length === 0) continue;
    if (sqlite) {
      const ids = cjk.map((row) => row.id);
      await sql`delete from knowledge_chunks_fts where rowid in (${sql.join(ids)})`.execute(db);
      await insertSqliteChunkWordsOf019(db, cjk);
    } else {
      for (const row of cjk) {
        await sql`update knowledge_chunks set tsv = ${postgresChunkWords(row)} where id = ${row.id}`.execute(
          db,
        );
      }
    }
  }
}

/** Nothing to undo: the words written are what the code of before would find its queries in, or more. */
export async function down(): Promise<void> {}
