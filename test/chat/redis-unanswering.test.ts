/**
 * A Redis that stops answering (its host blackholed or hung, a network partition, a server stuck
 * in a slow command) neither refuses nor closes connections: nothing comes back. ioredis waits
 * for ever for an answer by default, so the rate limit's count held every request of the API,
 * `/readyz` with them, and stop and resume never answered. Each Redis command now fails after a
 * bounded time, and what needs it falls back as when Redis is down (docs/chat.md, README).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type BlackholeProxy, startBlackholeProxy } from '../db/blackhole-proxy.js';
import { deleteRedisKeys, REDIS_URL, redisReachable } from '../helpers/redis.js';
import { CHAT_KEYS, userText } from './fixtures.js';
import { listeningChatApp } from './listening-app.js';

/**
 * How long an answer may take before the request counts as hanging: the command timeout and a
 * generous margin for a loaded machine; a hanging request never answers at all.
 */
const HANG_BOUND_MS = 10_000;
const PREFIX = `atrium-unanswering-${randomBytes(4).toString('hex')}`;

describe.skipIf(!(await redisReachable()))('a Redis that stops answering', () => {
  let proxy: BlackholeProxy;
  let app: Awaited<ReturnType<typeof listeningChatApp>>;

  beforeAll(async () => {
    const target = new URL(REDIS_URL);
    proxy = await startBlackholeProxy({ host: target.hostname, port: Number(target.port || 6379) });
    app = await listeningChatApp({
      env: {
        REDIS_URL: proxy.through(REDIS_URL),
        ATRIUM_REDIS_PREFIX: PREFIX,
        // Under 64 a minute, every request is counted in Redis on its own (no leases).
        ATRIUM_RATE_LIMIT_PER_MINUTE: '50',
      },
      shutdownWaitMs: 50,
    });
  });
  afterEach(() => proxy?.forward());
  afterAll(async () => {
    proxy?.forward();
    await app?.close();
    await proxy?.close();
    await deleteRedisKeys(PREFIX);
  });

  const headers = { 'x-service-api-key': CHAT_KEYS.main };
  /** The answer, or the error of a request still unanswered after HANG_BOUND_MS. */
  const request = (path: string, init: RequestInit = {}) =>
    fetch(`${app.baseUrl}${path}`, { ...init, signal: AbortSignal.timeout(HANG_BOUND_MS) }).catch(
      (error: Error) => error,
    );

  it('serves requests uncounted, says so in /readyz, answers stop with 503, and recovers', async () => {
    const created = await app.post({ agentId: 'agt_plain', messages: [userText('hello')] });
    const { chatId } = (await created.json()) as { chatId: string };
    const ready = await request('/readyz');
    expect(await (ready as Response).json()).toMatchObject({ redis: 'available' });

    proxy.blackhole('freeze');

    // Every request counts its key in Redis first: it is served, uncounted, not held.
    const [listed, probe, stop] = await Promise.all([
      request('/v1/workspace/wsp_main/agents', { headers }),
      request('/readyz'),
      request(`/v1/chat/${chatId}/stop`, { method: 'POST', headers }),
    ]);
    expect(listed, 'still unanswered: the request hangs').toBeInstanceOf(Response);
    expect((listed as Response).status).toBe(200);
    expect(probe, 'still unanswered: /readyz hangs').toBeInstanceOf(Response);
    expect((probe as Response).status).toBe(200);
    expect(await (probe as Response).json()).toMatchObject({ status: 'ready', redis: 'unavailable' });
    expect(stop, 'still unanswered: the stop hangs').toBeInstanceOf(Response);
    expect((stop as Response).status).toBe(503);
    expect((stop as Response).headers.get('retry-after')).toBe('5');

    proxy.forward();
    await expect
      .poll(async () => ((await await request('/readyz')) as Response).json() as Promise<unknown>, {
        timeout: 10_000,
      })
      .toMatchObject({ redis: 'available' });
    const again = await request(`/v1/chat/${chatId}/stop`, { method: 'POST', headers });
    expect((again as Response).status).toBe(200);
    expect(await (again as Response).json()).toEqual({ data: { stopped: false, messageId: null } });
  }, 60_000);
});
