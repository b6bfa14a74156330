import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Extraction, ExtractOptions } from '../../src/knowledge/types.js';
import { waitForIndexIdle } from '../../src/knowledge/indexer.js';
import { projectStoragePrefix } from '../../src/services/project-files.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';
import { waitUntil } from '../helpers/wait-until.js';
import { textFile } from './files.js';
import { putAndSync, startTestIndexer, type TestApp } from './helpers.js';

let t: TestApp;
const WS = 'wsp_main';
const PROJECT = 'prj_docs';
const stops: Array<() => Promise<void>> = [];

beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
});
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
  await t.env.database.db.deleteFrom('project_files').execute();
  await t.store.deletePrefix(projectStoragePrefix(WS, PROJECT));
});
afterAll(() => t.close());

const indexer = (options: Parameters<typeof startTestIndexer>[1] = {}) => {
  const started = startTestIndexer(t, options);
  stops.push(() => started.stop());
  return started;
};

/** An extraction that never ends by itself: only its caller's signal ends it. */
function endlessExtractor() {
  const signals: Array<AbortSignal | undefined> = [];
  const extract = (_input: unknown, options: ExtractOptions) =>
    new Promise<Extraction>((resolve) => {
      signals.push(options.signal);
      options.signal?.addEventListener('abort', () => resolve({ status: 'failed', error: 'abandoned' }));
    });
  return { extract, signals };
}

describe(`the indexing claim between processes (${engineName})`, () => {
  it('an indexer whose renewal finds its claim taken stops extracting the file at once', async () => {
    const endless = endlessExtractor();
    // Its claim lasts 300 ms, renewed every 100 ms.
    const owner = indexer({ extract: endless.extract, leaseMs: 300 });
    await putAndSync(t, WS, PROJECT, [textFile('claimed.txt', 'taken over by another process')]);
    await waitUntil(() => endless.signals.length === 1, 'the extraction started');
    expect(endless.signals[0]?.aborted).toBe(false);

    // Another process whose clock is a minute on sees the claim lapsed (as after a stall).
    const other = indexer({ clock: () => new Date(Date.now() + 60_000) });
    await waitForIndexIdle(t.env.database.db, { projectId: PROJECT, timeoutMs: 10_000 });
    const file = await t.env.database.db
      .selectFrom('project_files')
      .select(['index_status', 'index_error', 'index_claimed_by'])
      .executeTakeFirstOrThrow();
    expect(file).toEqual({ index_status: 'indexed', index_error: null, index_claimed_by: null });
    expect(other.extractions.get('claimed.txt')).toBe(1);

    // The owner's renewal finds the claim gone: its extraction is abandoned, not run to the end.
    await waitUntil(() => endless.signals[0]!.aborted, 'the extraction abandoned');
    expect(owner.extractions.get('claimed.txt')).toBe(1);
    // Nor does it record a failure over the other's result.
    expect(
      await t.env.database.db.selectFrom('project_files').select('index_status').executeTakeFirstOrThrow(),
    ).toEqual({ index_status: 'indexed' });
  });
});
