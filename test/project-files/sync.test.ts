import { mkdirSync, truncateSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { filesApi, injectable } from './helpers.js';

let now = new Date('2026-11-22T10:00:00.000Z');
let t: Awaited<ReturnType<typeof createTestApp>>;
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP, clock: () => now });
});
afterAll(() => t.close());

const tick = () => {
  now = new Date(now.getTime() + 1000);
};

async function newProject(name: string): Promise<string> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/v1/projects',
    headers: { 'x-service-api-key': KEYS.mainOwner },
    payload: { name },
  });
  return res.json().data.project.id;
}

const prefixOf = (projectId: string) => `projects/wsp_main/${projectId}/`;

/** Puts an object in storage directly, as a finished upload (or an operator copying files) would. */
const putObject = (projectId: string, filePath: string, content: string, contentType = 'text/plain') =>
  t.store.put(prefixOf(projectId) + filePath, Readable.from([Buffer.from(content)]), { contentType });

/** Writes a file under the fs data dir behind Atrium's back (no sidecar metadata). */
function writeBehindTheBack(projectId: string, filePath: string, sizeOrContent: number | string) {
  const target = path.join(t.env.config.dataDir, 'objects', 'data', prefixOf(projectId), filePath);
  mkdirSync(path.dirname(target), { recursive: true });
  if (typeof sizeOrContent === 'string') writeFileSync(target, sizeOrContent);
  else {
    writeFileSync(target, '');
    truncateSync(target, sizeOrContent); // sparse: no disk space, real size
  }
}

const sync = async (projectId: string) => {
  const res = await filesApi(t.app, projectId).sync();
  return { status: res.statusCode, body: res.json() };
};
const files = async (projectId: string) => (await filesApi(t.app, projectId).list()).json().data.files;
/** An upload URL for one byte of text: what the project's quota still lets in. */
const requestOneByteUpload = (projectId: string, filename: string) =>
  filesApi(t.app, projectId).requestUpload({ filename, contentType: 'text/plain', sizeBytes: 1 });

