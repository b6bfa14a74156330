import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/database.js';
import { applyFixture, createTestEnv, engineName, type TestEnv } from '../helpers/app.js';

const FULL = `
providers:
  - { id: local, type: openai-compatible, baseURL: "http://127.0.0.1:11434/v1", apiKey: provider-secret }
  - { id: envkeyed, type: openai, apiKeyEnv: SOME_KEY }
models:
  - { id: llama3, provider: local, model: "llama3.1:8b", pricing: { inputPerMTok: 1.5, outputPerMTok: 3 } }
  - { id: gpt, provider: envkeyed, model: gpt-x, pricing: { inputPerMTok: 2, outputPerMTok: 4 } }
organizations:
  - id: org_p
    name: Partial
    users:
      - { id: usr_p, name: Pat, email: pat@partial.test }
      - { id: usr_q, name: Quinn, email: quinn@partial.test }
    apiKeys:
      - { name: org-key, user: usr_p, key: "atr_org_fixture_partial_000000000000000000", expiresAt: "2031-01-01T00:00:00Z" }
    workspaces:
      - id: wsp_p
        name: Main
        models: [llama3, gpt, atrium/echo]
        defaultModel: gpt
        limits: { monthlyTokens: 5000, monthlyCostUsd: 50, chatSpendCapUsd: 2, rateLimitPerMinute: 60 }
        members:
          - { user: usr_p, role: owner }
          - { user: usr_q, role: member }
        apiKeys:
          - { name: ws-key, user: usr_p, key: "atr_ws_fixture_partial_0000000000000000000", expiresAt: "2030-01-01T00:00:00Z" }
        agents:
          - id: agt_full
            title: Full
            description: Does everything
            image: https://example.test/full.png
            category: support
            visibility: private
            model: llama3
            instructions: Be thorough.
            tools:
              - { type: mcp, name: search, url: "http://127.0.0.1:9/mcp" }
          - { id: agt_lead, title: Lead, orchestration: { agents: [agt_full] } }
          - { id: agt_gone, title: Gone, deleted: true }
        projects:
          - { id: prj_full, name: Full, description: All of it, instructions: Cite files., color: "#FF0000", icon: star, memory: Remember this., archived: true }
`;

/** Names every object again with only what identifies it, and adds one key. */
const SMALL = `
providers:
  - { id: envkeyed, type: openai }
models:
  - { id: gpt, provider: envkeyed, model: gpt-x }
organizations:
  - id: org_p
    name: Partial
    users:
      - { id: usr_p, name: Pat, email: pat@partial.test }
    apiKeys:
      - { name: org-key, user: usr_p }
    workspaces:
      - id: wsp_p
        name: Main
        apiKeys:
          - { name: ws-key, user: usr_p }
          - { name: added-key, user: usr_p, key: "atr_ws_fixture_partial_added_000000000000000" }
        agents:
          - { id: agt_full, title: Full }
          - { id: agt_lead, title: Lead }
          - { id: agt_gone, title: Gone }
        projects:
          - { id: prj_full, name: Full }
`;

const TABLES = [
  'providers',
  'models',
  'organizations',
  'users',
  'workspaces',
  'workspace_models',
  'workspace_members',
  'api_keys',
  'agents',
  'projects',
] as const;

async function snapshot(db: Db) {
  const rows: Record<string, unknown[]> = {};
  for (const table of TABLES) {
    rows[table] = await db
      .selectFrom(table)
      .selectAll()
      .orderBy(table === 'workspace_models' ? 'model_id' : 'created_at')
      .execute();
  }
  return rows;
}

let env: TestEnv;
let db: Db;

beforeAll(async () => {
  env = await createTestEnv();
  db = env.database.db;
});
afterAll(async () => {
  await env.close();
});

function workspace() {
  return db.selectFrom('workspaces').selectAll().where('id', '=', 'wsp_p').executeTakeFirstOrThrow();
}

