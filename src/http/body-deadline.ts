import type { IncomingMessage } from 'node:http';
import type { ApiError } from '../errors.js';

/**
 * How slowly a request body may arrive: Apache mod_reqtimeout's `body=…,MinRate=…`. A body has
 * `timeoutMs` to start with, and every byte received extends its deadline by
 * 1/`minBytesPerSecond` seconds, so a large upload on a slow but steady link finishes while a
 * client that trickles a few bytes is cut off. A pause longer than `timeoutMs` is cut off too,
 * however much credit the bytes before it earned.
 */
export interface BodyRate {
  timeoutMs: number;
  minBytesPerSecond: number;
}

/**
 * Whether a request announces a body, by its length or by chunked transfer. One that does not has
 * none (RFC 9112 §6.3), though Node marks it complete only once its parser has read past its head:
 * a request answered at once may not be marked yet.
 */
export function announcesBody(request: IncomingMessage): boolean {
  const { headers } = request;
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** The instant (ms) by which a body must be complete, given what it has received so far. */
export function bodyDeadline(
  rate: BodyRate,
  progress: { startedAt: number; bytes: number; lastProgressAt: number },
): number {
  return Math.min(
    progress.startedAt + rate.timeoutMs + (progress.bytes * 1000) / rate.minBytesPerSecond,
    progress.lastProgressAt + rate.timeoutMs,
  );
}

interface Watched {
  request: IncomingMessage;
  /** Bytes the connection had read when the request's headers were complete. */
  baseline: number;
  startedAt: number;
  bytes: number;
  lastProgressAt: number;
  onExpired: () => void;
}

/**
 * Watches request bodies against their deadline. Bytes are read from the socket's own counter,
 * never by listening to the body (a `data` listener would start the stream flowing before its
 * reader is there). One timer serves every request, as Node's own checks of headers do.
 */
export class BodyDeadlines {
  private readonly watched = new Set<Watched>();
  private timer: NodeJS.Timeout | undefined;
  private readonly tickMs: number;

  constructor(
    private readonly rate: BodyRate,
    private readonly now: () => number = Date.now,
  ) {
    this.tickMs = Math.min(1000, Math.max(10, Math.floor(rate.timeoutMs / 4)));
  }

  /** Watches `request` until its body is complete or its connection closes. */
  watch(request: IncomingMessage, onExpired: () => void): void {
    const bytesRead = request.socket?.bytesRead;
    // Requests injected in tests have no real socket to measure.
    if (request.complete || typeof bytesRead !== 'number') return;
    const startedAt = this.now();
    this.watched.add({
      request,
      baseline: bytesRead,
      startedAt,
      bytes: 0,
      lastProgressAt: startedAt,
      onExpired,
    });
    this.timer ??= setInterval(() => this.check(), this.tickMs).unref();
  }

  /** Runs on every tick; exposed so that a test can drive it with its own clock. */
  check(): void {
    const now = this.now();
    for (const entry of this.watched) {
      const { request } = entry;
      const socket = request.socket;
      if (request.complete || !socket || socket.destroyed) {
        this.watched.delete(entry);
        continue;
      }
      const bytes = socket.bytesRead - entry.baseline;
      if (bytes > entry.bytes) {
        entry.bytes = bytes;
        entry.lastProgressAt = now;
      }
      if (now >= bodyDeadline(this.rate, entry)) {
        this.watched.delete(entry);
        entry.onExpired();
      }
    }
    if (this.watched.size === 0) this.stop();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.watched.clear();
  }
}

const TIMED_OUT = Symbol('atrium.bodyTimedOut');

/** Marks a request whose body missed its deadline, with the error it is to be answered with. */
export function markBodyTimedOut(request: IncomingMessage, error: ApiError): void {
  (request as IncomingMessage & { [TIMED_OUT]?: ApiError })[TIMED_OUT] = error;
}

/**
 * The error of a request whose body missed its deadline. Whatever failed downstream because of
 * it (a cut-off upload, a broken multipart part) is answered with this instead.
 */
export function bodyTimeoutError(request: IncomingMessage): ApiError | undefined {
  return (request as IncomingMessage & { [TIMED_OUT]?: ApiError })[TIMED_OUT];
}
