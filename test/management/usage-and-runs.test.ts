import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { MANAGEMENT_SETUP, MKEYS } from './fixtures.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
let upstream: FakeUpstream;
let now = new Date('2026-10-31T23:00:00.000Z');
let pricedAgent: string;

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';
const call = (method: Method, url: string, key: string, payload?: unknown) =>
  t.app.inject({
    method,
    url,
    headers: { 'x-service-api-key': key },
    ...(payload !== undefined && { payload: payload as object }),
  });
const chat = (key: string, agentId: string) =>
  call('POST', '/v1/chat', key, {
    agentId,
    messages: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
  });

beforeAll(async () => {
  upstream = await startFakeUpstream();
  t = await createTestApp({ setup: MANAGEMENT_SETUP, clock: () => now });
  await t.env.database.db
    .updateTable('providers')
    .set({ base_url: upstream.baseURL })
    .where('id', '=', 'local')
    .execute();
  const created = await call('POST', '/v1/workspace/wsp_main/agents', MKEYS.owner, {
    title: 'Priced',
    model: 'local/small',
  });
  pricedAgent = created.json().data.agent.id;
});
afterAll(async () => {
  await t.close();
  await upstream.close();
});

describe(`usage in chat and run replies (${engineName})`, () => {
  it('the chat JSON reply carries usage from the model’s price', async () => {
    upstream.enqueue({ kind: 'text', text: 'ok', usage: { prompt: 1000, completion: 500 } });
    const res = await chat(MKEYS.member, pricedAgent);
    expect(res.statusCode).toBe(200);
    expect(res.json().usage).toEqual({ inputTokens: 1000, outputTokens: 500, costUsd: 0.002 });
  });

  it('the run reply carries usage too', async () => {
    now = new Date('2026-11-05T08:00:00.000Z');
    upstream.enqueue({ kind: 'text', text: 'run', usage: { prompt: 2000, completion: 1000 } });
    const res = await call('POST', `/v1/agents/${pricedAgent}/runs`, MKEYS.member, { message: 'go' });
    expect(res.statusCode).toBe(200);
    expect(res.json().data.usage).toEqual({ inputTokens: 2000, outputTokens: 1000, costUsd: 0.004 });
  });
});

describe(`costs as replies, runs and the report show them (${engineName})`, () => {
  it('shows a cost without float noise (0.00000135, not 0.0000013499999999999998), the same everywhere', async () => {
    // A price with cents per million tokens, as most providers list theirs: (1 × 0.15 + 2 × 0.6) / 1e6
    // is 0.0000013499999999999998 in floating point.
    const pricing = (input: number, output: number) =>
      t.env.database.db
        .updateTable('models')
        .set({ input_per_mtok: input, output_per_mtok: output })
        .where('id', '=', 'local/small')
        .execute();
    const was = now;
    now = new Date('2025-06-15T12:00:00.000Z');
    await pricing(0.15, 0.6);
    try {
      const agent = (
        await call('POST', '/v1/workspace/wsp_main/agents', MKEYS.owner, {
          title: 'Cents',
          model: 'local/small',
        })
      ).json().data.agent.id as string;
      upstream.enqueue({ kind: 'text', text: 'ok', usage: { prompt: 1, completion: 2 } });
      const replied = await chat(MKEYS.owner, agent);
      expect(replied.json().usage).toEqual({ inputTokens: 1, outputTokens: 2, costUsd: 0.00000135 });
      const messages = await call('GET', `/v1/chats/${replied.json().chatId}/messages`, MKEYS.owner);
      const stored = messages.json().data.messages.find((m: { role: string }) => m.role === 'assistant');
      expect(stored.metadata.costUsd).toBe(0.00000135);
      upstream.enqueue({ kind: 'text', text: 'ok', usage: { prompt: 1, completion: 2 } });
      const run = (await call('POST', `/v1/agents/${agent}/runs`, MKEYS.owner, { message: 'go' })).json()
        .data;
      expect(run.usage.costUsd).toBe(0.00000135);
      const readBack = await call('GET', `/v1/agents/${agent}/runs/${run.id}`, MKEYS.owner);
      expect(readBack.json().data.usage.costUsd).toBe(0.00000135);
      const report = (await call('GET', '/v1/workspace/wsp_main/usage?month=2025-06', MKEYS.owner)).json()
        .data;
      expect(report.costUsd).toBe(0.0000027);
    } finally {
      now = was;
      await pricing(1, 2);
    }
  });
});

