import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { waitForIndexIdle } from '../../src/knowledge/indexer.js';
import { forgetSearchStatistics, searchProject, sqliteProjectMatch } from '../../src/knowledge/search.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { textFile } from './files.js';
import { indexPending, putAndSync, type TestApp } from './helpers.js';
import { addIndexedFile } from './turn-fixtures.js';

let t: TestApp;
let stopIndexer: () => Promise<void>;
const owner = { 'x-service-api-key': KEYS.mainOwner };

beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
  await putAndSync(t, 'wsp_main', 'prj_docs', [
    textFile('guide.md', '# Guide\n\nThe secret ingredient of the house soup is saffron.'),
    textFile('other.md', 'Nothing about soup here; this is about bicycles.'),
  ]);
  await putAndSync(t, 'wsp_other', 'prj_other', [
    textFile('other-tenant.md', 'Saffron from another tenant.'),
    textFile('code-name.md', 'Project zanzibarcode launches in May.'),
  ]);
  // Soup in most chunks of the whole database, though in no other tenant's.
  await putAndSync(t, 'wsp_main', 'prj_2019', [
    textFile('soup-1.md', 'Soup of the day, 2019.'),
    textFile('soup-2.md', 'Soup recipes, 2019.'),
  ]);
  stopIndexer = await indexPending(t, 110_000);
}, 120_000);
afterAll(async () => {
  await stopIndexer();
  await t.close();
});

const get = (url: string, headers: Record<string, string> = owner) =>
  t.app.inject({ method: 'GET', url, headers });

