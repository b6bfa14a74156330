import { existsSync, mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { runPeriodically } from '../../src/leftovers.js';
import { startServer } from '../../src/server.js';
import { createTestEnv, engineName, type TestEnv } from '../helpers/app.js';

const TWO_HOURS_AGO = new Date(Date.now() - 2 * 60 * 60 * 1000);

let env: TestEnv;
let server: Awaited<ReturnType<typeof startServer>>;

/** Creates a file (and its folders) whose modification time, and its folder's, is `mtime`. */
function leftover(file: string, mtime?: Date): string {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, 'left behind');
  if (mtime) {
    utimesSync(file, mtime, mtime);
    utimesSync(path.dirname(file), mtime, mtime);
  }
  return file;
}

describe(`periodic sweep of crash leftovers while serving (${engineName})`, () => {
  // The server lives in this block only: its sweeps, still running, would otherwise schedule
  // their next run on the fake timers of the block below and be counted there.
  beforeAll(async () => {
    env = await createTestEnv({ HOST: '127.0.0.1', PORT: '0', ATRIUM_SWEEP_INTERVAL_MS: '100' });
    server = await startServer(env.config);
  });
  afterAll(async () => {
    await server?.close();
    await env.close();
  });

  it('removes leftovers older than an hour without a restart, and keeps younger ones', async () => {
    const objects = path.join(env.dataDir, 'objects');
    const staleTemp = leftover(path.join(objects, 'tmp', 'crashed.data'), TWO_HOURS_AGO);
    const freshTemp = leftover(path.join(objects, 'tmp', 'in-flight.data'));
    const staleSpool = leftover(
      path.join(env.dataDir, 'tmp', 'skill-uploads', 'req-crashed', 'part-0'),
      TWO_HOURS_AGO,
    );
    const freshSpool = leftover(path.join(env.dataDir, 'tmp', 'skill-uploads', 'req-running', 'part-0'));
    const orphanSkill = leftover(
      path.join(objects, 'data', 'skills', 'wsp_x', 'skl_orphan', 'SKILL.md'),
      TWO_HOURS_AGO,
    );
    const youngSkill = leftover(path.join(objects, 'data', 'skills', 'wsp_x', 'skl_storing', 'SKILL.md'));
    // A process killed between a write's mkdir and its rename left its folder empty.
    const emptyFolder = path.join(objects, 'data', 'killed', 'mid-write');
    mkdirSync(emptyFolder, { recursive: true });
    utimesSync(emptyFolder, TWO_HOURS_AGO, TWO_HOURS_AGO);

    await vi.waitFor(
      () => {
        expect(existsSync(staleTemp)).toBe(false);
        expect(existsSync(path.dirname(staleSpool))).toBe(false);
        expect(existsSync(orphanSkill)).toBe(false);
        expect(existsSync(emptyFolder)).toBe(false);
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(existsSync(freshTemp)).toBe(true);
    expect(existsSync(freshSpool)).toBe(true);
    expect(existsSync(youngSkill)).toBe(true);
  });
});

const failOnError = (error: unknown) => {
  throw error;
};

describe('runPeriodically', () => {
  // Fake timers: "never again after stop" is checked by running every timer there is, not by
  // sleeping a while and hoping a late run would have shown by then.
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('runs at once and then again, one run at a time, and never after stop', async () => {
    let runs = 0;
    let concurrent = 0;
    let maxConcurrent = 0;
    const task = runPeriodically(
      async () => {
        runs++;
        concurrent++;
        maxConcurrent = Math.max(maxConcurrent, concurrent);
        await new Promise((resolve) => setTimeout(resolve, 5));
        concurrent--;
      },
      1,
      failOnError,
    );
    expect(runs).toBe(1);
    // Each run takes 5 ms and the next starts 1 ms after it ends: 6 ms apart.
    await vi.advanceTimersByTimeAsync(5);
    expect(runs).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(runs).toBe(2);
    await vi.advanceTimersByTimeAsync(12);
    expect(runs).toBe(4);
    // Stopped mid-run: stop waits for that run, and nothing is scheduled after it.
    const stopping = task.stop();
    await vi.advanceTimersByTimeAsync(5);
    await stopping;
    expect(vi.getTimerCount()).toBe(0);
    await vi.runAllTimersAsync();
    expect(runs).toBe(4);
    expect(maxConcurrent).toBe(1);
  });

  it('reports each failed run and keeps running, and runs once only with interval 0', async () => {
    let runs = 0;
    const reported: unknown[] = [];
    const failing = runPeriodically(
      async () => {
        runs++;
        throw new Error(`storage down ${runs}`);
      },
      1,
      (error) => reported.push(error),
    );
    await vi.advanceTimersByTimeAsync(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(runs).toBe(3);
    await failing.stop();
    expect(reported.length).toBe(runs);
    expect((reported[0] as Error).message).toBe('storage down 1');

    let once = 0;
    const single = runPeriodically(
      async () => {
        once++;
      },
      0,
      failOnError,
    );
    await single.stop();
    expect(vi.getTimerCount()).toBe(0);
    await vi.runAllTimersAsync();
    expect(once).toBe(1);
  });
});