describe(`atrium apply leaves what a file does not mention (${engineName})`, () => {
  it('a small file that only adds a key changes nothing else on any object', async () => {
    await applyFixture(env, FULL);
    const before = await snapshot(db);
    const report = await applyFixture(env, SMALL);
    expect(report.created).toEqual(['workspace key added-key']);
    expect(report.updated).toEqual([]);
    const after = await snapshot(db);
    const added = (after.api_keys as Array<{ name: string }>).filter((k) => k.name === 'added-key');
    expect(added).toHaveLength(1);
    after.api_keys = (after.api_keys as Array<{ name: string }>).filter((k) => k.name !== 'added-key');
    expect(after).toEqual(before);
    expect(await workspace()).toMatchObject({
      default_model: 'gpt',
      monthly_tokens: 5000,
      monthly_cost_usd: 50,
      chat_spend_cap_usd: 2,
      rate_limit_per_minute: 60,
    });
  });

  it('an explicit null removes one setting and leaves the others', async () => {
    const report = await applyFixture(
      env,
      `
providers:
  - { id: envkeyed, type: openai, apiKeyEnv: null }
models:
  - { id: gpt, provider: envkeyed, model: gpt-x, pricing: { inputPerMTok: null } }
organizations:
  - id: org_p
    name: Partial
    users: [{ id: usr_p, name: Pat, email: pat@partial.test }]
    workspaces:
      - id: wsp_p
        name: Main
        limits: { monthlyTokens: null }
        apiKeys:
          - { name: ws-key, user: usr_p, expiresAt: null }
        agents:
          - { id: agt_full, title: Full, model: null, description: null }
          - { id: agt_gone, title: Gone, deleted: false }
        projects:
          - { id: prj_full, name: Full, color: null }
`,
    );
    expect(report.created).toEqual([]);
    expect(await workspace()).toMatchObject({
      default_model: 'gpt',
      monthly_tokens: null,
      monthly_cost_usd: 50,
      chat_spend_cap_usd: 2,
      rate_limit_per_minute: 60,
    });
    const provider = await db
      .selectFrom('providers')
      .selectAll()
      .where('id', '=', 'envkeyed')
      .executeTakeFirstOrThrow();
    expect(provider).toMatchObject({ api_key_env: null, type: 'openai' });
    const model = await db.selectFrom('models').selectAll().where('id', '=', 'gpt').executeTakeFirstOrThrow();
    expect(model).toMatchObject({ input_per_mtok: 0, output_per_mtok: 4 });
    const key = await db
      .selectFrom('api_keys')
      .selectAll()
      .where('name', '=', 'ws-key')
      .executeTakeFirstOrThrow();
    expect(key.expires_at).toBeNull();
    const orgKey = await db
      .selectFrom('api_keys')
      .selectAll()
      .where('name', '=', 'org-key')
      .executeTakeFirstOrThrow();
    expect(orgKey.expires_at).toBe('2031-01-01T00:00:00.000Z');
    const agent = await db
      .selectFrom('agents')
      .selectAll()
      .where('id', '=', 'agt_full')
      .executeTakeFirstOrThrow();
    expect(agent).toMatchObject({
      model: null,
      description: '',
      image: 'https://example.test/full.png',
      category: 'support',
      visibility: 'private',
      instructions: 'Be thorough.',
    });
    expect(JSON.parse(agent.tools)).toHaveLength(1);
    const restored = await db
      .selectFrom('agents')
      .selectAll()
      .where('id', '=', 'agt_gone')
      .executeTakeFirstOrThrow();
    expect(restored.deleted_at).toBeNull();
    const project = await db
      .selectFrom('projects')
      .selectAll()
      .where('id', '=', 'prj_full')
      .executeTakeFirstOrThrow();
    expect(project).toMatchObject({
      color: '#64748B',
      icon: 'star',
      description: 'All of it',
      instructions: 'Cite files.',
      memory: 'Remember this.',
      archived: 1,
    });
  });

  it('`limits: null` removes every limit; `defaultModel: null` removes the default', async () => {
    await applyFixture(
      env,
      `
organizations:
  - id: org_p
    name: Partial
    workspaces:
      - { id: wsp_p, name: Main, limits: null, defaultModel: null }
`,
    );
    expect(await workspace()).toMatchObject({
      default_model: null,
      monthly_tokens: null,
      monthly_cost_usd: null,
      chat_spend_cap_usd: null,
      rate_limit_per_minute: null,
    });
  });

  it('`null` clears a limit set to 0 too (0 and null are not the same setting)', async () => {
    const limits = (value: string) =>
      applyFixture(
        env,
        `
organizations:
  - id: org_p
    name: Partial
    workspaces:
      - { id: wsp_p, name: Main, limits: ${value} }
`,
      );
    await limits('{ rateLimitPerMinute: 0, chatSpendCapUsd: 0 }');
    expect(await workspace()).toMatchObject({ rate_limit_per_minute: 0, chat_spend_cap_usd: 0 });
    // Before, both stayed 0 ("nothing to change"): a cap of 0 refused every chat until set to
    // something else first.
    await limits('{ rateLimitPerMinute: null, chatSpendCapUsd: null }');
    expect(await workspace()).toMatchObject({ rate_limit_per_minute: null, chat_spend_cap_usd: null });
    await limits('{ chatSpendCapUsd: 0 }');
    await limits('null');
    expect(await workspace()).toMatchObject({ chat_spend_cap_usd: null });
  });

  it('a file that narrows the enabled models moves a default they no longer include to the first one', async () => {
    await applyFixture(
      env,
      `
providers:
  - { id: envkeyed, type: openai }
models:
  - { id: gpt, provider: envkeyed, model: gpt-x }
organizations:
  - id: org_p
    name: Partial
    workspaces:
      - { id: wsp_p, name: Main, models: [gpt, atrium/echo], defaultModel: gpt }
`,
    );
    await applyFixture(
      env,
      `
organizations:
  - id: org_p
    name: Partial
    workspaces:
      - { id: wsp_p, name: Main, models: [atrium/echo] }
`,
    );
    expect((await workspace()).default_model).toBe('atrium/echo');
  });
});
