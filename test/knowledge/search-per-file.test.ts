import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { searchProject } from '../../src/knowledge/search.js';
import { createTestApp, engineName, type TestApp } from '../helpers/app.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';
import { addIndexedFile, filler } from './turn-fixtures.js';

let t: TestApp;
const DOCS = { workspaceId: 'wsp_main', projectId: 'prj_docs' };
const SHORT_FILES = 5;

beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
  // One long file whose every chunk matches far better than any other file's (the word in its
  // heading and all through its text), and short files that mention the word once.
  await addIndexedFile(t.env.database.db, {
    ...DOCS,
    path: 'manual/long.md',
    text: 'x',
    chunks: Array.from({ length: 50 }, (_, i) => ({
      heading: 'Zanzibar',
      text: `zanzibar zanzibar zanzibar part ${i}. ${filler(300 + i, 300)}`,
    })),
  });
  for (let i = 0; i < SHORT_FILES; i++) {
    await addIndexedFile(t.env.database.db, {
      ...DOCS,
      path: `notes/short-${i}.md`,
      text: `${filler(400 + i, 1_200)} A trip to zanzibar. ${filler(500 + i, 1_200)}`,
    });
  }
});
afterAll(async () => {
  await t?.close();
});

const search = (limit: number) => searchProject(t.env.database.db, { ...DOCS, query: 'zanzibar', limit });

/** docs/knowledge.md, "Search": at most 3 chunks of one file, the other files' matches after them. */
describe(`search's per-file cap (${engineName})`, () => {
  it("answers other files' matches when one file holds every best chunk", async () => {
    // The long file's 50 chunks are the best 4 × limit candidates, for either limit here.
    const hits = await search(4);
    expect(hits.map((hit) => hit.path)).toEqual([
      'manual/long.md',
      'manual/long.md',
      'manual/long.md',
      expect.stringMatching(/^notes\/short-\d\.md$/),
    ]);
  });

  it('fills the limit from as many files as match, best first', async () => {
    const hits = await search(10);
    const paths = hits.map((hit) => hit.path);
    expect(paths.slice(0, 3)).toEqual(['manual/long.md', 'manual/long.md', 'manual/long.md']);
    expect(paths.slice(3).sort()).toEqual(
      Array.from({ length: SHORT_FILES }, (_, i) => `notes/short-${i}.md`),
    );
    const scores = hits.map((hit) => hit.score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
  });
});
