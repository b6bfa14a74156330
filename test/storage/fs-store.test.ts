import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import fsPromises from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { FsObjectStore } from '../../src/storage/fs-store.js';
import type { ObjectInfo } from '../../src/storage/object-store.js';
import { resolveSafePath, UnsafePathError } from '../../src/storage/safe-path.js';

let root: string;
let store: FsObjectStore;
const warnings: Array<{ details: Record<string, unknown>; message: string }> = [];
beforeAll(() => {
  root = mkdtempSync(path.join(tmpdir(), 'atrium-fs-store-'));
  store = new FsObjectStore({
    root,
    signingSecret: 's',
    clock: () => new Date(),
    fallbackOrigin: 'http://127.0.0.1:1',
    log: { warn: (details, message) => warnings.push({ details, message }) },
  });
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

const text = async (body: Readable) => {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString();
};

async function keys(prefix: string) {
  const found: string[] = [];
  for await (const info of store.list(prefix)) found.push(info.key);
  return found.sort();
}

/** A store of its own in a new folder, for tests that look at its whole tree. */
function ownStore(name: string) {
  const own = mkdtempSync(path.join(tmpdir(), `atrium-fs-store-${name}-`));
  const folders = new FsObjectStore({
    root: own,
    signingSecret: 's',
    clock: () => new Date(),
    fallbackOrigin: 'http://127.0.0.1:1',
  });
  return { own, folders };
}

describe('FsObjectStore', () => {
  it('stores, reads, heads, ranges, lists and deletes objects', async () => {
    const info = await store.put('p/a/b.txt', Readable.from([Buffer.from('hello '), Buffer.from('world')]), {
      contentType: 'text/plain',
    });
    expect(info).toMatchObject({ key: 'p/a/b.txt', size: 11, contentType: 'text/plain' });
    const got = await store.get('p/a/b.txt');
    expect(await text(got!.body)).toBe('hello world');
    const ranged = await store.get('p/a/b.txt', { start: 6, end: 8 });
    expect(await text(ranged!.body)).toBe('wor');
    expect(ranged!.info.size).toBe(11);
    expect(await store.head('p/a/b.txt')).toMatchObject({
      size: 11,
      etag: info.etag,
      contentType: 'text/plain',
    });
    await store.put('p/c.md', Readable.from([Buffer.from('# c')]), { contentType: 'text/markdown' });
    expect(await keys('p/')).toEqual(['p/a/b.txt', 'p/c.md']);
    await store.delete('p/a/b.txt');
    expect(await store.head('p/a/b.txt')).toBeNull();
    expect(await store.get('p/a/b.txt')).toBeNull();
    expect(await keys('p/')).toEqual(['p/c.md']);
    await store.deletePrefix('p/');
    expect(await keys('p/')).toEqual([]);
  });

  it('gives replaced content a new etag, even at the same size', async () => {
    const first = await store.put('r/x', Readable.from([Buffer.from('aaaa')]), { contentType: 'text/plain' });
    const second = await store.put('r/x', Readable.from([Buffer.from('bbbb')]), {
      contentType: 'text/plain',
    });
    expect(second.etag).not.toBe(first.etag);
    expect((await store.head('r/x'))!.etag).toBe(second.etag);
  });

  it('stores an object without the per-object flush when durable is false', async () => {
    const info = await store.put('fast/x', Readable.from([Buffer.from('quick')]), {
      contentType: 'text/plain',
      durable: false,
    });
    expect(info.size).toBe(5);
    expect(await text((await store.get('fast/x'))!.body)).toBe('quick');
  });

  it('refuses a body over maxBytes with 413 and leaves no object and no temp file', async () => {
    await expect(
      store.put('big/x', Readable.from([Buffer.alloc(10), Buffer.alloc(10)]), {
        contentType: 'a/b',
        maxBytes: 15,
      }),
    ).rejects.toMatchObject({ code: 'payload_too_large', status: 413 });
    expect(await store.head('big/x')).toBeNull();
    expect(readdirSync(path.join(root, 'tmp'))).toEqual([]);
  });

  it('refuses a body shorter than exactBytes and stores nothing', async () => {
    await expect(
      store.put('short/x', Readable.from([Buffer.alloc(3)]), { contentType: 'a/b', exactBytes: 5 }),
    ).rejects.toMatchObject({ code: 'bad_request' });
    expect(await store.head('short/x')).toBeNull();
  });

  it('leaves nothing when the body stream fails midway', async () => {
    const failing = new Readable({
      read() {
        this.push(Buffer.alloc(100));
        this.destroy(new Error('connection reset'));
      },
    });
    await expect(store.put('cut/x', failing, { contentType: 'a/b' })).rejects.toThrow();
    expect(await store.head('cut/x')).toBeNull();
    expect(readdirSync(path.join(root, 'tmp'))).toEqual([]);
  });

  it('fails a write whose body was cut off before the write began, keeping no file open or left', async () => {
    const openFiles = () => readdirSync('/proc/self/fd').length;
    await store.put('left/warm', Readable.from([Buffer.from('w')]), { contentType: 'a/b' });
    const before = openFiles();
    // A request whose client left while the write was being set up: destroyed, 'close' already
    // emitted, so neither that event nor 'end' comes again.
    const body = new Readable({ read() {} });
    body.on('error', () => {});
    const closed = new Promise((resolve) => body.on('close', resolve));
    body.destroy(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }));
    await closed;
    await expect(store.put('left/x', body, { contentType: 'a/b', exactBytes: 10 })).rejects.toMatchObject({
      code: 'bad_request',
      message: expect.stringContaining('cut off'),
    });
    expect(openFiles()).toBe(before);
    expect(readdirSync(path.join(root, 'tmp'))).toEqual([]);
    expect(await store.head('left/x')).toBeNull();
    await store.deletePrefix('left/');
  });

  it('reports a file/folder name clash as a bad request', async () => {
    await store.put('clash/a', Readable.from([Buffer.from('x')]), { contentType: 'a/b' });
    await expect(
      store.put('clash/a/b', Readable.from([Buffer.from('y')]), { contentType: 'a/b' }),
    ).rejects.toMatchObject({
      code: 'bad_request',
    });
  });

  it('writes a file over a folder a killed write or delete left empty, but never over one that holds anything', async () => {
    // A process killed between making a write's folders and renaming its file into them, or
    // between a delete's removal of a folder's last file and its pruning of the folder, leaves
    // the folder empty (seen with SIGKILL). Before, a file at that path was refused for ever as
    // a clash with a folder that nothing lists.
    await fsPromises.mkdir(path.join(root, 'data', 'emptied', 'docs'), { recursive: true });
    await store.put('emptied/docs', Readable.from([Buffer.from('a file')]), { contentType: 'text/plain' });
    expect(await text((await store.get('emptied/docs'))!.body)).toBe('a file');

    await store.put('emptied/full/a.txt', Readable.from([Buffer.from('x')]), { contentType: 'text/plain' });
    await expect(
      store.put('emptied/full', Readable.from([Buffer.from('y')]), { contentType: 'text/plain' }),
    ).rejects.toMatchObject({ code: 'bad_request' });
    expect(await keys('emptied/')).toEqual(['emptied/docs', 'emptied/full/a.txt']);
    await store.deletePrefix('emptied/');
  });

  it('sweeps temp files left over by a crashed write, keeping recent ones', async () => {
    const { utimesSync, writeFileSync, mkdirSync } = await import('node:fs');
    const tmp = path.join(root, 'tmp');
    mkdirSync(tmp, { recursive: true });
    writeFileSync(path.join(tmp, 'stale.data'), 'x');
    const old = new Date(Date.now() - 2 * 60 * 60 * 1000);
    utimesSync(path.join(tmp, 'stale.data'), old, old);
    writeFileSync(path.join(tmp, 'fresh.data'), 'y');
    expect(await store.sweepStaleTemp()).toBe(1);
    expect(readdirSync(tmp)).toEqual(['fresh.data']);
    rmSync(path.join(tmp, 'fresh.data'));
  });

  it('makes tmp/ again when it was removed, and keeps no file open or left after writes that end or fail', async () => {
    const tmp = path.join(root, 'tmp');
    const openFiles = () => readdirSync('/proc/self/fd').length;
    await store.put('handles/warm.txt', Readable.from([Buffer.from('w')]), { contentType: 'text/plain' });
    const before = openFiles();
    rmSync(tmp, { recursive: true, force: true });
    await store.put('handles/a.txt', Readable.from([Buffer.from('a')]), { contentType: 'text/plain' });
    await expect(
      store.put('handles/short.txt', Readable.from([Buffer.from('ab')]), {
        contentType: 'text/plain',
        exactBytes: 3,
      }),
    ).rejects.toMatchObject({ status: 400 });
    const failing = new Readable({
      read() {
        this.push(Buffer.alloc(64 * 1024));
        this.destroy(Object.assign(new Error('read failed'), { code: 'EIO' }));
      },
    });
    await expect(store.put('handles/cut.txt', failing, { contentType: 'text/plain' })).rejects.toThrow();
    expect(openFiles()).toBe(before);
    expect(readdirSync(tmp)).toEqual([]);
    expect(await keys('handles/')).toEqual(['handles/a.txt', 'handles/warm.txt']);
    await store.deletePrefix('handles/');
  });

  it('reads an object whole within a limit: too-large past it, null when missing or a folder', async () => {
    const bytes = Buffer.from('0123456789'.repeat(1000));
    await store.put('whole/a.txt', Readable.from([bytes]), { contentType: 'text/plain' });
    expect(await store.readAll('whole/a.txt', bytes.length)).toEqual(bytes);
    expect(await store.readAll('whole/a.txt', bytes.length - 1)).toBe('too-large');
    expect(await store.readAll('whole/missing.txt', 100)).toBeNull();
    expect(await store.readAll('whole', 100)).toBeNull();
    await store.put('whole/empty.txt', Readable.from([]), { contentType: 'text/plain' });
    expect(await store.readAll('whole/empty.txt', 0)).toEqual(Buffer.alloc(0));
    await expect(store.readAll('whole/../../etc/passwd', 100)).rejects.toThrow(UnsafePathError);
    await store.deletePrefix('whole/');
  });

  it('lists the folders under a prefix, none under a missing one', async () => {
    for (const key of ['folders/a/1.txt', 'folders/a/deep/2.txt', 'folders/b/3.txt', 'folders/top.txt']) {
      await store.put(key, Readable.from([Buffer.from('x')]), { contentType: 'text/plain' });
    }
    const folders: string[] = [];
    for await (const folder of store.listFolders('folders/')) folders.push(folder);
    expect(folders.sort()).toEqual(['a', 'b']);
    for await (const folder of store.listFolders('nothing-here/')) expect.unreachable(folder);
  });

  it('lists around files and folders put on disk under names no key can hold (a backslash)', async () => {
    await store.put('odd/ok.txt', Readable.from([Buffer.from('x')]), { contentType: 'text/plain' });
    const data = path.join(root, 'data', 'odd');
    await fsPromises.writeFile(path.join(data, 'back\\slash.txt'), 'x');
    await fsPromises.mkdir(path.join(data, 'back\\slash', 'inner'), { recursive: true });
    await fsPromises.writeFile(path.join(data, 'back\\slash', 'inner', 'x.txt'), 'x');
    expect(await keys('odd/')).toEqual(['odd/ok.txt']);
    for await (const folder of store.listFolders('odd/')) expect.unreachable(folder);
    await store.deletePrefix('odd/');
    expect(await keys('odd/')).toEqual([]);
  });

  it('lists around a folder tree put on disk deeper than the longest path the system takes', async () => {
    await store.put('deep/ok.txt', Readable.from([Buffer.from('x')]), { contentType: 'text/plain' });
    // Each folder is entered before the next is made, so no call names the whole path.
    execFileSync('bash', [
      '-c',
      `cd "${path.join(root, 'data', 'deep')}" && for i in $(seq 18); do mkdir ${'d'.repeat(250)} && cd ${'d'.repeat(250)}; done && echo x > f.txt`,
    ]);
    expect(await keys('deep/')).toEqual(['deep/ok.txt']);
    // Node's recursive rm cannot remove such a tree either; GNU rm walks it folder by folder.
    execFileSync('rm', ['-rf', path.join(root, 'data', 'deep')]);
  });

  it('refuses unsafe keys: traversal, absolute, NUL, backslash, empty segments', () => {
    for (const key of ['../x', 'a/../../x', '/etc/passwd', 'a\0b', 'a\\b', 'a//b', './a', '']) {
      expect(() => resolveSafePath(root, key), key).toThrow(UnsafePathError);
    }
    expect(resolveSafePath(root, 'a/b..c/.env')).toBe(path.join(root, 'a', 'b..c', '.env'));
  });
});

