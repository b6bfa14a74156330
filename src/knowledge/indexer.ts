import { isDependencyUnavailable } from '../network-errors.js';
import { EventEmitter } from 'node:events';
import type { IndexingConfig } from '../config.js';
import type { Db } from '../db/database.js';
import {
  type ClaimedFile,
  claimNextFile,
  claimSmallFiles,
  failClaim,
  hasIndexWork,
  recordIndexFailure,
  releaseClaim,
  type IndexOutcome,
  renewClaim,
  storeIndexOutcomes,
} from '../db/repositories/knowledge.js';
import { mapConcurrently } from '../concurrency.js';
import { type Clock, newId, systemClock } from '../ids.js';
import { renewWhileWorking } from '../lease-renewal.js';
import type { ObjectStore } from '../storage/object-store.js';
import { chunkExtraction } from './chunk.js';
import { createExtractorPool } from './extract/index.js';
import { type Extraction, type ExtractInput, type ExtractOptions, extractedText } from './types.js';

/** Largest object read for indexing: the largest file a project may hold (decisions.md). */
export const MAX_INDEXED_FILE_BYTES = 50 * 1024 * 1024;

/**
 * In-process signal that files were marked for indexing (sync, rebuild), so an indexer of this
 * process starts at once; indexers of other processes find the work by polling.
 */
const signals = new EventEmitter();
signals.setMaxListeners(0);

export function notifyIndexWork(): void {
  signals.emit('work');
}

export interface IndexerLog {
  info(object: Record<string, unknown>, message: string): void;
  warn(object: Record<string, unknown>, message: string): void;
}

export interface IndexerDeps {
  db: Db;
  store: ObjectStore;
  config: IndexingConfig;
  /** Object storage key of a file (projects/{workspace}/{project}/{path}). */
  storageKey: (file: ClaimedFile) => string;
  clock?: Clock;
  log?: IndexerLog;
  /** Replaces the worker-thread extractor (tests). */
  extract?: (input: ExtractInput, options: ExtractOptions) => Promise<Extraction>;
}

export interface Indexer {
  /** This process's id in claims (with a loop number after a dot when it indexes several files at once). */
  readonly processId: string;
  /** Looks for work now instead of at the next poll. */
  wake(): void;
  /**
   * Stops taking work; files being indexed are handed back (`pending`) for any process to take,
   * and the extraction workers end. Resolves once nothing touches the database any more.
   */
  stop(): Promise<void>;
}

/**
 * Small files are indexed several at a time: claimed together and stored in one transaction, as
 * a commit (and on SQLite the FTS5 segment it writes) costs more than a small file's chunks:
 * 32 files a batch indexed 300 small files about a quarter faster than 16 (bench/knowledge.bench.ts),
 * and a batch holds at most 32 × 256 KB of file bytes in memory.
 * A large file, or the first of the queue, is claimed on its own, so files keep their order.
 */
const BATCH_FILES = 32;
const BATCH_FILE_BYTES = 256 * 1024;
/**
 * Files of a batch read and extracted at once: each file is a chain of waits (storage reads,
 * the extraction worker's round trip) that leaves the process idle when files go one by one.
 * Extraction itself still runs at most `concurrency` files at a time (the worker pool's size).
 */
const FILES_READ_AT_ONCE = 8;

/**
 * A failure told in Atrium's own words about the file (extraction's reason, not in storage, too
 * large, a read past the time limit): its message becomes the file's `indexError` as it is.
 * Any other failure (a database or storage error) may name tables, statements, buckets or
 * hosts: the file shows {@link INTERNAL_FAILURE} instead, and only the log has the error.
 */
class IndexFailure extends Error {}

/** The claims of one batch of files, while it is indexed. */
interface BatchClaims {
  /** Whom the claims are under: the loop of this process that took them (see `loops`). */
  claimant: string;
  /** Aborted when a renewal finds the file's claim lost (taken over, the file changed). */
  lost: Map<ClaimedFile, AbortController>;
  /** Files whose claim this process ended itself (result stored, failure recorded). */
  settled: Set<ClaimedFile>;
}

