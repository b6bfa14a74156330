import { Redis } from 'ioredis';

export type RedisClient = Redis;

/**
 * The one Redis connection of a process (REDIS_URL), shared by everything several processes
 * coordinate through it. A command sent while the connection is down waits for one reconnect
 * attempt at most, then fails, so a caller can fall back rather than hang a request.
 */
export function createRedis(url: string): RedisClient {
  return new Redis(url, { maxRetriesPerRequest: 1 });
}

/** Closes the connection, waiting for replies in flight; never throws at shutdown. */
export async function closeRedis(redis: RedisClient): Promise<void> {
  try {
    await redis.quit();
  } catch {
    redis.disconnect();
  }
}
