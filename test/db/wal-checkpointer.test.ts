import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
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
const others: SQLite.Database[] = [];
afterEach(async () => {
  for (const handle of handles.splice(0)) await handle.close();
  for (const other of others.splice(0)) other.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'atrium-wal-'));
  dirs.push(dir);
  return dir;
}

async function open(file: string): Promise<DatabaseHandle> {
  const handle = await openDatabase({ kind: 'sqlite', file });
  handles.push(handle);
  return handle;
}

/**
 * About 8 MB in 2,000 rows, in one transaction after the table is made: the log passes SQLite's
 * 1,000-page checkpoint point twice. Nothing in it waits for the event loop (better-sqlite3 is
 * synchronous), so no timer of the checkpointer can run between its first write and its end.
 */
async function writeManyPages(handle: DatabaseHandle) {
  await sql`create table filler (body blob)`.execute(handle.db);
  await handle.db.transaction().execute(async (trx) => {
    for (let i = 0; i < 2000; i++)
      await sql`insert into filler (body) values (randomblob(4000))`.execute(trx);
  });
}

describe('SQLite log checkpoints (issue 16)', () => {
  it('are not run by the service connection’s commits, but by the worker soon after', async () => {
    const file = path.join(tempDir(), 'atrium.sqlite');
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
    // The commit copied none of its pages into the database file: they are all in the log.
    expect(statSync(file).size).toBe(before);
    expect(statSync(`${file}-wal`).size).toBeGreaterThan(8_000_000);

    const result = await checkpointed;
    expect(result.checkpointed).toBe(result.log);
    expect(statSync(file).size).toBeGreaterThan(8_000_000);
    // The data reads back whole through the service's connection.
    const count = await sql<{ n: number }>`select count(*) as n from filler`.execute(handle.db);
    expect(count.rows[0]!.n).toBe(2000);
  });

  it('are run as a process that wrote closes, even while another process keeps the file open', async () => {
    const file = path.join(tempDir(), 'atrium.sqlite');
    const handle = await openDatabase({ kind: 'sqlite', file });
    // Another process (`atrium serve` beside a CLI command) that only reads: it checkpoints nothing.
    const server = new SQLite(file);
    others.push(server);
    server.prepare('select 1').get();
    await writeManyPages(handle);
    // Closed well within the worker's delay, as a CLI command is: no worker ever ran.
    await handle.close();
    expect(statSync(file).size).toBeGreaterThan(8_000_000);
    expect(server.prepare('select count(*) as n from filler').get()).toEqual({ n: 2000 });
  });

  it('fall back to the connection’s own when the worker cannot run', async () => {
    const file = path.join(tempDir(), 'atrium.sqlite');
    const sqlite = new SQLite(file);
    others.push(sqlite);
    sqlite.pragma('journal_mode = WAL');
    // The worker opens only an existing file: this one is not there, so it fails at once.
    const checkpointer = new WalCheckpointer(sqlite, `${file}.missing`, { delayMs: 10 });
    expect(sqlite.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    const warned = new Promise<Error>((resolve) => {
      const onWarning = (warning: Error & { code?: string }) => {
        if (warning.code !== 'ATRIUM_WAL_CHECKPOINTER') return;
        process.off('warning', onWarning);
        resolve(warning);
      };
      process.on('warning', onWarning);
    });
    checkpointer.wrote();
    await expect
      .poll(() => sqlite.pragma('wal_autocheckpoint', { simple: true }), { timeout: 10_000 })
      .toBe(1000);
    // The operator is told once, with the cause.
    expect((await warned).message).toMatch(/checkpoint worker failed: SQLITE_CANTOPEN/);
    await checkpointer.close();
  });

  it('close cleanly when a checkpoint fails as they close', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'atrium.sqlite');
    const sqlite = new SQLite(file);
    others.push(sqlite);
    sqlite.pragma('journal_mode = WAL');
    // A driver whose checkpoints fail as a full or broken disk makes them fail.
    const driver = path.join(dir, 'failing-driver.cjs');
    writeFileSync(
      driver,
      `module.exports = class {
        pragma(text) {
          if (!text.startsWith('wal_checkpoint')) return [];
          const error = new Error('disk I/O error');
          error.code = 'SQLITE_IOERR';
          throw error;
        }
        close() {}
      };`,
    );
    const checkpointer = new WalCheckpointer(sqlite, file, { delayMs: 1, driver });
    checkpointer.wrote();
    await new Promise((resolve) => setTimeout(resolve, 20));
    await expect(checkpointer.close()).resolves.toBeUndefined();
    await expect(checkpointer.close()).resolves.toBeUndefined();
  });
});
