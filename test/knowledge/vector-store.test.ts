import { afterAll, beforeAll, expect, it } from 'vitest';
import { waitForIndexIdle } from '../../src/knowledge/indexer.js';
import { chunksLackingVectors, storeVectors } from '../../src/knowledge/vector-store.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';
import { textFile } from './files.js';
import { putAndSync, startTestIndexer, type TestApp } from './helpers.js';

let t: TestApp;
let stop: () => Promise<void>;
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
  const indexer = startTestIndexer(t);
  stop = () => indexer.stop();
}, 60_000);
afterAll(async () => {
  await stop();
  await t.close();
});

it(`gives no vector to a chunk that took the id of the one embedded meanwhile (${engineName})`, async () => {
  const db = t.env.database.db;
  await putAndSync(t, 'wsp_main', 'prj_docs', [textFile('a.txt', 'The old text about apples.')]);
  await waitForIndexIdle(db);
  // The embedder reads the chunks lacking a vector and asks the provider…
  const [embedded] = await chunksLackingVectors(db, 'wsp_main', 'model-1', 64);
  expect(embedded).toBeDefined();
  // …meanwhile the file is deleted and another tenant's file indexed (SQLite reuses the id).
  await db
    .deleteFrom('project_files')
    .where('path', '=', 'a.txt')
    .where('project_id', '=', 'prj_docs')
    .execute();
  await putAndSync(t, 'wsp_other', 'prj_other', [textFile('b.txt', 'Another tenant: bananas.')]);
  await waitForIndexIdle(db);
  // The provider answers: "apples" must not become the vector of the bananas chunk.
  expect(await storeVectors(db, 'model-1', [{ chunk: embedded!, vector: [1, 0, 0] }])).toBe(0);
  expect(await db.selectFrom('knowledge_vectors').select('chunk_id').execute()).toEqual([]);
});
