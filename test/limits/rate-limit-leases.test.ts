import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import {
  DatabaseRateLimitCounter,
  type RateLimitCounter,
  RedisRateLimitCounter,
} from '../../src/coordination/rate-limit-counter.js';
import { leaseSize, RateLimiter } from '../../src/http/plugins/rate-limit.js';
import { createTestEnv, engineName } from '../helpers/app.js';

/** One shared count, as the database or Redis keeps it, that records every increment asked of it. */
class SharedCounter implements RateLimitCounter {
  readonly counts = new Map<string, number>();
  readonly increments: number[] = [];
  async increment(key: string, windowStart: number, _windowMs: number, amount: number) {
    await Promise.resolve();
    this.increments.push(amount);
    const id = `${key}:${windowStart}`;
    const count = (this.counts.get(id) ?? 0) + amount;
    this.counts.set(id, count);
    return count;
  }
}

/** 10:00:00 UTC: the start of a window. */
const WINDOW = Date.parse('2026-11-23T10:00:00.000Z');

describe('per-key rate limit leases (issue 16)', () => {
  it('take a thirty-second of what is left, at most 1,000, and one at a time under 64 left', () => {
    expect(leaseSize(1_000_000_000, 0)).toBe(1000);
    expect(leaseSize(600, 0)).toBe(18);
    expect(leaseSize(600, 536)).toBe(2);
    expect(leaseSize(600, 537)).toBe(1);
    expect(leaseSize(50, 0)).toBe(1);
    expect(leaseSize(600, 700)).toBe(1);
  });

  it('let exactly the limit through across two processes taking turns, in few increments', async () => {
    const counter = new SharedCounter();
    const processes = [new RateLimiter(counter, () => WINDOW), new RateLimiter(counter, () => WINDOW)];
    const limit = 10_000;
    let allowed = 0;
    let lastRemaining = Infinity;
    for (let i = 0; i < limit + 500; i++) {
      const state = (await processes[i % 2]!.hit('key', limit))!;
      if (!state.exceeded) allowed++;
      if (i >= limit) expect(state).toMatchObject({ exceeded: true, remaining: 0 });
      lastRemaining = state.remaining;
    }
    expect(allowed).toBe(limit);
    expect(lastRemaining).toBe(0);
    // Leases while much is left, one at a time near the end, nothing once each process saw it passed.
    expect(counter.increments.length).toBeLessThan(300);
    expect(counter.counts.get(`key:${WINDOW}`)).toBeLessThanOrEqual(limit + 2);
  });

  it('share one refill among the requests that arrive while it is under way', async () => {
    const counter = new SharedCounter();
    const limiter = new RateLimiter(counter, () => WINDOW);
    const states = await Promise.all(Array.from({ length: 500 }, () => limiter.hit('key', 1_000_000)));
    expect(counter.increments).toEqual([1000]);
    // Each request got its own slot.
    expect(new Set(states.map((state) => state!.remaining)).size).toBe(500);
  });

  it('count every request at once under 64 left, concurrently, as without leases', async () => {
    const counter = new SharedCounter();
    const limiter = new RateLimiter(counter, () => WINDOW);
    const states = await Promise.all(Array.from({ length: 20 }, () => limiter.hit('key', 50)));
    expect(counter.increments).toEqual(Array(20).fill(1));
    expect(states.map((state) => state!.remaining).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 20 }, (_, i) => 30 + i),
    );
  });

  it('refuse without counting once the limit is seen passed, and start again in the next window', async () => {
    const counter = new SharedCounter();
    let now = WINDOW + 42_000;
    const limiter = new RateLimiter(counter, () => now);
    for (let i = 0; i < 3; i++) expect((await limiter.hit('key', 2))!.exceeded).toBe(i >= 2);
    const asked = counter.increments.length;
    expect(await limiter.hit('key', 2)).toEqual({ limit: 2, remaining: 0, resetSeconds: 18, exceeded: true });
    expect(counter.increments).toHaveLength(asked);
    now = WINDOW + 60_000;
    expect(await limiter.hit('key', 2)).toEqual({
      limit: 2,
      remaining: 1,
      resetSeconds: 60,
      exceeded: false,
    });
  });

  it('keeps no lease of another window, and a failed refill fails only the requests that waited on it', async () => {
    const counter = new SharedCounter();
    let now = WINDOW;
    const limiter = new RateLimiter(counter, () => now);
    await limiter.hit('key', 1_000_000);
    now = WINDOW + 60_000;
    await limiter.hit('key', 1_000_000);
    expect(counter.increments).toEqual([1000, 1000]);

    const failing: RateLimitCounter = { increment: () => Promise.reject(new Error('store down')) };
    const broken = new RateLimiter(failing, () => now);
    await expect(Promise.all([broken.hit('key', 1_000_000), broken.hit('key', 1_000_000)])).rejects.toThrow(
      'store down',
    );
    const recovered = new RateLimiter(counter, () => now);
    expect((await recovered.hit('key', 1_000_000))!.exceeded).toBe(false);
  });
});

describe('the shared stores count a lease as one increment', () => {
  it(`in the database (${engineName})`, async () => {
    const env = await createTestEnv();
    try {
      const counter = new DatabaseRateLimitCounter(env.database.db);
      expect(await counter.increment('key', WINDOW, 60_000, 18)).toBe(18);
      expect(await counter.increment('key', WINDOW, 60_000, 1)).toBe(19);
      expect(await counter.increment('other', WINDOW, 60_000, 1000)).toBe(1000);
    } finally {
      await env.close();
    }
  });

  it('in Redis, when one is reachable', async () => {
    const redis = new Redis(process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379', {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    try {
      await redis.connect();
    } catch {
      return; // No Redis here: rate-limit.test.ts says so in its skipped test.
    }
    const prefix = `atrium-test-leases-${randomBytes(4).toString('hex')}:`;
    try {
      const counter = new RedisRateLimitCounter(redis, prefix);
      expect(await counter.increment('key', WINDOW, 60_000, 18)).toBe(18);
      expect(await counter.increment('key', WINDOW, 60_000, 1)).toBe(19);
      // The window's first increment set the expiry, whatever its amount.
      expect(await redis.pttl(`${prefix}ratelimit:key:${WINDOW}`)).toBeGreaterThan(60_000);
    } finally {
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      await redis.quit();
    }
  });
});
