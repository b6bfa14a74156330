import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
});
afterAll(() => t.close());

const list = (query = '', workspaceId = 'wsp_main') =>
  t.app.inject({
    method: 'GET',
    url: `/v1/workspace/${workspaceId}/agents${query}`,
    headers: { 'x-service-api-key': KEYS.mainOwner },
  });

describe(`GET /v1/workspace/{workspaceId}/agents (${engineName})`, () => {
  it('lists workspace and organization agents by title, case-insensitively, without private or deleted ones', async () => {
    const res = await list();
    expect(res.statusCode).toBe(200);
    const { agents, pagination } = res.json().data;
    expect(agents.map((a: { id: string }) => a.id)).toEqual(['agt_alpha', 'agt_beta', 'agt_zeta']);
    expect(pagination).toEqual({ total: 3, limit: 20, offset: 0 });
  });

  it('returns every field, with "" for missing ones and the workspace default model', async () => {
    const { agents } = (await list()).json().data;
    expect(agents[0]).toEqual({
      id: 'agt_alpha',
      title: 'Alpha',
      description: 'First',
      image: 'https://example.test/a.png',
      model: 'atrium/echo',
      visibility: 'organization',
      category: 'support',
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updatedAt: expect.any(String),
    });
    expect(agents[1]).toMatchObject({
      id: 'agt_beta',
      description: '',
      image: '',
      category: '',
      model: 'atrium/echo',
    });
  });

  it('pages with limit and offset', async () => {
    const first = (await list('?limit=2')).json().data;
    expect(first.agents.map((a: { id: string }) => a.id)).toEqual(['agt_alpha', 'agt_beta']);
    expect(first.pagination).toEqual({ total: 3, limit: 2, offset: 0 });
    const second = (await list('?limit=2&offset=2')).json().data;
    expect(second.agents.map((a: { id: string }) => a.id)).toEqual(['agt_zeta']);
    expect(second.pagination).toEqual({ total: 3, limit: 2, offset: 2 });
    const beyond = (await list('?offset=10')).json().data;
    expect(beyond.agents).toEqual([]);
    expect(beyond.pagination.total).toBe(3);
  });

  it('clamps a limit above 100 to 100', async () => {
    const res = await list('?limit=1000');
    expect(res.statusCode).toBe(200);
    expect(res.json().data.pagination.limit).toBe(100);
  });

  it.each([
    ['?limit=0', 'query.limit'],
    ['?limit=-1', 'query.limit'],
    ['?limit=abc', 'query.limit'],
    ['?limit=1.5', 'query.limit'],
    ['?offset=-1', 'query.offset'],
    ['?offset=x', 'query.offset'],
  ])('answers %s with 400 bad_request naming %s', async (query, path) => {
    const res = await list(query);
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(body.code).toBe('bad_request');
    expect(body.details.issues[0].path).toBe(path);
  });

  it('refuses an oversized workspace id with 400 bad_request', async () => {
    const res = await list('', 'w'.repeat(201));
    expect(res.statusCode).toBe(400);
    expect(res.json().details.issues[0].path).toBe('params.workspaceId');
  });

  it("never shows another organization's agents", async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: '/v1/workspace/wsp_globex/agents',
      headers: { 'x-service-api-key': KEYS.mainOwner },
    });
    expect(res.statusCode).toBe(401);
    expect(JSON.stringify(res.json())).not.toContain('agt_globex');
  });
});
