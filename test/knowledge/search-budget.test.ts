import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { forgetSearchStatistics, searchProject } from '../../src/knowledge/search.js';
import { createTestApp, engineName, type TestApp } from '../helpers/app.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';
import { addIndexedFile } from './turn-fixtures.js';

let t: TestApp;
const DOCS = { workspaceId: 'wsp_main', projectId: 'prj_docs' };
/** Past both engines' rank budgets (2,000 chunks on SQLite, 1,000 on PostgreSQL). */
const NEW_MATCHES = 2_100;

beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
  // The oldest chunk matches best by far; thousands of newer ones match once each. No ANALYZE
  // runs: PostgreSQL's statistics have not seen the word.
  await addIndexedFile(t.env.database.db, {
    ...DOCS,
    path: 'old.md',
    text: 'x',
    chunks: [{ heading: 'Zebra', text: 'zebra zebra zebra zebra zebra' }],
  });
  await addIndexedFile(t.env.database.db, {
    ...DOCS,
    path: 'new.md',
    text: 'x',
    chunks: Array.from({ length: NEW_MATCHES }, (_, i) => ({ text: `A zebra, number ${i}.` })),
  });
  forgetSearchStatistics(t.env.database.db);
}, 60_000);
afterAll(async () => {
  await t?.close();
});

/** docs/knowledge.md, "Search": a word in more chunks than the budget is ranked on its newest matches. */
describe(`search's rank budget (${engineName})`, () => {
  it('ranks only the newest matches of a word past the budget, whether or not ANALYZE has seen it', async () => {
    const hits = await searchProject(t.env.database.db, { ...DOCS, query: 'zebra', limit: 5 });
    // Ranking every match put old.md first; past the budget it is not among the chunks ranked.
    expect(hits.map((hit) => hit.path)).toEqual(['new.md', 'new.md', 'new.md']);
  });
});
