import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Embedder, type EmbedderOptions } from '../../src/knowledge/embedder.js';
import { ModelRegistry } from '../../src/models/registry.js';
import { applyFixture, createTestEnv, engineName, type TestEnv } from '../helpers/app.js';
import { embeddingWorkspaceSetup, HeldVectors, waitUntil } from './embedder-fixtures.js';
import { addIndexedFile } from './turn-fixtures.js';

// The provider is never called: HeldVectors answers in its place.
const SETUP = embeddingWorkspaceSetup('el', { baseURL: 'http://127.0.0.1:9/v1', providerModel: 'hash-8' });

/** The chat providers' default upstream timeout: the old lease was this plus a minute. */
const REQUEST_TIMEOUT_MS = 120_000;

describe(`the embedding lease between processes (${engineName})`, () => {
  let env: TestEnv;
  let held: HeldVectors;
  let at: number;
  const clock = () => new Date(at);
  const embedders: Embedder[] = [];

  /** An embedding process on the test's database and clock. */
  function process(processId: string, options: Partial<EmbedderOptions> = {}): Embedder {
    const embedder = new Embedder(held, {
      processId,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      now: clock,
      ...options,
    });
    embedders.push(embedder);
    return embedder;
  }

  const state = () =>
    env.database.db.selectFrom('knowledge_embedding_state').selectAll().executeTakeFirstOrThrow();
  const storedVectors = async () =>
    (await env.database.db.selectFrom('knowledge_vectors').select('chunk_id').execute()).length;

  /**
   * Starts a step of `embedder` and resolves once its provider call is in flight, with the
   * step (wrapped: an async function would wait for a promise it returned).
   */
  async function stepUntilCalled(embedder: Embedder): Promise<{ step: Promise<boolean> }> {
    const calls = held.calls.length;
    let returned = false;
    const step = embedder.step().finally(() => {
      returned = true;
    });
    await waitUntil(() => held.calls.length > calls || returned, 'the provider call');
    expect(returned, 'the step returned without calling the provider').toBe(false);
    return { step };
  }

  beforeEach(async () => {
    at = Date.parse('2026-12-01T10:00:00.000Z');
    env = await createTestEnv();
    await applyFixture(env, SETUP);
    held = new HeldVectors(env.database.db, new ModelRegistry(env.config));
    await addIndexedFile(env.database.db, {
      workspaceId: 'wsp_el',
      projectId: 'prj_el',
      path: 'docs/runbook.md',
      text: 'Rotate the signing secret every ninety days. Back up the database nightly.',
      chunks: [
        { text: 'Rotate the signing secret every ninety days.' },
        { text: 'Back up the database nightly.' },
      ],
    });
  });

  afterEach(async () => {
    // A stop aborts the calls nobody answered.
    await Promise.all(embedders.splice(0).map((embedder) => embedder.stop()));
    await env.close();
  });

  it('a killed owner holds the workspace for the short lease, not for the request timeout', async () => {
    // Its call never returns and it never renews nor releases: the process is gone.
    const killed = process('prc_killed');
    await stepUntilCalled(killed);
    expect(await state()).toMatchObject({
      lease_owner: 'prc_killed',
      lease_until: new Date(at + 30_000).toISOString(),
    });

    const other = process('prc_other');
    at += 29_000;
    expect(await other.step()).toBe(false);
    expect(held.calls).toHaveLength(1);

    at += 2_000;
    const { step: taking } = await stepUntilCalled(other);
    expect((await state()).lease_owner).toBe('prc_other');
    held.calls[1]!.answer();
    expect(await taking).toBe(true);
    expect(await storedVectors()).toBe(2);
    expect(await state()).toMatchObject({ lease_owner: null, lease_until: null, failures: 0 });
  });

  it('a healthy owner whose call outlasts the lease renews it, and no other process takes the workspace', async () => {
    const owner = process('prc_owner', { leaseMs: 300 });
    const other = process('prc_other', { leaseMs: 300 });
    const { step: owning } = await stepUntilCalled(owner);
    expect((await state()).lease_until).toBe(new Date(at + 300).toISOString());

    // The call has lasted longer than the lease: the owner's renewal moves the lease on.
    at += 1_000;
    const renewed = new Date(at + 300).toISOString();
    await waitUntil(async () => (await state()).lease_until === renewed, 'the lease renewed');
    expect(await other.step()).toBe(false);
    expect(held.calls).toHaveLength(1);
    expect((await state()).lease_owner).toBe('prc_owner');

    held.calls[0]!.answer();
    expect(await owning).toBe(true);
    expect(await storedVectors()).toBe(2);
    expect(await state()).toMatchObject({ lease_owner: null, lease_until: null, failures: 0 });
  });

  it('an owner whose lease was taken while its call ran does not store the answer', async () => {
    const owner = process('prc_owner');
    const other = process('prc_other');
    const { step: owning } = await stepUntilCalled(owner);

    // The owner stalled (its renewals did not run) past its lease, whatever its length.
    at += REQUEST_TIMEOUT_MS + 61_000;
    const { step: taking } = await stepUntilCalled(other);
    expect((await state()).lease_owner).toBe('prc_other');

    held.calls[0]!.answer();
    expect(await owning).toBe(false);
    expect(await storedVectors()).toBe(0);
    // Nor does it let go of (or count a failure on) the lease it no longer holds.
    expect(await state()).toMatchObject({ lease_owner: 'prc_other', failures: 0, last_error: null });

    held.calls[1]!.answer();
    expect(await taking).toBe(true);
    expect(await storedVectors()).toBe(2);
  });

  it('an owner whose renewal finds the lease taken abandons its call', async () => {
    const errors: unknown[] = [];
    const owner = process('prc_owner', { leaseMs: 300, onError: (error) => errors.push(error) });
    const { step: owning } = await stepUntilCalled(owner);

    // Another process whose clock is a minute on sees the lease lapsed (as after a stall).
    const other = new Embedder(held, {
      processId: 'prc_other',
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      now: () => new Date(at + 60_000),
    });
    embedders.push(other);
    const { step: taking } = await stepUntilCalled(other);

    await waitUntil(() => held.calls[0]!.signal.aborted, 'the call abandoned');
    expect(await owning).toBe(false);
    expect(errors).toEqual([]);
    expect(await storedVectors()).toBe(0);
    expect(await state()).toMatchObject({ lease_owner: 'prc_other', failures: 0, last_error: null });

    held.calls[1]!.answer();
    expect(await taking).toBe(true);
    expect(await storedVectors()).toBe(2);
  });
});
