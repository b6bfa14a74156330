import { sql } from 'kysely';
import { type Db, directSqliteStatement } from '../db/database.js';
import type { RedisClient } from './redis.js';
import { redisScript, runScript } from './redis-scripts.js';

/**
 * Counts hits per key in fixed windows shared by every process: one atomic increment by
 * `amount` (the requests a process takes at once, see RateLimiter), returning the count
 * including them.
 */
export interface RateLimitCounter {
  increment(key: string, windowStart: number, windowMs: number, amount: number): Promise<number>;
}

/**
 * The upsert below as SQLite text, run directly on the connection when it is free (every request
 * runs it; see directSqliteStatement). The table is no access table, so no cache misses it.
 */
const INCREMENT_SQL = `insert into rate_limit_counters (key, window_start, count) values (?, ?, ?)
  on conflict (key, window_start) do update set count = rate_limit_counters.count + excluded.count returning count`;

/** Counts in the database (the default): one upsert per increment. */
export class DatabaseRateLimitCounter implements RateLimitCounter {
  /** The window this process last swept; old windows are removed once per window. */
  private sweptWindow = 0;

  constructor(private readonly db: Db) {}

  async increment(key: string, windowStart: number, _windowMs: number, amount: number): Promise<number> {
    if (windowStart !== this.sweptWindow) {
      this.sweptWindow = windowStart;
      // Past windows are never read again; a failed sweep is retried in the next window.
      this.db
        .deleteFrom('rate_limit_counters')
        .where('window_start', '<', windowStart)
        .execute()
        .catch(() => {});
    }
    const direct = directSqliteStatement(this.db, INCREMENT_SQL);
    if (direct) return Number((direct.get(key, windowStart, amount) as { count: number }).count);
    const row = await this.db
      .insertInto('rate_limit_counters')
      .values({ key, window_start: windowStart, count: amount })
      .onConflict((oc) =>
        oc
          .columns(['key', 'window_start'])
          .doUpdateSet({ count: sql<number>`rate_limit_counters.count + excluded.count` }),
      )
      .returning('count')
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }
}

// INCRBY and, on the window's first increment, an expiry: one round trip, atomic on the server.
const INCREMENT_SCRIPT = redisScript(`
local count = redis.call('INCRBY', KEYS[1], ARGV[2])
if count == tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count`);

/** Counts in Redis (when REDIS_URL is set): one script call per increment; keys expire with their window. */
export class RedisRateLimitCounter implements RateLimitCounter {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {}

  async increment(key: string, windowStart: number, windowMs: number, amount: number): Promise<number> {
    const redisKey = `${this.prefix}ratelimit:${key}:${windowStart}`;
    // A little past the window's end, so a process whose clock lags never sees the key vanish early.
    const ttl = String(windowMs + 5_000);
    return Number(await runScript(this.redis, INCREMENT_SCRIPT, [redisKey], [ttl, String(amount)]));
  }
}
