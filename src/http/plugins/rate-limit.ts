import type { RateLimitCounter } from '../../coordination/rate-limit-counter.js';
import { ApiError } from '../../errors.js';

const WINDOW_MS = 60_000;
/** The policy's name in the IETF `RateLimit` and `RateLimit-Policy` fields. */
const POLICY_NAME = 'per-key';
/** A lease is at most this share of what is left of the limit (see leaseSize). */
const LEASE_SHARE = 32;
/** …and at most this many requests: one shared increment per thousand requests at most. */
const MAX_LEASE = 1000;

export interface RateLimitState {
  limit: number;
  remaining: number;
  /** Seconds until the window ends and the count starts again. */
  resetSeconds: number;
  /** This request is past the limit. */
  exceeded: boolean;
}

/** What this process holds of one key's count in the current window. */
interface KeyWindow {
  windowStart: number;
  /** The next leased slot to hand out, and the last one: slots `next`…`end` are this process's. */
  next: number;
  end: number;
  /** The largest count the shared store has answered this process in this window. */
  seen: number;
  /** The increment that refills the lease, while one is under way. */
  refill?: Promise<void>;
}

/**
 * Fixed one-minute windows per key, aligned to the clock (so every process behind a load
 * balancer uses the same windows), counted in a store every process shares: the database, or
 * Redis when configured.
 *
 * Every request takes a slot: the count of the window including it. A slot above the limit is
 * refused. Slots come from the shared store in leases (issue 16): a process that has seen the
 * count at `c` increments it by about (limit − c) / 32 at once, at most 1,000, and hands those
 * slots to its next requests without a round trip. Slots are never handed out twice, so no more
 * than the limit ever gets through, on any number of processes; a lease a process did not use up
 * by the window's end only lets the key be refused a little early, by at most a thirty-second of
 * what was left when it was taken. Near the limit (under 64 left) every request is one increment
 * of 1, exactly as without leases. Once a process has seen the limit passed in a window, it
 * refuses the key's requests until the window ends without counting them: a count cannot go
 * down within a window, so counting them would change no answer.
 */
export class RateLimiter {
  private readonly windows = new Map<string, KeyWindow>();

  constructor(
    private readonly counter: RateLimitCounter,
    private readonly now: () => number = Date.now,
  ) {}

  /** Counts one request and returns the key's state; a limit of 0 is no limit (undefined). */
  async hit(key: string, limitPerMinute: number): Promise<RateLimitState | undefined> {
    if (limitPerMinute <= 0) return undefined;
    const now = this.now();
    const windowStart = now - (now % WINDOW_MS);
    const slot = await this.takeSlot(key, windowStart, limitPerMinute);
    return {
      limit: limitPerMinute,
      remaining: Math.max(0, limitPerMinute - slot),
      resetSeconds: Math.max(1, Math.ceil((windowStart + WINDOW_MS - now) / 1000)),
      exceeded: slot > limitPerMinute,
    };
  }

  private async takeSlot(key: string, windowStart: number, limit: number): Promise<number> {
    for (;;) {
      const window = this.windowOf(key, windowStart);
      if (window.next <= window.end) return window.next++;
      if (window.seen > limit) return window.seen;
      const size = leaseSize(limit, window.seen);
      if (size === 1) {
        // Nothing to share: each request increments for itself, concurrently, as without leases.
        const count = await this.counter.increment(key, windowStart, WINDOW_MS, 1);
        window.seen = Math.max(window.seen, count);
        return count;
      }
      window.refill ??= this.refill(window, key, size);
      await window.refill;
    }
  }

  private async refill(window: KeyWindow, key: string, size: number): Promise<void> {
    try {
      const count = await this.counter.increment(key, window.windowStart, WINDOW_MS, size);
      window.next = count - size + 1;
      window.end = count;
      window.seen = Math.max(window.seen, count);
    } finally {
      window.refill = undefined;
    }
  }

  private windowOf(key: string, windowStart: number): KeyWindow {
    const current = this.windows.get(key);
    if (current && current.windowStart === windowStart) return current;
    // A new window: what was kept for the last one is of no further use, for any key.
    if (current && current.windowStart < windowStart) this.forgetBefore(windowStart);
    const fresh: KeyWindow = { windowStart, next: 1, end: 0, seen: 0 };
    this.windows.set(key, fresh);
    return fresh;
  }

  private forgetBefore(windowStart: number): void {
    for (const [key, window] of this.windows) {
      if (window.windowStart < windowStart) this.windows.delete(key);
    }
  }
}

/**
 * How many slots to take at once when the count seen so far is `seen`: a thirty-second of what
 * is left, at most MAX_LEASE; 1 once fewer than 64 are left, so the end of a window is exact.
 */
export function leaseSize(limit: number, seen: number): number {
  return Math.min(MAX_LEASE, Math.max(1, Math.floor((limit - seen) / LEASE_SHARE)));
}

/** 429 `rate_limited`; the error handler turns `retryAfterSeconds` into `Retry-After`. */
export function rateLimitedError(state: RateLimitState): ApiError {
  return new ApiError('rate_limited', `Rate limit of ${state.limit} requests per minute reached`, {
    retryAfterSeconds: state.resetSeconds,
  });
}

/**
 * The response headers for a state: the long-standing `x-ratelimit-*` pair, and the fields of
 * draft-ietf-httpapi-ratelimit-headers (structured-field lists of named policies):
 * `RateLimit-Policy: "per-key";q=600;w=60` and `RateLimit: "per-key";r=599;t=42`.
 */
export function rateLimitHeaders(state: RateLimitState): Record<string, string> {
  return {
    'x-ratelimit-limit': String(state.limit),
    'x-ratelimit-remaining': String(state.remaining),
    'ratelimit-policy': `"${POLICY_NAME}";q=${state.limit};w=${WINDOW_MS / 1000}`,
    ratelimit: `"${POLICY_NAME}";r=${state.remaining};t=${state.resetSeconds}`,
  };
}
