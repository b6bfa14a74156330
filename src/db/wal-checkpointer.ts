import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type SQLite from 'better-sqlite3';

/**
 * Issue 16: SQLite checkpoints its write-ahead log on the connection whose commit takes the log
 * past 1,000 pages: it copies the pages into the database file and syncs both files, in that
 * commit. On the service's one connection that is the event loop's thread, stalled 6–29 ms
 * every few dozen stored replies (strace tracing only the syncs, during chat.bench's 200
 * streams): every token of every running reply waited for it. So the service's connection never
 * checkpoints as it commits (`wal_autocheckpoint = 0`); a second connection in a worker thread
 * runs a passive checkpoint about a second after writes, which neither waits for nor blocks the
 * service's reads and writes. What is durable, and when, does not change: a commit is in the log
 * either way.
 *
 * The worker starts at the first write, so a process that only reads never starts one. A
 * process that wrote checkpoints on its own connection as it closes (a CLI command ends before
 * its worker would start; another process may keep the file open, so closing alone would not).
 * Should the worker fail, the connection checkpoints for itself again, as SQLite does by default.
 */
const CHECKPOINT_DELAY_MS = 1000;
/** SQLite's own default: the connection checkpoints when a commit takes the log past it. */
const DEFAULT_AUTOCHECKPOINT_PAGES = 1000;
/** How long closing waits for a checkpoint under way before the worker is stopped. */
const CLOSE_WAIT_MS = 5000;

/**
 * The worker, as CommonJS source (it needs no build step and no loader, under tsx or vitest
 * alike): one connection to the file, a passive checkpoint per message, closed on `close`. A
 * checkpoint that finds another under way (another process's) reports `busy` and leaves the work
 * to that one; one that fails ends the worker (the connection then checkpoints for itself).
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma('synchronous = NORMAL');
parentPort.on('message', (message) => {
  if (message === 'close') {
    db.close();
    parentPort.close();
    return;
  }
  const [result] = db.pragma('wal_checkpoint(PASSIVE)');
  parentPort.postMessage({ type: 'checkpointed', log: result.log, checkpointed: result.checkpointed });
});
`;

export interface CheckpointResult {
  /** Pages in the log, and how many of them are now in the database file. */
  log: number;
  checkpointed: number;
}

export interface WalCheckpointerOptions {
  /** How long after a write the worker checkpoints (default CHECKPOINT_DELAY_MS). */
  delayMs?: number;
  /** The module the worker opens the file with (default better-sqlite3, as resolved here). */
  driver?: string;
}

export class WalCheckpointer {
  private worker: Worker | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The worker failed: the connection checkpoints for itself again. */
  private failed = false;
  /** A statement that may write ran on the connection. */
  private wroteAny = false;
  private closing: Promise<void> | undefined;
  private readonly listeners = new Set<(result: CheckpointResult) => void>();

  constructor(
    private readonly sqlite: SQLite.Database,
    private readonly file: string,
    private readonly options: WalCheckpointerOptions = {},
  ) {
    sqlite.pragma('wal_autocheckpoint = 0');
  }

  /** A statement that may write is about to run: a checkpoint follows about a second later. */
  wrote(): void {
    this.wroteAny = true;
    if (this.timer || this.failed || this.closing) return;
    this.timer = setTimeout(this.checkpoint, this.options.delayMs ?? CHECKPOINT_DELAY_MS);
    // A pending checkpoint keeps no process alive: closing checkpoints what is left.
    this.timer.unref();
  }

  /** Calls `listener` after each checkpoint the worker ran (tests watch the log this way). */
  onCheckpoint(listener: (result: CheckpointResult) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Stops the worker, letting a checkpoint under way finish (up to CLOSE_WAIT_MS), then
   * checkpoints what is left on the connection, which stays open. Never rejects.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      clearTimeout(this.timer);
      const worker = this.worker;
      this.worker = undefined;
      if (worker) {
        // 'exit' comes after an 'error' too: a checkpoint failing now does not fail the close.
        const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
        worker.postMessage('close');
        const stop = setTimeout(() => void worker.terminate(), CLOSE_WAIT_MS);
        await exited;
        clearTimeout(stop);
      }
      this.checkpointHere();
    })();
    return this.closing;
  }

  /**
   * For a connection closing at once (its Kysely destroyed without the handle's `close`): the
   * worker is told to stop and the log is checkpointed here, now.
   */
  closeNow(): void {
    if (this.closing) return;
    const worker = this.worker;
    this.closing = Promise.resolve();
    clearTimeout(this.timer);
    this.worker = undefined;
    worker?.postMessage('close');
    this.checkpointHere();
  }

  private checkpointHere(): void {
    if (!this.wroteAny || !this.sqlite.open) return;
    try {
      this.sqlite.pragma('wal_checkpoint(PASSIVE)');
    } catch {
      // The log stays as it is; the next connection to open the file checkpoints it.
    }
  }

  private readonly checkpoint = (): void => {
    this.timer = undefined;
    if (this.failed || this.closing) return;
    try {
      this.worker ??= this.start();
      this.worker.postMessage('checkpoint');
    } catch (error) {
      this.fallBack(this.worker, error);
    }
  };

  private start(): Worker {
    const driver = this.options.driver ?? createRequire(import.meta.url).resolve('better-sqlite3');
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { driver, file: this.file } });
    // The worker keeps no process alive, as the timer does not.
    worker.unref();
    worker.on('message', (message: { type: string } & CheckpointResult) => {
      if (message.type !== 'checkpointed') return;
      for (const listener of this.listeners)
        listener({ log: message.log, checkpointed: message.checkpointed });
    });
    worker.on('error', (error) => this.fallBack(worker, error));
    worker.on('exit', () => this.fallBack(worker));
    return worker;
  }

  /**
   * The worker failed (or could not start): the connection checkpoints for itself again, and
   * the process says so once (a Node warning, on stderr: the database layer has no logger).
   */
  private fallBack(worker: Worker | undefined, error?: unknown): void {
    if (this.closing || this.worker !== worker) return;
    this.failed = true;
    this.worker = undefined;
    if (this.sqlite.open) this.sqlite.pragma(`wal_autocheckpoint = ${DEFAULT_AUTOCHECKPOINT_PAGES}`);
    // A worker's error arrives serialized: better-sqlite3's own errors as their code alone.
    const detail = error as { message?: unknown; code?: unknown } | undefined;
    const cause = detail?.message ?? detail?.code;
    const reason = cause === undefined ? '' : `: ${String(cause)}`;
    process.emitWarning(
      `SQLite log checkpoints run on the service's connection again: the checkpoint worker failed${reason}`,
      { code: 'ATRIUM_WAL_CHECKPOINTER' },
    );
  }
}
