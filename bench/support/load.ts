import { type ChildProcess, fork } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

const here = path.dirname(fileURLToPath(import.meta.url));

/**
 * A server in its own process (child-server.ts). Node options for it: BENCH_CHILD_ARGS for every
 * child (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`), BENCH_ATRIUM_ARGS for Atrium's alone (e.g.
 * `--max-semi-space-size=32`, compared with its baseline left as it is).
 */
export async function startChildServer(mode: 'atrium' | 'bare' | 'relay', env: Record<string, string>) {
  const child: ChildProcess = fork(path.join(here, 'child-server.ts'), [mode], {
    env: { ...process.env, ...env },
    execArgv: [
      '--import',
      'tsx',
      ...(process.env.BENCH_CHILD_ARGS?.split(' ').filter(Boolean) ?? []),
      ...(mode === 'atrium' ? (process.env.BENCH_ATRIUM_ARGS?.split(' ').filter(Boolean) ?? []) : []),
    ],
    stdio: ['ignore', process.env.BENCH_CHILD_STDOUT ? 'inherit' : 'ignore', 'inherit', 'ipc'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (message) => resolve((message as { url: string }).url));
    child.once('exit', (code) => reject(new Error(`${mode} server exited with ${code}`)));
  });
  return {
    url,
    pid: child.pid!,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

export interface LoadResult {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
}

export async function load(
  url: string,
  headers: Record<string, string>,
  seconds: number,
): Promise<LoadResult> {
  const result = await autocannon({ url, headers, connections: 10, pipelining: 1, duration: seconds });
  return {
    requestsPerSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors,
    non2xx: result.non2xx,
  };
}
