import { type Kysely, SqliteAdapter, sql } from 'kysely';
import { hasSoutheastAsianText } from '../../knowledge/fold.js';
import { postgresChunkWords } from '../repositories/knowledge.js';
import { insertSqliteChunkWordsOf027 } from './sqlite-chunk-words-frozen.js';

/** Chunks read per statement while looking for Thai, Lao, Khmer and Burmese text. */
const BATCH = 500;

/**
 * Thai, Lao, Khmer and Burmese text is now split into words before it is indexed, as Chinese
 * and Japanese were by 021 (knowledge/fold.ts, `Intl.Segmenter`): a word inside an unspaced run
 * was never found. The chunks already indexed that hold such text get their searchable words
 * again, as 021 did: the FTS5 row on SQLite (deleted, then written with the columns 027 and 029
 * left it), the `tsvector` on PostgreSQL. Other chunks' words do not change. The text is looked
 * for here, in batches by id, as neither engine's SQL has the script classes the check needs.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const sqlite = db.getExecutor().adapter instanceof SqliteAdapter;
  let after = -1;
  for (;;) {
    const { rows } = await sql<{ id: number; project_id: string; heading: string | null; text: string }>`
      select id, project_id, heading, text from knowledge_chunks where id > ${after} order by id limit ${BATCH}`.execute(
      db,
    );
    if (rows.length === 0) break;
    after = Number(rows[rows.length - 1]!.id);
    const split = rows.filter(
      (row) => hasSoutheastAsianText(row.text) || hasSoutheastAsianText(row.heading ?? ''),
    );
    if (split.length === 0) continue;
    if (sqlite) {
      await sql`delete from knowledge_chunks_fts where rowid in (${sql.join(split.map((row) => row.id))})`.execute(
        db,
      );
      await insertSqliteChunkWordsOf027(db, split);
    } else {
      for (const row of split) {
        await sql`update knowledge_chunks set tsv = ${postgresChunkWords(row)} where id = ${row.id}`.execute(
          db,
        );
      }
    }
  }
}

/**
 * Nothing undone: the code of before finds these chunks by any one of their words, but not by
 * several typed without spaces (its query keeps them as one word); a rebuild writes them as it did.
 */
export async function down(): Promise<void> {}
