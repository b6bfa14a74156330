/**
 * A PostgreSQL that stops answering (its host blackholed or hung, a network partition) neither
 * refuses nor closes connections: nothing comes back. The pool waited for ever for a connection
 * to open (pg's default), so every request needing one hung, and `/readyz` too. Each now answers
 * 503 once ATRIUM_DB_CONNECT_TIMEOUT_MS has passed, and the process serves again once PostgreSQL
 * answers.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { testDatabaseUrl } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { type ServeCluster, type ServeProcess, startServeCluster } from '../helpers/serve-processes.js';
import { type BlackholeProxy, startBlackholeProxy } from './blackhole-proxy.js';

const CONNECT_TIMEOUT_MS = 1_000;
/**
 * How long past the timeout an answer may take before the request counts as hanging: generous,
 * for a loaded machine; a hanging request never answers at all.
 */
const HANG_BOUND_MS = CONNECT_TIMEOUT_MS + 5_000;

describe.skipIf(!testDatabaseUrl)('atrium serve when PostgreSQL stops answering', () => {
  let cluster: ServeCluster;
  let proxy: BlackholeProxy;
  let server: ServeProcess;

  beforeAll(async () => {
    cluster = await startServeCluster({ processes: 0, setup: TENANCY_SETUP });
    const target = new URL(cluster.databaseUrl!);
    proxy = await startBlackholeProxy({ host: target.hostname, port: Number(target.port || 5432) });
    server = await cluster.start({
      DATABASE_URL: proxy.through(cluster.databaseUrl!),
      ATRIUM_DB_CONNECT_TIMEOUT_MS: String(CONNECT_TIMEOUT_MS),
    });
  });
  // Each test starts on a PostgreSQL that answers, whatever the last one left.
  afterEach(() => proxy?.forward());
  afterAll(async () => {
    await cluster?.close();
    await proxy?.close();
  });

  /** The answer, or the error of a request still unanswered after HANG_BOUND_MS. */
  const request = (path: string, init: RequestInit = {}) =>
    fetch(`${server.url}${path}`, { ...init, signal: AbortSignal.timeout(HANG_BOUND_MS) }).catch(
      (error: Error) => error,
    );
  const createProject = (name: string) =>
    request('/v1/projects', {
      method: 'POST',
      headers: { 'x-service-api-key': KEYS.mainOwner, 'content-type': 'application/json' },
      body: JSON.stringify({ name }),
    });

  const connectionsLost = () => server.output().split('a PostgreSQL connection was closed').length - 1;

  /** `/readyz` answers, and says the database is unavailable: it does not hang. */
  async function expectNotReady(): Promise<void> {
    const ready = await request('/readyz');
    expect(ready, 'still unanswered: /readyz hangs').toBeInstanceOf(Response);
    expect((ready as Response).status).toBe(503);
    expect(await (ready as Response).json()).toMatchObject({
      status: 'unavailable',
      checks: { database: 'unavailable' },
    });
  }

  async function servesAgain(): Promise<void> {
    proxy.forward();
    await expect
      .poll(async () => ((await request('/readyz')) as Response).status, { timeout: 10_000 })
      .toBe(200);
    expect(((await createProject('After')) as Response).status).toBe(201);
    expect(server.child.exitCode).toBeNull();
  }

  it('answers 503 service_unavailable when no connection to PostgreSQL opens, and serves again after', async () => {
    expect(((await createProject('Before')) as Response).status).toBe(201);
    const lostBefore = connectionsLost();
    proxy.blackhole('cut');
    // Once the process has seen its pooled connections go (they went at once), the next
    // statement needs a new one; a statement sent on one not yet seen to be gone fails at once.
    await expect.poll(connectionsLost, { timeout: 10_000 }).toBeGreaterThan(lostBefore);

    const created = await createProject('During');
    expect(created, 'still unanswered: the request hangs').toBeInstanceOf(Response);
    const answer = created as Response;
    expect(answer.status).toBe(503);
    expect(answer.headers.get('retry-after')).toBe('5');
    expect(await answer.json()).toMatchObject({ code: 'service_unavailable' });
    // Not a statement on a connection already gone: the connect timeout's error is the cause.
    // The process logs it as the response goes: its line may reach the pipe after the answer.
    await expect
      .poll(() => server.output(), { timeout: 10_000 })
      .toMatch(/Connection terminated due to connection timeout|timeout exceeded when trying to connect/);

    await expectNotReady();

    await servesAgain();
  });

  it('/readyz answers 503 when its pooled connection stops answering, and 200 after', async () => {
    // A connection now idle in the pool, which the next probe takes.
    expect(((await request('/readyz')) as Response).status).toBe(200);
    proxy.blackhole('freeze');

    await expectNotReady();

    await servesAgain();
  });
});
