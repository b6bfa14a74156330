import type { Kysely } from 'kysely';

/**
 * Upload URLs handed out and not expired yet, with the bytes each may bring: counted by the
 * project quota beside what storage holds, so URLs asked for together cannot take a project
 * past it (docs/files.md, "Quota").
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('upload_reservations')
    .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('path', 'text', (c) => c.notNull())
    .addColumn('size_bytes', 'bigint', (c) => c.notNull())
    // ISO 8601 text, as every other time column (001-initial).
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('upload_reservations_pk', ['project_id', 'path'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('upload_reservations').execute();
}
