import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import { buildFileTree } from '../../src/services/project-files.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { filesApi } from './helpers.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
});
afterAll(() => t.close());

async function newProject(name: string, key: string = KEYS.mainOwner): Promise<string> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/v1/projects',
    headers: { 'x-service-api-key': key },
    payload: { name },
  });
  return res.json().data.project.id;
}

/** Records with chosen paths and updatedAt, straight in the database. */
async function insertRecords(
  projectId: string,
  entries: Array<{ path: string; updatedAt?: string; id?: string }>,
  workspaceId = 'wsp_main',
) {
  const rows = entries.map((entry, i) => ({
    id: entry.id ?? newId('fil'),
    workspace_id: workspaceId,
    project_id: projectId,
    name: entry.path.split('/').pop()!,
    path: entry.path,
    mime_type: 'text/plain',
    size_bytes: i + 1,
    etag: `e${i}`,
    type: 'uploaded',
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: entry.updatedAt ?? '2026-01-01T00:00:00.000Z',
    synced_at: '2026-01-01T00:00:00.000Z',
  }));
  await t.env.database.db.insertInto('project_files').values(rows).execute();
  return rows;
}

describe(`GET /v1/projects/{projectId}/files (${engineName})`, () => {
  it('lists newest updatedAt first, then id, and pages with limit and offset', async () => {
    const projectId = await newProject('Paged');
    await insertRecords(projectId, [
      { path: 'old.txt', updatedAt: '2026-01-01T00:00:00.000Z' },
      { path: 'new.txt', updatedAt: '2026-03-01T00:00:00.000Z' },
      { path: 'tie-a.txt', updatedAt: '2026-02-01T00:00:00.000Z', id: 'fil_a' },
      { path: 'tie-b.txt', updatedAt: '2026-02-01T00:00:00.000Z', id: 'fil_b' },
    ]);
    const api = filesApi(t.app, projectId);
    const all = (await api.list()).json().data;
    expect(all.files.map((f: { path: string }) => f.path)).toEqual([
      'new.txt',
      'tie-b.txt',
      'tie-a.txt',
      'old.txt',
    ]);
    expect(all.pagination).toEqual({ total: 4, limit: 4, offset: 0 });
    const page = (await api.list('?limit=2&offset=1')).json().data;
    expect(page.files.map((f: { path: string }) => f.path)).toEqual(['tie-b.txt', 'tie-a.txt']);
    expect(page.pagination).toEqual({ total: 4, limit: 2, offset: 1 });
    const rest = (await api.list('?offset=3')).json().data;
    expect(rest.files.map((f: { path: string }) => f.path)).toEqual(['old.txt']);
    expect(rest.pagination).toEqual({ total: 4, limit: 4, offset: 3 });
    expect((await api.list('?offset=10')).json().data.files).toEqual([]);
  });

  it.each([
    ['limit=0'],
    ['limit=101'],
    ['limit=-1'],
    ['limit=abc'],
    ['limit=1.5'],
    ['offset=-1'],
    ['offset=x'],
    ['tree=maybe'],
  ])('refuses the query %s with 400', async (query) => {
    const res = await filesApi(t.app).list(`?${query}`);
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('bad_request');
  });

  it('returns an empty list with total 0 for a project without files', async () => {
    const projectId = await newProject('Empty');
    expect((await filesApi(t.app, projectId).list()).json().data).toEqual({
      files: [],
      pagination: { total: 0, limit: 0, offset: 0 },
    });
    expect((await filesApi(t.app, projectId).list('?tree=true')).json().data).toEqual({ tree: [] });
  });

  it('with tree=true, nests folders, folders first then files, each by name, ignoring limit and offset', async () => {
    const projectId = await newProject('Tree');
    await insertRecords(projectId, [
      { path: 'zeta.txt' },
      { path: 'Alpha.md' },
      { path: 'docs/specs/api.md' },
      { path: 'docs/readme.md' },
      { path: 'docs/specs/deep/er/x.md' },
      { path: 'assets/logo.png' },
      { path: 'docs/Zed/a.txt' },
    ]);
    const res = await filesApi(t.app, projectId).list('?tree=true&limit=1&offset=5');
    expect(res.statusCode).toBe(200);
    // Ignored means ignored: values the flat list refuses change nothing here.
    for (const query of ['limit=500', 'limit=0', 'offset=-1']) {
      const other = await filesApi(t.app, projectId).list(`?tree=true&${query}`);
      expect(other.statusCode, query).toBe(200);
      expect(other.json(), query).toEqual(res.json());
    }
    type Node = { kind: string; path: string; children?: Node[] };
    const shape = (nodes: Node[]): unknown =>
      nodes.map((n) => (n.kind === 'folder' ? { [`${n.path}/`]: shape(n.children!) } : n.path));
    expect(shape(res.json().data.tree)).toEqual([
      { 'assets/': ['assets/logo.png'] },
      {
        'docs/': [
          {
            'docs/specs/': [
              { 'docs/specs/deep/': [{ 'docs/specs/deep/er/': ['docs/specs/deep/er/x.md'] }] },
              'docs/specs/api.md',
            ],
          },
          { 'docs/Zed/': ['docs/Zed/a.txt'] },
          'docs/readme.md',
        ],
      },
      'Alpha.md',
      'zeta.txt',
    ]);
    const folder = res.json().data.tree[0];
    expect(folder).toMatchObject({ kind: 'folder', name: 'assets', path: 'assets' });
    expect(folder.children[0]).toMatchObject({
      kind: 'file',
      name: 'logo.png',
      path: 'assets/logo.png',
      projectId,
      type: 'uploaded',
    });
    expect(Object.keys(folder.children[0]).sort()).toEqual([
      'createdAt',
      'id',
      'indexError',
      'indexStatus',
      'kind',
      'mimeType',
      'name',
      'path',
      'projectId',
      'sizeBytes',
      'syncedAt',
      'type',
      'updatedAt',
    ]);
  });

  it('builds the tree from paths alone (unit)', () => {
    const file = (p: string) => ({
      id: p,
      projectId: 'p',
      name: p.split('/').pop()!,
      path: p,
      mimeType: 'a/b',
      sizeBytes: 0,
      type: 'uploaded',
      createdAt: '',
      updatedAt: '',
      syncedAt: '',
      indexStatus: 'pending' as const,
      indexError: null,
    });
    const tree = buildFileTree([file('b/c.txt'), file('a.txt'), file('b/a/d.txt')]);
    expect(tree.map((n) => `${n.kind}:${n.path}`)).toEqual(['folder:b', 'file:a.txt']);
  });

  it('orders names case-insensitively as listings do: NFC, lower-cased, then code point by code point (unit)', () => {
    const file = (p: string) => ({
      id: p,
      projectId: 'p',
      name: p,
      path: p,
      mimeType: 'a/b',
      sizeBytes: 0,
      type: 'uploaded',
      createdAt: '',
      updatedAt: '',
      syncedAt: '',
      indexStatus: 'pending' as const,
      indexError: null,
    });
    const order = (paths: string[]) => buildFileTree(paths.map(file)).map((n) => n.path);
    // U+FF5A comes before U+1F600, though its UTF-16 unit (0xFF5A) is above the emoji's first (0xD83D).
    expect(order(['\u{1F600}.txt', '\uFF5A.txt'])).toEqual(['\uFF5A.txt', '\u{1F600}.txt']);
    expect(order(['\u{1F600}.txt', '\uFF3A.txt'])).toEqual(['\uFF3A.txt', '\u{1F600}.txt']);
    // A decomposed é (e + U+0301) is the letter é: "éb" after "éa", not before it as "e…".
    expect(order(['e\u0301b.txt', '\u00e9a.txt'])).toEqual(['\u00e9a.txt', 'e\u0301b.txt']);
    // Ties (the same name but for case) by code point: upper case first.
    expect(order(['readme.md', 'README.md', 'Readme.md'])).toEqual(['README.md', 'Readme.md', 'readme.md']);
  });

  it('answers 404 for projects of another workspace or organization, also to an organization key', async () => {
    for (const projectId of ['prj_other', 'prj_globex', 'prj_missing']) {
      expect((await filesApi(t.app, projectId).list()).statusCode, projectId).toBe(404);
      expect((await filesApi(t.app, projectId).list('?tree=true')).statusCode, projectId).toBe(404);
    }
    const orgKey = filesApi(t.app, 'prj_other', {
      'x-service-api-key': KEYS.acmeOrg,
      'x-workspace-id': 'wsp_main',
    });
    expect((await orgKey.list()).statusCode).toBe(404);
  });
});

