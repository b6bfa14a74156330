import { afterEach, describe, expect, it, vi } from 'vitest';
import { renewWhileWorking } from '../src/lease-renewal.js';

/** Renewals answered when the test says. */
function heldRenewals() {
  const answers: Array<(held: boolean) => void> = [];
  return {
    answers,
    renew: () => new Promise<boolean>((resolve) => answers.push(resolve)),
  };
}

describe('lease renewal while work is under way', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('renews every period, one at a time; one due during a slow reply runs when it comes', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const renewals = heldRenewals();
    const stop = renewWhileWorking({ everyMs: 10_000, renew: renewals.renew });
    await vi.advanceTimersByTimeAsync(10_000);
    expect(renewals.answers).toHaveLength(1);
    // The reply takes two more periods: nothing piles up meanwhile...
    await vi.advanceTimersByTimeAsync(20_000);
    expect(renewals.answers).toHaveLength(1);
    // ...and the renewal due meanwhile runs at once, not a period later.
    renewals.answers[0]!(true);
    await vi.advanceTimersByTimeAsync(0);
    expect(renewals.answers).toHaveLength(2);
    renewals.answers[1]!(true);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(renewals.answers).toHaveLength(3);
    stop();
    renewals.answers[2]!(true);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(renewals.answers).toHaveLength(3);
  });

  it('reports a lost lease once and renews no more; a failure is reported and retried', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const errors: unknown[] = [];
    let lost = 0;
    let calls = 0;
    const stop = renewWhileWorking({
      everyMs: 1_000,
      renew: async () => {
        calls++;
        if (calls === 1) throw new Error('database unreachable');
        return calls < 3;
      },
      onLost: () => lost++,
      onError: (error) => errors.push(error),
    });
    await vi.advanceTimersByTimeAsync(5_000);
    expect(errors).toEqual([new Error('database unreachable')]);
    expect(calls).toBe(3);
    expect(lost).toBe(1);
    stop();
  });

  it('reports nothing for a renewal still in flight when the work ends', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const renewals = heldRenewals();
    let lost = 0;
    const stop = renewWhileWorking({ everyMs: 1_000, renew: renewals.renew, onLost: () => lost++ });
    await vi.advanceTimersByTimeAsync(1_000);
    stop();
    renewals.answers[0]!(false);
    await vi.advanceTimersByTimeAsync(0);
    expect(lost).toBe(0);
  });

  it('does not keep the process running', () => {
    const setInterval = vi.spyOn(globalThis, 'setInterval');
    const stop = renewWhileWorking({ everyMs: 1_000, renew: async () => true });
    const timer = setInterval.mock.results[0]!.value as NodeJS.Timeout;
    expect(timer.hasRef()).toBe(false);
    stop();
    setInterval.mockRestore();
  });
});
