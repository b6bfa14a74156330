/**
 * Issue 10, item 1: slow clients. Opens many connections that send their body (or their
 * headers) a byte at a time to a real server in its own process, with short timeouts (2 s), and
 * reports how long each was held, how many got the 408 error body, the server's open file
 * descriptors at the peak and after, and /healthz latency meanwhile.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Report } from './run.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const CLIENTS = 400;
const TIMEOUT_MS = 2000;

const quantile = (values: number[], q: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * q))]!;

const openFds = (pid: number) => {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return undefined;
  }
};

async function startChild(dataDir: string) {
  const child: ChildProcess = fork(path.join(here, 'support', 'child-server.ts'), ['atrium'], {
    env: {
      ...process.env,
      ATRIUM_DATA_DIR: dataDir,
      ATRIUM_SIGNING_SECRET: 'bench-signing-secret-of-at-least-32-bytes',
      LOG_LEVEL: 'silent',
      DATABASE_URL: '',
      ATRIUM_BODY_TIMEOUT_MS: String(TIMEOUT_MS),
      ATRIUM_HEADERS_TIMEOUT_MS: String(TIMEOUT_MS),
    },
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (message) => resolve((message as { url: string }).url));
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
  return {
    url,
    pid: child.pid!,
    stop: () => new Promise<void>((r) => (child.once('exit', () => r()), child.kill('SIGTERM'))),
  };
}

/** One slow client: resolves with how long the server held it and whether it answered 408 in the error body. */
function slowClient(
  port: number,
  kind: 'body' | 'headers',
): Promise<{ heldMs: number; answered408: boolean }> {
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = connect(port, '127.0.0.1');
    let received = '';
    const payload = kind === 'body' ? 'x'.repeat(100_000) : `x-padding: ${'p'.repeat(100_000)}\r\n\r\n`;
    socket.write(
      kind === 'body'
        ? 'POST /nope HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n'
        : 'GET /healthz HTTP/1.1\r\nHost: x\r\n',
    );
    let sent = 0;
    const timer = setInterval(() => {
      if (!socket.destroyed && socket.writable) socket.write(payload[sent++]!);
    }, 250);
    socket.on('data', (chunk) => (received += chunk.toString()));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearInterval(timer);
      resolve({
        heldMs: Date.now() - started,
        answered408: received.startsWith('HTTP/1.1 408') && received.includes('"code":"request_timeout"'),
      });
    });
  });
}

export async function run(report: Report) {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atrium-bench-timeouts-'));
  const server = await startChild(dataDir);
  const port = Number(new URL(server.url).port);
  try {
    const baselineFds = openFds(server.pid);
    const clients = [
      ...Array.from({ length: CLIENTS / 2 }, () => slowClient(port, 'body')),
      ...Array.from({ length: CLIENTS / 2 }, () => slowClient(port, 'headers')),
    ];
    let peakFds = 0;
    const health: number[] = [];
    let done = false;
    const all = Promise.all(clients).finally(() => (done = true));
    while (!done) {
      peakFds = Math.max(peakFds, openFds(server.pid) ?? 0);
      const t0 = performance.now();
      await fetch(`${server.url}/healthz`);
      health.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, 50));
    }
    const results = await all;
    const held = results.map((r) => r.heldMs);
    await new Promise((r) => setTimeout(r, 200));
    report(
      `slow clients: ${CLIENTS} (half slow body to POST /nope, half slow headers), 1 byte / 250 ms, timeouts ${TIMEOUT_MS} ms`,
    );
    report(
      `  held: p50 ${quantile(held, 0.5)} ms, max ${Math.max(...held)} ms; answered 408 + error body: ${results.filter((r) => r.answered408).length}/${CLIENTS}`,
    );
    report(
      `  server fds: ${baselineFds} before, ${peakFds} at peak, ${openFds(server.pid)} after; /healthz meanwhile p50 ${quantile(health, 0.5).toFixed(1)} ms, p99 ${quantile(health, 0.99).toFixed(1)} ms (${health.length} probes)`,
    );
  } finally {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
