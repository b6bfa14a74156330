import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { hashApiKey } from '../../src/auth/api-keys.js';
import { migrateTo, migrateToLatest } from '../../src/db/database.js';
import { createTestEnv, engineName, type TestEnv } from '../helpers/app.js';

const KEY = 'atr_ws_from_the_previous_release_0000000000000';
const T = '2026-10-01T09:00:00.000Z';
let env: TestEnv;
let app: Awaited<ReturnType<typeof buildApp>>;

/**
 * Data written with the schema of the release before 010-management, by plain SQL as that
 * release wrote it; then the migration runs and the API reads it back.
 */
beforeAll(async () => {
  env = await createTestEnv();
  const db = env.database.db;
  // With the migrator's retries: Kysely lists every schema's tables, and other test files
  // migrate and drop theirs meanwhile (a column dropped under the listing failed this file once).
  await migrateTo(db, env.database.schema, '002-chat-messages-and-run-usage');
  const insert = (table: string, row: Record<string, unknown>) =>
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- columns of the previous schema
    (db as any).insertInto(table).values(row).execute();
  await insert('organizations', { id: 'org_old', name: 'Old Co', created_at: T, updated_at: T });
  await insert('users', {
    id: 'usr_old',
    organization_id: 'org_old',
    name: 'Ola',
    email: 'ola@old.test',
    created_at: T,
    updated_at: T,
  });
  await insert('workspaces', {
    id: 'wsp_old',
    organization_id: 'org_old',
    name: 'Old',
    created_at: T,
    updated_at: T,
  });
  await insert('workspace_members', {
    workspace_id: 'wsp_old',
    user_id: 'usr_old',
    role: 'owner',
    created_at: T,
  });
  await insert('api_keys', {
    id: 'key_old',
    name: 'old-owner',
    kind: 'workspace',
    organization_id: 'org_old',
    workspace_id: 'wsp_old',
    user_id: 'usr_old',
    key_hash: hashApiKey(KEY),
    key_prefix: KEY.slice(0, 12),
    created_at: T,
  });
  await insert('agents', {
    id: 'agt_old',
    workspace_id: 'wsp_old',
    title: 'Old agent',
    visibility: 'workspace',
    instructions: 'Kept.',
    created_at: T,
    updated_at: T,
  });
  await insert('projects', {
    id: 'prj_old',
    workspace_id: 'wsp_old',
    name: 'Old project',
    color: '#000000',
    icon: 'folder',
    memory: '- remembered',
    created_at: T,
    updated_at: T,
  });
  await insert('agent_runs', {
    id: 'run_old',
    workspace_id: 'wsp_old',
    agent_id: 'agt_old',
    status: 'completed',
    input: 'q',
    response: 'a',
    execution_time_ms: 5,
    input_tokens: 3,
    output_tokens: 4,
    cost_usd: 0,
    created_at: T,
    completed_at: T,
  });
  await insert('chats', {
    id: 'cht_old',
    workspace_id: 'wsp_old',
    agent_id: 'agt_old',
    title: 'Old chat',
    created_at: T,
    updated_at: T,
  });
  const message = { chat_id: 'cht_old', workspace_id: 'wsp_old', parts: '[]', created_at: T };
  await insert('messages', { ...message, id: 'm1', role: 'user', position: 0 });
  await insert('messages', {
    ...message,
    id: 'm2',
    role: 'assistant',
    position: 1,
    model: 'atrium/echo',
    input_tokens: 7,
    output_tokens: 9,
    cost_usd: 0,
  });
  // Every migration after the previous release runs, this one among them.
  expect(await migrateToLatest(db, env.database.schema)).toContain('010-management');
  app = await buildApp({ config: env.config, db });
  await app.ready();
});
afterAll(async () => {
  await app?.close();
  await env?.close();
});

const get = (url: string) => app.inject({ method: 'GET', url, headers: { 'x-service-api-key': KEY } });

describe(`migration 010-management over data of the previous release (${engineName})`, () => {
  it('keeps the key working and marks it as managed by the setup file', async () => {
    expect((await get('/v1/me')).json().data).toMatchObject({
      key: { id: 'key_old' },
      workspace: { role: 'owner' },
    });
    const keys = (await get('/v1/workspace/wsp_old/api-keys')).json().data.apiKeys;
    expect(keys).toEqual([expect.objectContaining({ id: 'key_old', managedBy: 'setup', createdAt: T })]);
  });

  it('keeps agents (managed by setup) and projects (unclaimed: shown as api) with their content', async () => {
    expect((await get('/v1/agents/agt_old')).json().data.agent).toMatchObject({
      instructions: 'Kept.',
      managedBy: 'setup',
    });
    expect((await get('/v1/projects/prj_old')).json().data.project).toMatchObject({
      memory: '- remembered',
      managedBy: 'api',
      createdAt: T,
    });
    const run = await env.database.db
      .selectFrom('agent_runs')
      .selectAll()
      .where('id', '=', 'run_old')
      .executeTakeFirst();
    expect(run).toMatchObject({ input_tokens: 3, output_tokens: 4, user_id: null });
  });

  it('counts the replies stored before the upgrade in the usage report', async () => {
    const report = (await get('/v1/workspace/wsp_old/usage?month=2026-10')).json().data;
    expect(report).toMatchObject({ inputTokens: 7, outputTokens: 9, requests: 1 });
    expect(report.byAgent).toEqual([
      { agentId: 'agt_old', inputTokens: 7, outputTokens: 9, costUsd: 0, requests: 1 },
    ]);
  });
});
