import { type Kysely, sql } from 'kysely';

/**
 * One upload reservation per upload URL rather than per path: a path asked for again keeps the
 * earlier URL's size only until that URL's own reservation ends, then the later URL's size until
 * its own (docs/files.md, "Quota"). One row per path had to hold the larger size until the later
 * URL's end. The key gains `expires_at`; the rows there are kept as they are.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await recreate(db, ['project_id', 'path', 'expires_at'], 'upload_reservations_url_pk', COPY_ALL);
}

/** Back to one row per path, holding its largest size until its latest end (never less than before). */
export async function down(db: Kysely<unknown>): Promise<void> {
  await recreate(db, ['project_id', 'path'], 'upload_reservations_pk', COPY_LARGEST_PER_PATH);
}

const COPY_ALL = sql`insert into upload_reservations (project_id, workspace_id, path, size_bytes, expires_at)
  select project_id, workspace_id, path, size_bytes, expires_at from upload_reservations_before`;
const COPY_LARGEST_PER_PATH = sql`insert into upload_reservations (project_id, workspace_id, path, size_bytes, expires_at)
  select project_id, min(workspace_id), path, max(size_bytes), max(expires_at) from upload_reservations_before
  group by project_id, path`;

/**
 * Neither engine changes a primary key in place (SQLite cannot at all): the table is renamed,
 * made again with the new key (under a name the old one's index does not hold, on PostgreSQL),
 * filled from the old one and the old one dropped.
 */
async function recreate(
  db: Kysely<unknown>,
  key: Array<'project_id' | 'path' | 'expires_at'>,
  keyName: string,
  copy: typeof COPY_ALL,
) {
  await db.schema.alterTable('upload_reservations').renameTo('upload_reservations_before').execute();
  await db.schema
    .createTable('upload_reservations')
    .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('path', 'text', (c) => c.notNull())
    .addColumn('size_bytes', 'bigint', (c) => c.notNull())
    // ISO 8601 text, as every other time column (001-initial).
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint(keyName, key)
    .execute();
  await copy.execute(db);
  await db.schema.dropTable('upload_reservations_before').execute();
}
