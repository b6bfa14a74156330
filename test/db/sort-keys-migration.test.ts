import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateToLatest } from '../../src/db/database.js';
import { createTestApp, engineName, migrateTestDatabaseTo } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

/**
 * Agents and skills written before 024-case-folded-sort-keys, then migrated: they get their sort
 * keys, so the lists order them case-insensitively as they do rows written since. Going back
 * down to 023 restores the listing index on `lower(title)`.
 */
let t: Awaited<ReturnType<typeof createTestApp>>;
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
});
afterAll(() => t.close());

const migrateTo = (name: string) => migrateTestDatabaseTo(t.env, name);

const listed = async (url: string, field: 'agents' | 'skills', key = KEYS.otherWorkspace) => {
  const res = await t.app.inject({ method: 'GET', url, headers: { 'x-service-api-key': key } });
  expect(res.statusCode).toBe(200);
  return res.json().data[field].map((row: { title?: string; name?: string }) => row.title ?? row.name);
};

describe(`migrating agents and skills to their sort keys (${engineName})`, () => {
  it('writes the key of every row there already, and back down to 023 as before', async () => {
    await migrateTo('023-knowledge-scope-file');
    const db = t.env.database.db;
    const now = new Date().toISOString();
    // Rows as 023 held them: no key column (raw SQL, the typed schema has it).
    for (const [id, title] of [
      ['agt_before_upper', 'Éb'],
      ['agt_before_lower', 'éa'],
    ]) {
      await sql`insert into agents (id, workspace_id, title, visibility, created_at, updated_at, managed_by)
        values (${id}, 'wsp_other', ${title}, 'workspace', ${now}, ${now}, 'api')`.execute(db);
    }
    for (const [id, name] of [
      ['skl_before_upper', 'Éb'],
      ['skl_before_lower', 'éa'],
      ['skl_before_ascii', 'Zed'],
    ]) {
      await sql`insert into skills (id, workspace_id, name, visibility, owner_user_id, storage_path, created_at, updated_at)
        values (${id}, 'wsp_other', ${name}, 'workspace', 'usr_olivia', ${`skills/wsp_other/${id}/`}, ${now}, ${now})`.execute(
        db,
      );
    }
    await migrateToLatest(db, t.env.database.schema);
    expect(await listed('/v1/workspace/wsp_other/agents', 'agents')).toEqual(['Other agent', 'éa', 'Éb']);
    expect(await listed('/v1/workspace/wsp_other/skills', 'skills')).toEqual(['Zed', 'éa', 'Éb']);

    await migrateTo('023-knowledge-scope-file');
    const listingIndex =
      t.env.database.dialect === 'sqlite'
        ? sql<{
            definition: string;
          }>`select sql as definition from sqlite_master where name = 'agents_listing_idx'`
        : sql<{ definition: string }>`select indexdef as definition from pg_indexes
            where indexname = 'agents_listing_idx' and schemaname = current_schema()`;
    const { rows } = await listingIndex.execute(db);
    expect(rows.map((row) => row.definition)).toEqual([expect.stringMatching(/lower\(title\)/)]);
    await migrateToLatest(db, t.env.database.schema);
    expect(await listed('/v1/workspace/wsp_other/agents', 'agents')).toEqual(['Other agent', 'éa', 'Éb']);
  });
});
