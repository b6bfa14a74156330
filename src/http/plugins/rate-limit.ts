import { ApiError } from '../../errors.js';

/**
 * Fixed one-minute windows per key, counted in this process. Behind a load balancer each
 * process counts on its own, so the effective limit is the configured one times the process
 * count; the README says so.
 */
export class RateLimiter {
  private windows = new Map<string, { start: number; count: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Counts one request; throws 429 `rate_limited` past the limit. A limit of 0 is no limit. */
  hit(key: string, limitPerMinute: number): { remaining: number } {
    if (limitPerMinute <= 0) return { remaining: Number.POSITIVE_INFINITY };
    const now = this.now();
    let window = this.windows.get(key);
    if (!window || now - window.start >= 60_000) {
      if (this.windows.size > 10_000) this.evictExpired(now);
      window = { start: now, count: 0 };
      this.windows.set(key, window);
    }
    window.count += 1;
    if (window.count > limitPerMinute) {
      const retryAfterSeconds = Math.max(1, Math.ceil((window.start + 60_000 - now) / 1000));
      throw new ApiError('rate_limited', `Rate limit of ${limitPerMinute} requests per minute reached`, {
        retryAfterSeconds,
      });
    }
    return { remaining: limitPerMinute - window.count };
  }

  private evictExpired(now: number) {
    for (const [key, window] of this.windows) {
      if (now - window.start >= 60_000) this.windows.delete(key);
    }
  }
}
