/**
 * Issue 10 item 7: what the shared per-key rate limit costs each request. Times the counter's
 * one atomic increment, sequentially and with 10 at once, on SQLite, and on PostgreSQL
 * (BENCH_DATABASE_URL) and Redis (REDIS_URL) when given, against the in-process count it
 * replaced (a Map), measured in the same run; then what a request pays through the RateLimiter,
 * whose leases take many requests' slots in one increment (issue 16), at a limit of 100,000 per
 * minute and key. `api.bench.ts` shows the same cost end to end.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  DatabaseRateLimitCounter,
  type RateLimitCounter,
  RedisRateLimitCounter,
} from '../src/coordination/rate-limit-counter.js';
import { closeRedis, createRedis } from '../src/coordination/redis.js';
import { migrateToLatest, openDatabase } from '../src/db/database.js';
import { RateLimiter } from '../src/http/plugins/rate-limit.js';
import type { Report } from './run.js';

const SEQUENTIAL = Number(process.env.BENCH_RATE_LIMIT_OPS ?? 5_000);
const CONCURRENCY = 10;

/** The per-process count the shared one replaced, as a baseline. */
class MapCounter implements RateLimitCounter {
  private counts = new Map<string, number>();
  async increment(key: string, windowStart: number): Promise<number> {
    const id = `${key}:${windowStart}`;
    const count = (this.counts.get(id) ?? 0) + 1;
    this.counts.set(id, count);
    return count;
  }
}

/** A request's count: one increment of the counter, or a hit through the RateLimiter's leases. */
type Count = (key: string) => Promise<unknown>;

function oneIncrement(counter: RateLimitCounter): Count {
  const windowStart = Date.now() - (Date.now() % 60_000);
  return (key) => counter.increment(key, windowStart, 60_000, 1);
}

function throughLimiter(counter: RateLimitCounter): Count {
  const limiter = new RateLimiter(counter);
  return (key) => limiter.hit(key, 100_000);
}

async function measure(count: Count): Promise<{ sequentialUs: number; concurrentPerSecond: number }> {
  for (let i = 0; i < 200; i++) await count('warm-up');
  let started = performance.now();
  for (let i = 0; i < SEQUENTIAL; i++) await count(`key_${i % 20}`);
  const sequentialUs = ((performance.now() - started) * 1000) / SEQUENTIAL;
  started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < SEQUENTIAL) {
        next += 1;
        await count(`key_${next % 20}`);
      }
    }),
  );
  const concurrentPerSecond = SEQUENTIAL / ((performance.now() - started) / 1000);
  return { sequentialUs, concurrentPerSecond };
}

export async function run(report: Report) {
  const line = (name: string, result: Awaited<ReturnType<typeof measure>>) =>
    report(
      `${name}: ${result.sequentialUs.toFixed(1)} µs per count one at a time, ${result.concurrentPerSecond.toFixed(0)} counts/s with ${CONCURRENCY} at once`,
    );
  report(`${SEQUENTIAL} counts over 20 keys per measurement`);
  line('in-process Map (the former per-process count)', await measure(oneIncrement(new MapCounter())));

  const dataDir = mkdtempSync(path.join(tmpdir(), 'atrium-bench-ratelimit-'));
  const sqlite = await openDatabase({ kind: 'sqlite', file: path.join(dataDir, 'atrium.sqlite') });
  try {
    await migrateToLatest(sqlite.db);
    const counter = new DatabaseRateLimitCounter(sqlite.db);
    line('SQLite upsert (WAL, synchronous=NORMAL)', await measure(oneIncrement(counter)));
    line('SQLite, per request through the leases', await measure(throughLimiter(counter)));
  } finally {
    await sqlite.close();
    rmSync(dataDir, { recursive: true, force: true });
  }

  const pgUrl = process.env.BENCH_DATABASE_URL;
  if (pgUrl) {
    const schema = `bench_ratelimit_${process.pid}`;
    const postgres = await openDatabase({ kind: 'postgres', url: pgUrl, schema });
    try {
      await migrateToLatest(postgres.db, schema);
      const counter = new DatabaseRateLimitCounter(postgres.db);
      line('PostgreSQL upsert', await measure(oneIncrement(counter)));
      line('PostgreSQL, per request through the leases', await measure(throughLimiter(counter)));
      await postgres.db.schema.dropSchema(schema).cascade().execute();
    } finally {
      await postgres.close();
    }
  } else {
    report('PostgreSQL: skipped (set BENCH_DATABASE_URL)');
  }

  if (process.env.REDIS_URL) {
    const redis = createRedis(process.env.REDIS_URL);
    const prefix = `atrium-bench-${process.pid}:`;
    try {
      await redis.ping();
      const counter = new RedisRateLimitCounter(redis, prefix);
      line('Redis INCRBY script', await measure(oneIncrement(counter)));
      line('Redis, per request through the leases', await measure(throughLimiter(counter)));
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
    } finally {
      await closeRedis(redis);
    }
  } else {
    report('Redis: skipped (set REDIS_URL)');
  }
}
