import { type Kysely, sql } from 'kysely';
import { searchableText } from '../../knowledge/fold.js';

/**
 * The FTS5 rows of SQLite chunks as 019–025 wrote them: searchable words in `heading` and `text`,
 * the table's only columns then. Migrations of that time (019, 021, and 027 going down) write
 * with this, not with the repository's writer, which follows the table of today.
 */
export async function insertSqliteChunkWordsOf019(
  db: Kysely<unknown>,
  chunks: Array<{ id: number; heading: string | null; text: string }>,
): Promise<void> {
  if (chunks.length === 0) return;
  const values = chunks.map(
    (chunk) => sql`(${chunk.id}, ${searchableText(chunk.heading ?? '')}, ${searchableText(chunk.text)})`,
  );
  await sql`insert into knowledge_chunks_fts (rowid, heading, text) values ${sql.join(values)}`.execute(db);
}

/**
 * The FTS5 rows of SQLite chunks as 027 writes them: the words, and the project's one-word
 * `scope` (`p` and the project id's UTF-8 in hex). Frozen here for the same reason.
 */
export async function insertSqliteChunkWordsOf027(
  db: Kysely<unknown>,
  chunks: Array<{ id: number; project_id: string; heading: string | null; text: string }>,
): Promise<void> {
  if (chunks.length === 0) return;
  const values = chunks.map(
    (chunk) =>
      sql`(${chunk.id}, ${searchableText(chunk.heading ?? '')}, ${searchableText(chunk.text)}, ${`p${Buffer.from(chunk.project_id, 'utf8').toString('hex')}`})`,
  );
  await sql`insert into knowledge_chunks_fts (rowid, heading, text, scope) values ${sql.join(values)}`.execute(
    db,
  );
}
