import { createClient } from 'redis';
import type { Coordination } from './coordination.js';

/**
 * Redis for what several processes share live. Two connections: a subscribed connection can
 * do nothing but receive, so commands go over the other.
 */
export async function connectRedis(url: string, onError: (error: unknown) => void): Promise<Coordination> {
  const publisher = createClient({ url });
  const subscriber = publisher.duplicate();
  // Without a listener node-redis would throw on a lost connection; it reconnects by itself.
  publisher.on('error', onError);
  subscriber.on('error', onError);
  await Promise.all([publisher.connect(), subscriber.connect()]);
  return {
    shared: true,
    publisher: {
      connect: async () => undefined,
      publish: (channel, message) => publisher.publish(channel, message),
      set: (key, value, options) => publisher.set(key, value, options?.EX ? { EX: options.EX } : undefined),
      get: (key) => publisher.get(key),
      incr: (key) => publisher.incr(key),
      del: (key) => publisher.del(key),
    },
    subscriber: {
      connect: async () => undefined,
      subscribe: (channel, callback) => subscriber.subscribe(channel, (message) => callback(message)),
      unsubscribe: (channel) => subscriber.unsubscribe(channel),
    },
    async close() {
      await Promise.allSettled([publisher.quit(), subscriber.quit()]);
    },
  };
}
