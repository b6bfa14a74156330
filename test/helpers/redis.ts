import { Redis } from 'ioredis';

/** The Redis of the development and CI machines; tests that need it skip where none answers. */
export const REDIS_URL = process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379';

/** Whether Redis answers at REDIS_URL (asked once, without retries). */
export async function redisReachable(): Promise<boolean> {
  const probe = new Redis(REDIS_URL, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

/** Removes the keys a test wrote under its own prefix. */
export async function deleteRedisKeys(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL);
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
}
