import type { Coordination } from './coordination.js';

/**
 * One process's stand-in for Redis: keys with an expiry and publish/subscribe, delivered on a
 * later tick as Redis would. Expiries are capped, because nothing else would ever remove the
 * day-long "done" markers of finished streams from this process's memory.
 */
export function createMemoryCoordination(options: { maxTtlSeconds?: number } = {}): Coordination {
  const maxTtlMs = (options.maxTtlSeconds ?? 300) * 1000;
  const values = new Map<string, { value: string; expiresAt: number }>();
  const channels = new Map<string, Set<(message: string) => void>>();
  let lastSweep = Date.now();

  const sweep = (now: number) => {
    if (now - lastSweep < 10_000) return;
    lastSweep = now;
    for (const [key, entry] of values) if (entry.expiresAt <= now) values.delete(key);
  };
  const read = (key: string): string | null => {
    const entry = values.get(key);
    if (!entry) return null;
    if (entry.expiresAt <= Date.now()) {
      values.delete(key);
      return null;
    }
    return entry.value;
  };
  const write = (key: string, value: string, ttlSeconds?: number) => {
    const now = Date.now();
    sweep(now);
    const ttl = Math.min(ttlSeconds === undefined ? maxTtlMs : ttlSeconds * 1000, maxTtlMs);
    values.set(key, { value, expiresAt: now + ttl });
  };

  return {
    shared: false,
    publisher: {
      connect: async () => undefined,
      async publish(channel, message) {
        const listeners = [...(channels.get(channel) ?? [])];
        setImmediate(() => {
          for (const listener of listeners) listener(message);
        });
        return listeners.length;
      },
      async set(key, value, setOptions) {
        write(key, value, setOptions?.EX);
        return 'OK';
      },
      async get(key) {
        return read(key);
      },
      async getMany(keys) {
        return keys.map(read);
      },
      async subscriberCounts(requested) {
        return requested.map((channel) => channels.get(channel)?.size ?? 0);
      },
      async incr(key) {
        const current = read(key);
        const next = current === null ? 1 : Number(current) + 1;
        if (!Number.isInteger(next)) throw new Error('ERR value is not an integer or out of range');
        write(key, String(next));
        return next;
      },
      async del(key) {
        return values.delete(key) ? 1 : 0;
      },
      async replace(key, expected, value, setOptions) {
        const current = read(key) ?? '';
        // As Redis's script: a key already holding the new value counts as set.
        if (current !== (expected ?? '') && (value === null || current !== value)) return false;
        if (value === null) values.delete(key);
        else write(key, value, setOptions?.EX);
        return true;
      },
    },
    subscriber: {
      connect: async () => undefined,
      async subscribe(channel, callback) {
        let listeners = channels.get(channel);
        if (!listeners) channels.set(channel, (listeners = new Set()));
        listeners.add(callback);
      },
      async unsubscribe(channel) {
        channels.delete(channel);
      },
    },
    async close() {
      values.clear();
      channels.clear();
    },
  };
}
