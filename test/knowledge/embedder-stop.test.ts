import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Embedder } from '../../src/knowledge/embedder.js';
import type { KnowledgeVectors } from '../../src/knowledge/vectors.js';
import { embeddingWords } from '../../src/models/echo-embedding.js';
import { ModelRegistry } from '../../src/models/registry.js';
import { applyFixture, createTestEnv, engineName, type TestEnv } from '../helpers/app.js';
import { type FakeEmbeddings, startFakeEmbeddings } from '../helpers/fake-embeddings.js';
import { embeddingWorkspaceSetup, StoringVectors, waitUntil } from './embedder-fixtures.js';
import { addIndexedFile } from './turn-fixtures.js';

const SETUP = (baseURL: string) =>
  embeddingWorkspaceSetup('es', { baseURL, providerModel: 'hash-256', inputPerMTok: 0.02 });

describe(`stopping the embedder during a provider call (${engineName})`, () => {
  let env: TestEnv;
  let fake: FakeEmbeddings;
  let vectors: KnowledgeVectors;
  let first: Embedder | undefined;

  beforeAll(async () => {
    env = await createTestEnv();
    fake = await startFakeEmbeddings();
    await applyFixture(env, SETUP(fake.baseURL));
    vectors = new StoringVectors(env.database.db, new ModelRegistry(env.config));
    await addIndexedFile(env.database.db, {
      workspaceId: 'wsp_es',
      projectId: 'prj_es',
      path: 'docs/runbook.md',
      text: 'Rotate the signing secret every ninety days. Back up the database nightly.',
      chunks: [
        { text: 'Rotate the signing secret every ninety days.' },
        { text: 'Back up the database nightly.' },
      ],
    });
  });

  afterAll(async () => {
    // Before the fix the stop waits for the call: ending the stalled answer lets it end.
    await fake?.close();
    await first?.stop();
    await env?.close();
  });

  it('aborts the call, hands the batch back without a failure or a charge, and the next embedder embeds it', async () => {
    const db = env.database.db;
    const errors: unknown[] = [];
    fake.mode = 'stall';
    first = new Embedder(vectors, {
      processId: 'prc_stopping',
      // A provider that never answers holds a call this long at most: a stop must not wait for it.
      requestTimeoutMs: 60_000,
      onError: (error) => errors.push(error),
    });
    first.start();
    await waitUntil(() => fake.requests.length === 1, 'the embedding call');
    const leased = await db.selectFrom('knowledge_embedding_state').selectAll().executeTakeFirstOrThrow();
    expect(leased.lease_owner).toBe('prc_stopping');

    const started = Date.now();
    const outcome = await Promise.race([
      first.stop().then(() => 'stopped'),
      new Promise((resolve) => setTimeout(() => resolve('still waiting for the provider'), 5_000)),
    ]);
    expect(outcome).toBe('stopped');
    expect(Date.now() - started).toBeLessThan(5_000);

    // The lease is given back; the stop is no provider failure: no count, no error, no backoff.
    const state = await db.selectFrom('knowledge_embedding_state').selectAll().executeTakeFirstOrThrow();
    expect(state).toMatchObject({
      workspace_id: 'wsp_es',
      lease_owner: null,
      lease_until: null,
      failures: 0,
      last_error: null,
      next_attempt_at: null,
    });
    expect(errors).toEqual([]);
    expect(await db.selectFrom('knowledge_vectors').selectAll().execute()).toEqual([]);
    // The aborted call answered nothing: no tokens are counted for it.
    expect(
      await db.selectFrom('usage_ledger').selectAll().where('workspace_id', '=', 'wsp_es').execute(),
    ).toEqual([]);
    expect(await vectors.summary('wsp_es', 'prj_es')).toEqual({
      embeddingModel: 'embed-es',
      vectors: 'building',
      vectorsError: null,
    });

    // Another process (or the next start) takes the chunks at once, not after the lease lapses.
    fake.mode = 'ok';
    const next = new Embedder(vectors, { processId: 'prc_next', requestTimeoutMs: 60_000 });
    await next.runUntilIdle();
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests[1]!.input).toHaveLength(2);
    const stored = await db.selectFrom('knowledge_vectors').select(['chunk_id', 'model_key']).execute();
    expect(stored).toHaveLength(2);
    expect(stored.every((row) => row.model_key === 'embed-es|emb|hash-256')).toBe(true);
    // Only the answered call is charged.
    const words = fake.requests[1]!.input.reduce((sum, text) => sum + embeddingWords(text).length, 0);
    const ledger = await db
      .selectFrom('usage_ledger')
      .selectAll()
      .where('workspace_id', '=', 'wsp_es')
      .executeTakeFirstOrThrow();
    expect(Number(ledger.input_tokens)).toBe(words);
    expect(await vectors.summary('wsp_es', 'prj_es')).toMatchObject({ vectors: 'ready', vectorsError: null });
  });

  it('a call that runs out of time, with no stop, is still a provider failure with a backoff', async () => {
    const db = env.database.db;
    await addIndexedFile(db, {
      workspaceId: 'wsp_es',
      projectId: 'prj_es',
      path: 'docs/later.md',
      text: 'Restore drills run every quarter.',
    });
    fake.mode = 'stall';
    const errors: unknown[] = [];
    const timed = new Embedder(vectors, {
      processId: 'prc_timed',
      requestTimeoutMs: 200,
      onError: (error) => errors.push(error),
    });
    expect(await timed.step()).toBe(false);
    const state = await db.selectFrom('knowledge_embedding_state').selectAll().executeTakeFirstOrThrow();
    expect(state).toMatchObject({ lease_owner: null, failures: 1 });
    expect(state.last_error).toBeTruthy();
    expect(state.next_attempt_at).not.toBeNull();
    expect(errors).toHaveLength(1);
    fake.mode = 'ok';
  });
});
