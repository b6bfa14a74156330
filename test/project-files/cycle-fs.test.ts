import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName, freePort } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
let origin: string;
beforeAll(async () => {
  const port = await freePort();
  t = await createTestApp({ setup: TENANCY_SETUP, env: { HOST: '127.0.0.1', PORT: String(port) } });
  origin = await t.app.listen({ port, host: '127.0.0.1' });
});
afterAll(() => t.close());

const api = (method: string, path: string, body?: unknown) =>
  fetch(`${origin}/v1${path}`, {
    method,
    headers: { 'x-service-api-key': KEYS.mainOwner, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });

describe(`project files, whole cycle over a listening server, fs storage (${engineName})`, () => {
  it('uploads through the signed URL, syncs, lists, trees, downloads the same bytes, deletes and syncs again', async () => {
    const bytes = Buffer.from('# Spec\n\nHello, files. ünïcödé\n');
    const requested = await api('POST', '/projects/prj_docs/files/upload', {
      filename: 'spec one.md',
      contentType: 'text/markdown',
      sizeBytes: bytes.length,
      folder: '/docs/specs/',
    });
    expect(requested.status).toBe(200);
    const { uploadUrl, storagePath } = (await requested.json()).data;
    expect(storagePath).toBe('projects/wsp_main/prj_docs/docs/specs/spec one.md');
    expect(uploadUrl.startsWith(`${origin}/storage/objects/`)).toBe(true);

    const put = await fetch(uploadUrl, {
      method: 'PUT',
      headers: { 'content-type': 'text/markdown' },
      body: bytes,
    });
    expect(put.status).toBe(200);

    const synced = await api('POST', '/projects/prj_docs/files/sync');
    expect(synced.status).toBe(200);
    expect((await synced.json()).data).toEqual({ added: 1, removed: 0, updated: 0 });

    const listed = (await (await api('GET', '/projects/prj_docs/files')).json()).data;
    expect(listed.pagination).toEqual({ total: 1, limit: 1, offset: 0 });
    const file = listed.files[0];
    expect(file).toEqual({
      id: expect.stringMatching(/^fil_/),
      projectId: 'prj_docs',
      name: 'spec one.md',
      path: 'docs/specs/spec one.md',
      mimeType: 'text/markdown',
      sizeBytes: bytes.length,
      type: 'uploaded',
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      syncedAt: expect.any(String),
      indexStatus: expect.stringMatching(/^(pending|indexing|indexed)$/),
      indexError: null,
    });

    const tree = (await (await api('GET', '/projects/prj_docs/files?tree=true')).json()).data.tree;
    expect(tree).toEqual([
      {
        kind: 'folder',
        name: 'docs',
        path: 'docs',
        children: [
          { kind: 'folder', name: 'specs', path: 'docs/specs', children: [{ kind: 'file', ...file }] },
        ],
      },
    ]);

    const download = (await (await api('GET', `/projects/prj_docs/files/${file.id}/download`)).json()).data;
    expect(download).toMatchObject({
      filename: 'spec one.md',
      contentType: 'text/markdown',
      sizeBytes: bytes.length,
    });
    const got = await fetch(download.downloadUrl);
    expect(got.status).toBe(200);
    expect(got.headers.get('content-type')).toBe('text/markdown');
    expect(got.headers.get('content-length')).toBe(String(bytes.length));
    expect(got.headers.get('content-disposition')).toBe(
      `attachment; filename="spec one.md"; filename*=UTF-8''spec%20one.md`,
    );
    expect(Buffer.from(await got.arrayBuffer()).equals(bytes)).toBe(true);

    const partial = await fetch(download.downloadUrl, { headers: { range: 'bytes=2-5' } });
    expect(partial.status).toBe(206);
    expect(partial.headers.get('content-range')).toBe(`bytes 2-5/${bytes.length}`);
    expect(await partial.text()).toBe('Spec');

    const deleted = await api('DELETE', `/projects/prj_docs/files/${file.id}`);
    expect(deleted.status).toBe(200);
    expect((await deleted.json()).data).toEqual({ deleted: true });
    expect((await api('DELETE', `/projects/prj_docs/files/${file.id}`)).status).toBe(404);
    expect((await fetch(download.downloadUrl)).status).toBe(404);

    const again = await api('POST', '/projects/prj_docs/files/sync');
    expect((await again.json()).data).toEqual({ added: 0, removed: 0, updated: 0 });
    expect((await (await api('GET', '/projects/prj_docs/files')).json()).data.files).toEqual([]);
  });
});
