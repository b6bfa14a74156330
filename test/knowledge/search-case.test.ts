import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { searchProject } from '../../src/knowledge/search.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';
import { textFile } from './files.js';
import { indexPending, putAndSync, type TestApp } from './helpers.js';

let t: TestApp;
const WS = 'wsp_main';
const PROJECT = 'prj_docs';
let stopIndexer: () => Promise<void>;

beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
  await putAndSync(t, WS, PROJECT, [
    // Greek written in capitals (a title, an acronym): its last letter is Σ.
    textFile('el/title.txt', 'ΟΔΗΓΟΣ ΕΓΚΑΤΑΣΤΑΣΗΣ για το σύστημα.'),
    textFile('el/lower.txt', 'Ο οδηγός εγκατάστασης εξηγεί τα βήματα.'),
  ]);
  stopIndexer = await indexPending(t);
});
afterAll(async () => {
  await stopIndexer?.();
  await t?.close();
});

const paths = async (query: string) =>
  (await searchProject(t.env.database.db, { projectId: PROJECT, query, limit: 10 }))
    .map((hit) => hit.path)
    .sort();

/** docs/knowledge.md, "How words are matched": case is folded, the same on both engines. */
describe(`search of Greek words ending in sigma (${engineName})`, () => {
  it('finds a word written in capitals by itself and in lower case (final ς)', async () => {
    // The query is the document's very word.
    expect(await paths('ΕΓΚΑΤΑΣΤΑΣΗΣ')).toEqual(['el/lower.txt', 'el/title.txt']);
    // And in lower case, as a user types it (final ς).
    expect(await paths('εγκατάστασης')).toEqual(['el/lower.txt', 'el/title.txt']);
  });
});
