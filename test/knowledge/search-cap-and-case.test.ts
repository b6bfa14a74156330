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
    // A long file in which every chunk is about zebras, and a short one that mentions one.
    textFile(
      'zoo/zebra-handbook.txt',
      Array.from(
        { length: 1_000 },
        (_, i) => `Paragraph ${i}: the zebra grazes; a zebra herd moves on; every zebra has its own stripes.`,
      ).join('\n\n'),
    ),
    textFile(
      'zoo/field-notes.txt',
      `Field notes from the river camp. ${'Rain fell through the morning and the tents held up well. '.repeat(20)}One zebra was seen near the water at dusk.`,
    ),
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

/** docs/knowledge.md, "Search": the best chunks first, at most 3 of one file. */
describe(`one long file and the per-file cap (${engineName})`, () => {
  it('does not hide the other matching files behind a file capped at 3', async () => {
    const hits = await searchProject(t.env.database.db, { projectId: PROJECT, query: 'zebra', limit: 10 });
    const files = hits.map((hit) => hit.path);
    // The handbook's chunks rank first, 3 of them at most; the field notes match too and there is room.
    expect(files.filter((path) => path === 'zoo/zebra-handbook.txt')).toHaveLength(3);
    expect(files).toContain('zoo/field-notes.txt');
  });
});
