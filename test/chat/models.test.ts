import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { userText } from './fixtures.js';

const KEY = 'atr_ws_fixture_models_main_0000000000000000';
const OPENAI_KEY = 'sk-env-openai-key-0000000000000000000000000';
const NAMED_KEY = 'sk-named-env-key-00000000000000000000000000';

function setup(upstream: FakeUpstream) {
  return `
providers:
  - { id: viaenv, type: openai-compatible, baseURL: ${upstream.baseURL}, apiKeyEnv: FAKE_PROVIDER_KEY }
models:
  - { id: env-model, provider: viaenv, model: env-1 }
  - { id: builtin-openai, provider: openai, model: gpt-test, pricing: { inputPerMTok: 3, outputPerMTok: 4 } }
organizations:
  - id: org_m
    name: M
    users: [{ id: usr_m, name: M, email: m@m.test }]
    workspaces:
      - id: wsp_m
        name: M
        models: [env-model, builtin-openai]
        members: [{ user: usr_m, role: owner }]
        apiKeys: [{ name: m, user: usr_m, key: "${KEY}" }]
        agents: [{ id: agt_m, title: M }]
      - id: wsp_nodefault
        name: No default
        members: [{ user: usr_m, role: owner }]
        apiKeys: [{ name: n, user: usr_m, key: "${KEY}_n" }]
        agents: [{ id: agt_n, title: N }]
`;
}

let upstream: FakeUpstream;
beforeAll(async () => {
  upstream = await startFakeUpstream();
});
afterAll(async () => {
  await upstream.close();
});

async function chat(app: TestApp, key: string, payload: Record<string, unknown>) {
  return app.app.inject({ method: 'POST', url: '/v1/chat', headers: { 'x-service-api-key': key }, payload });
}

describe('providers from the environment', () => {
  it('uses OPENAI_API_KEY and OPENAI_BASE_URL for the built-in openai provider, and apiKeyEnv for a setup provider', async () => {
    const t = await createTestApp({
      setup: setup(upstream),
      env: { OPENAI_API_KEY: OPENAI_KEY, OPENAI_BASE_URL: upstream.baseURL, FAKE_PROVIDER_KEY: NAMED_KEY },
    });
    try {
      let res = await chat(t, KEY, { agentId: 'agt_m', model: 'builtin-openai', messages: [userText('hi')] });
      expect(res.statusCode).toBe(200);
      expect(upstream.lastRequest().headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
      expect(upstream.lastRequest().body.model).toBe('gpt-test');
      const row = await t.db
        .selectFrom('messages')
        .selectAll()
        .where('id', '=', res.json().messageId)
        .executeTakeFirstOrThrow();
      expect(row.cost_usd).toBeGreaterThan(0);

      // `openai/<name>` ids need no models row (the setup file only enables defined models).
      await t.db
        .insertInto('workspace_models')
        .values({ workspace_id: 'wsp_m', model_id: 'openai/gpt-direct' })
        .execute();
      res = await chat(t, KEY, { agentId: 'agt_m', model: 'openai/gpt-direct', messages: [userText('hi')] });
      expect(res.statusCode).toBe(200);
      expect(upstream.lastRequest().body.model).toBe('gpt-direct');

      res = await chat(t, KEY, { agentId: 'agt_m', model: 'env-model', messages: [userText('hi')] });
      expect(res.statusCode).toBe(200);
      expect(upstream.lastRequest().headers.authorization).toBe(`Bearer ${NAMED_KEY}`);
      expect(upstream.lastRequest().body.model).toBe('env-1');

      // No workspace default: the built-in default of the configured provider.
      res = await chat(t, `${KEY}_n`, { agentId: 'agt_n', messages: [userText('hi')] });
      expect(res.statusCode).toBe(200);
      expect(upstream.lastRequest().body.model).toBe('gpt-4o-mini');
    } finally {
      await t.close();
    }
  });

  it('falls back to the offline echo model when no provider key is set, and answers 502 for a model whose provider is missing', async () => {
    const t = await createTestApp({ setup: setup(upstream) });
    try {
      const before = upstream.requests.length;
      let res = await chat(t, `${KEY}_n`, { agentId: 'agt_n', messages: [userText('hi')] });
      expect(res.statusCode).toBe(200);
      expect(res.json().text).toContain('atrium/echo');
      expect(upstream.requests.length).toBe(before);

      res = await chat(t, KEY, { agentId: 'agt_m', model: 'builtin-openai', messages: [userText('hi')] });
      expect(res.statusCode).toBe(502);
      expect(res.json()).toMatchObject({ code: 'upstream_error', details: { model: 'builtin-openai' } });
      expect(await t.db.selectFrom('chats').selectAll().where('agent_id', '=', 'agt_m').execute()).toEqual(
        [],
      );
    } finally {
      await t.close();
    }
  });
});

describe('OpenAPI', () => {
  it('documents POST /v1/chat (JSON and event stream, 402/502/504) and agent runs', async () => {
    const t = await createTestApp({ setup: setup(upstream) });
    try {
      const doc = (await t.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
      const chatOp = doc.paths['/v1/chat'].post;
      expect(Object.keys(chatOp.responses['200'].content).sort()).toEqual([
        'application/json',
        'text/event-stream',
      ]);
      for (const status of ['400', '401', '402', '404', '502', '504'])
        expect(chatOp.responses[status], status).toBeDefined();
      const runOp = doc.paths['/v1/agents/{agentId}/runs'].post;
      for (const status of ['200', '400', '402', '404', '502', '504'])
        expect(runOp.responses[status], status).toBeDefined();
    } finally {
      await t.close();
    }
  });
});
