import { afterEach, describe, expect, it, vi } from 'vitest';
import { keepSpoolFresh } from '../../src/http/skill-upload-spool.js';

/**
 * keepSpoolFresh's marks (`utimes` of the spool directory) held until the test lets them end, as
 * a thread pool busy with other file work would hold them: `stop()` must wait for every mark
 * begun before it, not only the last one. (The mark is passed in, not mocked: the suite shares
 * its module registry between files, so a module another file loaded first would keep the real
 * `utimes`.)
 */
const pending: Array<() => void> = [];
const utimes = vi.fn((_now: Date) => new Promise<void>((resolve) => pending.push(resolve)));
afterEach(() => {
  vi.useRealTimers();
  pending.splice(0).forEach((resolve) => resolve());
  utimes.mockClear();
});
describe('keepSpoolFresh', () => {
  it('stops only once every mark begun before the stop has ended, marking again only after one ends', async () => {
    vi.useFakeTimers();
    const inUse = keepSpoolFresh('/spool/req-held', 10, utimes);
    // The first mark is still under way when the interval comes round again (a busy pool).
    await vi.advanceTimersByTimeAsync(35);
    const begun = utimes.mock.calls.length;
    expect(begun).toBeGreaterThan(0);
    let stopped = false;
    const stopping = inUse.stop().then(() => {
      stopped = true;
    });
    // The newest mark ends: any older one still under way could land after the stop, so the
    // stop waits for it.
    pending.pop()!();
    await vi.advanceTimersByTimeAsync(0);
    expect({ begun, stopped }).toEqual({ begun: 1, stopped: pending.length === 0 });
    pending.splice(0).forEach((resolve) => resolve());
    await stopping;
    expect(stopped).toBe(true);
    // No mark after the stop.
    await vi.advanceTimersByTimeAsync(100);
    expect(utimes.mock.calls.length).toBe(begun);
  });
});
