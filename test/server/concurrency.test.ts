import { describe, expect, it } from 'vitest';
import { mapConcurrently } from '../../src/concurrency.js';

describe('mapConcurrently', () => {
  it('keeps the items order and never runs more than the limit at once', async () => {
    let running = 0;
    let most = 0;
    const results = await mapConcurrently([5, 1, 4, 2, 3], 2, async (n) => {
      running++;
      most = Math.max(most, running);
      await new Promise((resolve) => setImmediate(resolve));
      running--;
      return n * 10;
    });
    expect(results).toEqual([50, 10, 40, 20, 30]);
    expect(most).toBe(2);
  });

  it('starts nothing after a failure and settles only once the running items are done', async () => {
    const started: number[] = [];
    let finished = 0;
    const failure = new Error('item 2 failed');
    await expect(
      mapConcurrently([1, 2, 3, 4, 5], 2, async (n) => {
        started.push(n);
        if (n === 2) throw failure;
        await new Promise((resolve) => setImmediate(resolve));
        finished++;
      }),
    ).rejects.toBe(failure);
    expect(started).toEqual([1, 2]);
    expect(finished).toBe(1);
  });
});
