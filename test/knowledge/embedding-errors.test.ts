import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Embedder } from '../../src/knowledge/embedder.js';
import { ApiError } from '../../src/errors.js';
import type { ResolvedEmbeddingModel } from '../../src/models/registry.js';
import { ModelRegistry } from '../../src/models/registry.js';
import { applyFixture, createTestEnv, engineName, freePort, type TestEnv } from '../helpers/app.js';
import { collectEvery } from '../helpers/collections.js';
import { type FakeEmbeddings, startFakeEmbeddings } from '../helpers/fake-embeddings.js';
import { embeddingWorkspaceSetup, StoringVectors } from './embedder-fixtures.js';
import { addIndexedFile } from './turn-fixtures.js';

/**
 * Vectors whose provider call fails as the test says (`fail`), or goes to the configured
 * provider as usual (`fail` undefined).
 */
class FailingVectors extends StoringVectors {
  fail: (() => Error) | undefined;

  override embed(
    workspaceId: string,
    model: ResolvedEmbeddingModel,
    values: string[],
    abortSignal: AbortSignal,
  ): Promise<number[][]> {
    if (this.fail) return Promise.reject(this.fail());
    return super.embed(workspaceId, model, values, abortSignal);
  }
}

function setupYaml(baseURL: string) {
  return embeddingWorkspaceSetup('e', { baseURL, apiKey: 'sk-secret-provider-key' });
}

describe(`what the index summary says of a failed embedding call (${engineName})`, () => {
  let env: TestEnv;
  let fake: FakeEmbeddings;
  let vectors: FailingVectors;
  let skewMs = 0;
  const logged: unknown[] = [];

  /** One embedding step by a fresh embedder past any backoff; the summary's error after it. */
  async function vectorsErrorAfterStep(requestTimeoutMs = 2_000): Promise<string | null> {
    skewMs += 60 * 60_000;
    const at = skewMs;
    const embedder = new Embedder(vectors, {
      processId: 'prc_errors',
      requestTimeoutMs,
      now: () => new Date(Date.now() + at),
      backoffBaseMs: 1,
      backoffMaxMs: 1,
      onError: (error) => logged.push(error),
    });
    await embedder.step();
    await embedder.stop();
    return (await vectors.summary('wsp_e', 'prj_e')).vectorsError;
  }

  beforeAll(async () => {
    env = await createTestEnv();
    fake = await startFakeEmbeddings();
    await applyFixture(env, setupYaml(fake.baseURL));
    vectors = new FailingVectors(env.database.db, new ModelRegistry(env.config));
    await addIndexedFile(env.database.db, {
      workspaceId: 'wsp_e',
      projectId: 'prj_e',
      path: 'notes.md',
      text: 'Backups run nightly at two.',
    });
  });

  afterAll(async () => {
    await env?.close();
    await fake?.close();
  });

  it("says the provider answered an HTTP error, not the provider's own words", async () => {
    fake.mode = 'fail';
    const shown = await vectorsErrorAfterStep();
    fake.mode = 'ok';
    expect(shown).toBe('the embedding provider answered HTTP 500');
    // The provider's message is for the service log.
    expect(String((logged.at(-1) as Error).message)).toMatch(/embedding backend down/);
  });

  it('says an unreachable provider could not be reached, naming no host or port', async () => {
    const port = await freePort();
    await applyFixture(env, setupYaml(`http://127.0.0.1:${port}/v1`));
    try {
      const shown = await vectorsErrorAfterStep();
      expect(shown).toBe('the embedding provider could not be reached');
      expect(String((logged.at(-1) as Error).message)).toMatch(/127\.0\.0\.1|ECONNREFUSED|connect/);
    } finally {
      await applyFixture(env, setupYaml(fake.baseURL));
    }
  });

  it('says a provider that did not answer in time timed out', async () => {
    fake.mode = 'stall';
    try {
      expect(await vectorsErrorAfterStep(200)).toBe('the embedding provider did not answer within 200 ms');
    } finally {
      fake.mode = 'ok';
    }
  });

  it("shows a database's or any other internal error in Atrium's words; the log has the error", async () => {
    const internal = Object.assign(
      new Error(
        'insert or update on table "usage_ledger" violates foreign key constraint "usage_ledger_workspace_id_fkey"',
      ),
      { code: '23503' },
    );
    vectors.fail = () => internal;
    try {
      const shown = await vectorsErrorAfterStep();
      expect(shown).toBe('embedding failed on an internal error; it will be tried again');
      expect(logged.at(-1)).toBe(internal);
    } finally {
      vectors.fail = undefined;
    }
  });

  it("keeps Atrium's own reasons, such as a workspace at its monthly limit", async () => {
    vectors.fail = () =>
      new ApiError('usage_limit_exceeded', 'The workspace has reached its monthly token limit');
    try {
      expect(await vectorsErrorAfterStep()).toBe('The workspace has reached its monthly token limit');
    } finally {
      vectors.fail = undefined;
    }
  });

  describe('with garbage collections while the call waits', () => {
    collectEvery(10);

    it('still says a provider that did not answer in time timed out', async () => {
      fake.mode = 'stall';
      try {
        // Node 20 lost a timeout signal combined with AbortSignal.any once collected: the call
        // waited for ever (a CI run's timeout of this file's other stalled-provider test).
        const shown = await Promise.race([
          vectorsErrorAfterStep(300),
          new Promise((resolve) => setTimeout(() => resolve('still waiting after 5 s'), 5_000)),
        ]);
        expect(shown).toBe('the embedding provider did not answer within 300 ms');
      } finally {
        fake.mode = 'ok';
      }
    });
  });

  it('clears the error once a call succeeds', async () => {
    expect(await vectorsErrorAfterStep()).toBeNull();
    expect(await vectors.summary('wsp_e', 'prj_e')).toMatchObject({ vectors: 'ready' });
  });
});