describe(`a chat's spendUsd as the listing, the chat and a 402 show it (${engineName})`, () => {
  it('is the chat’s spend rounded as every cost (0.0000027, not 2.6999999999999996e-06), spelled as JSON.stringify', async () => {
    // Two replies of 1 input and 2 output tokens at 0.15/0.60 per million: the stored spend is
    // 2 × 0.0000013499999999999998 = 0.0000026999999999999996 in floating point.
    const setPricing = (input: number, output: number) =>
      t.env.database.db
        .updateTable('models')
        .set({ input_per_mtok: input, output_per_mtok: output })
        .where('id', '=', 'local/small')
        .execute();
    const setCap = (cap: number | null) =>
      t.env.database.db
        .updateTable('workspaces')
        .set({ chat_spend_cap_usd: cap })
        .where('id', '=', 'wsp_main')
        .execute();
    const was = now;
    // A month of its own, so the usage reports tested below do not count these replies.
    now = new Date('2025-07-15T12:00:00.000Z');
    await setPricing(0.15, 0.6);
    // Room for two replies, not three: the third request is refused with the chat's spend.
    await setCap(0.000002);
    try {
      const agent = (
        await call('POST', '/v1/workspace/wsp_main/agents', MKEYS.owner, {
          title: 'Spend',
          model: 'local/small',
        })
      ).json().data.agent.id as string;
      const turn = (chatId?: string) =>
        call('POST', '/v1/chat', MKEYS.owner, {
          agentId: agent,
          ...(chatId && { chatId }),
          messages: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
        });
      upstream.enqueue({ kind: 'text', text: 'ok', usage: { prompt: 1, completion: 2 } });
      const chatId = (await turn()).json().chatId as string;
      upstream.enqueue({ kind: 'text', text: 'ok', usage: { prompt: 1, completion: 2 } });
      expect((await turn(chatId)).statusCode).toBe(200);
      const stored = await t.env.database.db
        .selectFrom('chats')
        .select('spend_usd')
        .where('id', '=', chatId)
        .executeTakeFirstOrThrow();
      expect(Number(stored.spend_usd)).toBe(0.0000026999999999999996);

      const listed = await call('GET', `/v1/chats?agentId=${agent}`, MKEYS.owner);
      expect(listed.statusCode).toBe(200);
      // The bytes, not only the value: the listing's JSON is the database's, SQLite writes reals
      // as `2.7e-06` and PostgreSQL may write another spelling of the same number.
      expect(listed.body).toContain('"spendUsd":0.0000027,');
      const [inList] = listed.json().data.chats;
      expect(inList.spendUsd).toBe(0.0000027);
      const read = await call('GET', `/v1/chats/${chatId}`, MKEYS.owner);
      expect(read.json().data.chat).toEqual(inList);
      expect(read.body).toContain('"spendUsd":0.0000027,');

      const refused = await turn(chatId);
      expect(refused.statusCode).toBe(402);
      expect(refused.json().details).toMatchObject({ chatId, spentUsd: 0.0000027 });
    } finally {
      now = was;
      await setCap(null);
      await setPricing(1, 2);
    }
  });
});

