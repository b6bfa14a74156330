import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    // Hooks start and stop `atrium serve` processes and create and drop PostgreSQL databases;
    // DROP DATABASE waits for a checkpoint, which on a disk busy with other suites took over 30 s
    // (a CI run failed in a suite's cleanup, every test of it passed).
    hookTimeout: 120_000,
    pool: 'forks',
    // Three test files at once on the 2-core CI machine: with two, a third of its CPU sat idle
    // (files wait on child processes, timers and the disk), and CI took 31 minutes on a slow day.
    maxWorkers: 3,
    // Test files share their worker's loaded modules instead of loading the app's dependencies
    // again for each of the 105 files: CI's test time on SQLite went from 589 s to 239 s on a
    // slow day (loading modules: 565 s of worker time to 43 s). Every file builds its own app,
    // database and data directory, so nothing a test reads is shared.
    isolate: false,
    setupFiles: ['test/setup.ts'],
  },
});
