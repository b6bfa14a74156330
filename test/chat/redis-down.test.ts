import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAT_KEYS, chatRows, userText } from '../chat/fixtures.js';
import { listeningChatApp } from '../chat/listening-app.js';
import { EventReader } from '../chat/sse-reader.js';
import { captureLog } from '../helpers/log-capture.js';

/**
 * REDIS_URL names a closed port: Redis is configured but down. Only what needs it fails (stop
 * and resume across processes, 503); replies and reads go on (README, "Redis").
 */
let app: Awaited<ReturnType<typeof listeningChatApp>>;
const log = captureLog();
beforeAll(async () => {
  app = await listeningChatApp({
    env: { REDIS_URL: 'redis://127.0.0.1:9', LOG_LEVEL: 'info' },
    shutdownWaitMs: 50,
    logStream: log.stream,
  });
});
afterAll(async () => {
  // Bounded: a response that never ends (as before) would keep app.close() waiting for ever.
  await Promise.race([app.close(), new Promise((resolve) => setTimeout(resolve, 3_000))]);
});

describe('Redis configured and down', () => {
  it('leaves the process ready: /readyz is 200 and says redis is unavailable', async () => {
    // A Redis every process shares going down must not take them all out of the load balancer
    // at once: they still serve everything but stop and resume across processes.
    const response = await fetch(`${app.baseUrl}/readyz`, { signal: AbortSignal.timeout(10_000) });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      status: 'ready',
      checks: { database: 'ok', storage: 'ok', shutdown: 'ok' },
      redis: 'unavailable',
      vectors: expect.any(String),
    });
  }, 20_000);

  it('a streamed reply still reaches its client and is stored', async () => {
    const response = await fetch(`${app.baseUrl}/v1/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-service-api-key': CHAT_KEYS.main },
      body: JSON.stringify({ agentId: 'agt_plain', stream: true, messages: [userText('hello')] }),
      signal: AbortSignal.timeout(8_000),
    }).catch((error: Error) => error.name);
    expect(response).toBeInstanceOf(Response);
    const events = new EventReader(response as Response);
    await events.all();
    expect(events.chunks.at(-1)?.type).toBe('finish');
    const chatId = (response as Response).headers.get('x-chat-id')!;
    expect((await chatRows(app.t.db, chatId)).some((row) => row.role === 'assistant')).toBe(true);
  }, 20_000);

  it('reads and lists its chat (200); stop and resume answer 503, not 500', async () => {
    const created = await app.post({ agentId: 'agt_plain', messages: [userText('hello')] });
    const { chatId } = (await created.json()) as { chatId: string };
    const headers = { 'x-service-api-key': CHAT_KEYS.main };
    const signal = () => AbortSignal.timeout(10_000);
    const status = (r: Promise<Response>) =>
      r.then(
        (x) => x.status,
        (e: Error) => e.name,
      );
    const read = await status(fetch(`${app.baseUrl}/v1/chats/${chatId}`, { headers, signal: signal() }));
    const list = await status(fetch(`${app.baseUrl}/v1/chats`, { headers, signal: signal() }));
    const stop = await status(
      fetch(`${app.baseUrl}/v1/chat/${chatId}/stop`, { method: 'POST', headers, signal: signal() }),
    );
    const resume = await status(
      fetch(`${app.baseUrl}/v1/chat/${chatId}/stream`, { headers, signal: signal() }),
    );
    expect({ read, list, stop, resume }).toEqual({
      read: 200,
      list: 200,
      stop: 503,
      resume: 503,
    });

    // …naming what did not answer: it said "Storage or the database did not answer", and an
    // operator looked at the wrong service.
    const answer = await fetch(`${app.baseUrl}/v1/chat/${chatId}/stop`, {
      method: 'POST',
      headers: { ...headers, 'x-request-id': 'stop-without-redis' },
      signal: signal(),
    });
    expect(answer.headers.get('retry-after')).toBe('5');
    expect(await answer.json()).toEqual({
      code: 'service_unavailable',
      message: 'Redis did not answer (stop and resume of a reply need it); try again shortly',
      details: { retryAfterSeconds: 5 },
    });
    // The outage is logged once, by itself (README, "Logs"): each refused stop or resume is a
    // warn line naming it, not an error line with a stack per request.
    const lines = log.lines.filter(
      (line) => line.reqId === 'stop-without-redis' && line.msg !== 'request completed',
    );
    expect(lines).toEqual([expect.objectContaining({ level: 40, code: 'service_unavailable', status: 503 })]);
    expect(JSON.stringify(lines)).not.toMatch(/stack/);
  }, 60_000);
});
