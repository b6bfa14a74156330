import type { FastifyRequest } from 'fastify';

/**
 * Runs a non-streamed reply with its connection's idle timeout (`ATRIUM_IDLE_TIMEOUT_MS`) paused.
 * Such a reply says nothing on its connection until it is done, through up to 8 model steps and
 * their tools, each bounded by the upstream timeout but not together: the idle timeout would cut
 * a long reply that is still working, and the client would never get the answer that was stored.
 * The timeout is set again before the answer is written, so a client that stops reading it is
 * still cut off.
 */
export async function withIdleTimeoutPaused<T>(request: FastifyRequest, work: () => Promise<T>): Promise<T> {
  const socket = request.raw.socket as (typeof request.raw.socket & { timeout?: number }) | undefined;
  // Injected requests (tests) have no real socket.
  if (typeof socket?.setTimeout !== 'function') return work();
  const idleTimeoutMs = socket.timeout ?? 0;
  socket.setTimeout(0);
  try {
    return await work();
  } finally {
    if (!socket.destroyed) socket.setTimeout(idleTimeoutMs);
  }
}
