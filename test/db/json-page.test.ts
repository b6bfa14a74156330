/**
 * Listings whose page the database builds as JSON text (src/db/json-page.ts) answer exactly what
 * the object views answer for the same rows: same fields in the same order, same types (booleans
 * from 0/1, numbers, nulls, embedded JSON), same order of rows, same paging.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertAgent } from '../../src/db/repositories/agents.js';
import { recordChatMessages } from '../../src/db/repositories/chats.js';
import { insertSkills } from '../../src/db/repositories/skills.js';
import { shownUsd } from '../../src/models/registry.js';
import { listChats } from '../../src/services/chats.js';
import { chatViewer } from '../../src/services/chat-visibility.js';
import { projectFileView } from '../../src/services/project-files.js';
import { projectView } from '../../src/services/projects.js';
import { agentView } from '../../src/services/agents.js';
import type { RunningReplies } from '../../src/services/running-replies.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
const headers = { 'x-service-api-key': KEYS.mainOwner };
const at = (i: number) => new Date(Date.parse('2026-03-01T00:00:00.000Z') + i * 1000).toISOString();
// Text that JSON must escape, and text that it must not mangle.
const tricky = 'quote " backslash \\ newline \n tab \t unicode é 漢字 😀 </script>';

beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
  const db = t.db;
  await db
    .insertInto('projects')
    .values(
      [0, 1, 2, 3].map((i) => ({
        id: `prj_json_${i}`,
        workspace_id: i === 3 ? 'wsp_other' : 'wsp_main',
        name: i === 0 ? tricky : `Project ${i}`,
        description: '',
        instructions: 'hidden',
        color: '#112233',
        icon: 'folder',
        memory: 'hidden',
        archived: i === 2 ? 1 : 0,
        // Two projects with the same time: the id breaks the tie.
        created_at: at(i),
        updated_at: at(i === 1 ? 0 : i),
        managed_by: 'api' as const,
      })),
    )
    .execute();
  await db
    .insertInto('models')
    .values([
      {
        id: 'chat-x',
        provider_id: 'p',
        provider_model: 'x',
        input_per_mtok: 0,
        output_per_mtok: 0,
        kind: 'chat',
        created_at: at(0),
        updated_at: at(0),
      },
      {
        id: 'emb-x',
        provider_id: 'p',
        provider_model: 'e',
        input_per_mtok: 0,
        output_per_mtok: 0,
        kind: 'embedding',
        created_at: at(0),
        updated_at: at(0),
      },
    ])
    .execute();
  await db
    .insertInto('workspace_models')
    .values([
      { workspace_id: 'wsp_main', model_id: 'chat-x' },
      { workspace_id: 'wsp_main', model_id: 'emb-x' },
    ])
    .execute();
  const agent = (id: string, title: string, model: string | null, extra = {}) => ({
    id,
    workspace_id: 'wsp_main',
    title,
    description: tricky,
    image: '',
    category: 'c',
    visibility: 'workspace' as const,
    model,
    instructions: 'hidden',
    tools: '[]',
    orchestration: null,
    deleted_at: null,
    created_at: at(1),
    updated_at: at(2),
    managed_by: 'api' as const,
    ...extra,
  });
  // Through the repositories, which write each row's sort key.
  for (const row of [
    agent('agt_json_a', 'alpha', 'chat-x'),
    agent('agt_json_b', 'Beta', 'emb-x'),
    agent('agt_json_c', 'gamma', 'not-enabled'),
    agent('agt_json_d', 'Delta', null),
    agent('agt_json_e', 'epsilon', null, { visibility: 'private' }),
    agent('agt_json_f', 'zeta', null, { deleted_at: at(3) }),
  ])
    await insertAgent(db, row);
  await insertSkills(
    db,
    [0, 1, 2].map((i) => ({
      id: `skl_json_${i}`,
      workspace_id: 'wsp_main',
      name: `Skill-${i}`,
      description: tricky,
      visibility: i === 2 ? ('private' as const) : ('workspace' as const),
      owner_user_id: i === 2 ? 'usr_max' : 'usr_olivia',
      // A replaced skill's row names its version folder; the list shows the skill's folder.
      storage_path: `skills/wsp_main/skl_json_${i}/.atrium-version-g${i}/`,
      metadata: JSON.stringify(i === 0 ? { license: 'MIT', nested: { list: [1, 2.5, null, true] } } : {}),
      created_at: at(i),
      updated_at: at(i),
    })),
  );
  await db
    .insertInto('chats')
    .values(
      [0, 1, 2, 3, 4].map((i) => ({
        id: `cht_json_${i}`,
        workspace_id: 'wsp_main',
        agent_id: 'agt_json_a',
        project_id: i === 0 ? 'prj_json_0' : null,
        title: i === 0 ? tricky : `Chat ${i}`,
        spend_usd: i === 0 ? 0.1 + 0.2 : i * 0.0125,
        client_id: i === 1 ? 'client-1' : null,
        created_by: 'usr_olivia',
        end_user: i === 2 ? 'end-user' : null,
        message_count: i * 2,
        last_message_at: i === 0 ? null : at(i),
        created_at: at(i),
        updated_at: at(i === 4 ? 3 : i),
      })),
    )
    .execute();
  await db
    .insertInto('project_files')
    .values(
      [0, 1, 2].map((i) => ({
        id: `fil_json_${i}`,
        workspace_id: 'wsp_main',
        project_id: 'prj_json_0',
        name: i === 0 ? 'é "x".md' : `f${i}.md`,
        path: i === 0 ? 'dir/é "x".md' : `f${i}.md`,
        mime_type: 'text/markdown',
        size_bytes: 10_000_000_000 + i,
        etag: 'e',
        type: 'uploaded',
        created_at: at(i),
        updated_at: at(i),
        synced_at: at(i),
        index_status: i === 1 ? ('failed' as const) : ('pending' as const),
        index_error: i === 1 ? tricky : null,
      })),
    )
    .execute();
});
afterAll(() => t.close());

const get = async (url: string) => {
  const res = await t.app.inject({ method: 'GET', url, headers });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
  // Sent as bytes (jsonDataBody): the length counts the UTF-8 bytes of é 漢字 😀, not characters.
  expect(Number(res.headers['content-length'])).toBe(res.rawPayload.length);
  expect(res.rawPayload.toString('utf8')).toBe(res.body);
  return res.json();
};

describe(`listings built as JSON by the database (${engineName})`, () => {
  it('projects: as projectView, newest first then id, archived ones apart, no other workspace', async () => {
    const rows = await t.db
      .selectFrom('projects')
      .selectAll()
      .where('workspace_id', '=', 'wsp_main')
      .orderBy('updated_at', 'desc')
      .orderBy('id', 'desc')
      .execute();
    const active = (await get('/v1/projects')).data.projects;
    expect(active).toEqual(rows.filter((r) => r.archived === 0).map(projectView));
    expect(active.map((p: { id: string }) => p.id).slice(-2)).toEqual(['prj_json_1', 'prj_json_0']);
    expect(active[active.length - 1].name).toBe(tricky);
    const archived = (await get('/v1/projects?archived=true')).data.projects;
    expect(archived).toEqual(rows.filter((r) => r.archived === 1).map(projectView));
    expect(archived.find((p: { id: string }) => p.id === 'prj_json_2').archived).toBe(true);
    expect(Object.keys(active[0])).toEqual(Object.keys(projectView(rows[0]!)));
  });

  it('agents: as agentView with the model each runs on, paged with the total', async () => {
    const body = await get('/v1/workspace/wsp_main/agents?limit=3&offset=1');
    const all = (await get('/v1/workspace/wsp_main/agents?limit=100')).data;
    const ours = all.agents.filter((a: { id: string }) => a.id.startsWith('agt_json_'));
    const rows = await t.db.selectFrom('agents').selectAll().where('id', 'like', 'agt_json_%').execute();
    const row = (id: string) => rows.find((r) => r.id === id)!;
    // Its own model when enabled as a chat model; else the workspace's fallback (the echo model).
    expect(ours).toEqual([
      agentView(row('agt_json_a'), 'chat-x'),
      agentView(row('agt_json_b'), 'atrium/echo'),
      agentView(row('agt_json_d'), 'atrium/echo'),
      agentView(row('agt_json_c'), 'atrium/echo'),
    ]);
    expect(Object.keys(ours[0])).toEqual(Object.keys(agentView(row('agt_json_a'), 'x')));
    expect(body.data.pagination).toEqual({ total: all.pagination.total, limit: 3, offset: 1 });
    expect(body.data.agents).toEqual(all.agents.slice(1, 4));
  });

  it('skills: metadata embedded as JSON; an owner’s list has a member’s private skill too', async () => {
    const body = await get('/v1/workspace/wsp_main/skills?limit=1&offset=0');
    expect(body.data.pagination).toEqual({ total: 3, limit: 1, offset: 0 });
    expect(body.data.skills).toEqual([
      {
        id: 'skl_json_0',
        name: 'Skill-0',
        description: tricky,
        visibility: 'workspace',
        ownerUserId: 'usr_olivia',
        storagePath: 'skills/wsp_main/skl_json_0/',
        metadata: { license: 'MIT', nested: { list: [1, 2.5, null, true] } },
        createdAt: at(0),
        updatedAt: at(0),
      },
    ]);
    const second = await get('/v1/workspace/wsp_main/skills?limit=5&offset=1');
    expect(second.data.skills.map((s: { id: string; metadata: object }) => [s.id, s.metadata])).toEqual([
      ['skl_json_1', {}],
      ['skl_json_2', {}],
    ]);
  });

  it('project files: as projectFileView, big sizes as numbers, 404 for another workspace’s project', async () => {
    const rows = await t.db
      .selectFrom('project_files')
      .selectAll()
      .where('project_id', '=', 'prj_json_0')
      .orderBy('updated_at', 'desc')
      .orderBy('id', 'desc')
      .execute();
    const all = (await get('/v1/projects/prj_json_0/files')).data;
    expect(all).toEqual({ files: rows.map(projectFileView), pagination: { total: 3, limit: 3, offset: 0 } });
    expect(all.files[1]).toMatchObject({
      indexStatus: 'failed',
      indexError: tricky,
      sizeBytes: 10_000_000_001,
    });
    const paged = (await get('/v1/projects/prj_json_0/files?limit=1&offset=2')).data;
    expect(paged).toEqual({
      files: [projectFileView(rows[2]!)],
      pagination: { total: 3, limit: 1, offset: 2 },
    });
    const other = await t.app.inject({ method: 'GET', url: '/v1/projects/prj_json_3/files', headers });
    expect(other.statusCode).toBe(404);
    const none = await t.app.inject({ method: 'GET', url: '/v1/projects/prj_nope/files', headers });
    expect(none.statusCode).toBe(404);
  });

  it('chats: every field and type, cursor paging with the lookahead, the same rows as one page', async () => {
    const whole = (await get('/v1/chats?limit=10')).data;
    expect(whole.pagination).toEqual({ limit: 10, hasMore: false, nextCursor: null });
    expect(whole.chats.map((c: { id: string }) => c.id)).toEqual([
      'cht_json_4',
      'cht_json_3',
      'cht_json_2',
      'cht_json_1',
      'cht_json_0',
    ]);
    expect(whole.chats[4]).toEqual({
      id: 'cht_json_0',
      clientId: null,
      title: tricky,
      agentId: 'agt_json_a',
      projectId: 'prj_json_0',
      createdBy: 'usr_olivia',
      user: null,
      messageCount: 0,
      lastMessageAt: null,
      active: false,
      // Stored 0.30000000000000004: shown to 1e-8 USD like every cost (shownUsd).
      spendUsd: 0.3,
      createdAt: at(0),
      updatedAt: at(0),
    });
    expect(whole.chats[3]).toMatchObject({ clientId: 'client-1', messageCount: 2, spendUsd: 0.0125 });
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: {
        chats: Array<{ id: string }>;
        pagination: { hasMore: boolean; nextCursor: string | null };
      } = (await get(`/v1/chats?limit=2${cursor ? `&cursor=${cursor}` : ''}`)).data;
      seen.push(...page.chats.map((c) => c.id));
      expect(page.pagination.hasMore).toBe(page.pagination.nextCursor !== null);
      cursor = page.pagination.nextCursor;
    } while (cursor);
    expect(seen).toEqual(whole.chats.map((c: { id: string }) => c.id));
  });

  it('chats: a chat whose reply is running is listed as active', async () => {
    const replies = {
      activeChats: async (ids: string[]) => new Set(ids.filter((id) => id === 'cht_json_3')),
    } as unknown as RunningReplies;
    const body = await listChats(
      { db: t.db, clock: () => new Date(), replies },
      { workspaceId: 'wsp_main', viewer: chatViewer('usr_olivia', 'owner', null) },
      { limit: 3 },
    );
    const { data } = JSON.parse(body.toString('utf8'));
    expect(data.chats.map((c: { id: string; active: boolean }) => [c.id, c.active])).toEqual([
      ['cht_json_4', false],
      ['cht_json_3', true],
      ['cht_json_2', false],
    ]);
    expect(data.pagination.hasMore).toBe(true);
  });
});

describe(`numbers in a listing built by the database (${engineName})`, () => {
  it('chats: spendUsd as the other routes write it, 0 for a fresh chat (not 0.0), any other spend kept', async () => {
    // Its own agent, so that the listing shows this chat alone.
    await t.db
      .insertInto('chats')
      .values({
        id: 'cht_json_spend',
        workspace_id: 'wsp_main',
        agent_id: 'agt_json_b',
        project_id: null,
        title: 'Spend',
        // As POST /v1/chat starts one.
        spend_usd: 0,
        client_id: null,
        created_by: 'usr_olivia',
        end_user: null,
        message_count: 0,
        last_message_at: null,
        created_at: at(9),
        updated_at: at(9),
      })
      .execute();
    const spendText = async (url: string) => {
      const res = await t.app.inject({ method: 'GET', url, headers });
      expect(res.statusCode).toBe(200);
      return [...res.body.matchAll(/"spendUsd":([^,}]*)/g)].map((match) => match[1]);
    };
    const listed = () => spendText('/v1/chats?agentId=agt_json_b');
    // Before: SQLite's JSON wrote the stored real as `0.0` where GET /v1/chats/{id} writes `0`.
    expect(await listed()).toEqual(['0']);
    expect(await spendText('/v1/chats/cht_json_spend')).toEqual(['0']);
    for (const [costUsd, written] of [
      [2, '2'],
      [0.5, '2.5'],
      [0.1, '2.6'],
    ] as const) {
      await recordChatMessages(t.db, 'cht_json_spend', { added: 0, costUsd, now: at(9) });
      expect(await listed()).toEqual([written]);
      expect(await spendText('/v1/chats/cht_json_spend')).toEqual([written]);
    }
  });

  it('chats: spendUsd is shownUsd of the stored spend, spelled as JSON.stringify, in the listing and the chat alike', async () => {
    // Costs with float noise, ties at half of 1e-8, spellings JavaScript and the engines write
    // differently (2.0e-05 and 2e-05 for 0.00002, 1.0e-07 for 1e-7), and a spread of magnitudes.
    let seed = 7;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    const spends = [
      0,
      1e-8,
      4.9e-9,
      5e-9,
      1.5e-8,
      2.5e-8,
      3.5e-8,
      0.000000125,
      5e-8,
      1e-7,
      1.2e-7,
      9.9e-7,
      9.95e-7,
      1e-6,
      (1 * 0.15 + 2 * 0.6) / 1e6,
      ((1 * 0.15 + 2 * 0.6) / 1e6) * 2,
      0.00002,
      0.1 + 0.2,
      0.0125,
      1.02,
      0.999999995,
      99999.999999995,
      1234567.89,
      9999999.99999999,
      ...Array.from({ length: 120 }, (_, i) => random() * 10 ** ((i % 15) - 8)),
      ...Array.from({ length: 40 }, (_, i) => (Math.floor(random() * 5000) * 0.15 + i * 0.6) / 1e6),
    ];
    await t.db
      .insertInto('chats')
      .values(
        spends.map((spend, i) => ({
          id: `cht_json_usd_${String(i).padStart(3, '0')}`,
          workspace_id: 'wsp_main',
          agent_id: 'agt_json_c',
          project_id: null,
          title: 'Cost',
          spend_usd: spend,
          client_id: null,
          created_by: 'usr_olivia',
          end_user: null,
          message_count: 0,
          last_message_at: null,
          created_at: at(20),
          updated_at: at(20),
        })),
      )
      .execute();
    const shown = (body: string) =>
      new Map([...body.matchAll(/"id":"([^"]*)"[^}]*"spendUsd":([^,}]*)/g)].map((m) => [m[1], m[2]]));
    const listed = new Map<string, string | undefined>();
    let cursor: string | null = null;
    do {
      const body: string = (
        await t.app.inject({
          method: 'GET',
          url: `/v1/chats?agentId=agt_json_c&limit=100${cursor ? `&cursor=${cursor}` : ''}`,
          headers,
        })
      ).body;
      for (const [id, text] of shown(body)) listed.set(id!, text);
      cursor = (JSON.parse(body) as { data: { pagination: { nextCursor: string | null } } }).data.pagination
        .nextCursor;
    } while (cursor);
    const expected = new Map(
      spends.map((spend, i) => [
        `cht_json_usd_${String(i).padStart(3, '0')}`,
        JSON.stringify(shownUsd(spend)),
      ]),
    );
    expect(listed).toEqual(expected);
    for (const id of ['cht_json_usd_000', 'cht_json_usd_005', 'cht_json_usd_014', 'cht_json_usd_016']) {
      const res = await t.app.inject({ method: 'GET', url: `/v1/chats/${id}`, headers });
      expect(shown(res.body).get(id)).toBe(expected.get(id));
    }
  });
});
