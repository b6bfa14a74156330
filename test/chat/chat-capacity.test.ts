import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CHAT_KEYS, chatRows, userText } from './fixtures.js';
import { listeningChatApp } from './listening-app.js';
import { EventReader, textDeltas } from './sse-reader.js';

let app: Awaited<ReturnType<typeof listeningChatApp>>;

/**
 * The app's readiness once its shutdown has begun to drain replies (503): close() gets there
 * after a few turns of the event loop, which a fixed wait could outlast on a loaded machine.
 */
function waitForDrain(baseUrl: string): Promise<Response> {
  return vi.waitFor(
    async () => {
      const ready = await fetch(`${baseUrl}/readyz`);
      if (ready.status === 503) return ready;
      await ready.body?.cancel();
      throw new Error(`readyz answered ${ready.status}, not yet draining`);
    },
    { timeout: 10_000, interval: 20 },
  );
}

beforeAll(async () => {
  app = await listeningChatApp({ env: { ATRIUM_MAX_CONCURRENT_REPLIES: '1' }, shutdownWaitMs: 50 });
});
afterAll(() => app.close());

describe('ATRIUM_MAX_CONCURRENT_REPLIES and shutdown', () => {
  it('answers 503 with Retry-After beyond the limit, storing nothing; then stores an interrupted reply at shutdown', async () => {
    app.upstream.enqueue({ kind: 'held', text: 'one two three four', afterPieces: 2 });
    const first = await app.post({ agentId: 'agt_plain', stream: true, messages: [userText('first')] });
    const chatId = first.headers.get('x-chat-id')!;
    const events = new EventReader(first);
    await events.until(textDeltas(2));

    const chatsBefore = await app.t.db.selectFrom('chats').select('id').execute();
    const busy = await app.post({ agentId: 'agt_plain', messages: [userText('second')] });
    expect(busy.status).toBe(503);
    expect(busy.headers.get('retry-after')).toBe('5');
    expect(await busy.json()).toEqual({
      code: 'service_unavailable',
      message: 'Too many replies are being generated right now; try again shortly',
      details: { retryAfterSeconds: 5 },
    });
    expect(await app.t.db.selectFrom('chats').select('id').execute()).toEqual(chatsBefore);

    // Shutdown lets the reply run for its bound (50 ms here), then stores it as interrupted.
    await app.t.app.close();
    await events.all();
    expect(events.chunks.at(-1)).toEqual({
      type: 'error',
      errorText: 'The server shut down while this reply was being generated',
    });
    const reply = (await chatRows(app.t.db, chatId)).find((row) => row.role === 'assistant');
    expect(reply?.finish_reason).toBe('interrupted');
    expect(JSON.parse(reply!.parts)[1]).toMatchObject({ type: 'text', text: 'one two ' });
  });
});

