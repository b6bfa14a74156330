/**
 * A data dir the system will not let Atrium make (a path under `/proc`): `atrium serve` says so
 * and exits 1. Node's recursive mkdir looped there forever, so the server hung saying nothing.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { makeDirectory, makeDirectorySync } from '../../src/make-directory.js';

const root = mkdtempSync(path.join(tmpdir(), 'atrium-make-dir-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('making the directories Atrium is told to use', () => {
  it('makes the missing levels and answers the first one made, as mkdir -p does', async () => {
    expect(makeDirectorySync(path.join(root, 'a', 'b', 'c'))).toBe(path.join(root, 'a'));
    expect(existsSync(path.join(root, 'a', 'b', 'c'))).toBe(true);
    expect(makeDirectorySync(path.join(root, 'a', 'b'))).toBeUndefined();
    expect(await makeDirectory(path.join(root, 'x', 'y'))).toBe(path.join(root, 'x'));
    expect(existsSync(path.join(root, 'x', 'y'))).toBe(true);
    expect(await makeDirectory(path.join(root, 'x'))).toBeUndefined();
  });

  it('fails with the error of the level that cannot be made', async () => {
    writeFileSync(path.join(root, 'file'), '');
    expect(() => makeDirectorySync(path.join(root, 'file', 'sub'))).toThrow(/ENOTDIR/);
    await expect(makeDirectory(path.join(root, 'file', 'sub'))).rejects.toThrow(/ENOTDIR/);
  });

  it.skipIf(!existsSync('/proc/self'))('fails under /proc instead of trying forever', async () => {
    expect(() => makeDirectorySync('/proc/atrium-test/data')).toThrow(/ENOENT/);
    await expect(makeDirectory('/proc/atrium-test/data')).rejects.toThrow(/ENOENT/);
  });

  it.skipIf(!existsSync('/proc/self'))(
    'atrium serve exits 1 with the reason',
    async () => {
      const script = `import('./src/cli/main.ts').then(async ({ main }) => { process.exitCode = await main(['serve']); process.exit(); })`;
      const run = promisify(execFile)(
        process.execPath,
        ['--import', 'tsx', '--input-type=module', '-e', script],
        {
          cwd: path.resolve(import.meta.dirname, '../..'),
          env: {
            ...process.env,
            ATRIUM_DATA_DIR: '/proc/atrium-test/data',
            DATABASE_URL: '',
            PORT: '0',
            LOG_LEVEL: 'silent',
          },
          timeout: 30_000,
        },
      );
      const failed = await run.then(
        () => undefined,
        (error: { code?: number; killed?: boolean; stderr?: string }) => error,
      );
      expect(failed?.killed).toBe(false);
      expect(failed?.code).toBe(1);
      expect(failed?.stderr).toMatch(/^atrium: .*ENOENT.*\/proc\/atrium-test/m);
      // Longer than the child's own 30 s bound: starting tsx and the sources took over 20 s (the
      // default) on a loaded CI host once.
    },
    60_000,
  );
});