describe(`GET /v1/workspace/{id}/usage (${engineName})`, () => {
  it('adds up to the stored messages (runs included) by agent, model and day', async () => {
    now = new Date('2026-11-20T12:00:00.000Z');
    upstream.enqueue({ kind: 'text', text: 'a', usage: { prompt: 10, completion: 20 } });
    expect((await chat(MKEYS.owner, pricedAgent)).statusCode).toBe(200);
    expect((await chat(MKEYS.owner, 'agt_listed')).statusCode).toBe(200);
    expect(
      (await call('POST', '/v1/agents/agt_listed/runs', MKEYS.admin, { message: 'two words' })).statusCode,
    ).toBe(200);

    const res = await call('GET', '/v1/workspace/wsp_main/usage', MKEYS.member);
    expect(res.statusCode).toBe(200);
    const report = res.json().data;
    const stored = await t.env.database.db
      .selectFrom('messages')
      .innerJoin('chats', 'chats.id', 'messages.chat_id')
      .select([
        'chats.agent_id',
        'messages.model',
        'messages.input_tokens',
        'messages.output_tokens',
        'messages.cost_usd',
        'messages.created_at',
      ])
      .where('messages.role', '=', 'assistant')
      .where('messages.workspace_id', '=', 'wsp_main')
      .where('messages.created_at', '>=', '2026-11-01')
      .execute();
    const sum = (rows: typeof stored) => ({
      inputTokens: rows.reduce((n, r) => n + r.input_tokens, 0),
      outputTokens: rows.reduce((n, r) => n + r.output_tokens, 0),
      requests: rows.length,
    });
    expect(report).toMatchObject({
      month: '2026-11',
      ...sum(stored),
      limits: { monthlyTokens: 1_000_000, monthlyCostUsd: null },
    });
    expect(report.costUsd).toBeCloseTo(0.004 + 0.00005, 10);
    expect(report.requests).toBe(4);
    // Runs are turns of chats: their usage is in the messages, not counted twice.
    const runs = await t.env.database.db
      .selectFrom('agent_runs')
      .selectAll()
      .where('created_at', '>=', '2026-11-01')
      .execute();
    expect(runs.reduce((n, r) => n + r.input_tokens, 0)).toBeLessThanOrEqual(report.inputTokens);
    for (const [list, key] of [
      [report.byAgent, 'agentId'],
      [report.byModel, 'model'],
      [report.byDay, 'date'],
    ] as const) {
      expect(list.reduce((n: number, g: { inputTokens: number }) => n + g.inputTokens, 0)).toBe(
        report.inputTokens,
      );
      expect(list.reduce((n: number, g: { requests: number }) => n + g.requests, 0)).toBe(report.requests);
      expect(list.every((g: Record<string, unknown>) => typeof g[key] === 'string')).toBe(true);
    }
    expect(report.byAgent.find((g: { agentId: string }) => g.agentId === pricedAgent)).toMatchObject({
      inputTokens: 2010,
      outputTokens: 1020,
      requests: 2,
    });
    expect(report.byModel.map((g: { model: string }) => g.model)).toEqual(['atrium/echo', 'local/small']);
    expect(report.byDay.map((g: { date: string }) => g.date)).toEqual(['2026-11-05', '2026-11-20']);
  });

  it('counts usage no message carries, as the limits do: a /v1/openai call that names no chat', async () => {
    now = new Date('2026-11-21T12:00:00.000Z');
    const report = async () => (await call('GET', '/v1/workspace/wsp_main/usage', MKEYS.owner)).json().data;
    const before = await report();
    upstream.enqueue({ kind: 'text', text: 'b', usage: { prompt: 7, completion: 3 } });
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/openai/chat/completions',
      headers: { authorization: `Bearer ${MKEYS.owner}` },
      payload: { model: pricedAgent, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(res.statusCode).toBe(200);
    const after = await report();
    expect([after.inputTokens - before.inputTokens, after.outputTokens - before.outputTokens]).toEqual([
      7, 3,
    ]);
    expect(after.requests - before.requests).toBe(1);
    expect(after.byDay.find((g: { date: string }) => g.date === '2026-11-21')).toMatchObject({
      inputTokens: 7,
      outputTokens: 3,
      requests: 1,
    });
    const byAgent = (r: typeof after) =>
      r.byAgent.find((g: { agentId: string }) => g.agentId === pricedAgent)?.inputTokens ?? 0;
    expect(byAgent(after) - byAgent(before)).toBe(7);
  });

  it('reports another month on request, and an empty month as zeros', async () => {
    const october = (await call('GET', '/v1/workspace/wsp_main/usage?month=2026-10', MKEYS.owner)).json()
      .data;
    expect(october).toMatchObject({
      month: '2026-10',
      inputTokens: 1000,
      outputTokens: 500,
      costUsd: 0.002,
      requests: 1,
    });
    expect(october.byDay).toEqual([
      { date: '2026-10-31', inputTokens: 1000, outputTokens: 500, costUsd: 0.002, requests: 1 },
    ]);
    const empty = (await call('GET', '/v1/workspace/wsp_main/usage?month=2020-01', MKEYS.owner)).json().data;
    expect(empty).toMatchObject({
      inputTokens: 0,
      costUsd: 0,
      requests: 0,
      byAgent: [],
      byModel: [],
      byDay: [],
    });
  });

  it('reads the very month asked for at the ends of the calendar: years 0000–0099 and 9999-12', async () => {
    const usage = { workspace_id: 'wsp_main', agent_id: pricedAgent, model: 'local/small', cost_usd: 0 };
    await t.env.database.db
      .insertInto('usage_daily')
      .values([
        { ...usage, date: '1999-05-10', input_tokens: 99, output_tokens: 0, requests: 1 },
        { ...usage, date: '9999-12-31', input_tokens: 9999, output_tokens: 0, requests: 1 },
      ])
      .execute();
    const report = async (month: string) => {
      const res = await call('GET', `/v1/workspace/wsp_main/usage?month=${month}`, MKEYS.owner);
      expect(res.statusCode, res.body).toBe(200);
      return res.json().data;
    };
    // Year 99, not 1999.
    expect(await report('0099-05')).toMatchObject({ month: '0099-05', inputTokens: 0, byDay: [] });
    expect(await report('0000-01')).toMatchObject({ month: '0000-01', inputTokens: 0, byDay: [] });
    expect(await report('1999-05')).toMatchObject({ month: '1999-05', inputTokens: 99 });
    expect(await report('9999-12')).toMatchObject({
      month: '9999-12',
      inputTokens: 9999,
      byDay: [expect.objectContaining({ date: '9999-12-31' })],
    });
  });

  it('names to a member only the agents they may see: a private agent’s usage counts, unnamed', async () => {
    now = new Date('2026-12-02T12:00:00.000Z');
    const secret = (
      await call('POST', '/v1/workspace/wsp_main/agents', MKEYS.owner, {
        title: 'Secret',
        visibility: 'private',
      })
    ).json().data.agent.id;
    for (const agentId of ['agt_private', secret, 'agt_listed']) {
      expect((await chat(MKEYS.owner, agentId)).statusCode).toBe(200);
    }
    // Deleted, it stays the managers' only: its past usage is still not named to members.
    expect((await call('DELETE', `/v1/agents/${secret}`, MKEYS.owner)).statusCode).toBe(200);
    const report = async (key: string) => {
      const res = await call('GET', '/v1/workspace/wsp_main/usage?month=2026-12', key);
      expect(res.statusCode).toBe(200);
      return res.json().data;
    };
    const agentIds = (r: { byAgent: { agentId: string }[] }) => r.byAgent.map((g) => g.agentId).sort();
    const managers = await report(MKEYS.admin);
    expect(agentIds(managers)).toEqual(['agt_listed', 'agt_private', secret].sort());
    expect(agentIds(await report(MKEYS.acmeOrg))).toEqual(agentIds(managers));
    for (const key of [MKEYS.member, MKEYS.acmeOrgMember]) {
      const member = await report(key);
      expect(JSON.stringify(member)).not.toContain('agt_private');
      expect(JSON.stringify(member)).not.toContain(secret);
      // Totals, models and days are the workspace's, the same for everyone; only byAgent is cut.
      expect(member).toEqual({
        ...managers,
        byAgent: managers.byAgent.filter((g: { agentId: string }) => g.agentId === 'agt_listed'),
      });
      expect(member.requests).toBe(3);
    }
  });

  it.each(['2026-13', '2026-1', 'november', '2026-11-01'])('answers 400 for month=%s', async (month) => {
    const res = await call('GET', `/v1/workspace/wsp_main/usage?month=${month}`, MKEYS.owner);
    expect(res.statusCode).toBe(400);
    expect(JSON.stringify(res.json().details)).toContain('month');
  });

  it('refuses other workspaces and tenants, and session tokens', async () => {
    expect((await call('GET', '/v1/workspace/wsp_main/usage', MKEYS.otherWorkspace)).statusCode).toBe(401);
    expect((await call('GET', '/v1/workspace/wsp_main/usage', MKEYS.globexOrg)).statusCode).toBe(401);
    expect((await call('GET', '/v1/workspace/wsp_main/usage', MKEYS.acmeOrg)).statusCode).toBe(200);
    const token = (
      await call('POST', '/v1/workspace/wsp_main/session-tokens', MKEYS.owner, { userId: 'usr_max' })
    ).json().data.token;
    expect((await call('GET', '/v1/workspace/wsp_main/usage', token)).statusCode).toBe(401);
  });
});

describe(`GET /v1/workspace/{id}/models (${engineName})`, () => {
  it('lists the enabled models with the default and pricing', async () => {
    const res = await call('GET', '/v1/workspace/wsp_main/models', MKEYS.member);
    expect(res.statusCode).toBe(200);
    expect(res.json().data.models).toEqual([
      {
        id: 'atrium/echo',
        kind: 'chat',
        provider: 'atrium',
        default: true,
        pricing: { inputPerMTok: 0, outputPerMTok: 0 },
      },
      {
        id: 'local/small',
        kind: 'chat',
        provider: 'local',
        default: false,
        pricing: { inputPerMTok: 1, outputPerMTok: 2 },
      },
    ]);
  });

  it('shows a workspace without models its built-in default, and refuses other tenants', async () => {
    const other = await call('GET', '/v1/workspace/wsp_other/models', MKEYS.otherWorkspace);
    expect(other.json().data.models).toEqual([
      {
        id: 'atrium/echo',
        kind: 'chat',
        provider: 'atrium',
        default: true,
        pricing: { inputPerMTok: 0, outputPerMTok: 0 },
      },
    ]);
    expect((await call('GET', '/v1/workspace/wsp_main/models', MKEYS.globexWorkspace)).statusCode).toBe(401);
    expect((await call('GET', '/v1/workspace/wsp_nope/models', MKEYS.owner)).statusCode).toBe(404);
    const token = (
      await call('POST', '/v1/workspace/wsp_main/session-tokens', MKEYS.owner, { userId: 'usr_max' })
    ).json().data.token;
    expect((await call('GET', '/v1/workspace/wsp_main/models', token)).statusCode).toBe(401);
    expect((await call('GET', '/v1/workspace/wsp_main/models', MKEYS.acmeOrg)).statusCode).toBe(200);
  });
});

describe(`GET /v1/agents/{id}/runs (${engineName})`, () => {
  it('pages an agent’s runs newest first by cursor; owners see all, members their own', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      now = new Date(Date.UTC(2026, 10, 21, 10, 0, i));
      const res = await call('POST', '/v1/agents/agt_listed/runs', i === 1 ? MKEYS.member : MKEYS.owner, {
        message: `m${i}`,
      });
      ids.push(res.json().data.id);
    }
    const first = await call('GET', '/v1/agents/agt_listed/runs?limit=2', MKEYS.owner);
    expect(first.statusCode).toBe(200);
    const page1 = first.json().data;
    expect(page1.runs.map((r: { id: string }) => r.id)).toEqual([ids[2], ids[1]]);
    expect(page1.pagination).toMatchObject({ limit: 2, hasMore: true, nextCursor: expect.any(String) });
    const second = await call(
      'GET',
      `/v1/agents/agt_listed/runs?limit=2&cursor=${page1.pagination.nextCursor}`,
      MKEYS.owner,
    );
    const page2 = second.json().data;
    expect(page2.runs[0].id).toBe(ids[0]);
    const all = [...page1.runs, ...page2.runs];
    expect(new Set(all.map((r: { id: string }) => r.id)).size).toBe(all.length);

    const mine = (await call('GET', '/v1/agents/agt_listed/runs', MKEYS.member)).json().data.runs;
    expect(mine.map((r: { id: string }) => r.id)).toEqual([ids[1]]);
  });

  it('answers a cursor holding text no database stores (NUL), or a time no run was made at, with 400, on both engines', async () => {
    // Compared as text, a time that is not one answered some page.
    for (const createdAt of ['\u0000', 'next week', '2026-11-22']) {
      const cursor = Buffer.from(JSON.stringify([createdAt, 'run_x'])).toString('base64url');
      const res = await call('GET', `/v1/agents/agt_listed/runs?cursor=${cursor}`, MKEYS.owner);
      expect({ status: res.statusCode, path: res.json().details?.issues?.[0]?.path }).toEqual({
        status: 400,
        path: 'query.cursor',
      });
    }
  });

  it('looks a run up in the shape POST answered', async () => {
    now = new Date('2026-11-22T10:00:00.000Z');
    const posted = (
      await call('POST', '/v1/agents/agt_listed/runs', MKEYS.member, { message: 'look me up' })
    ).json().data;
    const res = await call('GET', `/v1/agents/agt_listed/runs/${posted.id}`, MKEYS.member);
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toEqual(posted);
    expect((await call('GET', `/v1/agents/agt_listed/runs/${posted.id}`, MKEYS.owner)).statusCode).toBe(200);
    expect((await call('GET', `/v1/agents/${pricedAgent}/runs/${posted.id}`, MKEYS.owner)).statusCode).toBe(
      404,
    );
    expect(
      (await call('GET', `/v1/agents/agt_listed/runs/${posted.id}`, MKEYS.globexWorkspace)).statusCode,
    ).toBe(404);
    const ownerRun = (
      await call('POST', '/v1/agents/agt_listed/runs', MKEYS.owner, { message: 'owner' })
    ).json().data;
    expect((await call('GET', `/v1/agents/agt_listed/runs/${ownerRun.id}`, MKEYS.member)).statusCode).toBe(
      404,
    );
  });

  it('lets a session token list its user’s runs', async () => {
    const token = (
      await call('POST', '/v1/workspace/wsp_main/session-tokens', MKEYS.owner, { userId: 'usr_max' })
    ).json().data.token;
    const res = await call('GET', '/v1/agents/agt_listed/runs', token);
    expect(res.statusCode).toBe(200);
    expect(res.json().data.runs.length).toBeGreaterThan(0);
  });

  it.each([
    ['limit=0', 400],
    ['limit=-1', 400],
    ['limit=abc', 400],
    ['limit=500', 200],
    ['cursor=not-a-cursor', 400],
    [`cursor=${Buffer.from('{"a":1}').toString('base64url')}`, 400],
  ])('answers %s with %i', async (query, status) => {
    const res = await call('GET', `/v1/agents/agt_listed/runs?${query}`, MKEYS.owner);
    expect(res.statusCode).toBe(status);
    if (status === 200) expect(res.json().data.pagination.limit).toBe(100);
  });

  it('lets an owner’s organization key see every run and a member’s organization key its own', async () => {
    const all = (await call('GET', '/v1/agents/agt_listed/runs?limit=100', MKEYS.acmeOrg)).json().data.runs;
    const owners = (await call('GET', '/v1/agents/agt_listed/runs?limit=100', MKEYS.owner)).json().data.runs;
    expect(all).toEqual(owners);
    const maxByOrgKey = (
      await call('GET', '/v1/agents/agt_listed/runs?limit=100', MKEYS.acmeOrgMember)
    ).json().data.runs;
    const maxByWorkspaceKey = (await call('GET', '/v1/agents/agt_listed/runs?limit=100', MKEYS.member)).json()
      .data.runs;
    expect(maxByOrgKey).toEqual(maxByWorkspaceKey);
    expect(maxByOrgKey.length).toBeLessThan(all.length);
  });

  it('answers 404 for an agent of another tenant', async () => {
    expect((await call('GET', '/v1/agents/agt_listed/runs', MKEYS.globexOrg)).statusCode).toBe(404);
  });
});
