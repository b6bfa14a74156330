import { Readable } from 'node:stream';
import type { IndexingConfig } from '../../src/config.js';
import { extractFile } from '../../src/knowledge/extract/index.js';
import {
  type Indexer,
  type IndexerDeps,
  startIndexer,
  waitForIndexIdle,
} from '../../src/knowledge/indexer.js';
import { projectStoragePrefix, syncProjectFiles } from '../../src/services/project-files.js';
import { systemClock } from '../../src/ids.js';
import type { createTestApp } from '../helpers/app.js';
import type { TestFile } from './files.js';

export type TestApp = Awaited<ReturnType<typeof createTestApp>>;

/** Indexer settings for tests: quick retries and polls, a short lease. */
export const TEST_INDEXING: IndexingConfig = {
  timeoutMs: 20_000,
  concurrency: 1,
  pollMs: 200,
  maxAttempts: 3,
  retryMs: 20,
  leaseMs: 2_000,
};

/** Puts files into a project's storage (as an upload through a signed URL would) and syncs. */
export async function putAndSync(t: TestApp, workspaceId: string, projectId: string, files: TestFile[]) {
  for (const file of files) {
    await t.store.put(projectStoragePrefix(workspaceId, projectId) + file.path, Readable.from([file.bytes]), {
      contentType: file.mediaType,
    });
  }
  return syncProjectFiles(
    { db: t.env.database.db, store: t.store, clock: systemClock },
    workspaceId,
    projectId,
  );
}

/** An indexer of the test's app, counting extractions per file path. */
export function startTestIndexer(
  t: TestApp,
  options: Partial<IndexingConfig> & Pick<Partial<IndexerDeps>, 'extract' | 'store' | 'log' | 'clock'> = {},
): Indexer & { extractions: Map<string, number> } {
  const extractions = new Map<string, number>();
  const { extract, store, log, clock, ...config } = options;
  const indexer = startIndexer({
    db: t.env.database.db,
    store: store ?? t.store,
    log,
    clock,
    config: { ...TEST_INDEXING, ...config },
    storageKey: (file) => projectStoragePrefix(file.workspace_id, file.project_id) + file.path,
    extract: async (input, opts) => {
      extractions.set(input.path, (extractions.get(input.path) ?? 0) + 1);
      return (extract ?? extractFile)(input, opts);
    },
  });
  return Object.assign(indexer, { extractions });
}

/**
 * Indexes what sync left pending, with a test indexer, until nothing is left; hands back how to
 * stop that indexer (files indexed later are indexed by it too).
 */
export async function indexPending(t: TestApp, timeoutMs = 60_000): Promise<() => Promise<void>> {
  const indexer = startTestIndexer(t);
  await waitForIndexIdle(t.env.database.db, { timeoutMs });
  return () => indexer.stop();
}
