import { type Kysely, SqliteAdapter, sql } from 'kysely';

/**
 * Project knowledge (spec/knowledge.md): the index state of every project file, the text
 * extracted from the version indexed, and its chunks with a full-text index.
 *
 * - Index state lives on `project_files` itself, so sync marks a file for indexing in the same
 *   write that records its new content, and a file's state goes with its record. `index_status`
 *   is `pending | indexing | indexed | failed | unsupported`. A claim is a lease
 *   (`index_claimed_by`, `index_lease_until`): a process that dies mid-index loses its claim when
 *   the lease ends, and any process takes the file up again. `index_attempts` counts claims since
 *   the last success; `index_retry_at` is the earliest time a failed attempt is retried.
 *   Existing files start `pending`, so an upgraded deployment indexes what it already has.
 * - `knowledge_texts`: the extracted text of the indexed version (`etag`), so a turn reads the
 *   database, never object storage.
 * - `knowledge_chunks`: the chunks. SQLite: an external-content FTS5 table kept by triggers
 *   (`unicode61 remove_diacritics 2`: case- and accent-folded), and a `fts5vocab` view of it
 *   that gives each term's document frequency for free. PostgreSQL: a `tsvector` written with
 *   each chunk from its accent-folded words (configuration `simple`, see
 *   knowledge/fold.ts for why), with a GIN index. Not a generated column: folding accents in
 *   SQL needs the `unaccent` extension, which a plain PostgreSQL may not offer.
 *
 * Deleting a file record deletes its text and chunks by foreign key, in the same statement.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const sqlite = isSqlite(db);
  await db.schema
    .alterTable('project_files')
    .addColumn('index_status', 'text', (c) => c.notNull().defaultTo('pending'))
    .execute();
  for (const column of [
    'index_error',
    'index_retry_at',
    'index_claimed_by',
    'index_lease_until',
    'indexed_etag',
  ]) {
    await db.schema.alterTable('project_files').addColumn(column, 'text').execute();
  }
  await db.schema
    .alterTable('project_files')
    .addColumn('index_attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  // The indexer looks for claimable work across every project by status.
  await sql`create index project_files_index_status_idx on project_files (index_status)`.execute(db);

  await db.schema
    .createTable('knowledge_texts')
    .addColumn('file_id', 'text', (c) => c.primaryKey().references('project_files.id').onDelete('cascade'))
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('etag', 'text', (c) => c.notNull())
    .addColumn('format', 'text', (c) => c.notNull())
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('chars', 'integer', (c) => c.notNull())
    .addColumn('indexed_at', 'text', (c) => c.notNull())
    .execute();
  // Covers the whole-file rule's sum of a project's chars (each turn): SQLite would otherwise read
  // past every file's text to reach `chars` (8 ms at 400 files of 35 KB, 0.06 ms with it).
  await sql`create index knowledge_texts_project_idx on knowledge_texts (project_id, workspace_id, chars)`.execute(
    db,
  );

  await db.schema
    .createTable('knowledge_chunks')
    // SQLite: an alias of the rowid, which the FTS table points at.
    .addColumn('id', sqlite ? 'integer' : 'bigserial', (c) => c.primaryKey())
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('file_id', 'text', (c) => c.notNull().references('project_files.id').onDelete('cascade'))
    .addColumn('ordinal', 'integer', (c) => c.notNull())
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('heading', 'text')
    .addColumn('pages', 'text')
    .addColumn('start_offset', 'integer', (c) => c.notNull())
    .addColumn('end_offset', 'integer', (c) => c.notNull())
    .execute();
  await sql`create index knowledge_chunks_file_idx on knowledge_chunks (file_id, ordinal)`.execute(db);
  await sql`create index knowledge_chunks_project_idx on knowledge_chunks (project_id)`.execute(db);

  if (sqlite) {
    await sql`create virtual table knowledge_chunks_fts using fts5(
      heading, text, content='knowledge_chunks', content_rowid='id',
      tokenize='unicode61 remove_diacritics 2')`.execute(db);
    await sql`create virtual table knowledge_chunks_vocab using fts5vocab(knowledge_chunks_fts, row)`.execute(
      db,
    );
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
  } else {
    // Written with each chunk (repositories/knowledge.ts): accent-folded words, the heading
    // weighing more than the body (weight A).
    await sql`alter table knowledge_chunks add column tsv tsvector`.execute(db);
    await sql`create index knowledge_chunks_tsv_idx on knowledge_chunks using gin (tsv)`.execute(db);
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (isSqlite(db)) {
    for (const trigger of ['knowledge_chunks_ai', 'knowledge_chunks_ad', 'knowledge_chunks_au']) {
      await sql`drop trigger ${sql.raw(trigger)}`.execute(db);
    }
    await sql`drop table knowledge_chunks_vocab`.execute(db);
    await sql`drop table knowledge_chunks_fts`.execute(db);
  }
  await db.schema.dropTable('knowledge_chunks').execute();
  await db.schema.dropTable('knowledge_texts').execute();
  await db.schema.dropIndex('project_files_index_status_idx').execute();
  for (const column of [
    'index_attempts',
    'indexed_etag',
    'index_lease_until',
    'index_claimed_by',
    'index_retry_at',
    'index_error',
    'index_status',
  ]) {
    await db.schema.alterTable('project_files').dropColumn(column).execute();
  }
}

function isSqlite(db: Kysely<unknown>): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}