describe(`download URL and delete (${engineName})`, () => {
  it('answers 404 for a file id of another project, workspace or organization', async () => {
    const mine = await newProject('Mine');
    const [own] = await insertRecords(mine, [{ path: 'own.txt' }]);
    const [foreign] = await insertRecords('prj_other', [{ path: 'foreign.txt' }], 'wsp_other');
    const [globex] = await insertRecords('prj_globex', [{ path: 'globex.txt' }], 'wsp_globex');
    const api = filesApi(t.app, mine);
    for (const fileId of [foreign!.id, globex!.id, 'fil_missing']) {
      expect((await api.download(fileId)).statusCode, fileId).toBe(404);
      expect((await api.remove(fileId)).statusCode, fileId).toBe(404);
    }
    // The right file id under another project of the same workspace is not found either.
    const elsewhere = filesApi(t.app, 'prj_docs');
    expect((await elsewhere.download(own!.id)).statusCode).toBe(404);
    expect((await elsewhere.remove(own!.id)).statusCode).toBe(404);
    // And the other workspace's own key cannot reach ours.
    const other = filesApi(t.app, mine, { 'x-service-api-key': KEYS.otherWorkspace });
    expect((await other.download(own!.id)).statusCode).toBe(404);
    expect((await other.remove(own!.id)).statusCode).toBe(404);
    expect((await api.download(own!.id)).statusCode).toBe(200);
  });

  it('deletes the object and the record; a second delete is 404', async () => {
    const projectId = await newProject('Delete');
    const key = `projects/wsp_main/${projectId}/d/x.txt`;
    await t.store.put(key, Readable.from([Buffer.from('x')]), { contentType: 'text/plain' });
    await filesApi(t.app, projectId).sync();
    const [file] = (await filesApi(t.app, projectId).list()).json().data.files;
    const first = await filesApi(t.app, projectId).remove(file.id);
    expect(first.statusCode).toBe(200);
    expect(first.json()).toEqual({ data: { deleted: true } });
    expect(await t.store.head(key)).toBeNull();
    expect((await filesApi(t.app, projectId).remove(file.id)).statusCode).toBe(404);
    expect((await filesApi(t.app, projectId).download(file.id)).statusCode).toBe(404);
    expect((await filesApi(t.app, projectId).sync()).json().data).toEqual({
      added: 0,
      removed: 0,
      updated: 0,
    });
  });
});
