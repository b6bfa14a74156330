/**
 * A durable `put` on the fs backend: the rename that makes an object visible changes its
 * folder, and the folders a write made change theirs; a power cut before those folders reach
 * the disk could lose the object after the API said it was stored. So they are fsynced.
 */
import fs, { mkdtempSync, rmSync } from 'node:fs';
import fsPromises from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import type { PutOptions } from '../../src/storage/object-store.js';

let root: string;
let data: string;
let store: FsObjectStore;
beforeAll(async () => {
  root = mkdtempSync(path.join(tmpdir(), 'atrium-fs-durable-'));
  data = path.join(root, 'data');
  store = new FsObjectStore({
    root,
    signingSecret: 's',
    clock: () => new Date(),
    fallbackOrigin: 'http://127.0.0.1:1',
  });
  await store.check();
});
afterEach(() => vi.restoreAllMocks());
afterAll(() => rmSync(root, { recursive: true, force: true }));

const failure = (code: string) => Object.assign(new Error(`${code}: failed`), { code });
const { open, fsync } = fs;
const { rename } = fsPromises;

/**
 * Writes `key` and returns what happened to the folders under `data/`, in order: the rename
 * into place, and each folder fsynced. `failDirectory` makes opening or fsyncing a folder fail;
 * `afterRename` runs between the rename and what follows it.
 */
async function put(
  key: string,
  options: Partial<PutOptions> = {},
  failDirectory?: { where: 'open' | 'fsync'; code: string },
  afterRename?: () => Promise<void>,
) {
  const steps: string[] = [];
  const folders = new Map<number, string>();
  const isFolder = (target: unknown) =>
    typeof target === 'string' && fs.statSync(target, { throwIfNoEntry: false })?.isDirectory() === true;
  vi.spyOn(fsPromises, 'rename').mockImplementation(async (from, to) => {
    steps.push(`rename to ${path.relative(data, String(to))}`);
    await rename(from, to);
    await afterRename?.();
  });
  vi.spyOn(fs, 'open').mockImplementation(((target: fs.PathLike, flags: fs.OpenMode, ...rest: unknown[]) => {
    const callback = rest.at(-1) as (error: Error | null, fd?: number) => void;
    if (isFolder(target) && failDirectory?.where === 'open') return callback(failure(failDirectory.code));
    (open as (...args: unknown[]) => void)(
      target,
      flags,
      ...rest.slice(0, -1),
      (error: Error | null, fd?: number) => {
        if (fd !== undefined && isFolder(target)) folders.set(fd, String(target));
        callback(error, fd);
      },
    );
  }) as typeof fs.open);
  vi.spyOn(fs, 'fsync').mockImplementation(((fd: number, callback: (error: Error | null) => void) => {
    const folder = folders.get(fd);
    if (folder === undefined) return fsync(fd, callback);
    steps.push(`fsync ${path.relative(data, folder) || 'data'}`);
    if (failDirectory?.where === 'fsync') return callback(failure(failDirectory.code));
    fsync(fd, callback);
  }) as typeof fs.fsync);
  const info = await store.put(key, Readable.from([Buffer.from('bytes')]), {
    contentType: 'text/plain',
    ...options,
  });
  vi.restoreAllMocks();
  return { steps, info };
}

describe('a durable write to the fs store', () => {
  it('fsyncs the folder it renamed the object into, after the rename', async () => {
    await fsPromises.mkdir(path.join(data, 'kept'), { recursive: true });
    // Before: the rename's folder was never fsynced; a power cut could lose the new name.
    expect((await put('kept/a.txt')).steps).toEqual(['rename to kept/a.txt', 'fsync kept']);
  });

  it('fsyncs the folders it made for the object, up to the one that was there', async () => {
    const { steps } = await put('fresh/deep/er/a.txt');
    expect(steps[0]).toBe('rename to fresh/deep/er/a.txt');
    // Each folder made holds a name that is new too; they may reach the disk in any order.
    expect(steps.slice(1).sort()).toEqual([
      'fsync data',
      'fsync fresh',
      'fsync fresh/deep',
      'fsync fresh/deep/er',
    ]);
  });

  it('does not fsync the folder when durable is false', async () => {
    expect((await put('quick/a.txt', { durable: false })).steps).toEqual(['rename to quick/a.txt']);
  });

  it('stores the object where a folder cannot be opened or fsynced (Windows, some file systems)', async () => {
    for (const [where, code] of [
      ['open', 'EISDIR'],
      ['fsync', 'EINVAL'],
      ['fsync', 'EPERM'],
      ['fsync', 'ENOTSUP'],
    ] as const) {
      const { info } = await put(`unsupported/${code}.txt`, {}, { where, code });
      expect(info.size, code).toBe(5);
      expect((await store.head(`unsupported/${code}.txt`))?.etag, code).toBe(info.etag);
    }
  });

  it('fails the write when the folder fsync fails for another reason (the name may not last)', async () => {
    await expect(put('faulty/a.txt', {}, { where: 'fsync', code: 'EIO' })).rejects.toMatchObject({
      code: 'EIO',
    });
  });

  it('succeeds when a delete of the key prunes the folder between the rename and its fsync', async () => {
    // The delete removed the object and its folder: no name is left to keep. Before this was
    // handled, the write failed with ENOENT (a 500) though it had been stored, then deleted.
    const { steps } = await put('pruned/only/a.txt', {}, undefined, () => store.delete('pruned/only/a.txt'));
    // `data` holds the name of the first folder the write made, and is still there.
    expect(steps).toEqual(['rename to pruned/only/a.txt', 'fsync data']);
    expect(await store.head('pruned/only/a.txt')).toBeNull();
  });
});
