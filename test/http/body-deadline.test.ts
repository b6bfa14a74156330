import { describe, expect, it } from 'vitest';
import { bodyDeadline } from '../../src/http/body-deadline.js';
import { loadConfig } from '../../src/config.js';

const MB = 1024 * 1024;

/** Whether a body sent at a steady `bytesPerSecond` meets every deadline until its last byte. */
function steadyUploadSucceeds(
  rate: { timeoutMs: number; minBytesPerSecond: number },
  sizeBytes: number,
  bytesPerSecond: number,
  chunkBytes = 64 * 1024,
): boolean {
  for (let bytes = 0; bytes < sizeBytes; bytes += chunkBytes) {
    // The next chunk arrives when the link has carried it; the deadline is judged on what came before.
    const arrivesAt = ((bytes + chunkBytes) * 1000) / bytesPerSecond;
    const lastProgressAt = (bytes * 1000) / bytesPerSecond;
    if (arrivesAt >= bodyDeadline(rate, { startedAt: 0, bytes, lastProgressAt })) return false;
  }
  return true;
}

describe('body deadline (mod_reqtimeout-style minimum rate)', () => {
  const defaults = loadConfig({
    ATRIUM_SIGNING_SECRET: 'x'.repeat(32),
    ATRIUM_DATA_DIR: '/tmp/atrium-unused',
  }).http;
  const rate = { timeoutMs: defaults.bodyTimeoutMs, minBytesPerSecond: defaults.bodyMinBytesPerSecond };

  it('grows with the bytes received: each byte adds 1/minRate seconds', () => {
    const start = { startedAt: 0, bytes: 0, lastProgressAt: 0 };
    expect(bodyDeadline(rate, start)).toBe(rate.timeoutMs);
    const later = { startedAt: 0, bytes: rate.minBytesPerSecond * 10, lastProgressAt: 15_000 };
    expect(bodyDeadline(rate, later)).toBe(rate.timeoutMs + 10_000);
  });

  it('never allows a pause longer than the body timeout, whatever credit earlier bytes earned', () => {
    const fastThenSilent = { startedAt: 0, bytes: 40 * MB, lastProgressAt: 3_000 };
    expect(bodyDeadline(rate, fastThenSilent)).toBe(3_000 + rate.timeoutMs);
  });

  it('with the default figures, lets 50 MB through at the documented slowest steady rates', () => {
    expect(steadyUploadSucceeds(rate, 50 * MB, rate.minBytesPerSecond)).toBe(true);
    expect(steadyUploadSucceeds(rate, 50 * MB, 125_000)).toBe(true); // 1 Mbit/s
  });

  it('cuts a body that trickles below the minimum rate', () => {
    expect(steadyUploadSucceeds(rate, 50 * MB, rate.minBytesPerSecond / 2, 1024)).toBe(false);
    expect(steadyUploadSucceeds(rate, 1 * MB, 100, 10)).toBe(false);
  });
});
