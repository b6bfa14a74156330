import { addIndexedFile as addIndexedFileWithChunks } from './turn-fixtures.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Embedder } from '../../src/knowledge/embedder.js';
import { searchProject } from '../../src/knowledge/search.js';
import { attachKnowledgeVectors, KnowledgeVectors } from '../../src/knowledge/vectors.js';
import { embeddingWords } from '../../src/models/echo-embedding.js';
import { ModelRegistry } from '../../src/models/registry.js';
import { applyFixture, createTestEnv, engineName, type TestEnv } from '../helpers/app.js';
import { type FakeEmbeddings, startFakeEmbeddings } from '../helpers/fake-embeddings.js';

/** A workspace whose embedding model runs on the fake `/v1/embeddings` server. */
function setupYaml(baseURL: string, embeddingModel: string | null, extraModels = '') {
  return `
providers:
  - { id: fake, type: openai-compatible, baseURL: "${baseURL}", apiKey: fake-key }
models:
  - { id: embed-a, provider: fake, model: hash-256, kind: embedding, pricing: { inputPerMTok: 0.02 } }
  - { id: embed-b, provider: fake, model: hash-64, kind: embedding }
${extraModels}
organizations:
  - id: org_v
    name: Vectors
    users: [{ id: usr_v, name: V, email: v@vectors.test }]
    workspaces:
      - id: wsp_v
        name: V
        members: [{ user: usr_v, role: owner }]
        embeddingModel: ${embeddingModel ?? 'null'}
        projects:
          - { id: prj_v, name: Knowledge }
      - id: wsp_w
        name: W
        members: [{ user: usr_v, role: owner }]
        projects:
          - { id: prj_w, name: Other }
`;
}

let fileCounter = 0;
/** A project file record with its chunks (one per text), as the indexer leaves them. */
function addIndexedFile(env: TestEnv, projectId: string, workspaceId: string, texts: string[]) {
  return addIndexedFileWithChunks(env.database.db, {
    workspaceId,
    projectId,
    path: `docs/vec-${++fileCounter}.md`,
    text: texts.join(''),
    chunks: texts.map((text) => ({ text })),
  });
}

async function vectorCount(env: TestEnv, modelKeyPrefix: string) {
  const rows = await env.database.db.selectFrom('knowledge_vectors').select('model_key').execute();
  return rows.filter((row) => row.model_key.startsWith(modelKeyPrefix)).length;
}

