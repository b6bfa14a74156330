import { describe, expect, it } from 'vitest';
import { timeoutSignal } from '../src/timeout-signal.js';
import { collectEvery } from './helpers/collections.js';

/** What `signal` has become within `ms`: its abort's reason, or 'not aborted'. */
function abortWithin(signal: AbortSignal, ms: number): Promise<unknown> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve('not aborted'), ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve(signal.reason);
    });
  });
}

describe('a signal that aborts after a time or with its parent', () => {
  // As often as a busy process has them: Node 20's AbortSignal.any([parent,
  // AbortSignal.timeout(ms)]) never aborted once one had run.
  collectEvery(10);

  it('aborts with a TimeoutError once its time is up, whatever collections ran', async () => {
    const parent = new AbortController();
    const reasons = await Promise.all(
      Array.from({ length: 20 }, () => abortWithin(timeoutSignal(100, parent.signal).signal, 3_000)),
    );
    for (const reason of reasons) expect(reason).toMatchObject({ name: 'TimeoutError' });
  });

  it("aborts with its parent's reason, also a parent aborted already", async () => {
    const parent = new AbortController();
    const pending = abortWithin(timeoutSignal(60_000, parent.signal).signal, 3_000);
    const why = new Error('the reply was stopped');
    parent.abort(why);
    expect(await pending).toBe(why);
    expect(timeoutSignal(60_000, parent.signal).signal.reason).toBe(why);
  });

  it('no longer aborts once cleared', async () => {
    const within = timeoutSignal(50);
    within.clear();
    expect(await abortWithin(within.signal, 300)).toBe('not aborted');
  });
});
