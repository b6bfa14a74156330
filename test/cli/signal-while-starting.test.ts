import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { hasAnyOrganization } from '../../src/cli/demo.js';
import { loadConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/database.js';
import { type ServeProcess, startServeProcess } from '../helpers/serve-processes.js';

// `npm start` on an empty embedded database makes the demo, so this file runs on SQLite
// whatever TEST_DATABASE_URL says (as test/cli/first-start.test.ts).
const ROOT = path.resolve(import.meta.dirname, '../..');
const SCRIPT = fileURLToPath(new URL('./serve-signalled.ts', import.meta.url));
const SECRET = 'signal-while-starting-secret-of-32-bytes';
const dataDirs: string[] = [];
const running: ServeProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((server) => server.stop('SIGKILL')));
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
});

/** Runs `atrium serve` on a fresh data dir, signalled while it starts; its exit code and output. */
async function serveSignalled(signal: 'SIGTERM' | 'SIGINT', when: 'taken' | 'listening') {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atrium-signal-start-'));
  dataDirs.push(dataDir);
  const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      ATRIUM_DATA_DIR: dataDir,
      ATRIUM_SIGNING_SECRET: SECRET,
      LOG_LEVEL: 'info',
      PORT: '0',
      HOST: '127.0.0.1',
      SIGNAL: signal,
      SIGNAL_WHEN: when,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  // 'close', not 'exit': its output has been read to the end by then.
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  return { code, output, dataDir };
}

async function demoMade(dataDir: string): Promise<boolean> {
  const database = await openDatabase(
    loadConfig({ ATRIUM_DATA_DIR: dataDir, ATRIUM_SIGNING_SECRET: SECRET }).database,
  );
  try {
    return await hasAnyOrganization(database.db);
  } finally {
    await database.close();
  }
}

/** The process stopped as a signalled one does: exit 0, `stopped` (for that signal) the last line. */
function expectStopped(run: { code: number | null; output: string }, signal: string) {
  expect(run.code, run.output).toBe(0);
  const last = JSON.parse(run.output.trim().split('\n').at(-1)!) as Record<string, unknown>;
  expect(last, run.output).toMatchObject({ msg: 'stopped', signal });
}

describe('atrium serve on an empty data dir, told to stop while it starts (sqlite)', () => {
  it('makes no demo and prints no key when SIGTERM comes as the server takes its signals', async () => {
    const run = await serveSignalled('SIGTERM', 'taken');
    expectStopped(run, 'SIGTERM');
    // Before: the demo was made once the listen ended, and its key and curl lines printed after
    // "stopped" (or cut off by the exit), for a server that was no longer there.
    expect(run.output).not.toContain('API key');
    expect(run.output).not.toContain('Demo workspace');
    expect(run.output).not.toContain('Atrium listening on');
    expect(await demoMade(run.dataDir)).toBe(false);
  }, 120_000);

  it('makes no demo and prints no key when SIGINT comes as it says it listens, and the next start shows the key', async () => {
    const run = await serveSignalled('SIGINT', 'listening');
    expectStopped(run, 'SIGINT');
    expect(run.output).not.toContain('API key');
    expect(run.output).not.toContain('Demo workspace');
    expect(await demoMade(run.dataDir)).toBe(false);

    // Nothing was half made: the next start is a first start, and shows the newcomer a key.
    const next = await startServeProcess({
      ATRIUM_DATA_DIR: run.dataDir,
      ATRIUM_SIGNING_SECRET: SECRET,
      LOG_LEVEL: 'warn',
    });
    running.push(next);
    await vi.waitFor(() => expect(next.output()).toContain('API key (shown once, keep it):'), {
      timeout: 10_000,
    });
  }, 240_000);
});
