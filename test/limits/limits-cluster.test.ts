import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { engineName } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { deleteRedisKeys, REDIS_URL, redisReachable } from '../helpers/redis.js';
import { type ServeCluster, startServeCluster } from '../helpers/serve-processes.js';
import { loadConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/database.js';

const RATE_LIMIT = 50;
const TOKEN_LIMIT = 100;
const SPEND_CAP = 0.001;
const CONCURRENT = 40;

const KEYS = {
  rateA: 'atr_ws_fixture_cluster_rate_a_000000000000000',
  rateB: 'atr_ws_fixture_cluster_rate_b_000000000000000',
  limited: 'atr_ws_fixture_cluster_limited_0000000000000',
  capped: 'atr_ws_fixture_cluster_capped_00000000000000',
};

function setup(upstream: FakeUpstream) {
  return `
providers:
  - { id: fake, type: openai-compatible, baseURL: ${upstream.baseURL}, apiKey: sk-fake-cluster-key }
models:
  - { id: fake-small, provider: fake, model: small-1, pricing: { inputPerMTok: 1, outputPerMTok: 2 } }
  - { id: fake-large, provider: fake, model: large-1, pricing: { inputPerMTok: 10, outputPerMTok: 20 } }
organizations:
  - id: org_c
    name: Cluster
    users:
      - { id: usr_c, name: Cleo, email: cleo@cluster.test }
    workspaces:
      - id: wsp_rate
        name: Rate
        limits: { rateLimitPerMinute: ${RATE_LIMIT} }
        members: [{ user: usr_c, role: owner }]
        apiKeys:
          - { name: rate-a, user: usr_c, key: "${KEYS.rateA}" }
          - { name: rate-b, user: usr_c, key: "${KEYS.rateB}" }
      - id: wsp_limited
        name: Limited
        models: [fake-small]
        limits: { monthlyTokens: ${TOKEN_LIMIT} }
        members: [{ user: usr_c, role: owner }]
        apiKeys:
          - { name: limited, user: usr_c, key: "${KEYS.limited}" }
        agents:
          - { id: agt_limited, title: Limited }
      - id: wsp_capped
        name: Capped
        models: [fake-large]
        limits: { chatSpendCapUsd: ${SPEND_CAP} }
        members: [{ user: usr_c, role: owner }]
        apiKeys:
          - { name: capped, user: usr_c, key: "${KEYS.capped}" }
        agents:
          - { id: agt_capped, title: Capped }
`;
}

/** The rate window is the clock's minute: start a burst early in one, so it ends in the same. */
async function awaitFreshWindow() {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 15_000) await new Promise((resolve) => setTimeout(resolve, left + 50));
}

async function rateLimitBurst(cluster: ServeCluster) {
  await awaitFreshWindow();
  // 2 processes × 2 keys, 100 requests for each pair, all at once.
  const requests = Array.from({ length: 400 }, (_, i) => {
    const server = cluster.servers[i % 2]!;
    const key = Math.floor(i / 2) % 2 === 0 ? KEYS.rateA : KEYS.rateB;
    return fetch(`${server.url}/v1/projects`, { headers: { 'x-service-api-key': key } }).then(async (res) => {
      await res.arrayBuffer();
      return { key, status: res.status, remaining: res.headers.get('x-ratelimit-remaining') };
    });
  });
  const results = await Promise.all(requests);
  for (const key of [KEYS.rateA, KEYS.rateB]) {
    const mine = results.filter((r) => r.key === key);
    expect(mine.filter((r) => r.status === 200)).toHaveLength(RATE_LIMIT);
    expect(mine.filter((r) => r.status === 429)).toHaveLength(200 - RATE_LIMIT);
    // Every remaining figure from 49 down to 0 was handed out once, whichever process answered.
    const remaining = mine.filter((r) => r.status === 200).map((r) => Number(r.remaining));
    expect(remaining.sort((a, b) => a - b)).toEqual(Array.from({ length: RATE_LIMIT }, (_, i) => i));
  }
}

