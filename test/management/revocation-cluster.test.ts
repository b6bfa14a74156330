import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/database.js';
import { engineName, testDatabaseUrl } from '../helpers/app.js';
import { runAtriumCli, type ServeCluster, startServeCluster } from '../helpers/serve-processes.js';
import { MANAGEMENT_SETUP, MKEYS } from './fixtures.js';

const me = (url: string, key: string) => fetch(`${url}/v1/me`, { headers: { 'x-service-api-key': key } });

let cluster: ServeCluster;
beforeAll(async () => {
  cluster = await startServeCluster({ processes: 2, setup: MANAGEMENT_SETUP });
  // On PostgreSQL a process answers from memory once it holds its lease (pg-change-signals.ts),
  // taken at its first authenticated request: both must, or these tests would prove nothing.
  for (const server of cluster.servers) expect((await me(server.url, MKEYS.owner)).status).toBe(200);
  if (testDatabaseUrl) {
    const database = await openDatabase(loadConfig(cluster.env).database);
    try {
      await vi.waitFor(
        async () => {
          const { rows } = await sql<{ n: number }>`
            select count(*)::int as n from cache_peers where lease_until > now()`.execute(database.db);
          expect(rows[0]!.n).toBe(2);
        },
        { timeout: 10_000 },
      );
    } finally {
      await database.close();
    }
  }
}, 150_000);
afterAll(async () => {
  await cluster?.close();
});

describe(`key revocation across two atrium serve processes (${engineName})`, () => {
  it('a key revoked through one process is refused by the other on its very next request', async () => {
    const [first, second] = cluster.servers;
    const created = await fetch(`${first!.url}/v1/workspace/wsp_main/api-keys`, {
      method: 'POST',
      headers: { 'x-service-api-key': MKEYS.owner, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'shared' }),
    });
    expect(created.status).toBe(201);
    const { data } = (await created.json()) as { data: { apiKey: { id: string }; key: string } };
    // Both processes have used the key, so any per-process memory of it would be warm.
    expect((await me(first!.url, data.key)).status).toBe(200);
    expect((await me(second!.url, data.key)).status).toBe(200);

    const revoked = await fetch(`${first!.url}/v1/api-keys/${data.apiKey.id}`, {
      method: 'DELETE',
      headers: { 'x-service-api-key': MKEYS.owner },
    });
    expect(revoked.status).toBe(200);

    const refused = await me(second!.url, data.key);
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { code: string }).code).toBe('not_authenticated');
  });

  it('a session token whose maker key is revoked through one process is refused by the other on its very next request', async () => {
    const [first, second] = cluster.servers;
    const post = (url: string, key: string, body: unknown) =>
      fetch(url, {
        method: 'POST',
        headers: { 'x-service-api-key': key, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const created = await post(`${first!.url}/v1/workspace/wsp_main/api-keys`, MKEYS.owner, {
      name: 'app server',
    });
    const { data } = (await created.json()) as { data: { apiKey: { id: string }; key: string } };
    const minted = await post(`${first!.url}/v1/workspace/wsp_main/session-tokens`, data.key, {
      userId: 'usr_max',
    });
    expect(minted.status).toBe(201);
    const { token } = ((await minted.json()) as { data: { token: string } }).data;
    expect((await me(first!.url, token)).status).toBe(200);
    expect((await me(second!.url, token)).status).toBe(200);

    const revoked = await fetch(`${first!.url}/v1/api-keys/${data.apiKey.id}`, {
      method: 'DELETE',
      headers: { 'x-service-api-key': MKEYS.owner },
    });
    expect(revoked.status).toBe(200);
    expect((await me(second!.url, token)).status).toBe(401);
  });

  it('a key revoked by `atrium keys revoke` (another process) is refused by both on their very next request', async () => {
    const { stdout } = await runAtriumCli(
      cluster.env,
      'keys create --workspace wsp_main --user usr_max --name operator --json'.split(' '),
    );
    const created = JSON.parse(stdout) as { id: string; key: string };
    // Both processes have used the key, so any per-process memory of it would be warm.
    for (const server of cluster.servers) expect((await me(server.url, created.key)).status).toBe(200);

    await runAtriumCli(cluster.env, ['keys', 'revoke', created.id]);

    for (const server of cluster.servers) {
      const refused = await me(server.url, created.key);
      expect(refused.status).toBe(401);
      expect(((await refused.json()) as { code: string }).code).toBe('not_authenticated');
    }
    // Two CLI processes, each loading the sources through tsx: seconds apiece on a busy CI host.
  }, 60_000);

  it('a project created or renamed through one process is listed by the other on its very next request', async () => {
    const [first, second] = cluster.servers;
    const headers = { 'x-service-api-key': MKEYS.owner, 'content-type': 'application/json' };
    const names = async (url: string) => {
      const res = await fetch(`${url}/v1/projects`, { headers });
      expect(res.status).toBe(200);
      return ((await res.json()) as { data: { projects: { name: string }[] } }).data.projects.map(
        (p) => p.name,
      );
    };
    // Both processes have listed, so any per-process memory of the page would be warm.
    const before = await names(second!.url);
    expect(await names(second!.url)).toEqual(before);
    expect(await names(first!.url)).toEqual(before);
    const created = await fetch(`${first!.url}/v1/projects`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ name: 'Made on the first' }),
    });
    expect(created.status).toBe(201);
    expect(await names(second!.url)).toEqual(['Made on the first', ...before]);
    const { data } = (await created.json()) as { data: { project: { id: string } } };
    const renamed = await fetch(`${second!.url}/v1/projects/${data.project.id}`, {
      method: 'PATCH',
      headers,
      body: JSON.stringify({ name: 'Renamed on the second' }),
    });
    expect(renamed.status).toBe(200);
    expect(await names(first!.url)).toEqual(['Renamed on the second', ...before]);
  });
});
