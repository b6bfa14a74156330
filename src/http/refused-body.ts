import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { bodyTimeoutError } from './body-deadline.js';

/**
 * How much of a refused request's remaining body is read and thrown away so that its client
 * sees the answer: more than any body limit (a 50 MB upload, 32 MiB of skills, 16 MiB of chat).
 */
export const REFUSED_BODY_DRAIN_LIMIT = 64 * 1024 * 1024;

/**
 * A request answered before its body was read: too large (413), a wrong type or a bad
 * signature. Closing the connection at once, as Fastify's body parser asks with `Connection:
 * close`, makes the kernel reset it while the client still writes, and most clients (fetch,
 * requests) write the whole body before they read: the reset throws our answer away and the
 * client sees only a broken pipe. So the rest is read and discarded, up to
 * REFUSED_BODY_DRAIN_LIMIT, and the connection stays open for the next request; past the limit
 * (or declared over it) the connection is closed. A body too slow to wait for
 * (request-timeouts.ts) is not drained either.
 */
export function drainRefusedBody(request: FastifyRequest, reply: FastifyReply): void {
  const raw = request.raw;
  if (raw.complete || bodyTimeoutError(raw)) return;
  const declared = Number(raw.headers['content-length']);
  if (Number.isFinite(declared) && declared > REFUSED_BODY_DRAIN_LIMIT) {
    reply.header('connection', 'close');
    return;
  }
  // Fastify's parser asks to close on every refused body; during shutdown Fastify asks on the raw
  // response instead, which stays: a closing server takes no next request.
  if (reply.raw.getHeader('connection') === undefined) reply.removeHeader('connection');
  let drained = 0;
  raw.on('data', (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > REFUSED_BODY_DRAIN_LIMIT) raw.socket?.destroy();
  });
  raw.resume();
}

/** Every route's answer, the 404 and the error handler's included, drains what it refused. */
export function registerRefusedBodyDrain(app: FastifyInstance): void {
  app.addHook('onSend', (request, reply, payload, done) => {
    drainRefusedBody(request, reply);
    done(null, payload);
  });
}