function post(cluster: ServeCluster, i: number, key: string, body: Record<string, unknown>) {
  return fetch(`${cluster.servers[i % 2]!.url}/v1/chat`, {
    method: 'POST',
    headers: { 'x-service-api-key': key, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  }).then(async (res) => ({
    status: res.status,
    body: (await res.json()) as { code?: string; chatId?: string },
  }));
}

async function withDatabase<T>(
  cluster: ServeCluster,
  fn: (db: Awaited<ReturnType<typeof openDatabase>>['db']) => Promise<T>,
) {
  const database = await openDatabase(loadConfig(cluster.env).database);
  try {
    return await fn(database.db);
  } finally {
    await database.close();
  }
}

async function largestAssistantUsage(cluster: ServeCluster, workspaceId: string) {
  return withDatabase(cluster, async (db) => {
    const rows = await db
      .selectFrom('messages')
      .select(['input_tokens', 'output_tokens', 'cost_usd'])
      .where('workspace_id', '=', workspaceId)
      .where('role', '=', 'assistant')
      .execute();
    return {
      tokens: Math.max(...rows.map((r) => r.input_tokens + r.output_tokens)),
      cost: Math.max(...rows.map((r) => r.cost_usd)),
    };
  });
}

let upstream: FakeUpstream;
beforeAll(async () => {
  upstream = await startFakeUpstream();
});
afterAll(async () => {
  await upstream.close();
});

describe(`limits across two atrium serve processes on one database (${engineName})`, () => {
  let cluster: ServeCluster;
  beforeAll(async () => {
    cluster = await startServeCluster({ processes: 2, setup: setup(upstream) });
  }, 150_000);
  afterAll(async () => {
    await cluster?.close();
  });

  it('the per-key rate limit is one count: 2 processes × 2 keys let exactly the limit through per key', async () => {
    await rateLimitBurst(cluster);
  }, 60_000);

  it(`monthlyTokens ${TOKEN_LIMIT}: ${CONCURRENT} concurrent requests on both processes pass it by at most one request`, async () => {
    const results = await Promise.all(
      Array.from({ length: CONCURRENT }, (_, i) =>
        post(cluster, i, KEYS.limited, {
          agentId: 'agt_limited',
          messages: [{ role: 'user', parts: [{ type: 'text', text: `question ${i}` }] }],
        }),
      ),
    );
    expect(results.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(1);
    for (const r of results.filter((r) => r.status !== 200)) {
      expect(r.status).toBe(402);
      expect(r.body.code).toBe('usage_limit_exceeded');
    }
    const used = await withDatabase(cluster, (db) =>
      db
        .selectFrom('usage_ledger')
        .selectAll()
        .where('workspace_id', '=', 'wsp_limited')
        .executeTakeFirstOrThrow(),
    );
    const largest = await largestAssistantUsage(cluster, 'wsp_limited');
    expect(used.input_tokens + used.output_tokens).toBeLessThanOrEqual(TOKEN_LIMIT + largest.tokens);
  }, 60_000);

  it(`chatSpendCapUsd: ${CONCURRENT} concurrent turns of one chat on both processes pass the cap by at most one turn`, async () => {
    const first = await post(cluster, 0, KEYS.capped, {
      agentId: 'agt_capped',
      messages: [{ role: 'user', parts: [{ type: 'text', text: 'start' }] }],
    });
    expect(first.status).toBe(200);
    const chatId = first.body.chatId!;
    const results = await Promise.all(
      Array.from({ length: CONCURRENT }, (_, i) =>
        post(cluster, i, KEYS.capped, {
          agentId: 'agt_capped',
          chatId,
          messages: [{ role: 'user', parts: [{ type: 'text', text: `turn ${i}` }] }],
        }),
      ),
    );
    for (const r of results.filter((r) => r.status !== 200)) expect(r.body.code).toBe('spend_cap_exceeded');
    const spend = await withDatabase(cluster, (db) =>
      db.selectFrom('chats').select('spend_usd').where('id', '=', chatId).executeTakeFirstOrThrow(),
    );
    const largest = await largestAssistantUsage(cluster, 'wsp_capped');
    expect(spend.spend_usd).toBeLessThanOrEqual(SPEND_CAP + largest.cost);
  }, 60_000);
});

describe.skipIf(!(await redisReachable()))(
  `limits across two atrium serve processes with REDIS_URL (${engineName})`,
  () => {
    const prefix = `atrium-test-${randomBytes(6).toString('hex')}:`;
    let cluster: ServeCluster;
    beforeAll(async () => {
      cluster = await startServeCluster({
        processes: 2,
        setup: setup(upstream),
        env: { REDIS_URL, ATRIUM_REDIS_PREFIX: prefix },
      });
    }, 150_000);
    afterAll(async () => {
      await cluster?.close();
      await deleteRedisKeys(prefix);
    });

    it('the per-key rate limit is one count in Redis, none in the database', async () => {
      await rateLimitBurst(cluster);
      const rows = await withDatabase(cluster, (db) =>
        db.selectFrom('rate_limit_counters').selectAll().execute(),
      );
      expect(rows).toEqual([]);
      const redis = new Redis(REDIS_URL);
      try {
        expect((await redis.keys(`${prefix}ratelimit:*`)).length).toBeGreaterThanOrEqual(2);
      } finally {
        await redis.quit();
      }
    }, 60_000);
  },
);
