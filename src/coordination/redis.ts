import { Redis } from 'ioredis';
import type { Coordination } from './coordination.js';
import { redisScript, runScript } from './redis-scripts.js';

export type RedisClient = Redis;

// Coordination's `replace`: GET, compare and SET or DEL in one step on the server. An empty
// expected value stands for an absent key, an empty value for a delete. A key that already
// holds the new value counts as set (its expiry renewed): ioredis sends a command again when
// the connection dropped before the answer came, and the second run must not undo the first.
const REPLACE_SCRIPT = redisScript(`
local current = redis.call('GET', KEYS[1]) or ''
if current ~= ARGV[1] and (ARGV[2] == '' or current ~= ARGV[2]) then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1])
elseif ARGV[3] == '' then redis.call('SET', KEYS[1], ARGV[2])
else redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3]) end
return 1`);

/**
 * How long a command waits for Redis's answer before it fails. A Redis that stops answering (its
 * host blackholed or hung, a partition) neither refuses nor closes the connection, and ioredis
 * waits for ever by default: the rate limit's count held every request of the API, and `/readyz`.
 * Redis answers in well under a millisecond; this leaves ample room for a loaded one.
 */
export const REDIS_COMMAND_TIMEOUT_MS = 2_000;

/** Options of a connection that sends commands (not the subscribed one). */
const COMMAND_OPTIONS = { maxRetriesPerRequest: 1, commandTimeout: REDIS_COMMAND_TIMEOUT_MS };

/**
 * The one Redis connection of a process (REDIS_URL), shared by everything several processes
 * coordinate through it. A command sent while the connection is down waits for one reconnect
 * attempt at most, and for an answer REDIS_COMMAND_TIMEOUT_MS at most, then fails, so a caller
 * can fall back rather than hang a request.
 */
export function createRedis(url: string): RedisClient {
  return new Redis(url, COMMAND_OPTIONS);
}

/** Closes the connection, waiting for replies in flight; never throws at shutdown. */
export async function closeRedis(redis: RedisClient): Promise<void> {
  // A connection that is not up has nothing in flight; QUIT would wait for it to come up.
  if (redis.status !== 'ready') {
    redis.disconnect();
    return;
  }
  try {
    await redis.quit();
  } catch {
    redis.disconnect();
  }
}

/**
 * Redis as the live coordination of replies (stop, resume) in the shape `resumable-stream`
 * expects. Two connections: a subscribed connection can do nothing but receive, so commands go
 * over the other.
 */
export function connectRedis(url: string, watch: (connection: Redis) => void): Coordination {
  // Connects in the background and reconnects by itself: a Redis that is down at start fails
  // only what needs it (stop and resume across processes), never the whole service, and
  // `/readyz` reports it.
  const publisher = new Redis(url, COMMAND_OPTIONS);
  // Subscriptions wait for the connection however long it takes, and are renewed on reconnect.
  const subscriber = new Redis(url, { maxRetriesPerRequest: null });
  // Without an error listener ioredis would report a lost connection as unhandled; the app's one
  // outage log (redis-outage-log.ts) listens to every connection of the process.
  watch(publisher);
  watch(subscriber);
  const listeners = new Map<string, Set<(message: string) => void>>();
  subscriber.on('message', (channel: string, message: string) => {
    for (const listener of listeners.get(channel) ?? []) listener(message);
  });
  return {
    shared: true,
    publisher: {
      connect: async () => undefined,
      publish: (channel, message) => publisher.publish(channel, message),
      set: (key, value, options) =>
        options?.EX ? publisher.set(key, value, 'EX', options.EX) : publisher.set(key, value),
      get: (key) => publisher.get(key),
      getMany: async (keys) => (keys.length === 0 ? [] : publisher.mget(keys)),
      subscriberCounts: async (channels) => {
        if (channels.length === 0) return [];
        // [channel, count, channel, count, …] in the order asked.
        const answer = (await publisher.pubsub('NUMSUB', ...channels)) as unknown[];
        return channels.map((_, i) => Number(answer[2 * i + 1]));
      },
      incr: (key) => publisher.incr(key),
      del: (key) => publisher.del(key),
      replace: async (key, expected, value, options) => {
        const args = [expected ?? '', value ?? '', options?.EX ? String(options.EX) : ''];
        return (await runScript(publisher, REPLACE_SCRIPT, [key], args)) === 1;
      },
    },
    subscriber: {
      connect: async () => undefined,
      async subscribe(channel, callback) {
        const set = listeners.get(channel) ?? new Set();
        set.add(callback);
        listeners.set(channel, set);
        await subscriber.subscribe(channel);
      },
      // As node-redis's unsubscribe without a listener: every listener of the channel goes.
      async unsubscribe(channel) {
        listeners.delete(channel);
        await subscriber.unsubscribe(channel);
      },
    },
    async close() {
      await Promise.allSettled([closeRedis(publisher), closeRedis(subscriber)]);
    },
  };
}
