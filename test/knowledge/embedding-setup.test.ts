import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { applySetup } from '../../src/setup/apply.js';
import { exportText, exportWorkspace } from '../../src/setup/export.js';
import { parseSetupText, type SetupFile } from '../../src/setup/validate.js';
import { createTestApp, engineName } from '../helpers/app.js';

const KEY = 'atr_ws_fixture_embedding_setup_00000000000';

function setup(embeddingModel = 'embed') {
  return `
providers:
  - { id: compat, type: openai-compatible, baseURL: "http://127.0.0.1:9/v1" }
models:
  - { id: chatty, provider: compat, model: chat-1 }
  - { id: embed, provider: compat, model: text-embedding-3-small, kind: embedding, pricing: { inputPerMTok: 0.02 } }
organizations:
  - id: org_e
    name: E
    users: [{ id: usr_e, name: E, email: e@e.test }]
    workspaces:
      - id: wsp_e
        name: E
        models: [atrium/echo, chatty]
        defaultModel: atrium/echo
        embeddingModel: ${embeddingModel}
        members: [{ user: usr_e, role: owner }]
        apiKeys: [{ name: e, user: usr_e, key: "${KEY}" }]
        agents: [{ id: agt_e, title: E }]
`;
}

function problems(yaml: string) {
  const parsed = parseSetupText(yaml, 'setup.yaml');
  return parsed.ok ? [] : parsed.problems;
}

describe('setup file: embedding models', () => {
  it('accepts kind: embedding and a workspace embeddingModel naming one (or the development one)', () => {
    expect(problems(setup())).toEqual([]);
    expect(problems(setup('atrium/echo-embedding'))).toEqual([]);
    expect(problems(setup('null'))).toEqual([]);
  });

  it.each([
    [
      'an unknown model',
      setup('nope'),
      'organizations[0].workspaces[0].embeddingModel',
      /unknown model "nope"/,
    ],
    ['a chat model', setup('chatty'), 'organizations[0].workspaces[0].embeddingModel', /is a chat model/],
    [
      'the chat echo model',
      setup('atrium/echo'),
      'organizations[0].workspaces[0].embeddingModel',
      /is a chat model/,
    ],
    [
      'an embedding model as default',
      setup().replace('defaultModel: atrium/echo', 'defaultModel: embed'),
      'organizations[0].workspaces[0].defaultModel',
      /is an embedding model/,
    ],
    [
      'an embedding model among the chat models',
      setup().replace('models: [atrium/echo, chatty]', 'models: [atrium/echo, embed]'),
      'organizations[0].workspaces[0].models[1]',
      /is an embedding model/,
    ],
    [
      'an embedding model for an agent',
      setup().replace('{ id: agt_e, title: E }', '{ id: agt_e, title: E, model: embed }'),
      'organizations[0].workspaces[0].agents[0].model',
      /is an embedding model/,
    ],
    [
      'an embedding model on Anthropic',
      setup().replace('provider: compat, model: text-embedding-3-small', 'provider: anthropic, model: x'),
      'models[1].kind',
      /Anthropic/,
    ],
    ['an unknown kind', setup().replace('kind: embedding', 'kind: vector'), 'models[1].kind', /./],
    ['an empty embeddingModel', setup('""'), 'organizations[0].workspaces[0].embeddingModel', /fewer than 1/],
    ['a number', setup('42'), 'organizations[0].workspaces[0].embeddingModel', /string/],
    [
      'an oversized id',
      setup('x'.repeat(201)),
      'organizations[0].workspaces[0].embeddingModel',
      /more than 200/,
    ],
  ])('refuses %s', (_name, yaml, path, message) => {
    const found = problems(yaml);
    expect(found.some((p) => p.path === path && message.test(p.message))).toBe(true);
  });
});