describe('FsObjectStore versions: an object and its metadata belong to one write', () => {
  const listFiles = (dir: string): string[] => {
    try {
      return readdirSync(dir, { recursive: true, withFileTypes: true })
        .filter((entry) => entry.isFile())
        .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)))
        .sort();
    } catch {
      return [];
    }
  };

  it('concurrent writes of equal size to one key leave the type and etag of the write whose bytes are stored', async () => {
    for (let round = 0; round < 10; round++) {
      const key = `same/round-${round}`;
      const writes = await Promise.all(
        Array.from({ length: 8 }, (_, writer) =>
          store.put(key, Readable.from([Buffer.alloc(4096, 0x61 + writer)]), {
            contentType: `application/x-writer-${writer}`,
            durable: false,
          }),
        ),
      );
      const object = await store.get(key);
      const bytes = await text(object!.body);
      const winner = bytes.charCodeAt(0) - 0x61;
      expect(object!.info).toMatchObject({
        contentType: `application/x-writer-${winner}`,
        etag: writes[winner]!.etag,
      });
      expect(await store.head(key)).toMatchObject({ etag: writes[winner]!.etag });
    }
    // Records of the writes that lost stay until they are old enough that no write can still be
    // about to rename; the sweep then leaves the stored write's record alone.
    await store.sweepStaleTemp(-60_000);
    for (let round = 0; round < 10; round++) {
      expect(listFiles(path.join(root, 'versions', `same/round-${round}`))).toHaveLength(1);
      expect((await store.head(`same/round-${round}`))!.contentType).toMatch(/^application\/x-writer-/);
    }
  });

  it("a write racing a delete of the same key, the folder's only file, succeeds: the delete may prune its folder midway", async () => {
    // Before the fix about 1 in 80 of these writes failed with ENOENT (a 500 to the client).
    for (let round = 0; round < 300; round++) {
      const key = `race-delete/r${round % 3}/only.txt`;
      await store.put(key, Readable.from([Buffer.from('old')]), {
        contentType: 'text/plain',
        durable: false,
      });
      const [write] = await Promise.allSettled([
        store.put(key, Readable.from([Buffer.from('new!')]), { contentType: 'text/plain', durable: false }),
        (async () => {
          for (let tick = 0; tick < round % 5; tick++) await Promise.resolve();
          await store.delete(key);
        })(),
      ]);
      expect(write.status === 'rejected' ? String(write.reason) : 'stored').toBe('stored');
      // Whichever came last: the new object whole with the etag the write returned, or nothing.
      const head = await store.head(key);
      if (head && write.status === 'fulfilled') expect(head.etag).toBe(write.value.etag);
    }
  });

  it('a head given what was listed answers it again from one stat while the object is that version, else what is there now', async () => {
    await store.put('listed/same', Readable.from([Buffer.from('aaaa')]), { contentType: 'text/plain' });
    await store.put('listed/replaced', Readable.from([Buffer.from('aaaa')]), { contentType: 'text/plain' });
    await store.put('listed/deleted', Readable.from([Buffer.from('aaaa')]), { contentType: 'text/plain' });
    const listed = new Map<string, ObjectInfo>();
    for await (const info of store.list('listed/')) listed.set(info.key, info);

    // The record is not read again: with it gone (as only someone editing the folder could do),
    // a plain head falls back to the size-mtime etag, a head given the listing does not.
    const dir = path.join(root, 'versions', 'listed', 'same');
    for (const record of listFiles(dir)) rmSync(path.join(dir, record));
    expect(await store.head('listed/same', listed.get('listed/same'))).toBe(listed.get('listed/same'));
    expect((await store.head('listed/same'))!.etag).not.toBe(listed.get('listed/same')!.etag);

    // Same size, other bytes and type: the new version, never the listed one.
    const replacement = await store.put('listed/replaced', Readable.from([Buffer.from('bbbb')]), {
      contentType: 'text/markdown',
    });
    expect(await store.head('listed/replaced', listed.get('listed/replaced'))).toMatchObject({
      etag: replacement.etag,
      size: 4,
      contentType: 'text/markdown',
    });
    await store.delete('listed/deleted');
    expect(await store.head('listed/deleted', listed.get('listed/deleted'))).toBeNull();
    // An answer this store did not give (another key, or built elsewhere) is read afresh.
    const other = await store.head('listed/replaced', { ...listed.get('listed/replaced')! });
    expect(other).toMatchObject({ etag: replacement.etag });
    expect(await store.head('listed/replaced', listed.get('listed/same'))).toMatchObject({
      etag: replacement.etag,
    });
  });

  it('a sequential write removes the record of the version it replaced', async () => {
    for (const content of ['one', 'two', 'three']) {
      await store.put('seq/x', Readable.from([Buffer.from(content)]), { contentType: 'text/plain' });
    }
    expect(listFiles(path.join(root, 'versions', 'seq', 'x'))).toHaveLength(1);
  });

  it('a read holds one version: a write landing while it streams changes neither its bytes nor its metadata', async () => {
    const first = await store.put('held/x', Readable.from([Buffer.from('first version')]), {
      contentType: 'text/plain',
    });
    const reading = await store.get('held/x');
    await store.put('held/x', Readable.from([Buffer.from('{"second":true}')]), {
      contentType: 'application/json',
    });
    expect(reading!.info).toMatchObject({ etag: first.etag, contentType: 'text/plain', size: 13 });
    expect(await text(reading!.body)).toBe('first version');
    expect(await store.head('held/x')).toMatchObject({ contentType: 'application/json', size: 15 });
  });

  it('still reads a sidecar of the old layout while the file is unchanged, and replaces it on the next write', async () => {
    const { mkdirSync, statSync, writeFileSync } = await import('node:fs');
    const dataFile = path.join(root, 'data', 'legacy', 'a.txt');
    mkdirSync(path.dirname(dataFile), { recursive: true });
    writeFileSync(dataFile, 'old layout');
    const stat = statSync(dataFile);
    const sidecar = path.join(root, 'meta', 'legacy', 'a.txt');
    mkdirSync(path.dirname(sidecar), { recursive: true });
    writeFileSync(
      sidecar,
      JSON.stringify({
        contentType: 'text/x-legacy',
        etag: 'legacy-etag',
        size: stat.size,
        mtimeMs: stat.mtimeMs,
      }),
    );
    expect(await store.head('legacy/a.txt')).toMatchObject({
      contentType: 'text/x-legacy',
      etag: 'legacy-etag',
    });
    await store.put('legacy/a.txt', Readable.from([Buffer.from('new layout')]), {
      contentType: 'text/plain',
    });
    expect(await store.head('legacy/a.txt')).toMatchObject({ contentType: 'text/plain' });
    expect(listFiles(path.join(root, 'meta', 'legacy'))).toEqual([]);
  });

  it('a delete removes the record with the object, and a deleted prefix leaves no record behind', async () => {
    await store.put('gone/a/b.txt', Readable.from([Buffer.from('b')]), { contentType: 'text/plain' });
    await store.put('gone/c.txt', Readable.from([Buffer.from('c')]), { contentType: 'text/plain' });
    await store.delete('gone/a/b.txt');
    expect(listFiles(path.join(root, 'versions', 'gone'))).toEqual([expect.stringMatching(/^c\.txt\//)]);
    await store.deletePrefix('gone/');
    expect(listFiles(path.join(root, 'versions', 'gone'))).toEqual([]);
  });

  it('sweeps records of writes that never became visible, keeping the live one', async () => {
    const { mkdirSync, writeFileSync } = await import('node:fs');
    await store.put('swept/x', Readable.from([Buffer.from('live')]), { contentType: 'text/plain' });
    const dir = path.join(root, 'versions', 'swept', 'x');
    const [live] = listFiles(dir);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, '4-1000.json'), JSON.stringify({ contentType: 'a/b', etag: 'e' }));
    // A cutoff in the future makes every record old enough.
    expect(await store.sweepStaleTemp(-60_000)).toBeGreaterThanOrEqual(1);
    expect(listFiles(dir)).toEqual([live]);
    expect(await store.head('swept/x')).toMatchObject({ contentType: 'text/plain' });
  });
  it('fails a read whose version record cannot be read, instead of giving the object a size-mtime etag', async () => {
    const { mkdirSync } = await import('node:fs');
    const info = await store.put('faulty/x', Readable.from([Buffer.from('x')]), {
      contentType: 'text/plain',
    });
    const dir = path.join(root, 'versions', 'faulty', 'x');
    const [record] = listFiles(dir);
    // A record that is a folder fails to read with EISDIR: a fault like EMFILE or EIO, not "none".
    rmSync(path.join(dir, record!));
    mkdirSync(path.join(dir, record!));
    await expect(store.head('faulty/x')).rejects.toMatchObject({ code: 'EISDIR' });
    await expect(keys('faulty/')).rejects.toMatchObject({ code: 'EISDIR' });
    rmSync(path.join(dir, record!), { recursive: true });
    // Missing (written behind Atrium's back) is expected: size and mtime stand in for the etag.
    const head = await store.head('faulty/x');
    expect(head!.etag).not.toBe(info.etag);
    expect(head!.etag).toBe(`${head!.size}-${head!.lastModified.getTime()}`);
  });

  it('logs a corrupt version record and falls back to the size-mtime etag', async () => {
    const { writeFileSync } = await import('node:fs');
    await store.put('corrupt/x', Readable.from([Buffer.from('x')]), { contentType: 'text/plain' });
    const dir = path.join(root, 'versions', 'corrupt', 'x');
    const [record] = listFiles(dir);
    writeFileSync(path.join(dir, record!), '{"etag": 4');
    warnings.length = 0;
    const head = await store.head('corrupt/x');
    expect(head).toMatchObject({ size: 1, contentType: undefined });
    expect(warnings).toEqual([
      {
        details: { storagePath: 'corrupt/x', file: path.join(dir, record!) },
        message: 'ignoring an unreadable object metadata record',
      },
    ]);
  });

  it('warns once per damaged record however often the object is read, and again when the record changes still damaged', async () => {
    const { writeFileSync } = await import('node:fs');
    await store.put('corrupt-busy/x', Readable.from([Buffer.from('x')]), { contentType: 'text/plain' });
    const dir = path.join(root, 'versions', 'corrupt-busy', 'x');
    const file = path.join(dir, listFiles(dir)[0]!);
    writeFileSync(file, '\0\0\0\0');
    warnings.length = 0;
    // A busy download: every get, head and listing reads the record again.
    for (let read = 0; read < 5; read++) {
      await text((await store.get('corrupt-busy/x'))!.body);
      expect(await store.head('corrupt-busy/x')).toMatchObject({ contentType: undefined });
      expect(await keys('corrupt-busy/')).toEqual(['corrupt-busy/x']);
    }
    const warning = {
      details: { storagePath: 'corrupt-busy/x', file },
      message: 'ignoring an unreadable object metadata record',
    };
    expect(warnings).toEqual([warning]);
    // Damaged another way (another size): a new fault, reported once more.
    writeFileSync(file, '{"etag": ');
    await store.head('corrupt-busy/x');
    await store.head('corrupt-busy/x');
    expect(warnings).toEqual([warning, warning]);
  });

  it('sweeps an empty version folder a lost record left, once it is as old as the sweep asks, and no other', async () => {
    const { mkdirSync, utimesSync, existsSync } = await import('node:fs');
    const { own, folders } = ownStore('folders');
    try {
      await folders.put('lost/x', Readable.from([Buffer.from('x')]), { contentType: 'text/plain' });
      await folders.put('kept/y', Readable.from([Buffer.from('y')]), { contentType: 'text/plain' });
      // A power cut lost x's record but not its folder; a write that just made its folder for
      // `fresh/z` has not linked its record in yet.
      const lost = path.join(own, 'versions', 'lost', 'x');
      rmSync(path.join(lost, listFiles(lost)[0]!));
      const fresh = path.join(own, 'versions', 'fresh', 'z');
      mkdirSync(fresh, { recursive: true });
      const kept = path.join(own, 'versions', 'kept', 'y');
      const old = new Date(Date.now() - 2 * 60 * 60 * 1000);
      for (const dir of [lost, kept]) utimesSync(dir, old, old);
      utimesSync(path.join(kept, listFiles(kept)[0]!), old, old);

      // A folder is no leftover of an upload: not counted.
      expect(await folders.sweepStaleTemp()).toBe(0);
      expect(existsSync(lost)).toBe(false);
      expect(existsSync(fresh)).toBe(true);
      expect(listFiles(kept)).toHaveLength(1);
      expect(await folders.head('kept/y')).toMatchObject({ contentType: 'text/plain' });
      // The object is still read (without its record) and a new write gets a record again.
      expect(await folders.head('lost/x')).toMatchObject({ size: 1, contentType: undefined });
      await folders.put('lost/x', Readable.from([Buffer.from('x2')]), { contentType: 'text/plain' });
      expect(await folders.head('lost/x')).toMatchObject({ size: 2, contentType: 'text/plain' });
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  });

  it('sweeps empty folders of data/, meta/ and versions/ once as old as the sweep asks, with the folders they leave empty, and counts only files', async () => {
    const { mkdirSync, utimesSync, existsSync, writeFileSync } = await import('node:fs');
    const { own, folders } = ownStore('empty');
    try {
      await folders.put('kept/y', Readable.from([Buffer.from('y')]), { contentType: 'text/plain' });
      // A process killed between a write's mkdir and its rename, or between a delete's removal of
      // a folder's last file and its pruning, leaves empty folders behind in data/ and meta/.
      const emptied = path.join(own, 'data', 'killed', 'a', 'b');
      const legacy = path.join(own, 'meta', 'old', 'c');
      const lost = path.join(own, 'versions', 'lost', 'x');
      const young = path.join(own, 'data', 'young', 'd');
      for (const dir of [emptied, legacy, lost, young]) mkdirSync(dir, { recursive: true });
      const stale = path.join(own, 'tmp', 'crashed.data');
      writeFileSync(stale, 'x');
      const old = new Date(Date.now() - 2 * 60 * 60 * 1000);
      for (const file of [
        stale,
        ...[emptied, legacy, lost].flatMap((dir) => [
          dir,
          path.dirname(dir),
          path.dirname(path.dirname(dir)),
        ]),
        path.join(own, 'data', 'kept'),
        path.join(own, 'versions', 'kept', 'y'),
      ]) {
        utimesSync(file, old, old);
      }

      // One leftover of an interrupted upload: the temp file. Before, the empty folder of
      // versions/ was counted too, and the server logged "removed leftovers of interrupted
      // uploads" when it had only tidied folders; the folders of data/ and meta/ stayed.
      expect(await folders.sweepStaleTemp()).toBe(1);
      expect(existsSync(stale)).toBe(false);
      expect(existsSync(path.join(own, 'data', 'killed'))).toBe(false);
      expect(existsSync(path.join(own, 'meta', 'old'))).toBe(false);
      expect(existsSync(path.join(own, 'versions', 'lost'))).toBe(false);
      // A younger one may be a write's, about to rename its file in; the roots stay.
      expect(existsSync(young)).toBe(true);
      for (const folder of ['data', 'meta', 'versions'])
        expect(existsSync(path.join(own, folder))).toBe(true);
      expect(await folders.head('kept/y')).toMatchObject({ contentType: 'text/plain' });

      // Only empty folders left to sweep: nothing counted.
      utimesSync(young, old, old);
      utimesSync(path.dirname(young), old, old);
      expect(await folders.sweepStaleTemp()).toBe(0);
      expect(existsSync(path.join(own, 'data', 'young'))).toBe(false);
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  });

  it('a write whose new folder the sweep removes between its mkdir and its rename lands all the same', async () => {
    const { utimesSync, existsSync } = await import('node:fs');
    const { own, folders } = ownStore('race');
    const realRename = fsPromises.rename;
    const made = path.join(own, 'data', 'race', 'deep');
    let removedMeanwhile = false;
    // The write's first rename into data/: its folders are made, empty, and (aged here) the sweep
    // takes them just then.
    const rename = vi.spyOn(fsPromises, 'rename').mockImplementationOnce(async (from, to) => {
      const old = new Date(Date.now() - 2 * 60 * 60 * 1000);
      utimesSync(made, old, old);
      utimesSync(path.dirname(made), old, old);
      expect(await folders.sweepStaleTemp()).toBe(0);
      removedMeanwhile = !existsSync(path.dirname(made));
      return realRename(from, to);
    });
    try {
      await folders.put('race/deep/file.txt', Readable.from([Buffer.from('raced')]), {
        contentType: 'text/plain',
      });
      expect(removedMeanwhile).toBe(true);
      expect(await text((await folders.get('race/deep/file.txt'))!.body)).toBe('raced');
      expect(await folders.head('race/deep/file.txt')).toMatchObject({ contentType: 'text/plain' });
    } finally {
      rename.mockRestore();
      rmSync(own, { recursive: true, force: true });
    }
  });

  it('the temp sweep fails on a file system fault instead of reporting nothing to sweep', async () => {
    const emfile = Object.assign(new Error('EMFILE: too many open files'), { code: 'EMFILE' });
    const readdir = vi.spyOn(fsPromises, 'readdir').mockRejectedValueOnce(emfile);
    try {
      await expect(store.sweepStaleTemp()).rejects.toBe(emfile);
    } finally {
      readdir.mockRestore();
    }
    // A missing temp folder is no fault: nothing was ever written there.
    const empty = new FsObjectStore({
      root: path.join(root, 'never-used'),
      signingSecret: 's',
      clock: () => new Date(),
      fallbackOrigin: 'http://127.0.0.1:1',
    });
    expect(await empty.sweepStaleTemp()).toBe(0);
  });
});
