import type { Publisher, Subscriber } from 'resumable-stream/generic';

/**
 * What processes share live: short-lived keys and publish/subscribe. Redis when `REDIS_URL` is
 * set (every process sees the same), else an in-memory stand-in (one process). The shapes are
 * those `resumable-stream` expects, plus `del` and `getMany` (many keys in one round trip, as
 * Redis's MGET).
 */
export interface Coordination {
  publisher: Publisher & {
    del(key: string): Promise<unknown>;
    getMany(keys: string[]): Promise<Array<string | null>>;
  };
  subscriber: Subscriber;
  /** True when other processes can see what this one publishes. */
  shared: boolean;
  close(): Promise<void>;
}
