import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deleteProjectFileRow } from '../../src/db/repositories/project-files.js';
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

/**
 * Three indexed files of project `P`: `word`'s one chunk, `rare`'s one chunk, and `common`, whose
 * NEW_MATCHES chunks make `common.word` a word past the rank budget; answers `common`'s file id.
 */
async function wordMadeCommon(
  db: Parameters<typeof addIndexedFile>[0],
  P: { workspaceId: string; projectId: string },
  files: {
    word: { path: string; text: string };
    rare: { path: string; text: string };
    common: { path: string; word: string };
  },
) {
  await addIndexedFile(db, { ...P, path: files.word.path, text: 'x', chunks: [{ text: files.word.text }] });
  await addIndexedFile(db, { ...P, path: files.rare.path, text: 'x', chunks: [{ text: files.rare.text }] });
  return addIndexedFile(db, {
    ...P,
    path: files.common.path,
    text: 'x',
    chunks: Array.from({ length: NEW_MATCHES }, (_, i) => ({ text: `${files.common.word} line ${i}` })),
  });
}

/** docs/knowledge.md, "Search": a word in more chunks than the budget is ranked on its newest matches. */
describe(`search's rank budget (${engineName})`, () => {
  it('ranks only the newest matches of a word past the budget, whether or not ANALYZE has seen it', async () => {
    const hits = await searchProject(t.env.database.db, { ...DOCS, query: 'zebra', limit: 5 });
    // Ranking every match put old.md first; past the budget it is not among the chunks ranked.
    expect(hits.map((hit) => hit.path)).toEqual(['new.md', 'new.md', 'new.md']);
  });

  /** The project the deletion cases write to, and the paths a query finds in it. */
  const P = { workspaceId: 'wsp_main', projectId: 'prj_2019' };
  const paths = async (query: string) =>
    (await searchProject(t.env.database.db, { ...P, query, limit: 5 })).map((hit) => hit.path).sort();

  // A count past the budget is cached for a minute: deleting the chunks must not leave the word
  // dropped from queries meanwhile, with its remaining matches.
  it('searches a word again at once when the chunks that made it common are deleted', async () => {
    const db = t.env.database.db;
    const big = await wordMadeCommon(db, P, {
      word: { path: 'old.md', text: 'wombat burrow diagram' },
      rare: { path: 'rare.md', text: 'platypus venom' },
      common: { path: 'big.md', word: 'wombat' },
    });
    expect(await paths('wombat platypus')).toEqual(['rare.md']);
    await db.deleteFrom('knowledge_chunks').where('file_id', '=', big).execute();
    await db.deleteFrom('project_files').where('id', '=', big).execute();
    expect(await paths('wombat platypus')).toEqual(['old.md', 'rare.md']);
  }, 60_000);

  // As the API deletes a file (or a project): the record alone, its chunks going with it by the
  // foreign key, with no write that names the chunks.
  it('searches a word again at once when the file that made it common is deleted, its chunks with it', async () => {
    const db = t.env.database.db;
    const big = await wordMadeCommon(db, P, {
      word: { path: 'den.md', text: 'numbat termite den' },
      rare: { path: 'claws.md', text: 'echidna claws' },
      common: { path: 'numbats.md', word: 'numbat' },
    });
    expect(await paths('numbat echidna')).toEqual(['claws.md']);
    expect(await deleteProjectFileRow(db, P.workspaceId, P.projectId, big)).toBe(true);
    expect(await paths('numbat echidna')).toEqual(['claws.md', 'den.md']);
  }, 60_000);
});