describe(`project index and search routes (${engineName})`, () => {
  it('searches a project: best chunk first, with file, heading and pages', async () => {
    const res = await get('/v1/projects/prj_docs/search?q=saffron%20soup');
    expect(res.statusCode).toBe(200);
    const results = res.json().data.results;
    expect(results[0]).toMatchObject({ path: 'guide.md', name: 'guide.md', heading: 'Guide', pages: null });
    expect(results[0].text).toContain('saffron');
    expect(results[0].fileId).toMatch(/^fil_/);
    expect(typeof results[0].score).toBe('number');
    // Another tenant's file with the same word is never found.
    expect(results.map((r: { path: string }) => r.path)).not.toContain('other-tenant.md');
  });

  it('answers query syntax and stop words as plain text', async () => {
    for (const q of ['"saffron', 'saffron AND OR NOT', 'saffron*', 'NEAR(saffron soup)', "sa'ffron:*"]) {
      const res = await get(`/v1/projects/prj_docs/search?q=${encodeURIComponent(q)}`);
      expect(res.statusCode, q).toBe(200);
    }
    const stop = await get('/v1/projects/prj_docs/search?q=the%20of%20and');
    expect(stop.json().data.results).toEqual([]);
  });

  it('honours limit and validates q and limit', async () => {
    expect((await get('/v1/projects/prj_docs/search?q=soup&limit=1')).json().data.results).toHaveLength(1);
    for (const query of [
      '',
      'q=',
      `q=${'a'.repeat(1001)}`,
      'q=soup&limit=0',
      'q=soup&limit=51',
      'q=soup&limit=x',
      'q=a&q=b',
    ]) {
      const res = await get(`/v1/projects/prj_docs/search?${query}`);
      expect(res.statusCode, query).toBe(400);
      expect(res.json().code, `${query} ${res.body}`).toBe('bad_request');
    }
    expect((await get(`/v1/projects/prj_docs/search?q=${'a'.repeat(1000)}`)).statusCode).toBe(200);
  });

  it('is 404 for another tenant, a missing project, and 401 without a key', async () => {
    for (const project of ['prj_other', 'prj_globex', 'prj_missing']) {
      for (const path of ['search?q=saffron', 'index']) {
        const res = await get(`/v1/projects/${project}/${path}`);
        expect(res.statusCode, `${project} ${path}`).toBe(404);
        expect(res.json().code, res.body).toBe('not_found');
      }
      const rebuild = await t.app.inject({
        method: 'POST',
        url: `/v1/projects/${project}/index/rebuild`,
        headers: owner,
      });
      expect(rebuild.statusCode).toBe(404);
    }
    const other = await get('/v1/projects/prj_docs/search?q=saffron', {
      'x-service-api-key': KEYS.otherWorkspace,
    });
    expect(other.statusCode).toBe(404);
    expect((await get('/v1/projects/prj_docs/search?q=saffron', {})).statusCode).toBe(401);
    // The other workspace finds its own file only.
    const own = await get('/v1/projects/prj_other/search?q=saffron', {
      'x-service-api-key': KEYS.otherWorkspace,
    });
    expect(own.json().data.results.map((r: { path: string }) => r.path)).toEqual(['other-tenant.md']);
  });

  it("answers the same whether or not a query's word is in another tenant's files", async () => {
    // Both words are absent from prj_docs: which terms a search keeps must not depend on other
    // projects (a word only they hold was once kept as the rarest, dropping the caller's matches).
    const paths = async (q: string) =>
      (await get(`/v1/projects/prj_docs/search?q=${encodeURIComponent(q)}`))
        .json()
        .data.results.map((r: { path: string }) => r.path)
        .sort();
    expect(await paths('soup')).toEqual(['guide.md', 'other.md']);
    expect(await paths('zanzibarcode soup')).toEqual(await paths('nosuchwordanywhere soup'));
    expect(await paths('zanzibarcode soup')).toEqual(['guide.md', 'other.md']);
  });

  it("keeps a query's word that is common in another tenant's files only", async () => {
    // Soup in nearly every chunk of the database, all of them another tenant's: PostgreSQL's
    // table-wide statistics (after ANALYZE) listed it as common, and it was dropped from this
    // project's query, losing b.md, which holds soup but not saffron.
    const db = t.env.database.db;
    const globex = { workspaceId: 'wsp_globex', projectId: 'prj_globex' };
    await addIndexedFile(db, { ...globex, path: 'a.md', text: 'The house recipe uses saffron.' });
    await addIndexedFile(db, { ...globex, path: 'b.md', text: 'A bowl of soup, nothing else.' });
    await addIndexedFile(db, {
      workspaceId: 'wsp_other',
      projectId: 'prj_other',
      path: 'tomato.md',
      text: 'x',
      chunks: Array.from({ length: 400 }, (_, i) => ({ text: `Tomato soup paragraph ${i}.` })),
    });
    if (engineName === 'postgres') await sql`analyze knowledge_chunks`.execute(db);
    forgetSearchStatistics(db);
    const results = await searchProject(db, { ...globex, query: 'saffron soup', limit: 10 });
    expect(results.map((result) => result.path).sort()).toEqual(['a.md', 'b.md']);
  });

  it.runIf(engineName === 'sqlite')(
    "visits only the project's own chunks in the full-text index, with other tenants' chunks between its ids",
    async () => {
      // prj_globex's first chunks are older than the 400 soup chunks of prj_other above, this one
      // newer: its ids span theirs. The search's full-text query hands SQLite the project's
      // matches alone (FTS5 intersects the project's doclist with the words'); it walked every
      // tenant's matches in the id range, and checked each one's project (a 20-word query over
      // 100,000 chunks between: seconds, the event loop blocked).
      const db = t.env.database.db;
      const globex = { workspaceId: 'wsp_globex', projectId: 'prj_globex' };
      await addIndexedFile(db, { ...globex, path: 'c.md', text: 'Tomato soup, in the end.' });
      const visited = async (words: string) =>
        Number(
          (
            await sql<{ n: number }>`select count(*) as n from knowledge_chunks_fts
              where knowledge_chunks_fts match ${sqliteProjectMatch('prj_globex', words)}`.execute(db)
          ).rows[0]!.n,
        );
      expect(await visited('"soup"')).toBe(2);
      expect(await visited('"tomato" OR "paragraph" OR "soup"')).toBe(2);
      expect(await visited('"saffron"')).toBe(1);
      const results = await searchProject(db, { ...globex, query: 'soup', limit: 10 });
      expect(results.map((result) => result.path).sort()).toEqual(['b.md', 'c.md']);
    },
  );

  it('summarizes the index and shows indexStatus on files and tree nodes', async () => {
    const summary = await get('/v1/projects/prj_docs/index');
    expect(summary.statusCode).toBe(200);
    expect(summary.json().data).toEqual({
      files: { pending: 0, indexing: 0, indexed: 2, failed: 0, unsupported: 0 },
      chunks: 2,
      embeddingModel: null,
      vectors: 'off',
      vectorsError: null,
    });
    const list = await get('/v1/projects/prj_docs/files');
    for (const file of list.json().data.files)
      expect(file).toMatchObject({ indexStatus: 'indexed', indexError: null });
    const tree = await get('/v1/projects/prj_docs/files?tree=true');
    for (const node of tree.json().data.tree)
      expect(node).toMatchObject({ kind: 'file', indexStatus: 'indexed' });
  });

  it('rebuilds: files pending again (202), still searchable, indexed again', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/projects/prj_docs/index/rebuild',
      headers: owner,
    });
    expect(res.statusCode).toBe(202);
    expect(res.json().data).toEqual({ files: 2 });
    expect((await get('/v1/projects/prj_docs/search?q=saffron')).json().data.results).not.toEqual([]);
    await waitForIndexIdle(t.env.database.db, { projectId: 'prj_docs' });
    expect((await get('/v1/projects/prj_docs/index')).json().data.files.indexed).toBe(2);
    expect((await get('/v1/projects/prj_docs/index')).json().data.chunks).toBe(2);
  });

  it('documents the routes in OpenAPI with operation ids', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    expect(doc.paths['/v1/projects/{projectId}/search'].get.operationId).toBe('searchProject');
    expect(doc.paths['/v1/projects/{projectId}/index'].get.operationId).toBe('getProjectIndex');
    expect(doc.paths['/v1/projects/{projectId}/index/rebuild'].post.operationId).toBe('rebuildProjectIndex');
  });
});
