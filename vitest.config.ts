import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Three test files at once on the 2-core CI machine: with two, a third of its CPU sat idle
    // (files wait on child processes, timers and the disk), and CI took 31 minutes on a slow day.
    maxWorkers: 3,
    setupFiles: ['test/setup.ts'],
  },
});