describe('a process draining on shutdown', () => {
  let draining: Awaited<ReturnType<typeof listeningChatApp>>;
  beforeAll(async () => {
    draining = await listeningChatApp({ shutdownWaitMs: 3_000 });
  });
  afterAll(() => draining.close());

  it('still stops a running reply for its client (stored as stopped), refuses new ones, and is not ready', async () => {
    draining.upstream.enqueue({ kind: 'held', text: 'one two three four', afterPieces: 2 });
    const first = await draining.post({ agentId: 'agt_plain', stream: true, messages: [userText('first')] });
    const chatId = first.headers.get('x-chat-id')!;
    const events = new EventReader(first);
    await events.until(textDeltas(2));

    const closing = draining.t.app.close();
    // Before: Fastify's own 503 body for every request while the replies drained, the stop too.
    const ready = await waitForDrain(draining.baseUrl);
    const refused = await draining.post({ agentId: 'agt_plain', messages: [userText('second')] });
    const stop = await fetch(`${draining.baseUrl}/v1/chat/${chatId}/stop`, {
      method: 'POST',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    const answers = {
      ready: [ready.status, (await ready.json()).checks?.shutdown],
      refused: [refused.status, await refused.json(), refused.headers.get('retry-after')],
      stop: [stop.status, await stop.json()],
    };
    await closing;
    await events.all();
    expect(answers).toEqual({
      ready: [503, 'unavailable'],
      // Before: "Too many replies are being generated right now", as if the process were full.
      refused: [
        503,
        {
          code: 'service_unavailable',
          message: 'This server is shutting down; send the request again',
          details: { retryAfterSeconds: 5 },
        },
        '5',
      ],
      stop: [200, { data: { stopped: true, messageId: expect.any(String) } }],
    });
    const reply = (await chatRows(draining.t.db, chatId)).find((row) => row.role === 'assistant');
    expect(reply?.finish_reason).toBe('stopped');
  });
});

const REDIS_URL = process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379';

/**
 * A reply resumed through the process that generates it, ending normally while that process
 * drains on shutdown: the replay must get the reply's last chunks and [DONE], as the reply's own
 * client does (drain ends replays of replies running elsewhere, not of its own).
 */
describe.each([
  ['memory', {}],
  ['redis', { REDIS_URL, ATRIUM_REDIS_PREFIX: `atrium-review-${randomBytes(4).toString('hex')}` }],
] as const)('a replay of a reply of the draining process (%s)', (_name, env) => {
  // 60 s: the test starts an app of its own, and took 19 s in all on a loaded machine.
  it('gets the end of the reply when it finishes during the drain, as its own client does', async () => {
    const app = await listeningChatApp({ env: { ...env }, shutdownWaitMs: 5_000 });
    try {
      app.upstream.enqueue({ kind: 'held', text: 'one two three four five six', afterPieces: 2 });
      const first = await app.post({ agentId: 'agt_plain', stream: true, messages: [userText('go')] });
      const chatId = first.headers.get('x-chat-id')!;
      const own = new EventReader(first);
      await own.until(textDeltas(2));
      const resumed = await fetch(`${app.baseUrl}/v1/chat/${chatId}/stream`, {
        headers: { 'x-service-api-key': CHAT_KEYS.main },
      });
      expect(resumed.status).toBe(200);
      const replay = new EventReader(resumed);
      await replay.until(textDeltas(2));

      const closing = app.t.app.close();
      await waitForDrain(app.baseUrl);
      app.upstream.release();
      const [ownChunks, replayChunks] = await Promise.all([own.all(), replay.all()]);
      await closing;
      expect(replay.text()).toBe(own.text());
      expect(replayChunks.at(-1)?.type).toBe(ownChunks.at(-1)?.type);
      expect(replay.done).toBe(own.done);
    } finally {
      await app.close().catch(() => undefined);
    }
  }, 60_000);
});

/**
 * Fastify times each hook of its close, the preClose hook that drains replies included, with its
 * plugin timeout (10 s by default). The drain's own bound is 15 s plus 5 s to store interrupted
 * replies: before, a reply still running 10 s after SIGTERM made `close()` reject with
 * "Plugin did not start in time" (AVV_ERR_READY_TIMEOUT), so `atrium serve` logged
 * "shutdown failed" and exited with 1 after a drain that had worked.
 */
describe('a drain longer than Fastify’s plugin timeout', () => {
  it('closes without an error when a reply ends 10.5 s into the drain', async () => {
    const app = await listeningChatApp({ shutdownWaitMs: 15_000 });
    try {
      app.upstream.enqueue({ kind: 'held', text: 'one two three four', afterPieces: 2 });
      const first = await app.post({ agentId: 'agt_plain', stream: true, messages: [userText('go')] });
      const chatId = first.headers.get('x-chat-id')!;
      const events = new EventReader(first);
      await events.until(textDeltas(2));

      const closing = app.t.app.close().then(
        () => 'closed',
        (error: unknown) => (error instanceof Error ? error.message : String(error)),
      );
      await waitForDrain(app.baseUrl);
      await new Promise((resolve) => setTimeout(resolve, 10_500));
      app.upstream.release();
      await events.all();
      expect(await closing).toBe('closed');
      const reply = (await chatRows(app.t.db, chatId)).find((row) => row.role === 'assistant');
      expect(reply?.finish_reason).toBe('stop');
    } finally {
      await app.close().catch(() => undefined);
    }
  }, 60_000);
});
