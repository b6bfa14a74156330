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
});
