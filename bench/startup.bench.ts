/**
 * How long `atrium serve` takes from the command to listening: on a fresh data directory (the
 * first start: migrations, the demo workspace) and again on the same directory (a restart, as a
 * deployment's processes are replaced), against a bare Fastify process that listens with one
 * route (Node's own start and Fastify's import: the least any Fastify service pays). Alternated
 * rounds, medians. No target: it shows what a start costs, and catches a change that slows it.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Report } from './run.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(here, '..');
const ROUNDS = Number(process.env.BENCH_STARTUP_ROUNDS ?? 5);

const BARE = `
import Fastify from 'fastify';
const app = Fastify();
app.get('/healthz', async () => ({ ok: true }));
await app.listen({ port: 0, host: '127.0.0.1' });
console.log('listening');
`;

/** Milliseconds from spawning the command to its first line saying it listens; then stops it. */
async function timeToListening(args: string[], env: Record<string, string>): Promise<number> {
  const started = performance.now();
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env } });
  let output = '';
  const listening = await new Promise<boolean>((resolve) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (/listening/i.test(output)) resolve(true);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.once('exit', () => resolve(false));
  });
  const elapsed = performance.now() - started;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
  if (!listening) throw new Error(`the process exited before listening:\n${output.slice(-2000)}`);
  return elapsed;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

export async function run(report: Report) {
  const root = mkdtempSync(path.join(tmpdir(), 'atrium-bench-startup-'));
  const first: number[] = [];
  const again: number[] = [];
  const bare: number[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const dataDir = path.join(root, `data-${round}`);
      const env = { ATRIUM_DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'info' };
      bare.push(await timeToListening(['--input-type=module', '-e', BARE], {}));
      first.push(await timeToListening(['bin/atrium', 'serve'], env));
      again.push(await timeToListening(['bin/atrium', 'serve'], env));
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  const [f, a, b] = [median(first), median(again), median(bare)];
  report(
    `atrium serve, command to listening (median of ${ROUNDS}): first start on a fresh data directory ${f.toFixed(0)} ms, restart on it ${a.toFixed(0)} ms | a bare Fastify process ${b.toFixed(0)} ms → Atrium's restart ${(a / b).toFixed(1)}× it`,
  );
  report(
    `  each round: first ${first.map((ms) => ms.toFixed(0)).join(', ')} ms; restart ${again.map((ms) => ms.toFixed(0)).join(', ')} ms; bare ${bare.map((ms) => ms.toFixed(0)).join(', ')} ms`,
  );
}
