import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyFixture, createTestApp, engineName } from '../helpers/app.js';
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
    ['?limit=', 'query.limit'],
    ['?limit=%20', 'query.limit'],
    ['?offset=%20', 'query.offset'],
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

describe(`agent list: the model an agent runs on (${engineName})`, () => {
  const KEY = 'atr_ws_fixture_models_list_owner_0000000000000';
  const SETUP = `
models:
  - { id: local-small, provider: openai, model: small }
  - { id: local-big, provider: openai, model: big }
organizations:
  - id: org_models
    name: Models
    users: [{ id: usr_models, name: M, email: m@models.test }]
    workspaces:
      - id: wsp_models
        name: Models
        models: [atrium/echo, local-small]
        defaultModel: atrium/echo
        members: [{ user: usr_models, role: owner }]
        apiKeys: [{ name: m, user: usr_models, key: "${KEY}" }]
        agents:
          - { id: agt_enabled, title: A enabled, model: local-small }
          - { id: agt_not_enabled, title: B not enabled, model: local-big }
          - { id: agt_own_none, title: C none }
      - id: wsp_nodefault
        name: No default
        members: [{ user: usr_models, role: owner }]
        apiKeys: [{ name: n, user: usr_models, key: "${KEY}_n" }]
        agents: [{ id: agt_plain_nodefault, title: Plain }]
`;
  let m: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    m = await createTestApp({
      setup: SETUP,
      env: { OPENAI_API_KEY: 'sk-test-not-used-000000000000000000000' },
    });
  });
  afterAll(() => m.close());

  const models = async (workspaceId: string, key: string) => {
    const res = await m.app.inject({
      method: 'GET',
      url: `/v1/workspace/${workspaceId}/agents`,
      headers: { 'x-service-api-key': key },
    });
    expect(res.statusCode).toBe(200);
    return Object.fromEntries(
      res.json().data.agents.map((a: { id: string; model: string }) => [a.id, a.model]),
    );
  };

  it('is the agent’s own model only when the workspace enables it, else the fallback a chat uses', async () => {
    expect(await models('wsp_models', KEY)).toEqual({
      agt_enabled: 'local-small',
      agt_not_enabled: 'atrium/echo',
      agt_own_none: 'atrium/echo',
    });
    // A chat with the not-enabled agent really runs on the model the list shows.
    const chat = await m.app.inject({
      method: 'POST',
      url: '/v1/chat',
      headers: { 'x-service-api-key': KEY },
      payload: {
        agentId: 'agt_not_enabled',
        messages: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
      },
    });
    expect(chat.statusCode).toBe(200);
    expect(chat.json().text).toContain('atrium/echo');
  });

  it('is the built-in default of the configured provider when the workspace names none', async () => {
    expect(await models('wsp_nodefault', `${KEY}_n`)).toEqual({ agt_plain_nodefault: 'openai/gpt-4o-mini' });
  });
});

describe(`agent list: titles from the setup file (${engineName})`, () => {
  const otherAgents = (agents: string) => `
organizations:
  - id: org_acme
    name: Acme
    workspaces:
      - id: wsp_other
        name: Other
        agents: ${agents}
`;
  const titles = async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: '/v1/workspace/wsp_other/agents',
      headers: { 'x-service-api-key': KEYS.otherWorkspace },
    });
    return res.json().data.agents.map((a: { title: string }) => a.title);
  };

  it('sorts them case-insensitively, as created and as renamed by a later apply', async () => {
    await applyFixture(
      t.env,
      otherAgents('[{ id: agt_upper_e, title: Éb }, { id: agt_lower_e, title: éa }]'),
    );
    expect(await titles()).toEqual(['Other agent', 'éa', 'Éb']);
    await applyFixture(t.env, otherAgents('[{ id: agt_lower_e, title: Éc }]'));
    expect(await titles()).toEqual(['Other agent', 'Éb', 'Éc']);
  });
});
