import fs, { type FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';

/** Written bytes between two background flushes. */
const FLUSH_EVERY_BYTES = 8 * 1024 * 1024;

/**
 * Flushes a file being written to disk in the background as its bytes pass `progress`, so the
 * `fsync` that makes it durable at its end has only the last few megabytes left to write: the
 * disk works while the body is still arriving rather than after it (issue 16). One flush at a
 * time, through a handle of its own (never the writer's descriptor, which may close meanwhile).
 * A failed background flush is ignored: the final `fsync` still decides durability.
 */
export class FlushBehind {
  private handle: Promise<FileHandle | undefined> | undefined;
  private inFlight: Promise<void> | undefined;
  private sinceFlush = 0;

  constructor(
    private readonly filePath: string,
    progress: Readable,
  ) {
    progress.on('data', (chunk: Buffer) => this.written(chunk.length));
  }

  private written(bytes: number): void {
    this.sinceFlush += bytes;
    if (this.sinceFlush < FLUSH_EVERY_BYTES || this.inFlight) return;
    this.sinceFlush = 0;
    this.handle ??= fs.open(this.filePath, 'r').catch(() => undefined);
    const handle = this.handle;
    this.inFlight = (async () => {
      await (await handle)?.datasync();
    })()
      .catch(() => undefined)
      .finally(() => {
        this.inFlight = undefined;
      });
  }

  /** Waits for the flush in flight and closes the handle. */
  async close(): Promise<void> {
    await this.inFlight;
    await (await this.handle)?.close().catch(() => undefined);
  }
}
