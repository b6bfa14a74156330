import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import pino from 'pino';

interface EndableStream {
  write(chunk: string): boolean;
  end(): void;
  once(event: 'close' | 'error', listener: () => void): unknown;
  /** Set once closed: SonicBoom (pino's destination) throws on a write after that. */
  destroyed?: boolean;
  /** Set by end() on a Node stream, which fails a write after it. */
  writableEnded?: boolean;
}

function isEndable(stream: unknown): stream is EndableStream {
  return (
    typeof stream === 'object' &&
    stream !== null &&
    typeof (stream as Partial<EndableStream>).write === 'function' &&
    typeof (stream as Partial<EndableStream>).end === 'function' &&
    typeof (stream as Partial<EndableStream>).once === 'function'
  );
}

/**
 * Ends the logger's destination once the lines written so far are out, at most `boundMs` later,
 * so that a process about to exit keeps its last lines. pino writes to stdout asynchronously: a
 * line is handed to a thread-pool write, and `process.exit()` while that write is under way
 * loses it (pino's own exit hook writes only what is not already being written). The bound keeps
 * a stdout nobody reads from holding the exit forever.
 *
 * A line logged once the destination is closed is dropped: work that outlives the shutdown
 * (server.ts waits for requests and its own background work, not for everything a library or
 * a detached task may still be doing) may still log, and SonicBoom throws
 * "SonicBoom destroyed" on that write, in whatever hook or callback logged it. SonicBoom still
 * writes the lines logged between end() and its close.
 */
export async function endLogWrites(log: FastifyBaseLogger, boundMs = 2_000): Promise<void> {
  // pino keeps its destination under this symbol, which its typings leave out.
  const stream: unknown = (log as unknown as Record<symbol, unknown>)[pino.symbols.streamSym];
  // process.stdout itself (pino's destination when stdout was replaced) is not the logger's to end.
  if (!isEndable(stream) || stream === process.stdout || stream === process.stderr) return;
  const write = stream.write;
  // An own property over the prototype's method, as pino itself does to silence a broken pipe.
  stream.write = (chunk) => (stream.destroyed || stream.writableEnded ? true : write.call(stream, chunk));
  const bound = new AbortController();
  const ended = new Promise<void>((resolve) => {
    stream.once('close', resolve);
    stream.once('error', resolve);
  });
  try {
    stream.end();
  } catch {
    return; // already ended: nothing left to write
  }
  await Promise.race([ended, sleep(boundMs, undefined, { signal: bound.signal }).catch(() => undefined)]);
  bound.abort();
}
