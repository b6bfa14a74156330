import type { Publisher, Subscriber } from 'resumable-stream/generic';

/**
 * What processes share live: short-lived keys and publish/subscribe. Redis when `REDIS_URL` is
 * set (every process sees the same), else an in-memory stand-in (one process). The shapes are
 * those `resumable-stream` expects, plus `del`, `getMany` (many keys in one round trip, as
 * Redis's MGET), `replace` and `subscriberCounts`.
 */
export interface Coordination {
  publisher: Publisher & {
    del(key: string): Promise<unknown>;
    getMany(keys: string[]): Promise<Array<string | null>>;
    /**
     * Sets `key` to `value` (deletes it when `value` is null) only while it holds `expected`
     * (null: while it is absent or empty), in one step for every process: true when done, or
     * when `key` already holds `value` (a command resent after a dropped connection finds its
     * own write). What a process reads and then writes on this condition, no other process can
     * have written between.
     */
    replace(
      key: string,
      expected: string | null,
      value: string | null,
      options?: { EX: number },
    ): Promise<boolean>;
    /**
     * How many connections listen on each channel (Redis's PUBSUB NUMSUB). A process's
     * subscription ends with its connection, so a process killed outright stops counting at
     * once, where a key it set lives on until its expiry.
     */
    subscriberCounts(channels: string[]): Promise<number[]>;
  };
  subscriber: Subscriber;
  /** True when other processes can see what this one publishes. */
  shared: boolean;
  close(): Promise<void>;
}
