import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { announcesBody, bodyTimeoutError } from './body-deadline.js';

/**
 * How much of a refused request's remaining body is read and thrown away so that its client
 * sees the answer: more than any body limit (a 50 MB upload, 32 MiB of skills, 16 MiB of chat).
 */
export const REFUSED_BODY_DRAIN_LIMIT = 64 * 1024 * 1024;

/**
 * The connections of refused bodies, and whether they may still linger. Replaced `destroySoon`
 * and the mark below touch only these sockets: each answered `Connection: close`.
 */
interface Lingering {
  /** Each lingering connection's way to close as soon as its answer is out. */
  readonly stops: Set<() => void>;
  /** The server is closing: a refused body's connection closes once its answer is sent. */
  closing: boolean;
}

/** Connections answered `Connection: close` before their request's body was read. */
const closingAfterRefusal = new WeakSet<Socket>();

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
 * one too slow to wait for (request-timeouts.ts), nor one refused while the server closes. A
 * request without a body has nothing to refuse: answered before Node marked it complete (at
 * once, as a 404 or a CORS preflight is), its connection stays open as any other.
 */
function drainRefusedBody(
  request: FastifyRequest,
  reply: FastifyReply,
  lingerMs: number,
  lingering: Lingering,
): void {
  const raw = request.raw;
  if (raw.complete || !announcesBody(raw) || bodyTimeoutError(raw)) return;
  reply.header('connection', 'close');
  const socket = raw.socket;
  // Requests injected in tests have no real socket to linger on.
  if (typeof socket?.destroySoon !== 'function') return;
  closingAfterRefusal.add(socket);
  const declared = Number(raw.headers['content-length']);
  if (Number.isFinite(declared) && declared > REFUSED_BODY_DRAIN_LIMIT) return;
  if (lingering.closing) return;
  closeAfterTheRest(raw, socket, lingerMs, lingering.stops);
}

function closeAfterTheRest(
  raw: IncomingMessage,
  socket: Socket,
  lingerMs: number,
  stops: Set<() => void>,
): void {
  const timer = setTimeout(() => socket.destroy(), lingerMs).unref();
  // Node ends a `Connection: close` answer with `destroySoon()`: the socket is destroyed once the
  // answer is written, whatever the client is still sending. This socket ends its side instead,
  // and is destroyed (as destroySoon would, once the answer is out) when the body has been read,
  // or at once when the server closes.
  const destroySoon = socket.destroySoon;
  let answered = false;
  let bodyRead = false;
  let lingers = true;
  const closeWhenDone = () => {
    if (answered && (bodyRead || !lingers)) destroySoon.call(socket);
  };
  const stop = () => {
    lingers = false;
    closeWhenDone();
  };
  stops.add(stop);
  socket.once('close', () => {
    clearTimeout(timer);
    stops.delete(stop);
  });
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

/** Closes, once their answers are out, the connections still reading refused bodies. */
export interface RefusedBodyDrain {
  /**
   * The server is closing: the connections lingering on a refused body close now (their answer
   * is sent), and one refused from now on closes once its answer is sent, as Node's own do. A
   * closing server would otherwise wait up to `lingerMs` for each.
   */
  stopLingering(): void;
}

/**
 * Every route's answer, the 404 and the error handler's included, drains what it refused, for
 * `lingerMs` at most after the answer. A request that follows the refused body on its connection
 * (pipelined, or sent by a client that did not wait for the answer) is not handled: the answer
 * said the connection serves no other (RFC 9112 §9.6), and the drain reads on through Node's
 * HTTP parser, which would hand it to the app to run with its answer lost.
 */
export function registerRefusedBodyDrain(app: FastifyInstance, lingerMs: number): RefusedBodyDrain {
  const lingering: Lingering = { stops: new Set(), closing: false };
  app.addHook('onRequest', (request, reply, done) => {
    const socket = request.raw.socket;
    if (!socket || !closingAfterRefusal.has(socket)) {
      done();
      return;
    }
    // Taken off Fastify's hands unanswered; its body is read and discarded with the rest.
    reply.hijack();
    request.raw.resume();
  });
  app.addHook('onSend', (request, reply, payload, done) => {
    drainRefusedBody(request, reply, lingerMs, lingering);
    done(null, payload);
  });
  return {
    stopLingering() {
      lingering.closing = true;
      for (const stop of lingering.stops) stop();
    },
  };
}
