import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chunkExtraction } from '../../src/knowledge/chunk.js';
import { Embedder } from '../../src/knowledge/embedder.js';
import { extractInProcess } from '../../src/knowledge/extract/index.js';
import { searchProject } from '../../src/knowledge/search.js';
import { attachKnowledgeVectors, KnowledgeVectors } from '../../src/knowledge/vectors.js';
import { ModelRegistry } from '../../src/models/registry.js';
import { applyFixture, createTestEnv, engineName, type TestEnv } from '../helpers/app.js';
import { type FakeEmbeddings, startFakeEmbeddings } from '../helpers/fake-embeddings.js';
import { buildRetrievalSet, type RetrievalSet } from './retrieval-set.js';
import { addIndexedFile } from './turn-fixtures.js';

const RECALL_AT = 8;

function setupYaml(baseURL: string) {
  return `
providers:
  - { id: fake, type: openai-compatible, baseURL: "${baseURL}" }
models:
  - { id: hashed, provider: fake, model: hash-1024, kind: embedding }
organizations:
  - id: org_r
    name: Recall
    users: [{ id: usr_r, name: R, email: r@recall.test }]
    workspaces:
      - id: wsp_r
        name: R
        members: [{ user: usr_r, role: owner }]
        embeddingModel: hashed
        projects:
          - { id: prj_r, name: Halcyon }
`;
}

/** The labelled set's files, extracted and chunked as the indexer does, stored as indexed. */
async function indexSet(env: TestEnv, set: RetrievalSet) {
  for (const file of set.files) {
    const extraction = await extractInProcess(file);
    if (extraction.status !== 'ok') throw new Error(`${file.path}: ${JSON.stringify(extraction)}`);
    await addIndexedFile(env.database.db, {
      workspaceId: 'wsp_r',
      projectId: 'prj_r',
      path: file.path,
      mimeType: file.mediaType,
      text: extraction.sections.map((section) => section.text).join('\n\n'),
      chunks: chunkExtraction(extraction),
      format: extraction.format,
    });
  }
}

/** Share of questions whose labelled file is among the first RECALL_AT results. */
async function recall(env: TestEnv, set: RetrievalSet): Promise<{ recall: number; missed: string[] }> {
  const missed: string[] = [];
  for (const question of set.questions) {
    const results = await searchProject(env.database.db, {
      projectId: 'prj_r',
      workspaceId: 'wsp_r',
      query: question.question,
      limit: RECALL_AT,
    });
    if (!results.some((result) => result.path === question.expectedPath)) missed.push(question.question);
  }
  return { recall: 1 - missed.length / set.questions.length, missed };
}

describe(`hybrid recall on the labelled retrieval set (${engineName})`, () => {
  let env: TestEnv;
  let fake: FakeEmbeddings;
  let set: RetrievalSet;

  beforeAll(async () => {
    env = await createTestEnv();
    fake = await startFakeEmbeddings();
    await applyFixture(env, setupYaml(fake.baseURL));
    set = await buildRetrievalSet();
    await indexSet(env, set);
  });
  afterAll(async () => {
    await env?.close();
    await fake?.close();
  });

  it(`hybrid recall@${RECALL_AT} (deterministic hashed embeddings) is never below lexical`, async () => {
    expect(set.questions.length).toBeGreaterThanOrEqual(50);
    // Lexical first: no vector side is attached to this database yet.
    const lexical = await recall(env, set);

    const vectors = new KnowledgeVectors(env.database.db, new ModelRegistry(env.config));
    attachKnowledgeVectors(vectors);
    const support = await vectors.support();
    await new Embedder(vectors, { processId: 'prc_recall', requestTimeoutMs: 10_000 }).runUntilIdle();
    const summary = await vectors.summary('wsp_r', 'prj_r');
    expect(summary.vectors).toBe(support.available ? 'ready' : 'unavailable');
    const hybrid = await recall(env, set);

    console.log(
      `recall@${RECALL_AT} on ${set.questions.length} questions (${engineName}): lexical ${lexical.recall.toFixed(3)}, ` +
        `hybrid ${hybrid.recall.toFixed(3)}${support.available ? '' : ' (vectors unavailable: hybrid is lexical)'}`,
    );
    if (hybrid.missed.length > 0) console.log(`hybrid missed:\n  ${hybrid.missed.join('\n  ')}`);
    expect(hybrid.recall).toBeGreaterThanOrEqual(lexical.recall);
  });
});
