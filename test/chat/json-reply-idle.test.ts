import { afterAll, beforeAll, expect, it } from 'vitest';
import { listeningChatApp } from './listening-app.js';

/**
 * A non-streamed reply is silent on its connection until it is done. Each of its steps is bounded
 * by the upstream timeout, but not all of them together: the connection's idle timeout must not
 * cut a reply that is still working (it once did, and the client never got the stored answer).
 */
let app: Awaited<ReturnType<typeof listeningChatApp>>;
beforeAll(async () => {
  app = await listeningChatApp({
    env: { ATRIUM_UPSTREAM_TIMEOUT_MS: '2000', ATRIUM_IDLE_TIMEOUT_MS: '3000' },
  });
});
afterAll(() => app.close());

it('answers a run longer than the idle timeout whose every step is within the upstream timeout', async () => {
  const { upstream } = app;
  // Four sub-agent calls, each answered 1,000 ms after it was asked: 4 s in all. Each step keeps
  // half the upstream timeout to spare (with 700 ms of 1,000 the requests' own way there and back
  // was left 300 ms on a loaded machine).
  upstream.enqueue(
    ...['a', 'b', 'c', 'd'].flatMap((message) => [
      { kind: 'tool-calls' as const, calls: [{ name: 'agt_plain', arguments: { message } }] },
      { kind: 'held' as const, text: `sub ${message}`, afterPieces: 0 },
    ]),
    { kind: 'text', text: 'all done' },
  );
  let seen = upstream.requests.length;
  const releases = setInterval(() => {
    if (upstream.requests.length === seen) return;
    seen = upstream.requests.length;
    if (seen % 2 === 0) setTimeout(() => upstream.release(), 1000);
  }, 10);
  try {
    const started = Date.now();
    const res = await fetch(`${app.baseUrl}/v1/agents/agt_lead/runs`, {
      method: 'POST',
      headers: app.headers,
      body: JSON.stringify({ message: 'go' }),
    });
    expect(res.status).toBe(200);
    expect((await res.json()).data).toMatchObject({ status: 'completed', agentResponse: 'all done' });
    expect(Date.now() - started).toBeGreaterThan(3000);
    // The connection is still good for the next request (keep-alive).
    const again = await app.post({
      agentId: 'agt_plain',
      messages: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
    });
    expect(again.status).toBe(200);
  } finally {
    clearInterval(releases);
  }
}, 20_000);
