import v8 from 'node:v8';
import vm from 'node:vm';
import { afterAll, beforeAll } from 'vitest';

/**
 * Garbage collections every `intervalMs` while the enclosing `describe` runs, as often as a busy
 * process has them: what a WeakRef holds (Node's fetch reaches a request's abort through one)
 * is then lost within the test, not one run in many.
 */
export function collectEvery(intervalMs: number): void {
  let collecting: NodeJS.Timeout;
  beforeAll(() => {
    v8.setFlagsFromString('--expose-gc');
    const collect = vm.runInNewContext('gc') as () => void;
    collecting = setInterval(collect, intervalMs);
  });
  afterAll(() => clearInterval(collecting));
}
