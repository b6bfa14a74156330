import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { loadConfig } from '../../src/config.js';
import { migrateToLatest, openDatabase } from '../../src/db/database.js';
import { applySetup } from '../../src/setup/apply.js';
import { parseSetupText } from '../../src/setup/validate.js';
import { createOwnDatabase } from './own-database.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = path.join(ROOT, 'test/helpers/atrium-cli.ts');

/** One real `atrium serve` process: its URL, what it printed, and ways to end it. */
export interface ServeProcess {
  url: string;
  port: number;
  /** stdout and stderr so far (pino JSON lines and the CLI's own lines). */
  output(): string;
  /** Sends a signal and waits for the process to exit and its output to end. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  readonly child: ChildProcess;
}

export interface ServeCluster {
  /** The environment every process of the cluster shares (database, data dir, secret). */
  env: Record<string, string>;
  dataDir: string;
  /** The database the processes share: a fresh PostgreSQL database, else the data dir's SQLite. */
  databaseUrl: string | undefined;
  servers: ServeProcess[];
  /** Starts one more process on the same database and data dir (e.g. after a kill). */
  start(extraEnv?: Record<string, string>): Promise<ServeProcess>;
  close(): Promise<void>;
}

/**
 * The URL the process prints once it listens (it was started on port 0, so the system chose a
 * free port and nothing else can hold it), once `/healthz` answers there. A port picked by the
 * test and handed over could be taken meanwhile by another test's server: its `/healthz` then
 * answered for a process that had failed to listen, and the first request went to another
 * database (a 401 for a valid key, seen twice in CI).
 */
async function waitUntilHealthy(child: ChildProcess, output: () => string): Promise<string> {
  // Generous: a loaded CI machine (the whole suite in parallel) can take long to start tsx.
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`atrium serve exited (${child.exitCode}):\n${output()}`);
    const url = /Atrium listening on (http:\/\/[^\s]+)/.exec(output())?.[1];
    if (url) {
      try {
        const res = await fetch(`${url}/healthz`);
        if (res.ok) return url;
      } catch {
        // not answering yet
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`atrium serve did not become healthy:\n${output()}`);
}

/**
 * Runs one `atrium` command (from source, as bin/atrium runs the build) in a process of its own,
 * on `env`'s database: what an operator's shell does beside running servers. Rejects on a
 * non-zero exit.
 */
/**
 * An answer's body and the process's last 4xx and error log lines: the message of an assertion
 * on a request to an `atrium serve` process, so that a rare failure shows its cause.
 */
export function answerAndLog(server: Pick<ServeProcess, 'output'>, body: unknown): string {
  const lines = server
    .output()
    .split('\n')
    .filter((line) => /"statusCode":4|"level":[45]/.test(line))
    .slice(-5);
  return `${JSON.stringify(body)}\n${lines.join('\n')}`;
}

export async function runAtriumCli(env: Record<string, string>, args: string[]): Promise<{ stdout: string }> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', CLI, ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
  });
  return { stdout };
}

export async function startServeProcess(env: Record<string, string>): Promise<ServeProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', CLI, 'serve'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env, PORT: '0', HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  child.stdout?.on('data', (chunk: Buffer) => (text += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (text += chunk.toString()));
  // 'close', not 'exit': by then its output has been read to the end (its last log line too).
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const output = () => text;
  let url: string;
  try {
    url = await waitUntilHealthy(child, output);
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  return {
    url,
    port: Number(new URL(url).port),
    child,
    output,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/**
 * Real `atrium serve` processes sharing one database and one data dir, as behind a load
 * balancer: on a fresh PostgreSQL database when TEST_DATABASE_URL is set (dropped on close),
 * else on one SQLite file. The setup file is applied before the first process starts.
 */
export async function startServeCluster(
  options: { processes?: number; setup?: string; env?: Record<string, string> } = {},
): Promise<ServeCluster> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atrium-serve-'));
  const ownDatabase = await createOwnDatabase('atrium_serve');
  const databaseUrl = ownDatabase?.url;
  const env: Record<string, string> = {
    ATRIUM_DATA_DIR: dataDir,
    ATRIUM_SIGNING_SECRET: 'serve-cluster-signing-secret-of-32-bytes',
    LOG_LEVEL: 'info',
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    ...options.env,
  };

  const config = loadConfig(env);
  const database = await openDatabase(config.database);
  try {
    await migrateToLatest(database.db);
    if (options.setup) {
      const parsed = parseSetupText(options.setup, 'fixture.yaml');
      if (!parsed.ok) throw new Error(parsed.problems.map((p) => `${p.path}: ${p.message}`).join('\n'));
      await applySetup(database.db, parsed.setup, { now: new Date() });
    }
  } finally {
    await database.close();
  }

  const servers: ServeProcess[] = [];
  const cluster: ServeCluster = {
    env,
    dataDir,
    databaseUrl,
    servers,
    async start(extraEnv = {}) {
      const server = await startServeProcess({ ...env, ...extraEnv });
      servers.push(server);
      return server;
    },
    async close() {
      await Promise.all(servers.map((server) => server.stop('SIGKILL')));
      await ownDatabase?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  try {
    await Promise.all(Array.from({ length: options.processes ?? 2 }, () => cluster.start()));
  } catch (error) {
    await cluster.close();
    throw error;
  }
  return cluster;
}
