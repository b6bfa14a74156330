/**
 * Processes starting at once on one SQLite file take turns to migrate it: Kysely's migrator
 * takes no lock on SQLite, and two `atrium migrate` run together both ran the pending
 * migrations, one failing ("table already exists").
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import SQLite from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { engineName } from '../helpers/app.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = path.join(ROOT, 'test/helpers/atrium-cli.ts');
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function dataDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'atrium-migration-lock-'));
  dirs.push(dir);
  return dir;
}

/** `atrium migrate` on `dir`: its exit code and output once it exits, and whether it has. */
function migrate(dir: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', CLI, 'migrate'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ATRIUM_DATA_DIR: dir, LOG_LEVEL: 'silent' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const state = { exited: false };
  const done = new Promise<{ code: number | null; output: string }>((resolve) =>
    child.once('exit', (code) => {
      state.exited = true;
      resolve({ code, output });
    }),
  );
  return { done, state };
}

describe.skipIf(engineName !== 'sqlite')('migrating one SQLite file from several processes', () => {
  it('waits while another process holds the migration lock, then migrates', async () => {
    const dir = dataDir();
    const holder = new SQLite(path.join(dir, 'atrium.sqlite-migration-lock'));
    holder.exec('begin exclusive');
    const run = migrate(dir);
    try {
      // Long enough for a start and all migrations of an empty database (about a second here).
      await new Promise((resolve) => setTimeout(resolve, 4_000));
      expect(run.state.exited).toBe(false);
    } finally {
      holder.close();
    }
    const { code, output } = await run.done;
    expect(code, output).toBe(0);
    expect(output).toContain('029-knowledge-fts-exact-statistics');
  }, 60_000);

  it('lets two processes started together both succeed, the second with nothing to do', async () => {
    const pairs = Array.from({ length: 3 }, () => {
      const dir = dataDir();
      return [migrate(dir), migrate(dir)];
    });
    const results = await Promise.all(pairs.flat().map((run) => run.done));
    for (const { code, output } of results) expect(code, output).toBe(0);
  }, 120_000);
});
