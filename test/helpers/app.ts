import type { FileDownloader } from '../../src/services/file-downloads.js';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { buildApp } from '../../src/app.js';
import { type Config, loadConfig } from '../../src/config.js';
import { type DatabaseHandle, migrateTo, migrateToLatest, openDatabase } from '../../src/db/database.js';
import type { Clock } from '../../src/ids.js';
import { checkResponsesAgainstSchemas } from './response-check.js';
import { applySetup } from '../../src/setup/apply.js';
import { parseSetupText } from '../../src/setup/validate.js';
import { createObjectStore } from '../../src/storage/index.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { type AddressInfo, createServer } from 'node:net';
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import type { DestinationStream } from 'pino';
import type { Db } from '../../src/db/database.js';

/** Which engine this run tests: PostgreSQL when TEST_DATABASE_URL is set, else SQLite. */
export const testDatabaseUrl = process.env.TEST_DATABASE_URL || undefined;
export const engineName = testDatabaseUrl ? 'postgres' : 'sqlite';

export interface TestEnv {
  config: Config;
  database: DatabaseHandle;
  dataDir: string;
  /** The test's own directory holding `dataDir` (removed on close). */
  root: string;
  close(): Promise<void>;
}

/**
 * A fresh data dir, and a fresh database (a SQLite file, or a PostgreSQL schema of its own),
 * migrated. Each test file gets its own, so files run in parallel without seeing each other.
 */
export async function createTestEnv(env: Record<string, string> = {}): Promise<TestEnv> {
  // The data dir sits alone in a directory of the test's own, so a test can look around it
  // (e.g. for a file a path traversal escaped with) without reading the system's temp dir.
  const root = mkdtempSync(path.join(tmpdir(), 'atrium-test-'));
  const dataDir = path.join(root, 'data');
  mkdirSync(dataDir);
  const config = loadConfig({
    ATRIUM_DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    ATRIUM_SIGNING_SECRET: 'test-signing-secret-at-least-32-bytes',
    ...env,
  });
  const schema = testDatabaseUrl ? `t_${randomBytes(6).toString('hex')}` : undefined;
  if (testDatabaseUrl) config.database = { kind: 'postgres', url: testDatabaseUrl, schema };
  const database = await openDatabase(config.database);
  await migrateToLatest(database.db, database.schema);
  return {
    config,
    database,
    dataDir,
    root,
    async close() {
      await database.close();
      if (testDatabaseUrl && schema) {
        const client = new pg.Client({ connectionString: testDatabaseUrl });
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await client.end();
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Migrates the test's database up or down to `name` (a migration of src/db/migrations). */
export async function migrateTestDatabaseTo(env: TestEnv, name: string): Promise<void> {
  // With migrateToLatest's retries: other test files migrate and drop their schemas meanwhile.
  await migrateTo(env.database.db, env.database.schema, name);
}

export async function applyFixture(env: TestEnv, yamlText: string) {
  const parsed = parseSetupText(yamlText, 'fixture.yaml');
  if (!parsed.ok) throw new Error(parsed.problems.map((p) => `${p.path}: ${p.message}`).join('\n'));
  return applySetup(env.database.db, parsed.setup, { now: new Date() });
}

/**
 * Writes through a second connection to the test's database, as another `atrium serve` or the
 * CLI would: every statement `write` runs commits before this resolves.
 */
export async function commitOnOtherConnection(env: TestEnv, write: (db: Db) => Promise<unknown>) {
  const other = await openDatabase(env.config.database);
  try {
    await write(other.db as Db);
  } finally {
    await other.close();
  }
}

/**
 * The one app builder of the suite: a fresh environment, the setup file applied, and the app
 * with every JSON response checked against its route's declared schema.
 */
export async function createTestApp(
  options: {
    env?: Record<string, string>;
    clock?: Clock;
    setup?: string;
    /** Object storage; default: the one config selects (fs under the test's data dir). */
    store?: (config: Config) => ObjectStore;
    mcpConnectTimeoutMs?: number;
    /** How file parts' URLs are fetched (the AI SDK's refuses the loopback address of tests). */
    fileDownloader?: FileDownloader;
    shutdownWaitMs?: number;
    /** How long a stop waits for the stopped reply to be stored (default 10 s). */
    stopWaitMs?: number;
    logger?: FastifyServerOptions['logger'];
    logStream?: DestinationStream;
    /** Runs before any route is registered, after the response-schema check is installed. */
    beforeRoutes?: (app: FastifyInstance) => void;
  } = {},
) {
  const env = await createTestEnv(options.env);
  const applied = options.setup ? await applyFixture(env, options.setup) : undefined;
  const store = options.store?.(env.config) ?? createObjectStore(env.config, { clock: options.clock });
  const app = await buildApp(
    {
      config: env.config,
      db: env.database.db,
      clock: options.clock,
      store,
      mcpConnectTimeoutMs: options.mcpConnectTimeoutMs,
      fileDownloader: options.fileDownloader,
      shutdownWaitMs: options.shutdownWaitMs,
      stopWaitMs: options.stopWaitMs,
    },
    {
      beforeRoutes: (app) => {
        checkResponsesAgainstSchemas(app);
        options.beforeRoutes?.(app);
      },
      logger: options.logger,
      logStream: options.logStream,
    },
  );
  await app.ready();
  return {
    app,
    db: env.database.db as Db,
    env,
    store,
    applied,
    async close() {
      await app.close();
      await env.close();
    },
  };
}

export type TestApp = Awaited<ReturnType<typeof createTestApp>>;

/**
 * A port free right now on 127.0.0.1, for a test that must know its server's origin before
 * building it (signed URLs use `http://HOST:PORT` when ATRIUM_PUBLIC_URL is not set).
 */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
