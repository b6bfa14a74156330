import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateToLatest } from '../../src/db/database.js';
import { createTestApp, engineName, migrateTestDatabaseTo } from '../helpers/app.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';

/**
 * 025-upload-reservations-per-url keys upload reservations by URL (path and end) instead of by
 * path: the reservations of URLs handed out before the upgrade stay, and going back down keeps
 * for each path its largest size until its latest end, never less room than was held.
 */
let t: Awaited<ReturnType<typeof createTestApp>>;
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
});
afterAll(() => t.close());

const migrateTo = (name: string) => migrateTestDatabaseTo(t.env, name);
const reservation = (path: string, size_bytes: number, expires_at: string) => ({
  project_id: 'prj_docs',
  workspace_id: 'wsp_main',
  path,
  size_bytes,
  expires_at,
});
const reservations = async () =>
  (
    await t.env.database.db
      .selectFrom('upload_reservations')
      .select(['path', 'size_bytes', 'expires_at'])
      .orderBy('path')
      .orderBy('expires_at')
      .execute()
  ).map((row) => ({ ...row, size_bytes: Number(row.size_bytes) }));

describe(`migration 025-upload-reservations-per-url (${engineName})`, () => {
  it('keeps the reservations there, and back down keeps each path’s largest size until its latest end', async () => {
    await migrateTo('024-case-folded-sort-keys');
    await t.env.database.db
      .insertInto('upload_reservations')
      .values(reservation('a.bin', 50, '2030-01-01T01:00:00.000Z'))
      .execute();
    await migrateToLatest(t.env.database.db, t.env.database.schema);
    expect(await reservations()).toEqual([
      { path: 'a.bin', size_bytes: 50, expires_at: '2030-01-01T01:00:00.000Z' },
    ]);
    // Now one row per URL: the path asked for again, smaller and ending later.
    await t.env.database.db
      .insertInto('upload_reservations')
      .values(reservation('a.bin', 1, '2030-01-01T02:00:00.000Z'))
      .execute();
    await migrateTo('024-case-folded-sort-keys');
    expect(await reservations()).toEqual([
      { path: 'a.bin', size_bytes: 50, expires_at: '2030-01-01T02:00:00.000Z' },
    ]);
    await migrateToLatest(t.env.database.db, t.env.database.schema);
  });
});