/** A failure retrying cannot cure (the file is too large): it ends `failed` at once. */
class PermanentIndexError extends IndexFailure {}

/** The `indexError` of a failure that is not an {@link IndexFailure} (docs/knowledge.md). */
export const INTERNAL_FAILURE = {
  retrying: 'indexing failed on an internal error; it will be tried again',
  final: 'indexing failed on an internal error; rebuild the index or upload the file again to retry',
};

/**
 * The background indexer of `atrium serve` (spec/knowledge.md "Indexing"): takes files marked
 * `pending` from the database on leases (small files several at a time), reads each from storage,
 * extracts its text in a worker thread with a time limit, chunks it and stores texts and chunks in
 * one transaction.
 * Several processes share the work through the leases; a crashed process's lease lapses and
 * another one takes the file.
 */
export function startIndexer(deps: IndexerDeps): Indexer {
  const clock = deps.clock ?? systemClock;
  const { config } = deps;
  const processId = newId('prc');
  const pool = deps.extract ? undefined : createExtractorPool({ size: config.concurrency });
  const extract = deps.extract ?? ((input, options) => pool!.extract(input, options));
  let stopped = false;
  /** Resolves the sleeping workers' waits. */
  let wakeUp: (() => void) | undefined;
  let wakeSignal = new Promise<void>((resolve) => (wakeUp = resolve));
  const wake = () => {
    wakeUp?.();
    wakeSignal = new Promise<void>((resolve) => (wakeUp = resolve));
  };
  signals.on('work', wake);
  /** Files being indexed, with the claimant (loop) that holds each. */
  const held = new Map<ClaimedFile, string>();
  const iso = (offsetMs = 0) => new Date(clock().getTime() + offsetMs).toISOString();

  async function readObject(file: ClaimedFile): Promise<Buffer> {
    // A storage server that stops answering must not hold the file (and its batch) for ever:
    // the read fails like any other attempt, and is retried.
    let timer: NodeJS.Timeout | undefined;
    const bytes = await Promise.race([
      deps.store.readAll(deps.storageKey(file), MAX_INDEXED_FILE_BYTES),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(new IndexFailure(`reading the file from storage timed out after ${config.timeoutMs} ms`)),
          config.timeoutMs,
        );
      }),
    ]).finally(() => clearTimeout(timer));
    if (bytes === null) throw new IndexFailure('the file is not in storage');
    if (bytes === 'too-large') {
      throw new PermanentIndexError(`the file is larger than ${MAX_INDEXED_FILE_BYTES} bytes`);
    }
    return bytes;
  }

  /** Reads and extracts one file: what to store for it (nothing once `claimLost` aborts). */
  async function indexFile(file: ClaimedFile, claimLost: AbortSignal): Promise<IndexOutcome | undefined> {
    const bytes = await readObject(file);
    if (stopped || claimLost.aborted) return undefined;
    const extraction = await extract(
      { bytes, path: file.path, mediaType: file.mime_type },
      { timeoutMs: config.timeoutMs, signal: claimLost },
    );
    if (stopped || claimLost.aborted) return undefined;
    if (extraction.status === 'failed') throw new IndexFailure(extraction.error, { cause: extraction.cause });
    return extraction.status === 'unsupported'
      ? { status: 'unsupported', reason: extraction.reason }
      : {
          status: 'indexed',
          format: extraction.format,
          // PostgreSQL refuses NUL in text; a space keeps every offset where it was.
          text: withoutNul(extractedText(extraction)),
          chunks: chunkExtraction(extraction).map((chunk) => ({ ...chunk, text: withoutNul(chunk.text) })),
        };
  }

  /**
   * Indexes claimed files and stores their outcomes together; failures are recorded one by one.
   * A file whose claim a renewal finds lost is dropped: the process that took it over indexes it.
   */
  async function indexFiles(files: ClaimedFile[], claims: BatchClaims): Promise<void> {
    const started = Date.now();
    const outcomes = await mapConcurrently(files, FILES_READ_AT_ONCE, async (file) => {
      const claimLost = claims.lost.get(file)!.signal;
      if (stopped || claimLost.aborted) return undefined;
      try {
        if (file.index_attempts > config.maxAttempts) {
          // Every earlier claim ended without a word: its process died reading this file.
          await failClaim(
            deps.db,
            file,
            claims.claimant,
            `gave up after ${config.maxAttempts} attempts: indexing stopped each time`,
          );
          claims.settled.add(file);
          return undefined;
        }
        return await indexFile(file, claimLost);
      } catch (error) {
        if (!stopped && !claimLost.aborted) {
          await handleFailure(file, error, claims.claimant).catch(() => {});
          claims.settled.add(file);
        }
        return undefined;
      }
    });
    if (stopped) return;
    const results = files.flatMap((file, i) => (outcomes[i] ? [{ file, outcome: outcomes[i] }] : []));
    if (results.length === 0) return;
    // Per result: stored, dropped (the file changed meanwhile), or undefined (failed, recorded).
    let stored: Array<boolean | undefined>;
    try {
      stored = await storeIndexOutcomes(deps.db, results, claims.claimant, iso());
    } catch (error) {
      if (stopped) return;
      // A database that did not answer would not answer each file alone either.
      if (results.length === 1 || isDependencyUnavailable(error)) {
        for (const { file } of results) await handleFailure(file, error, claims.claimant).catch(() => {});
        return;
      }
      // One result the database refuses must not fail the others of its batch: each alone.
      stored = [];
      for (const result of results) stored.push(await storeAlone(result, claims.claimant));
    } finally {
      for (const { file } of results) claims.settled.add(file);
    }
    results.forEach(({ file, outcome }, i) =>
      stored[i] === undefined
        ? undefined
        : deps.log?.info(
            {
              fileId: file.id,
              projectId: file.project_id,
              indexStatus: outcome.status,
              chunks: outcome.status === 'indexed' ? outcome.chunks.length : 0,
              stored: stored[i],
              ms: Date.now() - started,
            },
            stored[i] ? 'indexed project file' : 'dropped index result: the file changed meanwhile',
          ),
    );
  }

  /** Stores one file's result; a failure is recorded against that file alone (undefined). */
  async function storeAlone(
    result: { file: ClaimedFile; outcome: IndexOutcome },
    claimant: string,
  ): Promise<boolean | undefined> {
    try {
      return (await storeIndexOutcomes(deps.db, [result], claimant, iso()))[0];
    } catch (error) {
      if (!stopped) await handleFailure(result.file, error, claimant).catch(() => {});
      return undefined;
    }
  }

  async function handleFailure(file: ClaimedFile, error: unknown, claimant: string): Promise<void> {
    const final = error instanceof PermanentIndexError || file.index_attempts >= config.maxAttempts;
    const retryAt = final ? null : iso(config.retryMs * 2 ** (file.index_attempts - 1));
    // `err`: the service log's serializer writes the error's type, message, code and causes,
    // never its other fields (a driver's row values, an SDK's request and response).
    deps.log?.warn(
      { fileId: file.id, projectId: file.project_id, attempt: file.index_attempts, err: error },
      final ? 'indexing a project file failed' : 'indexing a project file failed; will retry',
    );
    const shown =
      error instanceof IndexFailure ? error.message : INTERNAL_FAILURE[final ? 'final' : 'retrying'];
    await recordIndexFailure(deps.db, file, claimant, { error: shown, retryAt });
  }

  /** Claims and indexes files (several small ones at once); false when there was nothing to claim. */
  async function workOnce(claimant: string): Promise<boolean> {
    const claim = { processId: claimant, now: iso(), leaseUntil: iso(config.leaseMs) };
    const first = await claimNextFile(deps.db, claim);
    if (!first) return false;
    const files = [first];
    held.set(first, claimant);
    const claims: BatchClaims = {
      claimant,
      lost: new Map([[first, new AbortController()]]),
      settled: new Set(),
    };
    // Renewed while the work lasts, so only a dead process's claim lapses. A file whose claim a
    // renewal finds lost (this process stalled past it, or the file changed) is abandoned at
    // once, its extraction stopped, instead of extracted to the end for nothing.
    const stopRenewing = renewWhileWorking({
      everyMs: Math.floor(config.leaseMs / 3),
      renew: async () => {
        if (stopped) return true;
        const leaseUntil = iso(config.leaseMs);
        const open = files.flatMap((file) => {
          const lost = claims.lost.get(file)!;
          return lost.signal.aborted || claims.settled.has(file) ? [] : [{ file, lost }];
        });
        const renewed = await Promise.all(
          open.map(({ file }) => renewClaim(deps.db, file, claimant, leaseUntil)),
        );
        open.forEach(({ file, lost }, i) => {
          // A claim settled meanwhile (stored, failed) is no longer there to renew.
          if (renewed[i] || claims.settled.has(file)) return;
          deps.log?.info(
            { fileId: file.id, projectId: file.project_id },
            'indexing claim lost; file abandoned',
          );
          lost.abort();
        });
        return open.length === 0 || renewed.some(Boolean);
      },
    });
    try {
      if (first.size_bytes <= BATCH_FILE_BYTES) {
        const more = await claimSmallFiles(deps.db, claim, BATCH_FILES - 1, BATCH_FILE_BYTES);
        for (const file of more) {
          held.set(file, claimant);
          claims.lost.set(file, new AbortController());
        }
        files.push(...more);
      }
      await indexFiles(files, claims);
    } finally {
      stopRenewing();
      // Stopped mid-batch: the files not stored yet go back to `pending` (a no-op for the others).
      if (stopped)
        await Promise.all(files.map((file) => releaseClaim(deps.db, file, claimant).catch(() => {})));
      for (const file of files) held.delete(file);
    }
    return true;
  }

  async function workLoop(claimant: string): Promise<void> {
    while (!stopped) {
      let found = false;
      try {
        found = await workOnce(claimant);
      } catch (error) {
        if (!stopped) deps.log?.warn({ err: error }, 'the indexer could not claim work');
      }
      if (found || stopped) continue;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        wakeSignal,
        new Promise<void>((resolve) => (timer = setTimeout(resolve, config.pollMs))),
      ]);
      clearTimeout(timer);
    }
  }

  // Each loop claims under its own name: under one name for the process, a loop could take a file
  // again (re-marked while another loop extracted it: a rebuild, or on S3 the same bytes stored
  // with another media type, which keeps its etag) and the other loop's stale result, finding
  // the claim still "held", was stored over the new one.
  const loops = Array.from({ length: config.concurrency }, (_, i) =>
    workLoop(config.concurrency === 1 ? processId : `${processId}.${i + 1}`),
  );
  const done = Promise.all(loops);

  return {
    processId,
    wake,
    async stop() {
      if (stopped) return;
      stopped = true;
      signals.off('work', wake);
      wake();
      // An extraction in progress may take up to its time limit: hand its file back instead.
      await Promise.race([done, new Promise((resolve) => setTimeout(resolve, 2_000))]);
      await Promise.all(
        [...held].map(([file, claimant]) => releaseClaim(deps.db, file, claimant).catch(() => {})),
      );
      await pool?.close();
      await done;
    },
  };
}

function withoutNul(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', ' ') : text;
}

/**
 * Resolves once no file waits for indexing or is being indexed (in the project, or anywhere),
 * for tests and tools that need the index complete. Rejects after `timeoutMs`.
 */
export async function waitForIndexIdle(
  db: Db,
  options: { projectId?: string; timeoutMs?: number; intervalMs?: number } = {},
): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  while (await hasIndexWork(db, options.projectId)) {
    if (Date.now() > deadline) throw new Error('indexing did not finish in time');
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 25));
  }
}
