/**
 * SQLite's data_version (src/db/change-signals.ts) tells the exact caches that another connection
 * committed. Each read is a read transaction, so the requests that ask in one poll phase share
 * one read, taken after all of them asked: exact for each, as it follows each request's arrival.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changeSignalsOf } from '../../src/db/change-signals.js';
import { openDatabase } from '../../src/db/database.js';

describe('SQLite data_version reads', () => {
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
    const signals = changeSignalsOf(handle.db as never)!;
    const before = await signals.externalVersion(handle.db as never);
    const first = signals.externalVersion(handle.db as never);
    const second = signals.externalVersion(handle.db as never);
    expect(second).toBe(first);
    // Committed after both asked, before the read: the shared read sees it.
    commitElsewhere();
    const shared = await first;
    expect(shared).not.toBe(before);
    // A caller asking once that read has run gets a read of its own, which sees later commits.
    const third = signals.externalVersion(handle.db as never);
    expect(third).not.toBe(first);
    commitElsewhere();
    expect(await third).not.toBe(shared);
  });

  it('answers the same number while nothing is committed elsewhere', async () => {
    const signals = changeSignalsOf(handle.db as never)!;
    const one = await signals.externalVersion(handle.db as never);
    // This connection's own writes are reported by the plugin, not by data_version.
    await handle.db.schema.createTable('mine').addColumn('id', 'integer').execute();
    expect(await signals.externalVersion(handle.db as never)).toBe(one);
  });
});
