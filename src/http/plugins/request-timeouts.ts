import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { HttpTimeouts } from '../../config.js';
import { ApiError } from '../../errors.js';
import { announcesBody, BodyDeadlines, markBodyTimedOut } from '../body-deadline.js';

/**
 * Every request body, on every route (unknown ones included), must keep to its deadline (see
 * body-deadline.ts); one answered before it was read, to the shorter bound of refused-body.ts
 * as well. Node's own `requestTimeout` cannot do this: one fixed limit for every
 * request would either cut honest 50 MB uploads on slow links or let a trickling client hold a
 * connection for as long.
 */
export function registerRequestTimeouts(app: FastifyInstance, timeouts: HttpTimeouts): void {
  const rate = { timeoutMs: timeouts.bodyTimeoutMs, minBytesPerSecond: timeouts.bodyMinBytesPerSecond };
  const deadlines = new BodyDeadlines(rate);

  const expire = (request: FastifyRequest, reply: FastifyReply) => {
    const raw = request.raw;
    const error = new ApiError(
      'request_timeout',
      `The request body arrived too slowly (allowed: ${rate.timeoutMs} ms plus 1 s per ${rate.minBytesPerSecond} bytes, with no pause over ${rate.timeoutMs} ms)`,
      { bodyTimeoutMs: rate.timeoutMs, minBytesPerSecond: rate.minBytesPerSecond },
    );
    markBodyTimedOut(raw, error);
    request.log.info(
      { code: error.code, bytesRead: raw.socket?.bytesRead },
      'request body too slow: cut off',
    );
    if (reply.sent || raw.listenerCount('error') === 0) {
      // Answered already, or nobody reads the body: nothing left to say, only a connection to free.
      raw.socket?.destroy();
      return;
    }
    // The reader of the body fails with this error, and the error handler answers 408 and closes
    // the connection. Should no answer follow, the connection is closed all the same.
    raw.emit('error', error);
    setTimeout(() => raw.socket?.destroy(), rate.timeoutMs).unref();
  };

  app.addHook('onRequest', (request, reply, done) => {
    if (announcesBody(request.raw)) deadlines.watch(request.raw, () => expire(request, reply));
    done();
  });
  app.addHook('onClose', async () => deadlines.stop());
}
