/**
 * The exact caches' version (src/db/exact-cache.ts; on SQLite its data_version, which tells that
 * another connection committed) is read once per poll phase of the event loop for every caller:
 * the reading is taken after all of them asked, so it is exact for each, as it follows each
 * request's arrival.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/database.js';
import { ExactCache } from '../../src/db/exact-cache.js';

describe('version readings of the exact caches (SQLite)', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'atrium-data-version-'));
  const file = path.join(dir, 'atrium.sqlite');
  let handle: Awaited<ReturnType<typeof openDatabase>>;
  let other: Database.Database;
  beforeAll(async () => {
    handle = await openDatabase({ kind: 'sqlite', file });
    other = new Database(file);
    other.exec('create table notes (text text)');
  });
  afterAll(async () => {
    other.close();
    await handle.close();
    rmSync(dir, { recursive: true, force: true });
  });
  /** Another process's commit, made synchronously: no poll phase passes meanwhile. */
  const commitElsewhere = () => other.prepare("insert into notes values ('x')").run();

  it('is read once for every caller of the same poll phase, after all of them asked', async () => {
    const cache = ExactCache.for(handle.db, ['notes'], { entries: 10 })!;
    // Another cache of the same database shares the reading too (the key cache and the listings).
    const other = ExactCache.for(handle.db, ['chats'], { entries: 10 })!;
    const before = await cache.readVersion();
    const first = cache.readVersion();
    const second = other.readVersion();
    expect(second).toBe(first);
    // Committed after both asked, before the read: the shared read sees it.
    commitElsewhere();
    const shared = await first;
    expect(shared).not.toBe(before);
    // A caller asking once that read has run gets a read of its own, which sees later commits.
    const third = cache.readVersion();
    expect(third).not.toBe(first);
    commitElsewhere();
    expect(await third).not.toBe(shared);
  });

  it('answers the same number while nothing is committed elsewhere', async () => {
    const cache = ExactCache.for(handle.db, ['notes'], { entries: 10 })!;
    const one = await cache.readVersion();
    // This connection's own writes are reported by the plugin, not by data_version.
    await handle.db.schema.createTable('mine').addColumn('id', 'integer').execute();
    expect(await cache.readVersion()).toBe(one);
  });
});
