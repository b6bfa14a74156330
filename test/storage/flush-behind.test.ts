import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { FlushBehind } from '../../src/storage/flush-behind.js';

const dir = mkdtempSync(path.join(tmpdir(), 'atrium-flush-behind-'));
afterEach(() => vi.restoreAllMocks());
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Passes `megabytes` through a stream watched by a FlushBehind; returns the files it opened. */
async function pass(megabytes: number) {
  const file = path.join(dir, `f-${megabytes}`);
  writeFileSync(file, '');
  const open = vi.spyOn(fs, 'open');
  const progress = new PassThrough();
  progress.resume();
  const flushing = new FlushBehind(file, progress);
  for (let i = 0; i < megabytes; i++) progress.write(Buffer.alloc(1024 * 1024));
  progress.end();
  await new Promise((resolve) => progress.once('end', resolve));
  await flushing.close();
  return open.mock.calls.map(([opened, flags]) => ({ opened, flags }));
}

describe('flushing a file behind its writer', () => {
  it('flushes through a read-only handle of its own once 8 MB have passed', async () => {
    const file = path.join(dir, 'f-9');
    expect(await pass(9)).toEqual([{ opened: file, flags: 'r' }]);
  });

  it('does nothing for a body under 8 MB (the final fsync does it all)', async () => {
    expect(await pass(7)).toEqual([]);
  });

  it('ignores a file it cannot open: the final fsync decides', async () => {
    const progress = new PassThrough();
    progress.resume();
    const flushing = new FlushBehind(path.join(dir, 'missing', 'file'), progress);
    progress.end(Buffer.alloc(9 * 1024 * 1024));
    await new Promise((resolve) => progress.once('end', resolve));
    await expect(flushing.close()).resolves.toBeUndefined();
  });
});
