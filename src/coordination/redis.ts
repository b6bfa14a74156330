import { Redis } from 'ioredis';

export type RedisClient = Redis;

/**
 * The one Redis connection of a process (REDIS_URL), shared by everything several processes
 * coordinate through it. Commands fail at once while the connection is down instead of
 * queueing, so a caller can fall back rather than hang a request.
 */
export function createRedis(url: string): RedisClient {
  return new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    lazyConnect: false,
  });
}

/** Closes the connection, waiting for replies in flight; never throws at shutdown. */
export async function closeRedis(redis: RedisClient): Promise<void> {
  try {
    await redis.quit();
  } catch {
    redis.disconnect();
  }
}