describe(`POST /v1/projects/{projectId}/files/sync (${engineName})`, () => {
  it('registers new objects as added, with their type, and a second sync changes nothing', async () => {
    const projectId = await newProject('Added');
    await putObject(projectId, 'a.md', '# a', 'text/markdown');
    await putObject(projectId, 'docs/b.json', '{}', 'application/json');
    writeBehindTheBack(projectId, 'c.csv', 'x,y');
    expect((await sync(projectId)).body.data).toEqual({ added: 3, removed: 0, updated: 0 });
    const listed = await files(projectId);
    expect(listed.map((f: { path: string; mimeType: string }) => [f.path, f.mimeType]).sort()).toEqual([
      ['a.md', 'text/markdown'],
      ['c.csv', 'text/csv'],
      ['docs/b.json', 'application/json'],
    ]);
    tick();
    expect((await sync(projectId)).body.data).toEqual({ added: 0, removed: 0, updated: 0 });
    const again = await files(projectId);
    expect(again.map((f: { id: string }) => f.id).sort()).toEqual(
      listed.map((f: { id: string }) => f.id).sort(),
    );
  });

  it('sets syncedAt on every present file, leaving updatedAt alone when nothing changed', async () => {
    const projectId = await newProject('SyncedAt');
    await putObject(projectId, 'a.txt', 'a');
    await sync(projectId);
    const [before] = await files(projectId);
    tick();
    await sync(projectId);
    const [after] = await files(projectId);
    expect(after.syncedAt).toBe(now.toISOString());
    expect(after.syncedAt).not.toBe(before.syncedAt);
    expect(after.updatedAt).toBe(before.updatedAt);
  });

  it('reports a record whose object was deleted as removed, once', async () => {
    const projectId = await newProject('Removed');
    await putObject(projectId, 'keep.txt', 'k');
    await putObject(projectId, 'gone.txt', 'g');
    await sync(projectId);
    await t.store.delete(`${prefixOf(projectId)}gone.txt`);
    expect((await sync(projectId)).body.data).toEqual({ added: 0, removed: 1, updated: 0 });
    expect((await files(projectId)).map((f: { path: string }) => f.path)).toEqual(['keep.txt']);
    expect((await sync(projectId)).body.data).toEqual({ added: 0, removed: 0, updated: 0 });
  });

  it('reports an object replaced with other content (same size too) as updated, keeping the id', async () => {
    const projectId = await newProject('Replaced');
    await putObject(projectId, 'r.txt', 'aaaa');
    await sync(projectId);
    const [before] = await files(projectId);
    tick();
    await putObject(projectId, 'r.txt', 'bbbb');
    expect((await sync(projectId)).body.data).toEqual({ added: 0, removed: 0, updated: 1 });
    const [after] = await files(projectId);
    expect(after.id).toBe(before.id);
    expect(after.updatedAt).toBe(now.toISOString());
    await putObject(projectId, 'r.txt', 'longer content', 'text/markdown');
    expect((await sync(projectId)).body.data).toEqual({ added: 0, removed: 0, updated: 1 });
    expect((await files(projectId))[0]).toMatchObject({
      id: before.id,
      sizeBytes: 14,
      mimeType: 'text/markdown',
    });
    expect((await sync(projectId)).body.data).toEqual({ added: 0, removed: 0, updated: 0 });
  });

  it('registers an object uploaded twice to the same path once', async () => {
    const projectId = await newProject('Twice');
    const api = filesApi(t.app, projectId);
    for (const content of ['first', 'again']) {
      const { uploadUrl } = (
        await api.requestUpload({ filename: 'twice.txt', contentType: 'text/plain', sizeBytes: 5 })
      ).json().data;
      const url = new URL(uploadUrl);
      const put = await t.app.inject({
        method: 'PUT',
        url: url.pathname + url.search,
        headers: { 'content-type': 'text/plain' },
        payload: content,
      });
      expect(put.statusCode).toBe(200);
    }
    expect((await sync(projectId)).body.data).toEqual({ added: 1, removed: 0, updated: 0 });
    expect(await files(projectId)).toHaveLength(1);
  });

  it('never creates duplicates when syncs run concurrently', async () => {
    const projectId = await newProject('Concurrent');
    await Promise.all(Array.from({ length: 30 }, (_, i) => putObject(projectId, `c/${i}.txt`, `file ${i}`)));
    const results = await Promise.all(Array.from({ length: 6 }, () => sync(projectId)));
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect(results.reduce((sum, r) => sum + r.body.data.added, 0)).toBe(30);
    const listed = await files(projectId);
    expect(listed).toHaveLength(30);
    expect(new Set(listed.map((f: { path: string }) => f.path)).size).toBe(30);

    // Concurrent syncs after a replacement and a removal count each change once.
    await putObject(projectId, 'c/0.txt', 'changed');
    await t.store.delete(`${prefixOf(projectId)}c/1.txt`);
    const again = await Promise.all(Array.from({ length: 6 }, () => sync(projectId)));
    expect(again.reduce((sum, r) => sum + r.body.data.updated, 0)).toBe(1);
    expect(again.reduce((sum, r) => sum + r.body.data.removed, 0)).toBe(1);
    expect(await files(projectId)).toHaveLength(29);
  });

  it('answers 409 when objects put behind its back exceed 500 files, registering up to the limit', async () => {
    const projectId = await newProject('Too many objects');
    for (let i = 0; i < 502; i++)
      writeBehindTheBack(projectId, `bulk/${String(i).padStart(3, '0')}.txt`, 'x');
    const first = await sync(projectId);
    expect(first.status).toBe(409);
    expect(first.body).toMatchObject({
      code: 'quota_exceeded',
      details: { added: 500, removed: 0, updated: 0, notRegisteredCount: 2, maxFiles: 500 },
    });
    expect(first.body.details.notRegistered).toHaveLength(2);
    const list = (await filesApi(t.app, projectId).list('?limit=1')).json().data;
    expect(list.pagination.total).toBe(500);
    // Still over: the same answer, nothing registered twice.
    const second = await sync(projectId);
    expect(second.status).toBe(409);
    expect(second.body.details).toMatchObject({ added: 0, notRegisteredCount: 2 });
    // Upload URLs are refused at the limit too.
    const refused = await requestOneByteUpload(projectId, 'n.txt');
    expect(refused.statusCode).toBe(409);
  });

  it('answers 409 when objects put behind its back exceed 500 MB, registering what fits', async () => {
    const projectId = await newProject('Too many bytes');
    const MB = 1024 * 1024;
    writeBehindTheBack(projectId, 'a.bin', 200 * MB);
    now = new Date(now.getTime() + 1000);
    writeBehindTheBack(projectId, 'b.bin', 200 * MB);
    writeBehindTheBack(projectId, 'c.bin', 200 * MB);
    const res = await sync(projectId);
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({
      code: 'quota_exceeded',
      details: { added: 2, notRegisteredCount: 1, maxBytes: 500 * MB },
    });
    const listed = await files(projectId);
    expect(listed).toHaveLength(2);
    expect(listed.reduce((sum: number, f: { sizeBytes: number }) => sum + f.sizeBytes, 0)).toBe(400 * MB);
  });

  it('applies replacements that take a project past 500 MB, answers 409 and refuses anything new', async () => {
    const projectId = await newProject('Grown by replacements');
    const MB = 1024 * 1024;
    for (const name of ['a', 'b', 'c', 'd']) writeBehindTheBack(projectId, `${name}.bin`, 1);
    expect((await sync(projectId)).status).toBe(200);
    // Each replacement's upload URL was checked alone against the files registered then; the
    // new bytes are in storage, so the records follow them (an old record could not be downloaded).
    for (const name of ['a', 'b', 'c', 'd']) writeBehindTheBack(projectId, `${name}.bin`, 150 * MB);
    writeBehindTheBack(projectId, 'new.txt', 'x');
    const res = await sync(projectId);
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({
      code: 'quota_exceeded',
      details: { updated: 4, added: 0, notRegistered: ['new.txt'], bytes: 600 * MB, maxBytes: 500 * MB },
    });
    expect((await files(projectId)).map((f: { sizeBytes: number }) => f.sizeBytes)).toEqual(
      Array(4).fill(150 * MB),
    );
    // Over its quota, the project takes no new upload until files are deleted.
    const upload = await requestOneByteUpload(projectId, 'more.txt');
    expect(upload.statusCode).toBe(409);
  });

  it('ignores a file put on disk under a name no storage key can hold, instead of failing', async () => {
    const projectId = await newProject('Backslash');
    writeBehindTheBack(projectId, 'back\\slash.txt', 'x');
    writeBehindTheBack(projectId, 'folder\\name/inside.txt', 'x');
    writeBehindTheBack(projectId, 'plain.txt', 'x');
    expect(await sync(projectId)).toEqual({
      status: 200,
      body: { data: { added: 1, removed: 0, updated: 0 } },
    });
    expect((await files(projectId)).map((f: { path: string }) => f.path)).toEqual(['plain.txt']);
    const upload = await requestOneByteUpload(projectId, 'more.txt');
    expect(upload.statusCode).toBe(200);
  });

  it('ignores a file put on disk under a name holding a bidirectional control or line separator, as no upload URL could name it', async () => {
    const projectId = await newProject('Bidirectional names');
    writeBehindTheBack(projectId, 'invoice\u202efdp.exe', 'x');
    writeBehindTheBack(projectId, 'docs\u2066/inside.txt', 'x');
    writeBehindTheBack(projectId, 'two\u2028lines.txt', 'x');
    writeBehindTheBack(projectId, 'plain.txt', 'x');
    expect(await sync(projectId)).toEqual({
      status: 200,
      body: { data: { added: 1, removed: 0, updated: 0 } },
    });
    expect((await files(projectId)).map((f: { path: string }) => f.path)).toEqual(['plain.txt']);
  });

  it('ignores a file put on disk under a name or folder that shows no character, as no upload URL could name it', async () => {
    const projectId = await newProject('Invisible names');
    writeBehindTheBack(projectId, '\u200b', 'x');
    writeBehindTheBack(projectId, '\u3164/inside.txt', 'x');
    writeBehindTheBack(projectId, 'docs/\ufe0f\u2800', 'x');
    writeBehindTheBack(projectId, 'a\u200bb.txt', 'x');
    expect(await sync(projectId)).toEqual({
      status: 200,
      body: { data: { added: 1, removed: 0, updated: 0 } },
    });
    expect((await files(projectId)).map((f: { path: string }) => f.path)).toEqual(['a\u200bb.txt']);
  });

  it('leaves objects it cannot register out of the quota, so uploads still fit beside them', async () => {
    const MB = 1024 * 1024;
    // 500 MB in one object whose name no upload URL could have (a control character).
    const bytesProject = await newProject('Ignored bytes');
    writeBehindTheBack(bytesProject, 'tab\there.bin', 500 * MB);
    // 500 objects deeper than 10 folders.
    const filesProject = await newProject('Ignored files');
    const tooDeep = Array.from({ length: 11 }, (_, i) => `d${i}`).join('/');
    for (let i = 0; i < 500; i++) writeBehindTheBack(filesProject, `${tooDeep}/${i}.txt`, 'x');
    for (const projectId of [bytesProject, filesProject]) {
      expect(await sync(projectId)).toEqual({
        status: 200,
        body: { data: { added: 0, removed: 0, updated: 0 } },
      });
      expect(await files(projectId)).toEqual([]);
      const api = filesApi(t.app, projectId);
      const upload = await api.requestUpload({
        filename: 'room.txt',
        contentType: 'text/plain',
        sizeBytes: 4,
      });
      expect(upload.statusCode, projectId).toBe(200);
      const put = await t.app.inject({
        method: 'PUT',
        url: injectable(upload.json().data.uploadUrl),
        headers: { 'content-type': 'text/plain' },
        payload: 'room',
      });
      expect(put.statusCode).toBe(200);
      expect((await sync(projectId)).body.data).toEqual({ added: 1, removed: 0, updated: 0 });
      expect((await files(projectId)).map((f: { path: string }) => f.path)).toEqual(['room.txt']);
    }
  });

  it('answers 404 for projects of other workspaces and organizations', async () => {
    for (const projectId of ['prj_other', 'prj_globex', 'prj_missing']) {
      expect((await sync(projectId)).status, projectId).toBe(404);
    }
  });
});