describe(`embeddings and hybrid search (${engineName})`, () => {
  let env: TestEnv;
  let fake: FakeEmbeddings;
  let vectors: KnowledgeVectors;
  let embedder: Embedder;
  let available: boolean;
  let clockSkewMs = 0;

  beforeAll(async () => {
    env = await createTestEnv();
    fake = await startFakeEmbeddings();
    await applyFixture(env, setupYaml(fake.baseURL, 'embed-a'));
    vectors = new KnowledgeVectors(env.database.db, new ModelRegistry(env.config), { queryTimeoutMs: 3_000 });
    attachKnowledgeVectors(vectors);
    embedder = new Embedder(vectors, {
      processId: 'prc_test',
      requestTimeoutMs: 2_000,
      now: () => new Date(Date.now() + clockSkewMs),
      backoffBaseMs: 1,
      backoffMaxMs: 1,
      batchSize: 3,
    });
    available = (await vectors.support()).available;
    await addIndexedFile(env, 'prj_v', 'wsp_v', [
      'Install the agent on Linux with the package manager.',
      'Configure the proxy server before the first sync.',
      'The quarterly revenue grew by twelve percent.',
      'Rotate the signing secret every ninety days.',
    ]);
    await addIndexedFile(env, 'prj_w', 'wsp_w', ['A chunk of another workspace about the signing secret.']);
  });

  afterAll(async () => {
    await env?.close();
    await fake?.close();
  });

  it('detects vector support: sqlite-vec on SQLite, unavailable on a PostgreSQL without pgvector', async () => {
    const support = await vectors.support();
    if (engineName === 'sqlite') expect(support).toEqual({ available: true, engine: 'sqlite' });
    else if (!support.available) expect(support.reason).toMatch(/vector/);
  });

  it('embeds the chunks lacking a vector in batches, in the background step, and counts the tokens', async () => {
    const before = await vectors.summary('wsp_v', 'prj_v');
    expect(before.embeddingModel).toBe('embed-a');
    if (!available) {
      expect(before.vectors).toBe('unavailable');
      await embedder.runUntilIdle();
      expect(fake.requests).toHaveLength(0);
      return;
    }
    expect(before.vectors).toBe('building');
    await embedder.runUntilIdle();
    // 4 chunks, batches of 3; the other workspace names no embedding model.
    expect(fake.requests.map((r) => r.input.length)).toEqual([3, 1]);
    expect(fake.requests[0]!.model).toBe('hash-256');
    expect(fake.requests[0]!.authorization).toBe('Bearer fake-key');
    expect(await vectorCount(env, 'embed-a|fake|hash-256')).toBe(4);
    expect(await vectors.summary('wsp_v', 'prj_v')).toEqual({
      embeddingModel: 'embed-a',
      vectors: 'ready',
      vectorsError: null,
    });
    expect(await vectors.summary('wsp_w', 'prj_w')).toMatchObject({ embeddingModel: null, vectors: 'off' });

    // One token per word in the fake; the ledger (monthly limits) and the report's rollup both.
    const words = fake.requests.flatMap((r) => r.input).reduce((sum, t) => sum + embeddingWords(t).length, 0);
    const ledger = await env.database.db
      .selectFrom('usage_ledger')
      .selectAll()
      .where('workspace_id', '=', 'wsp_v')
      .executeTakeFirstOrThrow();
    expect(Number(ledger.input_tokens)).toBe(words);
    expect(Number(ledger.cost_usd)).toBeCloseTo((words * 0.02) / 1e6, 12);
    const daily = await env.database.db
      .selectFrom('usage_daily')
      .selectAll()
      .where('workspace_id', '=', 'wsp_v')
      .execute();
    expect(daily).toHaveLength(1);
    expect(daily[0]).toMatchObject({ agent_id: '', model: 'embed-a', requests: 2 });
  });

  it('searches hybrid: a passage lexical search misses is found by its vector, tenant-bound', async () => {
    if (!available) return;
    // "installing" is no word of the index (FTS5 does not stem), but shares word pieces with
    // "Install": only the vector side finds it.
    const results = await searchProject(env.database.db, {
      projectId: 'prj_v',
      workspaceId: 'wsp_v',
      query: 'installing',
      limit: 5,
    });
    expect(results[0]?.text).toBe('Install the agent on Linux with the package manager.');
    // Never another workspace's chunk, whatever the vectors.
    const secret = await searchProject(env.database.db, {
      projectId: 'prj_v',
      query: 'signing secret',
      limit: 10,
    });
    expect(secret.map((r) => r.text)).not.toContain('A chunk of another workspace about the signing secret.');
    expect(secret[0]?.text).toBe('Rotate the signing secret every ninety days.');
    const requests = fake.requests.length;
    await searchProject(env.database.db, { projectId: 'prj_v', query: 'installing', limit: 5 });
    // The query's embedding was cached: no second provider call for the same question.
    expect(fake.requests.length).toBe(requests);
  });

  it('searches by vector a query of stop words only, which has no lexical terms', async () => {
    if (!available) return;
    // "with" and "the" are both stop words; "with" is in one chunk only, which its vector finds.
    const results = await searchProject(env.database.db, {
      projectId: 'prj_v',
      workspaceId: 'wsp_v',
      query: 'with the',
      limit: 5,
    });
    expect(results[0]?.text).toBe('Install the agent on Linux with the package manager.');
  });

  it('keeps files indexed and search lexical while the provider fails, and recovers', async () => {
    if (!available) return;
    fake.mode = 'fail';
    await addIndexedFile(env, 'prj_v', 'wsp_v', ['Backups run nightly at two.']);
    const worked = await embedder.step();
    expect(worked).toBe(false);
    const failing = await vectors.summary('wsp_v', 'prj_v');
    expect(failing.vectors).toBe('building');
    expect(failing.vectorsError).toBe('the embedding provider answered HTTP 500');
    const state = await env.database.db
      .selectFrom('knowledge_embedding_state')
      .selectAll()
      .executeTakeFirstOrThrow();
    expect(state.failures).toBe(1);
    expect(state.next_attempt_at).not.toBeNull();
    // A new question needs a query embedding; the provider fails, so the answer is lexical.
    const results = await searchProject(env.database.db, {
      projectId: 'prj_v',
      query: 'nightly backups',
      limit: 5,
    });
    expect(results[0]?.text).toBe('Backups run nightly at two.');
    const files = await env.database.db.selectFrom('project_files').select('index_status').execute();
    expect(files.every((f) => f.index_status === 'indexed')).toBe(true);

    fake.mode = 'ok';
    // The embedder's clock moves past the (1 ms) backoff instead of the test sleeping through it.
    clockSkewMs += 1_000;
    await embedder.runUntilIdle();
    expect(await vectors.summary('wsp_v', 'prj_v')).toMatchObject({ vectors: 'ready', vectorsError: null });
  });

  it('answers lexically when the provider is too slow for a query', async () => {
    if (!available) return;
    fake.mode = 'stall';
    const results = await searchProject(env.database.db, {
      projectId: 'prj_v',
      query: 'proxy configuration',
      limit: 5,
    });
    expect(results[0]?.text).toBe('Configure the proxy server before the first sync.');
    fake.mode = 'ok';
  });

  it('spends no tokens on a query past the monthly limit: search answers lexically', async () => {
    if (!available) return;
    const db = env.database.db;
    await db.updateTable('workspaces').set({ monthly_tokens: 1 }).where('id', '=', 'wsp_v').execute();
    try {
      const requests = fake.requests.length;
      const results = await searchProject(db, {
        projectId: 'prj_v',
        workspaceId: 'wsp_v',
        query: 'proxy before sync, a question not asked yet',
        limit: 5,
      });
      expect(results[0]?.text).toBe('Configure the proxy server before the first sync.');
      expect(fake.requests.length).toBe(requests);
    } finally {
      await db.updateTable('workspaces').set({ monthly_tokens: null }).where('id', '=', 'wsp_v').execute();
    }
  });

  it('changing the embedding model never mixes vectors: search stays whole, old ones are removed', async () => {
    if (!available) return;
    await applyFixture(env, setupYaml(fake.baseURL, 'embed-b'));
    const changed = await vectors.summary('wsp_v', 'prj_v');
    expect(changed).toMatchObject({ embeddingModel: 'embed-b', vectors: 'building' });
    // No vector under the new model yet: lexical, every document still found.
    const during = await searchProject(env.database.db, { projectId: 'prj_v', query: 'revenue', limit: 5 });
    expect(during[0]?.text).toBe('The quarterly revenue grew by twelve percent.');
    await embedder.runUntilIdle();
    expect(fake.requests.at(-1)!.model).toBe('hash-64');
    expect(await vectorCount(env, 'embed-b|')).toBe(5);
    expect(await vectorCount(env, 'embed-a|')).toBe(0);
    expect(await vectors.summary('wsp_v', 'prj_v')).toMatchObject({ vectors: 'ready' });
    const after = await searchProject(env.database.db, { projectId: 'prj_v', query: 'revenue', limit: 5 });
    expect(after[0]?.text).toBe('The quarterly revenue grew by twelve percent.');

    // Turned off: the vectors go, search is lexical.
    await applyFixture(env, setupYaml(fake.baseURL, null));
    expect(await vectors.summary('wsp_v', 'prj_v')).toMatchObject({ embeddingModel: null, vectors: 'off' });
    await embedder.runUntilIdle();
    expect(await vectorCount(env, '')).toBe(0);
  });

  it('deleting a file deletes its vectors with its chunks', async () => {
    if (!available) return;
    await applyFixture(env, setupYaml(fake.baseURL, 'embed-a'));
    const id = await addIndexedFile(env, 'prj_v', 'wsp_v', ['Ephemeral note.']);
    await embedder.runUntilIdle();
    const before = await vectorCount(env, 'embed-a|');
    await env.database.db.deleteFrom('project_files').where('id', '=', id).execute();
    expect(await vectorCount(env, 'embed-a|')).toBe(before - 1);
  });
});
