/**
 * A power cut can lose what the fs store keeps beside an object's bytes: the version record
 * (`versions/{key}/{size}-{mtimeNs}.json`, content type and etag) may be missing, empty or cut
 * short while the bytes survive. The object must stay readable; the next sync takes it as a
 * change once (its etag is now `size-mtime`, its type guessed from the name) and then settles.
 */
import { readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';
import { filesApi, injectable, PREFIX } from './helpers.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
});
afterAll(() => t.close());

/** What a power cut may leave of a record that was never fsynced (or whose link was lost). */
const damages: Record<string, (file: string) => void> = {
  missing: (file) => rmSync(file),
  empty: (file) => truncateSync(file, 0),
  'cut short': (file) => truncateSync(file, 20),
  // ext4 may keep a file's new size while its blocks never reached the disk: zeros.
  'zero-filled': (file) => writeFileSync(file, Buffer.alloc(60)),
};

/** The one version record of the object at `storagePath`. */
function recordOf(storagePath: string): string {
  const folder = path.join(t.env.config.dataDir, 'objects', 'versions', storagePath);
  const names = readdirSync(folder);
  expect(names).toHaveLength(1);
  return path.join(folder, names[0]!);
}

const bytes = '# Notes\n\nkept through the cut\n';

/** Uploads `name` as text/plain (not the type its name suggests), returning its storage path. */
async function upload(name: string): Promise<string> {
  const res = await filesApi(t.app).requestUpload({
    filename: name,
    contentType: 'text/plain',
    sizeBytes: Buffer.byteLength(bytes),
    folder: 'cut',
  });
  expect(res.statusCode).toBe(200);
  const { uploadUrl, storagePath } = res.json().data;
  const put = await t.app.inject({
    method: 'PUT',
    url: injectable(uploadUrl),
    headers: { 'content-type': 'text/plain' },
    payload: bytes,
  });
  expect(put.statusCode).toBe(200);
  return storagePath;
}

const sync = async () => {
  const res = await filesApi(t.app).sync();
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data;
};

async function fileNamed(name: string) {
  const res = await filesApi(t.app).list();
  expect(res.statusCode).toBe(200);
  return res.json().data.files.find((f: { name: string }) => f.name === name);
}

/** Asks for a download URL of the file and fetches it. */
async function download(fileId: string) {
  const asked = await filesApi(t.app).download(fileId);
  expect(asked.statusCode).toBe(200);
  return t.app.inject({ method: 'GET', url: injectable(asked.json().data.downloadUrl) });
}

describe(`an fs object whose version record a power cut lost (${engineName})`, () => {
  for (const [damage, apply] of Object.entries(damages)) {
    it(`record ${damage} after sync: readable, updated once by the next sync with the type its name suggests, then settled`, async () => {
      const name = `after-${damage.replace(' ', '-')}.md`;
      const storagePath = await upload(name);
      expect(await sync()).toMatchObject({ added: 1, updated: 0 });
      const before = await fileNamed(name);
      expect(before.mimeType).toBe('text/plain');

      apply(recordOf(storagePath));

      // The store still describes it: etag from size and mtime, no content type.
      const head = await t.store.head(storagePath);
      expect(head).toMatchObject({ size: Buffer.byteLength(bytes), contentType: undefined });
      expect(head!.etag).toBe(`${head!.size}-${head!.lastModified.getTime()}`);
      const listed = [];
      for await (const info of t.store.list(`${PREFIX}cut/`)) listed.push(info.key);
      expect(listed).toContain(storagePath);

      // The file is still listed; its recorded version is not the object's any more, so a
      // download URL serves nothing until a sync records the version again.
      expect((await fileNamed(name)).id).toBe(before.id);
      const stale = await download(before.id);
      expect(stale.statusCode).toBe(404);
      expect(stale.json()).toMatchObject({ details: { reason: 'version_changed' } });

      expect(await sync()).toEqual({ added: 0, removed: 0, updated: 1 });
      const after = await fileNamed(name);
      expect(after).toMatchObject({ id: before.id, mimeType: 'text/markdown', sizeBytes: before.sizeBytes });
      const served = await download(after.id);
      expect(served.statusCode).toBe(200);
      expect(served.body).toBe(bytes);
      expect(served.headers['content-type']).toBe('text/markdown');

      expect(await sync()).toEqual({ added: 0, removed: 0, updated: 0 });
      expect(await sync()).toEqual({ added: 0, removed: 0, updated: 0 });
    });
  }

  it('record lost before the first sync: added with the type its name suggests, downloadable, settled', async () => {
    const storagePath = await upload('before-sync.md');
    damages.empty!(recordOf(storagePath));
    expect(await sync()).toMatchObject({ added: 1, updated: 0 });
    const file = await fileNamed('before-sync.md');
    expect(file.mimeType).toBe('text/markdown');
    const served = await download(file.id);
    expect(served.statusCode).toBe(200);
    expect(served.body).toBe(bytes);
    expect(await sync()).toEqual({ added: 0, removed: 0, updated: 0 });
  });

  it('a new upload over an object without a readable record stores a fresh record', async () => {
    const storagePath = await upload('again.md');
    await sync();
    damages['cut short']!(recordOf(storagePath));
    await upload('again.md');
    expect(await sync()).toEqual({ added: 0, removed: 0, updated: 1 });
    // The damaged record was the replaced version's: it is gone, the new one is whole.
    expect(JSON.parse(readFileSync(recordOf(storagePath), 'utf8'))).toMatchObject({
      contentType: 'text/plain',
    });
    expect((await fileNamed('again.md')).mimeType).toBe('text/plain');
  });
});
