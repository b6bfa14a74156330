import { once } from 'node:events';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type SQLite from 'better-sqlite3';

/**
 * Issue 16: SQLite checkpoints its write-ahead log on the connection whose commit takes the log
 * past 1,000 pages: it copies the pages into the database file and syncs both files, in that
 * commit. On the service's one connection that is the event loop's thread, stalled 6–29 ms
 * every few dozen stored replies (measured with strace during chat.bench's 200 streams): every
 * token of every running reply waited for it. So the service's connection never checkpoints
 * (`wal_autocheckpoint = 0`); a second connection in a worker thread runs a passive checkpoint
 * about a second after writes, which neither waits for nor blocks the service's reads and
 * writes. What is durable, and when, does not change: a commit is in the log either way.
 *
 * The worker starts at the first write, so a process that only reads never starts one. Should
 * it fail, the connection checkpoints for itself again, as SQLite does by default.
 */
const CHECKPOINT_DELAY_MS = 1000;
/** SQLite's own default: the connection checkpoints when a commit takes the log past it. */
const DEFAULT_AUTOCHECKPOINT_PAGES = 1000;
/** How long closing waits for a checkpoint under way before the worker is stopped. */
const CLOSE_WAIT_MS = 5000;

/**
 * The worker, as CommonJS source (it needs no build step and no loader, under tsx or vitest
 * alike): one connection to the file, a passive checkpoint per message, closed on `close`.
 * A checkpoint that finds another under way (another process's) is skipped: that one does it.
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
  try {
    const [result] = db.pragma('wal_checkpoint(PASSIVE)');
    parentPort.postMessage({ type: 'checkpointed', log: result.log, checkpointed: result.checkpointed });
  } catch (error) {
    if (error && error.code !== 'SQLITE_BUSY') throw error;
  }
});
`;

export interface CheckpointResult {
  /** Pages in the log, and how many of them are now in the database file. */
  log: number;
  checkpointed: number;
}

export class WalCheckpointer {
  private worker: Worker | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The worker failed: the connection checkpoints for itself again. */
  private failed = false;
  private closed = false;
  private readonly listeners = new Set<(result: CheckpointResult) => void>();

  constructor(
    private readonly sqlite: SQLite.Database,
    private readonly file: string,
    private readonly delayMs = CHECKPOINT_DELAY_MS,
  ) {
    sqlite.pragma('wal_autocheckpoint = 0');
  }

  /** A statement that may write is about to run: a checkpoint follows about a second later. */
  wrote(): void {
    if (this.timer || this.failed || this.closed) return;
    this.timer = setTimeout(this.checkpoint, this.delayMs);
    // A pending checkpoint keeps no process alive: closing the last connection checkpoints.
    this.timer.unref();
  }

  /** Calls `listener` after each checkpoint the worker ran (tests watch the log this way). */
  onCheckpoint(listener: (result: CheckpointResult) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Stops the worker, letting a checkpoint under way finish (up to CLOSE_WAIT_MS). */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    const worker = this.worker;
    this.worker = undefined;
    if (!worker) return;
    const exited = once(worker, 'exit');
    worker.postMessage('close');
    const stop = setTimeout(() => void worker.terminate(), CLOSE_WAIT_MS);
    try {
      await exited;
    } finally {
      clearTimeout(stop);
    }
  }

  private readonly checkpoint = (): void => {
    this.timer = undefined;
    if (this.failed || this.closed) return;
    this.worker ??= this.start();
    this.worker.postMessage('checkpoint');
  };

  private start(): Worker {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { driver: createRequire(import.meta.url).resolve('better-sqlite3'), file: this.file },
    });
    // The worker keeps no process alive, as the timer does not.
    worker.unref();
    worker.on('message', (message: { type: string } & CheckpointResult) => {
      if (message.type !== 'checkpointed') return;
      for (const listener of this.listeners)
        listener({ log: message.log, checkpointed: message.checkpointed });
    });
    const fallBack = () => {
      if (this.closed || this.worker !== worker) return;
      this.failed = true;
      this.worker = undefined;
      if (this.sqlite.open) this.sqlite.pragma(`wal_autocheckpoint = ${DEFAULT_AUTOCHECKPOINT_PAGES}`);
    };
    worker.on('error', fallBack);
    worker.on('exit', fallBack);
    return worker;
  }
}