describe(`embedding models in the service (${engineName})`, () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    t = await createTestApp({ setup: setup() });
  });
  afterAll(async () => {
    await t?.close();
  });
  const get = (url: string) => t.app.inject({ method: 'GET', url, headers: { 'x-service-api-key': KEY } });
  /** The workspace's embedding model as stored. */
  const embeddingModel = async () =>
    (
      await t.env.database.db
        .selectFrom('workspaces')
        .select('embedding_model')
        .where('id', '=', 'wsp_e')
        .executeTakeFirstOrThrow()
    ).embedding_model;

  it('stores kind and embeddingModel; null clears; left out keeps', async () => {
    const db = t.env.database.db;
    const modelKind = async (id: string) =>
      (await db.selectFrom('models').select('kind').where('id', '=', id).executeTakeFirstOrThrow()).kind;
    expect(await modelKind('embed')).toBe('embedding');
    expect(await modelKind('chatty')).toBe('chat');
    expect(await embeddingModel()).toBe('embed');
    const apply = async (yaml: string) => {
      const parsed = parseSetupText(yaml, 'setup.yaml');
      if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
      await applySetup(db, parsed.setup, { now: new Date() });
    };
    await apply(setup().replace('        embeddingModel: embed\n', ''));
    expect(await embeddingModel()).toBe('embed');
    await apply(setup('null'));
    expect(await embeddingModel()).toBeNull();
    await apply(setup());
    expect(await embeddingModel()).toBe('embed');
  });

  it('atrium export → apply --adopt keeps the embedding model', async () => {
    const db = t.env.database.db;
    const exported = (await exportWorkspace(db, 'wsp_e'))!;
    const reparsed = parseSetupText(exportText(exported, 'wsp_e'), 'export.yaml');
    expect(reparsed.ok).toBe(true);
    await applySetup(db, (reparsed as { setup: SetupFile }).setup, { now: new Date(), adopt: true });
    expect(await embeddingModel()).toBe('embed');
    // The export names no model: applying it must not need the file's model entries.
    expect(parseYaml(exportText(exported, 'wsp_e'))).not.toHaveProperty('models');
  });

  it('lists the embedding model with kind embedding, never as a chat model or default', async () => {
    const res = await get('/v1/workspace/wsp_e/models');
    expect(res.statusCode).toBe(200);
    const models = res.json().data.models as {
      id: string;
      kind: string;
      default: boolean;
      pricing: unknown;
    }[];
    expect(models.find((m) => m.id === 'embed')).toEqual({
      id: 'embed',
      kind: 'embedding',
      provider: 'compat',
      default: false,
      pricing: { inputPerMTok: 0.02, outputPerMTok: 0 },
    });
    expect(models.filter((m) => m.kind === 'chat').map((m) => m.id)).toEqual(['atrium/echo', 'chatty']);
    // OpenAI's model list is the agents: no model entry at all.
    const openai = await get('/v1/openai/models');
    expect(openai.statusCode).toBe(200);
    expect((openai.json().data as { id: string }[]).map((m) => m.id)).toEqual(['agt_e']);
  });

  it('refuses an embedding model as a chat model', async () => {
    for (const model of ['embed', 'atrium/echo-embedding']) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/v1/chat',
        headers: { 'x-service-api-key': KEY },
        payload: {
          agentId: 'agt_e',
          model,
          messages: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
        },
      });
      expect(res.statusCode).toBe(400);
      // POST /v1/chat answers errors in the chat protocol's flat shape (docs/chat.md).
      expect(res.json()).toMatchObject({
        code: 'bad_request',
        message: expect.stringMatching(/embedding model/),
      });
    }
    const agent = await t.app.inject({
      method: 'POST',
      url: '/v1/workspace/wsp_e/agents',
      headers: { 'x-service-api-key': KEY },
      payload: { title: 'Embedder', model: 'embed' },
    });
    expect(agent.statusCode).toBe(400);
    const openai = await t.app.inject({
      method: 'POST',
      url: '/v1/openai/chat/completions',
      headers: { authorization: `Bearer ${KEY}` },
      payload: { model: 'embed', messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(openai.statusCode).toBe(404);
  });

  it('an entry redefined as an embedding model stops being a chat model of workspaces enabling it', async () => {
    const db = t.env.database.db;
    await db.updateTable('models').set({ kind: 'embedding' }).where('id', '=', 'chatty').execute();
    try {
      const res = await get('/v1/workspace/wsp_e/models');
      expect((res.json().data.models as { id: string }[]).map((m) => m.id)).not.toContain('chatty');
      const chat = await t.app.inject({
        method: 'POST',
        url: '/v1/chat',
        headers: { 'x-service-api-key': KEY },
        payload: {
          agentId: 'agt_e',
          model: 'chatty',
          messages: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
        },
      });
      expect(chat.statusCode).toBe(400);
    } finally {
      await db.updateTable('models').set({ kind: 'chat' }).where('id', '=', 'chatty').execute();
    }
  });

  it('/readyz says whether vectors are available, without failing readiness', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(200);
    // SQLite loads sqlite-vec here; this machine's PostgreSQL has no `vector` extension.
    expect(res.json().vectors).toBe(engineName === 'sqlite' ? 'available' : 'unavailable');
    expect(res.json().status).toBe('ready');
  });
});
