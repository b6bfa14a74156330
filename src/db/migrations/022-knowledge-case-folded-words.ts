import { type Kysely, SqliteAdapter, sql } from 'kysely';
import { postgresChunkWords } from '../repositories/knowledge.js';

/** Chunks read per statement while looking for such text. */
const BATCH = 500;

/**
 * Text PostgreSQL may have lower-cased otherwise than a query is: a capital beyond ASCII (left as
 * it is under the `C` locale), or a final sigma. Curly quotes, dashes and accents alone (common
 * in PDFs) are folded alike either way, so their chunks are left as they are.
 */
const CASED_BEYOND_ASCII = /(?![A-Z])[\p{Lu}\p{Lt}]|ς/u;

/**
 * Searchable words are now lower-cased by knowledge/fold.ts, with a final sigma written `σ`, not
 * by PostgreSQL: its `to_tsvector` lower-cases by the database's locale (nothing beyond ASCII
 * under `C`) and keeps `ς`, so a Greek word in capitals, or any capitalised word beyond ASCII on
 * a `C` database, was never found by the query words, which JavaScript lower-cases. The chunks
 * already indexed that hold such letters get their `tsvector` again, through the function
 * the repository writes new chunks with. SQLite's tokenizer folds case itself: nothing to do.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) return;
  let after = 0;
  for (;;) {
    const { rows } = await sql<{ id: number; heading: string | null; text: string }>`
      select id, heading, text from knowledge_chunks where id > ${after} order by id limit ${BATCH}`.execute(
      db,
    );
    if (rows.length === 0) break;
    after = Number(rows[rows.length - 1]!.id);
    for (const row of rows) {
      if (!CASED_BEYOND_ASCII.test(row.text) && !CASED_BEYOND_ASCII.test(row.heading ?? '')) continue;
      await sql`update knowledge_chunks set tsv = ${postgresChunkWords(row)} where id = ${row.id}`.execute(
        db,
      );
    }
  }
}

/** Nothing to undo: the words written are what the code of before would find its queries in, or more. */
export async function down(): Promise<void> {}
