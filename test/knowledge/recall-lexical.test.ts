import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitForIndexIdle } from '../../src/knowledge/indexer.js';
import { sql } from 'kysely';
import { queryTerms, searchProject } from '../../src/knowledge/search.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';
import { putAndSync, startTestIndexer, type TestApp } from './helpers.js';
import { buildRetrievalSet, type RetrievalSet } from './retrieval-set.js';

const K = 8;
let t: TestApp;
let set: RetrievalSet;

beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
  set = await buildRetrievalSet();
  await putAndSync(t, 'wsp_main', 'prj_docs', set.files);
  const indexer = startTestIndexer(t);
  await waitForIndexIdle(t.env.database.db, { timeoutMs: 170_000 });
  await indexer.stop();
}, 180_000);
afterAll(() => t?.close());

describe(`lexical retrieval on the labelled set (${engineName})`, () => {
  it(`finds the answering file in the top ${K} for at least 85% of the questions`, async () => {
    const statuses = await t.env.database.db
      .selectFrom('project_files')
      .select(['path', 'index_status'])
      .execute();
    expect(statuses.filter((row) => row.index_status !== 'indexed')).toEqual([]);
    let found = 0;
    const missed: string[] = [];
    for (const { question, expectedPath } of set.questions) {
      const results = await searchProject(t.env.database.db, {
        projectId: 'prj_docs',
        query: question,
        limit: K,
      });
      if (results.some((result) => result.path === expectedPath)) found++;
      else missed.push(`${question} → ${expectedPath}`);
    }
    const recall = found / set.questions.length;
    console.log(
      `lexical recall@${K} (${engineName}): ${recall.toFixed(3)} (${found}/${set.questions.length} questions, ${set.files.length} files)` +
        (missed.length ? `\n  missed:\n  ${missed.join('\n  ')}` : ''),
    );
    expect(set.questions.length).toBeGreaterThanOrEqual(50);
    expect(recall).toBeGreaterThanOrEqual(0.85);
  }, 60_000);

  it.runIf(engineName === 'sqlite')(
    'is far better than an implicit AND of the same words (printed)',
    async () => {
      // The fact the OR-query rests on: a question nearly always has a word its passage lacks.
      let found = 0;
      for (const { question, expectedPath } of set.questions) {
        const terms = queryTerms(question);
        if (terms.length === 0) continue;
        const rows = await sql<{ path: string }>`
        select f.path from knowledge_chunks_fts
        join knowledge_chunks c on c.id = knowledge_chunks_fts.rowid
        join project_files f on f.id = c.file_id
        where knowledge_chunks_fts match ${terms.map((term) => `"${term}"`).join(' AND ')}
        order by bm25(knowledge_chunks_fts) limit ${K}`.execute(t.env.database.db);
        if (rows.rows.some((row) => row.path === expectedPath)) found++;
      }
      const andRecall = found / set.questions.length;
      console.log(`implicit-AND recall@${K} (sqlite, same words): ${andRecall.toFixed(3)}`);
      expect(andRecall).toBeLessThan(0.85);
    },
  );
});
