import type { Kysely } from 'kysely';

/**
 * `projects.file_removals`: how many of the project's file records have been removed, by a file
 * delete or by a sync that found the object gone. A sync reads storage (list, HEADs) outside any
 * transaction, with this count and the records read before it; in its transaction a count that
 * moved means a file may have been registered and removed meanwhile, and an object it listed
 * may be such a file's, deleted since: it looks again instead of registering it
 * (services/project-files.ts).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('projects')
    .addColumn('file_removals', 'integer', (column) => column.notNull().defaultTo(0))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('projects').dropColumn('file_removals').execute();
}
