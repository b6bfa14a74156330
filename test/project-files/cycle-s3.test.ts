import { ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../src/ids.js';
import { S3ObjectStore } from '../../src/storage/s3-store.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { startS3rver } from './s3rver.js';

let s3: Awaited<ReturnType<typeof startS3rver>>;
let t: Awaited<ReturnType<typeof createTestApp>>;
let origin: string;
beforeAll(async () => {
  s3 = await startS3rver();
  t = await createTestApp({
    setup: TENANCY_SETUP,
    store: () => new S3ObjectStore(s3.config, { clock: systemClock }),
  });
  origin = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await t.close();
  await s3.close();
});

const api = (method: string, path: string, body?: unknown) =>
  fetch(`${origin}/v1${path}`, {
    method,
    headers: { 'x-service-api-key': KEYS.mainOwner, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });

describe(`project files, whole cycle over a listening server, s3 storage on s3rver (${engineName})`, () => {
  it('uploads to the presigned URL, syncs, lists, trees, downloads the same bytes, deletes and syncs again', async () => {
    const bytes = Buffer.from('a,b\n1,2\n');
    const requested = await api('POST', '/projects/prj_docs/files/upload', {
      filename: 'data.csv',
      contentType: 'text/csv',
      sizeBytes: bytes.length,
      folder: 'tables',
    });
    expect(requested.status).toBe(200);
    const { uploadUrl, storagePath } = (await requested.json()).data;
    expect(storagePath).toBe('projects/wsp_main/prj_docs/tables/data.csv');
    const signed = new URL(uploadUrl);
    expect(signed.origin).toBe(s3.config.endpoint);
    // The presigned URL binds type and length as signed headers, and expires in 15 minutes.
    expect(signed.searchParams.get('X-Amz-SignedHeaders')?.split(';')).toEqual(
      expect.arrayContaining(['content-length', 'content-type', 'host']),
    );
    expect(signed.searchParams.get('X-Amz-Expires')).toBe('900');

    const put = await fetch(uploadUrl, {
      method: 'PUT',
      headers: { 'content-type': 'text/csv' },
      body: bytes,
    });
    expect(put.status).toBe(200);

    expect((await (await api('POST', '/projects/prj_docs/files/sync')).json()).data).toEqual({
      added: 1,
      removed: 0,
      updated: 0,
    });
    const { files } = (await (await api('GET', '/projects/prj_docs/files')).json()).data;
    expect(files).toHaveLength(1);
    expect(files[0]).toMatchObject({
      name: 'data.csv',
      path: 'tables/data.csv',
      mimeType: 'text/csv',
      sizeBytes: bytes.length,
    });

    const tree = (await (await api('GET', '/projects/prj_docs/files?tree=true')).json()).data.tree;
    expect(tree).toEqual([
      { kind: 'folder', name: 'tables', path: 'tables', children: [{ kind: 'file', ...files[0] }] },
    ]);

    const download = (await (await api('GET', `/projects/prj_docs/files/${files[0].id}/download`)).json())
      .data;
    expect(download).toMatchObject({
      filename: 'data.csv',
      contentType: 'text/csv',
      sizeBytes: bytes.length,
    });
    expect(new URL(download.downloadUrl).searchParams.get('X-Amz-Expires')).toBe('14400');
    // Bound to the version: a signed If-Match with the recorded etag, in the query so a plain
    // link carries it. S3 answers 412 once the object is another version (s3rver ignores it).
    const recordedEtag = `"${(await t.store.head(storagePath))!.etag}"`;
    expect(new URL(download.downloadUrl).searchParams.get('if-match')).toBe(recordedEtag);
    // Not a signed header: a browser following the link sends no If-Match of its own.
    expect(new URL(download.downloadUrl).searchParams.get('X-Amz-SignedHeaders')).toBe('host');
    const got = await fetch(download.downloadUrl);
    expect(got.status).toBe(200);
    expect(got.headers.get('content-type')).toBe('text/csv');
    expect(got.headers.get('content-disposition')).toContain('filename="data.csv"');
    expect(Buffer.from(await got.arrayBuffer()).equals(bytes)).toBe(true);

    // Replacing the object through a new upload URL keeps the id and counts as updated.
    const replacement = Buffer.from('a,b\n3,4\n5,6\n');
    const again = (
      await (
        await api('POST', '/projects/prj_docs/files/upload', {
          filename: 'data.csv',
          contentType: 'text/csv',
          sizeBytes: replacement.length,
          folder: 'tables',
        })
      ).json()
    ).data;
    expect(
      (
        await fetch(again.uploadUrl, {
          method: 'PUT',
          headers: { 'content-type': 'text/csv' },
          body: replacement,
        })
      ).status,
    ).toBe(200);
    expect((await (await api('POST', '/projects/prj_docs/files/sync')).json()).data).toEqual({
      added: 0,
      removed: 0,
      updated: 1,
    });
    const relisted = (await (await api('GET', '/projects/prj_docs/files')).json()).data.files;
    expect(relisted).toEqual([expect.objectContaining({ id: files[0].id, sizeBytes: replacement.length })]);
    // The old URL names a version that is gone; a new URL names the current one.
    const currentEtag = `"${(await t.store.head(storagePath))!.etag}"`;
    expect(currentEtag).not.toBe(recordedEtag);
    const fresh = (await (await api('GET', `/projects/prj_docs/files/${files[0].id}/download`)).json()).data;
    expect(new URL(fresh.downloadUrl).searchParams.get('if-match')).toBe(currentEtag);
    expect((await fetch(fresh.downloadUrl)).status).toBe(200);

    expect((await api('DELETE', `/projects/prj_docs/files/${files[0].id}`)).status).toBe(200);
    expect((await api('DELETE', `/projects/prj_docs/files/${files[0].id}`)).status).toBe(404);
    expect(await t.store.head(storagePath)).toBeNull();
    expect((await (await api('POST', '/projects/prj_docs/files/sync')).json()).data).toEqual({
      added: 0,
      removed: 0,
      updated: 0,
    });
  });

  it('registers objects put in the bucket directly, with their stored content type, and serves no fs storage routes', async () => {
    const { Readable } = await import('node:stream');
    const prefix = 'projects/wsp_main/prj_docs/';
    await t.store.put(`${prefix}direct/report.pdf`, Readable.from([Buffer.from('%PDF-1.4')]), {
      contentType: 'application/pdf',
    });
    await t.store.put(`${prefix}direct/notes.weird`, Readable.from([Buffer.from('x')]), {
      contentType: 'text/x-notes',
    });
    expect((await (await api('POST', '/projects/prj_docs/files/sync')).json()).data).toEqual({
      added: 2,
      removed: 0,
      updated: 0,
    });
    const { files } = (await (await api('GET', '/projects/prj_docs/files')).json()).data;
    const types = Object.fromEntries(
      files.map((f: { path: string; mimeType: string }) => [f.path, f.mimeType]),
    );
    expect(types).toMatchObject({
      'direct/report.pdf': 'application/pdf',
      'direct/notes.weird': 'text/x-notes',
    });
    await t.store.deletePrefix(`${prefix}direct/`);
    expect((await (await api('POST', '/projects/prj_docs/files/sync')).json()).data).toEqual({
      added: 0,
      removed: 2,
      updated: 0,
    });
    const fsRoute = await fetch(`${origin}/storage/objects/${prefix}x.txt?signature=x`, {
      method: 'PUT',
      body: 'x',
    });
    expect(fsRoute.status).toBe(404);
  });

  it('takes the type of the same bytes uploaded again with another content type, and marks the file for indexing', async () => {
    // S3's ETag is the MD5 of the bytes: only the object's time tells this upload from the last.
    const bytes = Buffer.from('# Title\n\nhello\n');
    const upload = async (contentType: string) => {
      const requested = await api('POST', '/projects/prj_docs/files/upload', {
        filename: 'README',
        folder: 'retyped',
        contentType,
        sizeBytes: bytes.length,
      });
      const { uploadUrl } = (await requested.json()).data;
      const put = await fetch(uploadUrl, {
        method: 'PUT',
        headers: { 'content-type': contentType },
        body: bytes,
      });
      expect(put.status).toBe(200);
      return (await (await api('POST', '/projects/prj_docs/files/sync')).json()).data;
    };
    const readme = async () =>
      (await (await api('GET', '/projects/prj_docs/files')).json()).data.files.find(
        (f: { path: string }) => f.path === 'retyped/README',
      );

    expect(await upload('application/octet-stream')).toEqual({ added: 1, removed: 0, updated: 0 });
    const before = await readme();
    expect(before.mimeType).toBe('application/octet-stream');
    expect(await upload('text/markdown')).toEqual({ added: 0, removed: 0, updated: 1 });
    expect(await readme()).toMatchObject({
      id: before.id,
      mimeType: 'text/markdown',
      indexStatus: 'pending',
    });
    const sync = async () => (await (await api('POST', '/projects/prj_docs/files/sync')).json()).data;
    // Nothing changed since: a second sync finds nothing to do.
    expect(await sync()).toEqual({ added: 0, removed: 0, updated: 0 });
    // Once no upload URL for it is live, sync records the object's time and stops asking for its type.
    await t.env.database.db.deleteFrom('upload_reservations').execute();
    expect(await sync()).toEqual({ added: 0, removed: 0, updated: 0 });
    const head = vi.spyOn(t.store, 'head');
    try {
      expect(await sync()).toEqual({ added: 0, removed: 0, updated: 0 });
      expect(head).not.toHaveBeenCalled();
    } finally {
      head.mockRestore();
    }
    expect((await api('DELETE', `/projects/prj_docs/files/${before.id}`)).status).toBe(200);
  });

  it('lists the folders under a prefix, as the sweep of deleted projects reads them', async () => {
    const { Readable } = await import('node:stream');
    for (const key of ['folders/a/1.txt', 'folders/a/deep/2.txt', 'folders/b/3.txt', 'folders/top.txt']) {
      await t.store.put(key, Readable.from([Buffer.from('x')]), { contentType: 'text/plain' });
    }
    const folders: string[] = [];
    for await (const folder of t.store.listFolders('folders/')) folders.push(folder);
    expect(folders.sort()).toEqual(['a', 'b']);
    await t.store.deletePrefix('folders/');
  });

  it('refuses an expired presigned upload URL', async () => {
    const past = new Date(Date.now() - 60 * 60 * 1000);
    const store = new S3ObjectStore(s3.config, { clock: () => past });
    const url = await store.createUploadUrl('projects/x/y/z.txt', {
      contentType: 'text/plain',
      sizeBytes: 2,
      expiresInSeconds: 900,
    });
    const put = await fetch(url, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'hi' });
    expect(put.status).toBe(403);
    expect(await store.head('projects/x/y/z.txt')).toBeNull();
  });

  it('stores and reads large objects through multipart upload, and ranged reads', async () => {
    const { Readable } = await import('node:stream');
    const big = Buffer.alloc(9 * 1024 * 1024 + 123, 7);
    big.write('head', 0);
    const info = await t.store.put(
      'scratch/big.bin',
      Readable.from([big.subarray(0, 5_000_000), big.subarray(5_000_000)]),
      {
        contentType: 'application/octet-stream',
      },
    );
    expect(info.size).toBe(big.length);
    expect((await t.store.head('scratch/big.bin'))?.size).toBe(big.length);
    const part = await t.store.get('scratch/big.bin', { start: 0, end: 3 });
    let text = '';
    for await (const chunk of part!.body) text += Buffer.from(chunk as Uint8Array).toString();
    expect(text).toBe('head');
    // Read whole (the indexer's read), within a limit and past it, and of a missing object.
    const whole = await t.store.readAll('scratch/big.bin', big.length);
    expect(Buffer.isBuffer(whole) && whole.equals(big)).toBe(true);
    expect(await t.store.readAll('scratch/big.bin', big.length - 1)).toBe('too-large');
    expect(await t.store.readAll('scratch/missing.bin', 10)).toBeNull();
    await expect(
      t.store.put('scratch/over.bin', Readable.from([Buffer.alloc(100)]), {
        contentType: 'a/b',
        maxBytes: 10,
      }),
    ).rejects.toMatchObject({ code: 'payload_too_large' });
    expect(await t.store.head('scratch/over.bin')).toBeNull();
    await t.store.deletePrefix('scratch/');
    expect(await t.store.head('scratch/big.bin')).toBeNull();
  });

  it('registers one of a file and a folder of the same name that both landed, and says which it left out', async () => {
    // Both URLs asked for before either was synced: each was checked against registered files.
    const urls = [];
    for (const [filename, folder] of [
      ['notes', undefined],
      ['a.txt', 'notes'],
    ] as const) {
      const res = await api('POST', '/projects/prj_docs/files/upload', {
        filename,
        contentType: 'text/plain',
        sizeBytes: 1,
        ...(folder ? { folder } : {}),
      });
      expect(res.status).toBe(200);
      urls.push((await res.json()).data.uploadUrl as string);
    }
    for (const url of urls) {
      expect(
        (await fetch(url, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'x' })).status,
      ).toBe(200);
    }
    const sync = await api('POST', '/projects/prj_docs/files/sync');
    expect(sync.status).toBe(409);
    const body = await sync.json();
    expect(body).toMatchObject({ code: 'conflict', details: { added: 1, notRegisteredCount: 1 } });
    const listed = (await (await api('GET', '/projects/prj_docs/files')).json()).data.files.map(
      (file: { path: string }) => file.path,
    );
    expect(listed.filter((path: string) => path === 'notes' || path === 'notes/a.txt')).toHaveLength(1);
    expect(body.details.notRegistered).toHaveLength(1);
    expect(listed).not.toContain(body.details.notRegistered[0]);
  });

  it('leaves folder markers and other keys sync ignores out of the quota, and deletes them with the project', async () => {
    const created = await api('POST', '/projects', { name: 'Folder markers' });
    const projectId = (await created.json()).data.project.id as string;
    const prefix = `projects/wsp_main/${projectId}/`;
    // The room of all files but one is promised to upload URLs not used yet.
    const expiresAt = new Date(Date.now() + 60 * 60 * 1000).toISOString();
    await t.db
      .insertInto('upload_reservations')
      .values(
        Array.from({ length: 499 }, (_, i) => ({
          project_id: projectId,
          workspace_id: 'wsp_main',
          path: `promised-${i}.txt`,
          size_bytes: 1,
          expires_at: expiresAt,
        })),
      )
      .execute();
    // What the S3 console or a copying tool may put in a bucket: empty "folders" (each an object),
    // a name with a backslash, a path deeper than 10 folders.
    const bucket = new S3Client({
      endpoint: s3.config.endpoint,
      region: s3.config.region,
      forcePathStyle: true,
      credentials: { accessKeyId: s3.config.accessKeyId!, secretAccessKey: s3.config.secretAccessKey! },
    });
    const ignored = [
      'docs/',
      'docs/specs/',
      'back\\slash.txt',
      `${Array.from({ length: 11 }, (_, i) => `d${i}`).join('/')}/deep.txt`,
    ];
    for (const key of ignored) {
      const body = key.endsWith('/') ? '' : 'x';
      await bucket.send(new PutObjectCommand({ Bucket: s3.config.bucket, Key: prefix + key, Body: body }));
    }
    const sync = async () => (await (await api('POST', `/projects/${projectId}/files/sync`)).json()).data;
    expect(await sync()).toEqual({ added: 0, removed: 0, updated: 0 });
    const requested = await api('POST', `/projects/${projectId}/files/upload`, {
      filename: 'room.txt',
      contentType: 'text/plain',
      sizeBytes: 4,
    });
    expect(requested.status).toBe(200);
    const { uploadUrl } = (await requested.json()).data;
    const put = await fetch(uploadUrl, {
      method: 'PUT',
      headers: { 'content-type': 'text/plain' },
      body: 'room',
    });
    expect(put.status).toBe(200);
    expect(await sync()).toEqual({ added: 1, removed: 0, updated: 0 });
    const { files } = (await (await api('GET', `/projects/${projectId}/files`)).json()).data;
    expect(files.map((file: { path: string }) => file.path)).toEqual(['room.txt']);

    expect((await api('DELETE', `/projects/${projectId}`)).status).toBe(200);
    const left = await bucket.send(new ListObjectsV2Command({ Bucket: s3.config.bucket, Prefix: prefix }));
    expect(left.Contents ?? []).toEqual([]);
    bucket.destroy();
  });
});
