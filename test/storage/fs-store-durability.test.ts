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
const { link, rename } = fsPromises;

/** A version record's temp file (`tmp/*.version`), before `link` gives it its name. */
const isRecordTemp = (target: unknown) => typeof target === 'string' && target.endsWith('.version');

/**
 * Writes `key` and returns what happened to the folders under `data/`, in order: the rename
 * into place, and each folder fsynced; and, in `records`, to the version record: each fsync of
 * its temp file (with the `mtimeMs` it held then) and each `link` that named it.
 * `failDirectory` makes opening or fsyncing a folder fail; `afterRename` runs between the rename
 * and what follows it; `failLinks` links fail with EEXIST first (another write took the name).
 */
async function put(
  key: string,
  options: Partial<PutOptions> = {},
  failDirectory?: { where: 'open' | 'fsync'; code: string },
  afterRename?: () => Promise<void>,
  failLinks = 0,
) {
  const steps: string[] = [];
  const records: string[] = [];
  const folders = new Map<number, string>();
  const recordTemps = new Map<number, string>();
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
        if (fd !== undefined) {
          // A number closed is given again: forget what it was.
          folders.delete(fd);
          recordTemps.delete(fd);
          if (isFolder(target)) folders.set(fd, String(target));
          if (isRecordTemp(target)) recordTemps.set(fd, String(target));
        }
        callback(error, fd);
      },
    );
  }) as typeof fs.open);
  vi.spyOn(fsPromises, 'link').mockImplementation(async (from, to) => {
    const name = path.basename(String(to));
    if (failLinks-- > 0) {
      records.push(`link ${name} taken`);
      throw failure('EEXIST');
    }
    records.push(`link ${name}`);
    await link(from, to);
  });
  vi.spyOn(fs, 'fsync').mockImplementation(((fd: number, callback: (error: Error | null) => void) => {
    const record = recordTemps.get(fd);
    if (record !== undefined)
      records.push(`fsync record ${JSON.parse(fs.readFileSync(record, 'utf8')).mtimeMs}`);
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
  return { steps, records, info };
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

/** The name a version record of `info` has, from the data file's stat (`versionName`). */
function recordName(key: string) {
  const stat = fs.statSync(path.join(data, key), { bigint: true });
  return `${stat.size}-${stat.mtimeNs}.json`;
}

describe("a durable write's version record", () => {
  it('is fsynced, with its final content, before the link that names it', async () => {
    const { records, info } = await put('record/a.txt');
    // Before: written with a plain writeFile and never fsynced; a power cut could leave the
    // object with an empty or half-written record.
    expect(records).toEqual([
      `fsync record ${info.lastModified.getTime()}`,
      `link ${recordName('record/a.txt')}`,
    ]);
  });

  it('is written again and fsynced again when its name was taken, with the new time', async () => {
    const { records, info } = await put('record/retried.txt', {}, undefined, undefined, 2);
    const mtimeMs = info.lastModified.getTime();
    expect(records).toHaveLength(6);
    expect(records.slice(0, 4)).toEqual([
      expect.stringMatching(/^fsync record \d+$/),
      expect.stringMatching(/^link .* taken$/),
      expect.stringMatching(/^fsync record \d+$/),
      expect.stringMatching(/^link .* taken$/),
    ]);
    expect(records.slice(4)).toEqual([`fsync record ${mtimeMs}`, `link ${recordName('record/retried.txt')}`]);
    const stored = JSON.parse(
      fs.readFileSync(
        path.join(root, 'versions', 'record/retried.txt', recordName('record/retried.txt')),
        'utf8',
      ),
    );
    expect(stored).toEqual({ contentType: 'text/plain', etag: info.etag, size: 5, mtimeMs });
    expect((await store.head('record/retried.txt'))?.etag).toBe(info.etag);
  });

  it('is not fsynced when durable is false', async () => {
    const { records } = await put('record/quick.txt', { durable: false });
    expect(records).toEqual([`link ${recordName('record/quick.txt')}`]);
  });
});
