import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { MAX_EXTRACTED_CHARS, type ExtractInput, type ExtractOptions, type Extraction } from '../types.js';
import type { ExtractRequest, WorkerMessage } from './worker.js';

export interface ExtractorPoolOptions {
  /** Worker threads at most; files beyond that wait their turn. Default 1. */
  size?: number;
  /** An idle worker is stopped after this long, giving back its memory. Default 60 s. */
  idleMs?: number;
  /** Heap limit of each worker, so one hostile file cannot exhaust the process. Default 1024 MB. */
  maxHeapMb?: number;
  /** Extracted text kept per file at most. Default {@link MAX_EXTRACTED_CHARS}. */
  maxChars?: number;
  /** The worker's script: the extraction worker next to this module unless a test gives a stand-in. */
  workerScript?: URL;
}

export interface ExtractorPool {
  /** Extracts one file in a worker thread; never throws. */
  extract(input: ExtractInput, options: ExtractOptions): Promise<Extraction>;
  /** Stops every worker; extractions not finished end `failed`. */
  close(): Promise<void>;
  /** Worker threads started so far (replacements included): lets tests see a worker replaced. */
  readonly workersStarted: number;
}

/**
 * Starting a worker, or loading a format's library in it, may take this long before the file
 * fails. Kept apart from the caller's `timeoutMs`, which measures the extraction itself: a
 * first import of pdf.js takes seconds on a busy machine, and must not fail a small PDF.
 */
const WORKER_LOAD_TIMEOUT_MS = 60_000;

/** What an extraction abandoned by its caller's signal ends with. */
const ABANDONED: Extraction = { status: 'failed', error: 'extraction abandoned' };

interface Job {
  request: ExtractRequest;
  timeoutMs: number;
  resolve: (extraction: Extraction) => void;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  job: Job | null;
  timer: NodeJS.Timeout | null;
  idleTimer: NodeJS.Timeout | null;
}

/**
 * Worker threads that extract files with a time limit. A worker is reused for consecutive files
 * (its start-up and library loading are paid once); one that times out or dies is terminated and
 * a fresh one takes the next file.
 */
