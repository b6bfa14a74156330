import type { RateLimitCounter } from '../../coordination/rate-limit-counter.js';
import { ApiError } from '../../errors.js';

const WINDOW_MS = 60_000;
/** The policy's name in the IETF `RateLimit` and `RateLimit-Policy` fields. */
const POLICY_NAME = 'per-key';

export interface RateLimitState {
  limit: number;
  remaining: number;
  /** Seconds until the window ends and the count starts again. */
  resetSeconds: number;
  /** This request is past the limit. */
  exceeded: boolean;
}

/**
 * Fixed one-minute windows per key, aligned to the clock (so every process behind a load
 * balancer uses the same windows), counted in a store every process shares: the database, or
 * Redis when configured. A request past the limit still counts, so a client that keeps
 * hammering does not get through early.
 */
export class RateLimiter {
  constructor(
    private readonly counter: RateLimitCounter,
    private readonly now: () => number = Date.now,
  ) {}

  /** Counts one request and returns the key's state; a limit of 0 is no limit (undefined). */
  async hit(key: string, limitPerMinute: number): Promise<RateLimitState | undefined> {
    if (limitPerMinute <= 0) return undefined;
    const now = this.now();
    const windowStart = now - (now % WINDOW_MS);
    const count = await this.counter.increment(key, windowStart, WINDOW_MS);
    return {
      limit: limitPerMinute,
      remaining: Math.max(0, limitPerMinute - count),
      resetSeconds: Math.max(1, Math.ceil((windowStart + WINDOW_MS - now) / 1000)),
      exceeded: count > limitPerMinute,
    };
  }
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
