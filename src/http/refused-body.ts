import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { bodyTimeoutError } from './body-deadline.js';

/**
 * How much of a refused request's remaining body is read and thrown away so that its client
 * sees the answer: more than any body limit (a 50 MB upload, 32 MiB of skills, 16 MiB of chat).
 */
export const REFUSED_BODY_DRAIN_LIMIT = 64 * 1024 * 1024;

/**
 * A request answered before its body was read: too large (413), an unknown route (404), a wrong
 * type or a bad signature. Its connection serves no other request: the answer says
 * `Connection: close`, as Fastify's body parser asks. Closing at once, as Node then does, makes
 * the kernel reset the connection while the client still writes, and most clients (fetch,
 * requests) write the whole body before they read: the reset throws our answer away and the
 * client sees only a broken pipe. So the connection is closed the way RFC 9112 §9.6 and
 * nginx's `lingering_close` do: the answer is sent and our side ended, and what the client still
 * sends is read and discarded until its body ends, but for `lingerMs` after the answer at most
 * (the body timeout: a refused body earns no time by its bytes, as an accepted one does, or 64 MiB
 * at the minimum rate would hold the connection for over two hours) and REFUSED_BODY_DRAIN_LIMIT
 * bytes at most; then it is closed. A body declared over that limit is not read at all, nor is
 * one too slow to wait for (request-timeouts.ts).
 */
export function drainRefusedBody(request: FastifyRequest, reply: FastifyReply, lingerMs: number): void {
  const raw = request.raw;
  if (raw.complete || bodyTimeoutError(raw)) return;
  reply.header('connection', 'close');
  const socket = raw.socket;
  const declared = Number(raw.headers['content-length']);
  // Requests injected in tests have no real socket to linger on.
  if (typeof socket?.destroySoon !== 'function') return;
  if (Number.isFinite(declared) && declared > REFUSED_BODY_DRAIN_LIMIT) return;
  closeAfterTheRest(raw, socket, lingerMs);
}

function closeAfterTheRest(raw: IncomingMessage, socket: Socket, lingerMs: number): void {
  const timer = setTimeout(() => socket.destroy(), lingerMs).unref();
  socket.once('close', () => clearTimeout(timer));
  // Node ends a `Connection: close` answer with `destroySoon()`: the socket is destroyed once the
  // answer is written, whatever the client is still sending. This socket ends its side instead,
  // and is destroyed (as destroySoon would, once the answer is out) when the body has been read.
  const destroySoon = socket.destroySoon;
  let answered = false;
  let bodyRead = false;
  const closeWhenDone = () => {
    if (answered && bodyRead) destroySoon.call(socket);
  };
  socket.destroySoon = () => {
    answered = true;
    socket.end();
    closeWhenDone();
  };
  let drained = 0;
  raw.on('data', (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > REFUSED_BODY_DRAIN_LIMIT) socket.destroy();
  });
  raw.once('end', () => {
    bodyRead = true;
    closeWhenDone();
  });
  raw.resume();
}

/**
 * Every route's answer, the 404 and the error handler's included, drains what it refused, for
 * `lingerMs` at most after the answer.
 */
export function registerRefusedBodyDrain(app: FastifyInstance, lingerMs: number): void {
  app.addHook('onSend', (request, reply, payload, done) => {
    drainRefusedBody(request, reply, lingerMs);
    done(null, payload);
  });
}
