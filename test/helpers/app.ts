import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { buildApp } from '../../src/app.js';
import { type Config, loadConfig } from '../../src/config.js';
import { type DatabaseHandle, migrateToLatest, openDatabase } from '../../src/db/database.js';
import type { Clock } from '../../src/ids.js';
import { checkResponsesAgainstSchemas } from './response-check.js';
import { applySetup } from '../../src/setup/apply.js';
import { parseSetupText } from '../../src/setup/validate.js';
import { createObjectStore } from '../../src/storage/index.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { type AddressInfo, createServer } from 'node:net';

/** Which engine this run tests: PostgreSQL when TEST_DATABASE_URL is set, else SQLite. */
export const testDatabaseUrl = process.env.TEST_DATABASE_URL || undefined;
export const engineName = testDatabaseUrl ? 'postgres' : 'sqlite';

export interface TestEnv {
  config: Config;
  database: DatabaseHandle;
  dataDir: string;
  close(): Promise<void>;
}

/**
 * A fresh data dir, and a fresh database (a SQLite file, or a PostgreSQL schema of its own),
 * migrated. Each test file gets its own, so files run in parallel without seeing each other.
 */
export async function createTestEnv(env: Record<string, string> = {}): Promise<TestEnv> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atrium-test-'));
  const config = loadConfig({
    ATRIUM_DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    ATRIUM_SIGNING_SECRET: 'test-signing-secret',
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
    async close() {
      await database.close();
      if (testDatabaseUrl && schema) {
        const client = new pg.Client({ connectionString: testDatabaseUrl });
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await client.end();
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export async function applyFixture(env: TestEnv, yamlText: string) {
  const parsed = parseSetupText(yamlText, 'fixture.yaml');
  if (!parsed.ok) throw new Error(parsed.problems.map((p) => `${p.path}: ${p.message}`).join('\n'));
  return applySetup(env.database.db, parsed.setup, { now: new Date() });
}

export async function createTestApp(
  options: {
    env?: Record<string, string>;
    clock?: Clock;
    setup?: string;
    /** Object storage; default: the one config selects (fs under the test's data dir). */
    store?: (config: Config) => ObjectStore;
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
    },
    { beforeRoutes: checkResponsesAgainstSchemas },
  );
  await app.ready();
  return {
    app,
    env,
    store,
    applied,
    async close() {
      await app.close();
      await env.close();
    },
  };
}

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
