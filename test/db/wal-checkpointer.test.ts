import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { type DatabaseHandle, openDatabase, walCheckpointerOf } from '../../src/db/database.js';
import { type CheckpointResult, WalCheckpointer } from '../../src/db/wal-checkpointer.js';

// SQLite's own behaviour, whichever engine the rest of the suite runs on.
const dirs: string[] = [];
const handles: DatabaseHandle[] = [];
afterEach(async () => {
  for (const handle of handles.splice(0)) await handle.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempFile(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'atrium-wal-'));
  dirs.push(dir);
  return path.join(dir, 'atrium.sqlite');
}

async function open(file: string): Promise<DatabaseHandle> {
  const handle = await openDatabase({ kind: 'sqlite', file });
  handles.push(handle);
  return handle;
}

/** About 8 MB in 2,000 rows: the log passes SQLite's 1,000-page checkpoint point twice. */
async function writeManyPages(handle: DatabaseHandle) {
  await sql`create table filler (body blob)`.execute(handle.db);
  for (let i = 0; i < 20; i++) {
    await handle.db.transaction().execute(async (trx) => {
      for (let k = 0; k < 100; k++)
        await sql`insert into filler (body) values (randomblob(4000))`.execute(trx);
    });
  }
}

describe('SQLite log checkpoints (issue 16)', () => {
  it('are not run by the service connection’s commits, but by the worker soon after', async () => {
    const file = tempFile();
    const handle = await open(file);
    const { rows } = await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(handle.db);
    expect(rows[0]!.wal_autocheckpoint).toBe(0);

    const checkpointed = new Promise<CheckpointResult>((resolve) => {
      walCheckpointerOf(handle.db)!.onCheckpoint((result) => {
        if (result.log > 1000) resolve(result);
      });
    });
    const before = statSync(file).size;
    await writeManyPages(handle);
    // No commit copied its pages into the database file: they are all in the log still.
    expect(statSync(file).size).toBe(before);
    expect(statSync(`${file}-wal`).size).toBeGreaterThan(8_000_000);

    const result = await checkpointed;
    expect(result.checkpointed).toBe(result.log);
    expect(statSync(file).size).toBeGreaterThan(8_000_000);
    // The data reads back whole through the service's connection.
    const count = await sql<{ n: number }>`select count(*) as n from filler`.execute(handle.db);
    expect(count.rows[0]!.n).toBe(2000);
  });

  it('leave no log behind once the database is closed', async () => {
    const file = tempFile();
    const handle = await openDatabase({ kind: 'sqlite', file });
    await writeManyPages(handle);
    await new Promise<void>((resolve) => walCheckpointerOf(handle.db)!.onCheckpoint(() => resolve()));
    await handle.close();
    // The worker's connection closed first, so the service's was the last and removed the log.
    expect(existsSync(`${file}-wal`)).toBe(false);
    const reopened = new SQLite(file, { readonly: true });
    expect(reopened.prepare('select count(*) as n from filler').get()).toEqual({ n: 2000 });
    reopened.close();
  });

  it('fall back to the connection’s own when the worker fails', async () => {
    const file = tempFile();
    const sqlite = new SQLite(file);
    sqlite.pragma('journal_mode = WAL');
    // The worker opens only an existing file: this one is not there, so it fails at once.
    const checkpointer = new WalCheckpointer(sqlite, `${file}.missing`, 10);
    expect(sqlite.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    checkpointer.wrote();
    await expect
      .poll(() => sqlite.pragma('wal_autocheckpoint', { simple: true }), { timeout: 10_000 })
      .toBe(1000);
    await checkpointer.close();
    sqlite.close();
  });
});
