/**
 * The signing secret generated in the data dir (src/secret-file.ts): durable once made, and one
 * for all the processes that start at once, on file systems with hard links and without.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs, { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config.js';

let dataDir: string;
let file: string;
beforeEach(() => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'atrium-secret-'));
  file = path.join(dataDir, 'signing-secret');
});
afterEach(() => {
  vi.restoreAllMocks();
  rmSync(dataDir, { recursive: true, force: true });
});

const failure = (code: string) => Object.assign(new Error(`${code}: failed`), { code });
const secretOf = (dir: string) => loadConfig({ ATRIUM_DATA_DIR: dir }).signingSecret;
const { openSync, fsyncSync, linkSync, readFileSync: read } = fs;

describe('the generated signing secret', () => {
  it('fsyncs the data dir once the secret is linked into it, and starts where a directory cannot be fsynced', () => {
    const steps: string[] = [];
    let dirFd: number | undefined;
    vi.spyOn(fs, 'linkSync').mockImplementation((from, to) => {
      steps.push('link');
      linkSync(from, to);
    });
    const open = vi.spyOn(fs, 'openSync').mockImplementation((target, flags, mode) => {
      const fd = openSync(target, flags, mode);
      if (target === dataDir) dirFd = fd;
      return fd;
    });
    const fsync = vi.spyOn(fs, 'fsyncSync').mockImplementation((fd) => {
      steps.push(fd === dirFd ? 'fsync the dir' : 'fsync the file');
      fsyncSync(fd);
    });
    // Before: the dir was never fsynced, so a power cut could lose the name of a secret already
    // in use, and the next start generate another one.
    const secret = secretOf(dataDir);
    expect(steps).toEqual(['fsync the file', 'link', 'fsync the dir']);
    expect(readFileSync(file, 'utf8')).toBe(`${secret}\n`);

    // Windows cannot open a directory, some file systems cannot fsync one.
    for (const [where, code] of [
      ['open', 'EISDIR'],
      ['fsync', 'EINVAL'],
      ['fsync', 'EPERM'],
    ]) {
      rmSync(file);
      dirFd = undefined;
      open.mockImplementation((target, flags, mode) => {
        if (target === dataDir && where === 'open') throw failure(code);
        const fd = openSync(target, flags, mode);
        if (target === dataDir) dirFd = fd;
        return fd;
      });
      fsync.mockImplementation((fd) => {
        if (fd === dirFd) throw failure(code);
        fsyncSync(fd);
      });
      expect(secretOf(dataDir), code).toMatch(/^[\w-]{43}$/);
      expect(readdirSync(dataDir)).toEqual(['signing-secret']);
    }
  });

  it('fsyncs the directories it created for the data dir, and the one that holds their name', () => {
    const nested = path.join(dataDir, 'srv', 'atrium');
    const synced: string[] = [];
    const opened = new Map<number, string>();
    vi.spyOn(fs, 'openSync').mockImplementation((target, flags, mode) => {
      const fd = openSync(target, flags, mode);
      opened.set(fd, String(target));
      return fd;
    });
    vi.spyOn(fs, 'fsyncSync').mockImplementation((fd) => {
      synced.push(opened.get(fd as number)!);
      fsyncSync(fd);
    });
    expect(secretOf(nested)).toMatch(/^[\w-]{43}$/);
    // Before: only the data dir itself; a power cut could lose `srv` and everything in it.
    expect(synced.filter((target) => !target.endsWith('signing-secret') && !target.endsWith('.tmp'))).toEqual(
      [nested, path.join(dataDir, 'srv'), dataDir],
    );
  });

  it('creates the file exclusively where the file system has no hard links, and a later start reads it', () => {
    for (const code of ['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']) {
      rmSync(file, { force: true });
      vi.spyOn(fs, 'linkSync').mockImplementation(() => {
        throw failure(code);
      });
      // Before: the start stopped on the link's error.
      const secret = secretOf(dataDir);
      expect(secret, code).toMatch(/^[\w-]{43}$/);
      expect(readFileSync(file, 'utf8')).toBe(`${secret}\n`);
      expect(fs.statSync(file).mode & 0o777).toBe(0o600);
      expect(readdirSync(dataDir)).toEqual(['signing-secret']);
      expect(secretOf(dataDir)).toBe(secret);
    }
  });

  it('without hard links, waits for the secret of a process that created the file first until it is whole', () => {
    const winner = randomBytes(32).toString('base64url');
    vi.spyOn(fs, 'linkSync').mockImplementation(() => {
      throw failure('EPERM');
    });
    // The other process creates the name after this one found none, just before this one does…
    vi.spyOn(fs, 'openSync').mockImplementation((target, flags, mode) => {
      if (target === file && flags === 'wx') writeFileSync(file, '');
      return openSync(target, flags, mode);
    });
    // …and writes its secret (in one write) while this one reads: nothing yet, then all of it.
    const writes = ['', `${winner}\n`];
    const seen: string[] = [];
    vi.spyOn(fs, 'readFileSync').mockImplementation((target, options) => {
      const text = read(target, options as BufferEncoding);
      if (target === file) {
        seen.push(text);
        const next = writes.shift();
        if (next !== undefined) {
          writeFileSync(file, next);
          // The file system's clock may be a fraction of a millisecond ahead of Date.now(),
          // which drops that fraction: the file then looks written in the future.
          const justAhead = (Date.now() + 0.9) / 1000;
          fs.utimesSync(file, justAhead, justAhead);
        }
      }
      return text;
    });
    expect(secretOf(dataDir)).toBe(winner);
    expect(seen).toEqual(['', '', `${winner}\n`]);
    expect(readdirSync(dataDir)).toEqual(['signing-secret']);
  });

  it('takes a secret written by hand without a final newline at once, whatever its time', () => {
    const handWritten = randomBytes(32).toString('base64url');
    for (const mtime of [new Date(), new Date(Date.now() + 60 * 60 * 1000)]) {
      writeFileSync(file, handWritten);
      fs.utimesSync(file, mtime, mtime);
      const started = performance.now();
      expect(secretOf(dataDir)).toBe(handWritten);
      // Before, a start waited 2 s for a newline that never came (for ever, with a clock ahead):
      // well under that, with room for a loaded machine.
      expect(performance.now() - started).toBeLessThan(1_500);
    }
  });

  it('gives processes started at once one secret, with hard links and without', async () => {
    const script = fileURLToPath(new URL('./start-reading-secret.ts', import.meta.url));
    for (const noHardLinks of ['', '1']) {
      rmSync(file, { force: true });
      const env = {
        ...process.env,
        DATA_DIR: dataDir,
        START_AT: String(Date.now() + 3000),
        NO_HARD_LINKS: noHardLinks,
      };
      const starts = Array.from({ length: 4 }, () =>
        promisify(execFile)(process.execPath, ['--import', 'tsx', script], { env }),
      );
      const secrets = (await Promise.all(starts)).map(({ stdout }) => stdout.trim());
      expect(new Set(secrets).size, `without hard links: ${noHardLinks}`).toBe(1);
      expect(readFileSync(file, 'utf8')).toBe(`${secrets[0]}\n`);
      expect(readdirSync(dataDir)).toEqual(['signing-secret']);
    }
  }, 60_000);
});
