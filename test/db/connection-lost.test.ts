/**
 * A pooled PostgreSQL connection the server closes (a restart, a failover, an administrator's
 * `pg_terminate_backend`, a pooler's idle timeout) is reported and replaced. Unheard, pg's
 * 'error' event on it threw and ended the whole process: `atrium serve` went down with an idle
 * connection (and a CI run failed when a test's DROP DATABASE … WITH (FORCE) closed one).
 */
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DatabaseHandle, openDatabase } from '../../src/db/database.js';
import { isDependencyUnavailable } from '../../src/network-errors.js';
import { testDatabaseUrl } from '../helpers/app.js';
import { createOwnDatabase } from '../helpers/own-database.js';
import { type ServeCluster, startServeCluster } from '../helpers/serve-processes.js';

describe.skipIf(!testDatabaseUrl)('a PostgreSQL connection closed by the server', () => {
  let own: Awaited<ReturnType<typeof createOwnDatabase>>;
  let handle: DatabaseHandle;
  const lost: Error[] = [];

  beforeAll(async () => {
    own = await createOwnDatabase('atrium_connection_lost');
    handle = await openDatabase(
      { kind: 'postgres', url: own!.url },
      { onConnectionLost: (error) => lost.push(error) },
    );
  });
  afterAll(async () => {
    await handle?.close();
    await own?.drop();
  });

  /** Ends the server process behind connection `pid`, as an administrator would. */
  async function terminate(pid: number): Promise<void> {
    const admin = new pg.Client({ connectionString: own!.url });
    await admin.connect();
    try {
      const { rows } = await admin.query('select pg_terminate_backend($1) as ended', [pid]);
      expect(rows[0].ended).toBe(true);
    } finally {
      await admin.end();
    }
  }

  async function reported(count: number): Promise<void> {
    await expect.poll(() => lost.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(count);
  }

  const backendPid = async (db: DatabaseHandle['db']) =>
    (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db)).rows[0]!.pid;

  it('is reported and replaced when it sat idle in the pool', async () => {
    const before = lost.length;
    const pid = await backendPid(handle.db);
    await terminate(pid);
    await reported(before + 1);
    expect(lost[before]!.message).toMatch(/terminat/i);
    // The next statement runs on a new connection.
    expect(await backendPid(handle.db)).not.toBe(pid);
  });

  it('fails only the statement that meets it when it was in use, between two statements', async () => {
    const before = lost.length;
    const outcome = await handle.db
      .transaction()
      .execute(async (trx) => {
        await terminate(await backendPid(trx));
        await reported(before + 1);
        await sql`select 1`.execute(trx);
        return 'committed';
      })
      .catch((error: Error) => error);
    expect(outcome).toBeInstanceOf(Error);
    // A 503 the client may retry, not a 500 (the failed rollback's error is the one thrown).
    expect(isDependencyUnavailable(outcome), String(outcome)).toBe(true);
    expect(await backendPid(handle.db)).toEqual(expect.any(Number));
  });
});

describe.skipIf(!testDatabaseUrl)('atrium serve when the server closes its connections', () => {
  let cluster: ServeCluster;
  beforeAll(async () => {
    cluster = await startServeCluster({ processes: 1 });
  });
  afterAll(async () => {
    await cluster?.close();
  });

  it('stays up, logs a warning, and answers on new connections', async () => {
    const [server] = cluster.servers;
    expect((await fetch(`${server!.url}/readyz`)).status).toBe(200);
    const admin = new pg.Client({ connectionString: cluster.databaseUrl });
    await admin.connect();
    try {
      // Every connection of the process: its pool's and its change listener's.
      const { rowCount } = await admin.query(
        `select pg_terminate_backend(pid) from pg_stat_activity
          where datname = current_database() and pid <> pg_backend_pid()`,
      );
      expect(rowCount).toBeGreaterThanOrEqual(1);
    } finally {
      await admin.end();
    }
    await expect
      .poll(() => server!.output(), { timeout: 10_000 })
      .toContain('a PostgreSQL connection was closed by the server');
    expect(server!.child.exitCode).toBeNull();
    // A probe may still reach a pooled connection whose close the process has not heard yet: a
    // 503 for it (the statement failed); the next probe gets a new connection.
    await expect
      .poll(async () => (await fetch(`${server!.url}/readyz`)).status, { timeout: 10_000 })
      .toBe(200);
    expect(server!.child.exitCode).toBeNull();
    expect(server!.output()).not.toMatch(/"level":(50|60)/);
  });
});
