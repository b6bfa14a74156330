import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { answerAndLog, type ServeCluster, startServeCluster } from '../helpers/serve-processes.js';

let cluster: ServeCluster;
beforeAll(async () => {
  cluster = await startServeCluster({ processes: 2, setup: TENANCY_SETUP });
}, 150_000);
afterAll(async () => {
  await cluster?.close();
});

describe(`two atrium serve processes on one database (${engineName})`, () => {
  it('a project created through one process is listed by the other', async () => {
    const [first, second] = cluster.servers;
    const created = await fetch(`${first!.url}/v1/projects`, {
      method: 'POST',
      headers: { 'x-service-api-key': KEYS.mainOwner, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Shared across processes' }),
    });
    const answer = (await created.json()) as { data: { project: { id: string } } };
    // A 401 was seen once here on PostgreSQL in CI, not reproduced: the answer and log say why.
    expect(created.status, answerAndLog(first!, answer)).toBe(201);
    const { data } = answer;
    const listed = await fetch(`${second!.url}/v1/projects`, {
      headers: { 'x-service-api-key': KEYS.mainOwner },
    });
    const body = (await listed.json()) as { data: { projects: { id: string }[] } };
    expect(body.data.projects.map((project) => project.id)).toContain(data.project.id);
  });

  it('a process killed with SIGKILL can be replaced by a new one on the same database', async () => {
    const killed = cluster.servers[0]!;
    await killed.stop('SIGKILL');
    const fresh = await cluster.start();
    const res = await fetch(`${fresh.url}/readyz`);
    expect(res.status).toBe(200);
  }, 150_000);

  it('a process stopped with SIGTERM logs "stopped" last, once everything has closed, with how long that took', async () => {
    const server = cluster.servers[1]!;
    expect(await server.stop('SIGTERM')).toBe(0);
    const lines = server.output().trim().split('\n');
    const start = lines.findIndex((line) => line.includes('"msg":"shutting down'));
    expect(start, server.output()).toBeGreaterThanOrEqual(0);
    const last = JSON.parse(lines.at(-1)!) as Record<string, unknown>;
    expect(last).toEqual({
      level: 30,
      time: expect.any(Number),
      pid: server.child.pid,
      hostname: expect.any(String),
      signal: 'SIGTERM',
      shutdownMs: expect.any(Number),
      msg: 'stopped',
    });
    expect(last.shutdownMs).toBeGreaterThanOrEqual(0);
    expect(server.output()).not.toContain(cluster.env.ATRIUM_SIGNING_SECRET);
  }, 150_000);
});
