import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { engineName } from '../helpers/app.js';
import { type ServeCluster, startServeCluster } from '../helpers/serve-processes.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = path.join(ROOT, 'test/helpers/atrium-cli.ts');

let cluster: ServeCluster;
beforeAll(async () => {
  // No process started: only the database (PostgreSQL when TEST_DATABASE_URL is set) and data dir.
  cluster = await startServeCluster({ processes: 0 });
});
afterAll(() => cluster.close());

describe(`atrium serve on a port already in use (${engineName})`, () => {
  it('exits with 1 and says why, rather than running on without listening', async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const { port } = holder.address() as AddressInfo;
    try {
      const child = spawn(process.execPath, ['--import', 'tsx', CLI, 'serve'], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', ...cluster.env, PORT: String(port), HOST: '127.0.0.1' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      // On PostgreSQL the open pool and its LISTEN connection kept the process alive for good.
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      expect(code).toBe(1);
      expect(output).toContain('EADDRINUSE');
      // One line of the command's own, as its other errors (before: the bare message).
      expect(output).toMatch(/^atrium: .*EADDRINUSE.*$/m);
      // What to do about it, and no shutdown lines for a server that never served.
      expect(output).toContain(
        `atrium: another process is listening on port ${port}: stop it, or start on another port`,
      );
      expect(output).not.toContain('shutting down');
      expect(output).not.toContain('"stopped"');
    } finally {
      await new Promise<void>((resolve) => holder.close(() => resolve()));
    }
  }, 120_000);
});
