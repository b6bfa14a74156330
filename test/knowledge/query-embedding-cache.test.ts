import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Embedder } from '../../src/knowledge/embedder.js';
import { searchProject } from '../../src/knowledge/search.js';
import { attachKnowledgeVectors } from '../../src/knowledge/vectors.js';
import { ModelRegistry } from '../../src/models/registry.js';
import { applyFixture, createTestEnv, engineName, type TestEnv } from '../helpers/app.js';
import { type FakeEmbeddings, startFakeEmbeddings } from '../helpers/fake-embeddings.js';
import { embeddingWorkspaceSetup, StoringVectors } from './embedder-fixtures.js';
import { addIndexedFile } from './turn-fixtures.js';

/** The workspace's embedding model on the provider at `baseURL`, with `apiKey`. */
const SETUP = (baseURL: string, apiKey: string) => embeddingWorkspaceSetup('qc', { baseURL, apiKey });

/** The provider calls that embedded `query` alone (a search's query embedding). */
function queryCalls(fake: FakeEmbeddings, query: string) {
  return fake.requests.filter((request) => request.input.length === 1 && request.input[0] === query);
}

/**
 * Vectors are said available (StoringVectors), so the search embeds its query on both engines;
 * on a PostgreSQL without pgvector the comparison then fails and the search answers lexically,
 * which does not matter here: what is checked is which provider embedded the query.
 */
describe(`query embeddings follow the embedding provider's configuration (${engineName})`, () => {
  let env: TestEnv;
  let first: FakeEmbeddings;
  let second: FakeEmbeddings;
  let vectors: StoringVectors;

  const search = (query: string) =>
    searchProject(env.database.db, { projectId: 'prj_qc', workspaceId: 'wsp_qc', query, limit: 5 });

  beforeAll(async () => {
    env = await createTestEnv();
    first = await startFakeEmbeddings();
    second = await startFakeEmbeddings();
    await applyFixture(env, SETUP(first.baseURL, 'sk-first-key'));
    vectors = new StoringVectors(env.database.db, new ModelRegistry(env.config), { queryTimeoutMs: 3_000 });
    attachKnowledgeVectors(vectors);
    await addIndexedFile(env.database.db, {
      workspaceId: 'wsp_qc',
      projectId: 'prj_qc',
      path: 'docs/runbook.md',
      text: 'Rotate the signing secret every ninety days. Back up the database nightly.',
      chunks: [
        { text: 'Rotate the signing secret every ninety days.' },
        { text: 'Back up the database nightly.' },
      ],
    });
    const embedder = new Embedder(vectors, { processId: 'prc_qc', requestTimeoutMs: 2_000 });
    await embedder.runUntilIdle();
    await embedder.stop();
    expect(first.embeddedTexts()).toBe(2);
  });

  afterAll(async () => {
    await env?.close();
    await first?.close();
    await second?.close();
  });

  it("embeds a repeated query at the new base URL once the provider's base URL changed", async () => {
    await search('rotating secrets');
    await search('rotating secrets');
    // Asked twice, embedded once: the second search reused the vector.
    expect(queryCalls(first, 'rotating secrets')).toHaveLength(1);

    await applyFixture(env, SETUP(second.baseURL, 'sk-first-key'));
    await search('rotating secrets');
    expect(queryCalls(second, 'rotating secrets')).toHaveLength(1);
    expect(queryCalls(first, 'rotating secrets')).toHaveLength(1);
    // The new provider's vector is reused in turn.
    await search('rotating secrets');
    expect(queryCalls(second, 'rotating secrets')).toHaveLength(1);
  });

  it("embeds a repeated query again with the new key once the provider's API key changed", async () => {
    await applyFixture(env, SETUP(second.baseURL, 'sk-first-key'));
    await search('nightly backups');
    await applyFixture(env, SETUP(second.baseURL, 'sk-second-key'));
    await search('nightly backups');
    expect(queryCalls(second, 'nightly backups').map((call) => call.authorization)).toEqual([
      'Bearer sk-first-key',
      'Bearer sk-second-key',
    ]);
  });

  it('keeps no API key in the keys of its query cache', async () => {
    const keys = [...vectors['queryCache'].keys()].join('\n');
    expect(keys).toContain('nightly backups');
    expect(keys).not.toContain('sk-first-key');
    expect(keys).not.toContain('sk-second-key');
  });
});
