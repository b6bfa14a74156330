import type { Kysely } from 'kysely';

/**
 * Replace uploads under way, one per skill: a replace takes its skill's row here before it
 * lists the skill's files and gives it back once its stale files are gone, so two replaces of
 * one skill (on any processes) cannot mix their files (docs/skills.md, "Replace"). `expires_at`
 * frees the skill when the process holding it died.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('skill_replacements')
    // No foreign key: a skill deleted meanwhile must not fail the replace's release (the row just
    // expires; expired rows are removed by the next replace).
    .addColumn('skill_id', 'text', (c) => c.primaryKey())
    // The replace holding it (a random id), so one whose time ran out never frees its successor's.
    .addColumn('holder', 'text', (c) => c.notNull())
    // ISO 8601 text, as every other time column (001-initial).
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('skill_replacements').execute();
}
