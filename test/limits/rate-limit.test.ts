import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { deleteRedisKeys, REDIS_URL, redisReachable } from '../helpers/redis.js';

const LIMIT = 5;
const SETUP = TENANCY_SETUP.replace(
  'name: Main\n',
  `name: Main\n        limits: { rateLimitPerMinute: ${LIMIT} }\n`,
);
/** 10:00:42 UTC: 18 seconds before the window ends. */
const NOW = new Date('2026-11-23T10:00:42.000Z');

const hasRedis = await redisReachable();

/** Two apps on one database, as two processes behind a load balancer, with one clock. */
async function twoProcesses(env: Record<string, string> = {}) {
  let now = NOW;
  const clock = () => now;
  const first = await createTestApp({ setup: SETUP, clock, env });
  const second = await buildApp({
    config: first.env.config,
    db: first.env.database.db,
    clock,
  });
  await second.ready();
  return {
    apps: [first.app, second],
    setNow: (date: Date) => {
      now = date;
    },
    async close() {
      await second.close();
      await first.close();
    },
  };
}

const redisPrefixes: string[] = [];
afterAll(async () => {
  if (!hasRedis) return;
  for (const prefix of redisPrefixes) await deleteRedisKeys(prefix);
});

function variants() {
  const list: Array<{ name: string; env: () => Record<string, string> }> = [
    { name: `database (${engineName})`, env: () => ({}) },
  ];
  if (hasRedis) {
    list.push({
      name: 'Redis',
      env: () => {
        const prefix = `atrium-test-${randomBytes(6).toString('hex')}:`;
        redisPrefixes.push(prefix);
        return { REDIS_URL, ATRIUM_REDIS_PREFIX: prefix };
      },
    });
  }
  return list;
}

describe.each(variants())('per-key rate limit counted in the $name', ({ env }) => {
  it('is one count across processes, with the same figures and IETF RateLimit fields on each', async () => {
    const cluster = await twoProcesses(env());
    try {
      const headers = { 'x-service-api-key': KEYS.mainOwner };
      const statuses: number[] = [];
      for (let i = 0; i < 2 * LIMIT; i++) {
        const app = cluster.apps[i % 2]!;
        const res = await app.inject({ method: 'GET', url: '/v1/projects', headers });
        statuses.push(res.statusCode);
        const remaining = Math.max(0, LIMIT - (i + 1));
        expect(res.headers['x-ratelimit-limit']).toBe(String(LIMIT));
        expect(res.headers['x-ratelimit-remaining']).toBe(String(remaining));
        expect(res.headers['ratelimit-policy']).toBe(`"per-key";q=${LIMIT};w=60`);
        expect(res.headers.ratelimit).toBe(`"per-key";r=${remaining};t=18`);
        if (res.statusCode === 429) {
          expect(res.json()).toEqual({
            code: 'rate_limited',
            message: `Rate limit of ${LIMIT} requests per minute reached`,
            details: { retryAfterSeconds: 18 },
          });
          expect(res.headers['retry-after']).toBe('18');
        }
      }
      expect(statuses).toEqual([...Array(LIMIT).fill(200), ...Array(LIMIT).fill(429)]);

      // Another key has its own count; the next window starts again on both processes.
      const other = await cluster.apps[1]!.inject({
        method: 'GET',
        url: '/v1/projects',
        headers: { 'x-service-api-key': KEYS.mainMember },
      });
      expect(other.statusCode).toBe(200);
      cluster.setNow(new Date(NOW.getTime() + 18_000));
      const next = await cluster.apps[0]!.inject({ method: 'GET', url: '/v1/projects', headers });
      expect(next.statusCode).toBe(200);
      expect(next.headers.ratelimit).toBe(`"per-key";r=${LIMIT - 1};t=60`);
    } finally {
      await cluster.close();
    }
  });

  it("holds the workspace's limit for an organization key acting there, counted per key and workspace", async () => {
    const cluster = await twoProcesses(env());
    try {
      const statuses: number[] = [];
      for (let i = 0; i < LIMIT + 2; i++) {
        const res = await cluster.apps[i % 2]!.inject({
          method: 'GET',
          url: '/v1/projects',
          headers: { 'x-service-api-key': KEYS.acmeOrg, 'x-workspace-id': 'wsp_main' },
        });
        statuses.push(res.statusCode);
      }
      // Once the organization's default limit (600) applied alone, whatever the workspace set.
      expect(statuses).toEqual([...Array(LIMIT).fill(200), 429, 429]);
      // The same count holds on a route that finds the workspace through the agent.
      const chat = await cluster.apps[0]!.inject({
        method: 'POST',
        url: '/v1/chat',
        headers: { 'x-service-api-key': KEYS.acmeOrg },
        payload: { agentId: 'agt_zeta', messages: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }] },
      });
      expect(chat.statusCode).toBe(429);
      // The same key in a workspace without a limit of its own is not held by wsp_main's count.
      const other = await cluster.apps[0]!.inject({
        method: 'GET',
        url: '/v1/projects',
        headers: { 'x-service-api-key': KEYS.acmeOrg, 'x-workspace-id': 'wsp_other' },
      });
      expect(other.statusCode).toBe(200);
    } finally {
      await cluster.close();
    }
  });

  it('counts concurrent requests exactly', async () => {
    const cluster = await twoProcesses(env());
    try {
      const headers = { 'x-service-api-key': KEYS.mainOwner };
      const responses = await Promise.all(
        Array.from({ length: 4 * LIMIT }, (_, i) =>
          cluster.apps[i % 2]!.inject({ method: 'GET', url: '/v1/projects', headers }),
        ),
      );
      expect(responses.filter((r) => r.statusCode === 200)).toHaveLength(LIMIT);
      expect(responses.filter((r) => r.statusCode === 429)).toHaveLength(3 * LIMIT);
    } finally {
      await cluster.close();
    }
  });
});

describe('per-key rate limit without its store', () => {
  it.skipIf(!hasRedis)(
    'serves requests uncounted while Redis is unreachable, rather than refusing them',
    async () => {
      const lines: Array<{ level: number; msg: string }> = [];
      const logStream = new Writable({
        write(chunk: Buffer, _encoding, done) {
          for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
          done();
        },
      });
      const t = await createTestApp({
        setup: SETUP,
        logStream,
        // A port nothing listens on: every count fails at once.
        env: {
          REDIS_URL: 'redis://127.0.0.1:9',
          ATRIUM_REDIS_PREFIX: 'atrium-test-down:',
          LOG_LEVEL: 'info',
        },
      });
      try {
        for (let i = 0; i < 5; i++) {
          const res = await t.app.inject({
            method: 'GET',
            url: '/v1/projects',
            headers: { 'x-service-api-key': KEYS.mainOwner },
          });
          expect(res.statusCode).toBe(200);
          expect(res.headers.ratelimit).toBeUndefined();
        }
        // Said, but not once per request: an outage under load was a warn line with a stack each.
        const uncounted = lines.filter((line) => line.msg.startsWith('rate limit not counted'));
        expect(uncounted).toHaveLength(1);
        expect(uncounted[0]!.level).toBe(40);
      } finally {
        await t.close();
      }
    },
  );
});