export function createExtractorPool(options: ExtractorPoolOptions = {}): ExtractorPool {
  const size = Math.max(1, options.size ?? 1);
  const idleMs = options.idleMs ?? 60_000;
  const maxHeapMb = options.maxHeapMb ?? 1024;
  const maxChars = options.maxChars ?? MAX_EXTRACTED_CHARS;
  const slots: Slot[] = [];
  const queue: Job[] = [];
  let nextId = 1;
  let started = 0;
  let closed = false;

  const setTimer = (slot: Slot, ms: number, error: string) => {
    if (slot.timer) clearTimeout(slot.timer);
    slot.timer = setTimeout(() => retire(slot, { status: 'failed', error }), ms);
  };

  const finish = (slot: Slot, extraction: Extraction) => {
    const job = slot.job;
    if (slot.timer) clearTimeout(slot.timer);
    slot.timer = null;
    slot.job = null;
    job?.resolve(extraction);
  };

  /** Terminates a worker (timed out, crashed, idle or shut down); its file gets `extraction`. */
  function retire(slot: Slot, extraction: Extraction) {
    const index = slots.indexOf(slot);
    if (index >= 0) slots.splice(index, 1);
    if (slot.idleTimer) clearTimeout(slot.idleTimer);
    finish(slot, extraction);
    void slot.worker.terminate();
    pump();
  }

  const send = (slot: Slot) => {
    if (!slot.job) return;
    slot.worker.postMessage(slot.job.request);
    setTimer(slot, WORKER_LOAD_TIMEOUT_MS, 'extraction worker did not load its extractor');
  };

  const spawn = (): Slot => {
    started++;
    const slot: Slot = {
      worker: startWorker(maxHeapMb, options.workerScript),
      ready: false,
      job: null,
      timer: null,
      idleTimer: null,
    };
    setTimer(slot, WORKER_LOAD_TIMEOUT_MS, 'extraction worker did not start');
    slot.worker.on('message', (message: WorkerMessage) => {
      if (message.type === 'ready') {
        slot.ready = true;
        if (slot.timer) clearTimeout(slot.timer);
        slot.timer = null;
        send(slot);
        return;
      }
      const job = slot.job;
      if (!job || job.request.id !== message.id) return;
      if (message.type === 'loaded') {
        setTimer(slot, job.timeoutMs, `extraction timed out after ${job.timeoutMs} ms`);
        return;
      }
      finish(slot, message.extraction);
      pump();
    });
    // What a crash says (a module's path, a stack frame; any value, since a worker may throw one
    // that is not an Error) is the server's business: the file's reason names the kind of
    // failure, and the crash goes along as its cause, for the log.
    slot.worker.on('error', (error: unknown) => {
      const outOfMemory = (error as { code?: unknown } | null)?.code === 'ERR_WORKER_OUT_OF_MEMORY';
      const reason = outOfMemory ? 'extraction ran out of memory' : 'extraction worker crashed';
      retire(slot, { status: 'failed', error: reason, cause: error });
    });
    slot.worker.on('exit', () => {
      if (slots.includes(slot)) retire(slot, { status: 'failed', error: 'extraction worker stopped' });
    });
    slots.push(slot);
    return slot;
  };

  function pump() {
    while (queue.length) {
      const slot = slots.find((s) => !s.job) ?? (slots.length < size ? spawn() : null);
      if (!slot) break;
      if (slot.idleTimer) clearTimeout(slot.idleTimer);
      slot.idleTimer = null;
      slot.job = queue.shift()!;
      slot.worker.ref();
      if (slot.ready) send(slot);
    }
    for (const slot of slots) {
      if (slot.job || slot.idleTimer) continue;
      // An idle worker must not keep the process alive, and gives its memory back after a while.
      slot.worker.unref();
      slot.idleTimer = setTimeout(() => retire(slot, { status: 'failed', error: 'idle' }), idleMs);
      slot.idleTimer.unref();
    }
  }

  return {
    get workersStarted() {
      return started;
    },
    extract(input, { timeoutMs, signal }) {
      if (closed) return Promise.resolve({ status: 'failed', error: 'extraction is shut down' });
      if (signal?.aborted) return Promise.resolve(ABANDONED);
      return new Promise<Extraction>((resolve) => {
        const { bytes, path, mediaType } = input;
        const job: Job = {
          request: { id: nextId++, bytes, path, mediaType, maxChars },
          timeoutMs,
          resolve: (extraction) => {
            signal?.removeEventListener('abort', abandon);
            resolve(extraction);
          },
        };
        // Waiting: it leaves the queue. Running: its worker is stopped, as on a time-out (a
        // worker cannot be told to drop a file midway), and a fresh one takes the next file.
        function abandon() {
          const waiting = queue.indexOf(job);
          if (waiting >= 0) {
            queue.splice(waiting, 1);
            job.resolve(ABANDONED);
            return;
          }
          const slot = slots.find((s) => s.job === job);
          if (slot) retire(slot, ABANDONED);
        }
        signal?.addEventListener('abort', abandon, { once: true });
        queue.push(job);
        pump();
      });
    },
    async close() {
      closed = true;
      for (const job of queue.splice(0)) job.resolve({ status: 'failed', error: 'extraction is shut down' });
      const workers = slots.map((slot) => slot.worker);
      for (const slot of [...slots]) retire(slot, { status: 'failed', error: 'extraction is shut down' });
      await Promise.all(workers.map((worker) => worker.terminate()));
    },
  };
}

/**
 * Starts the worker script next to this module (or `script`): `worker.js` in the built `dist/`,
 * `worker.ts` when the sources run directly (tsx, vitest), where the thread first registers tsx's
 * loader (a `--import tsx` flag does not reach a worker's entry module on Node 20).
 */
function startWorker(maxHeapMb: number, script?: URL): Worker {
  const resourceLimits = { maxOldGenerationSizeMb: maxHeapMb };
  const source = import.meta.url.endsWith('.ts') ? './worker.ts' : './worker.js';
  const entry = (script ?? new URL(source, import.meta.url)).href;
  if (!entry.endsWith('.ts')) return new Worker(new URL(entry), { resourceLimits });
  const bootstrap = `import(${JSON.stringify(tsxApiUrl())}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(bootstrap, { eval: true, resourceLimits });
}

/** The ESM entry of tsx's register API (require.resolve finds its CommonJS twin beside it). */
function tsxApiUrl(): string {
  const cjs = createRequire(import.meta.url).resolve('tsx/esm/api');
  const esm = cjs.replace(/\.cjs$/, '.mjs');
  return pathToFileURL(existsSync(esm) ? esm : cjs).href;
}
