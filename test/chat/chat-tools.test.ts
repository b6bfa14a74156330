import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MAX_PROJECT_MEMORY_LENGTH } from '../../src/limits.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { deferred } from '../helpers/deferred.js';
import { estimateUsage, type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatSetup, DEAD_MCP_URL, userText } from './fixtures.js';
import { startMcpServer, type TestMcpServer } from './mcp-server.js';
import { startRawMcpServer } from './raw-mcp-server.js';

// Long enough for a live local MCP server to answer on a loaded CI machine; the stalling one
// still proves the timeout.
const MCP_TIMEOUT_MS = 2_000;

/** A URL on a port that was free a moment ago: connecting there is refused. */
async function closedPortUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}/mcp`;
}
let upstream: FakeUpstream;
let t: TestApp;
let mcp: TestMcpServer;
let failingMcp: TestMcpServer;
let stallingMcp: TestMcpServer;
let sessionMcp: Awaited<ReturnType<typeof startMcpServer>>;
const logLines: string[] = [];

beforeAll(async () => {
  upstream = await startFakeUpstream();
  [mcp, failingMcp, stallingMcp, sessionMcp] = await Promise.all([
    startMcpServer('ok'),
    startMcpServer('fail'),
    startMcpServer('stall'),
    startMcpServer('sessions-hold-close'),
  ]);
  t = await createTestApp({
    setup: chatSetup(upstream),
    mcpConnectTimeoutMs: MCP_TIMEOUT_MS,
    env: { LOG_LEVEL: 'error' },
    logStream: { write: (line: string) => void logLines.push(line) },
  });
});
afterAll(async () => {
  await t.close();
  await Promise.all([
    upstream.close(),
    mcp.close(),
    failingMcp.close(),
    stallingMcp.close(),
    sessionMcp.close(),
  ]);
});
beforeEach(() => {
  upstream.requests.length = 0;
});

/** An app whose MCP servers have a minute to connect (and to end a session), for slow listings. */
function patientApp() {
  return createTestApp({
    setup: chatSetup(upstream),
    mcpConnectTimeoutMs: 60_000,
    env: { LOG_LEVEL: 'error' },
  });
}

function post(url: string, payload: Record<string, unknown>, app = t) {
  return app.app.inject({ method: 'POST', url, headers: { 'x-service-api-key': CHAT_KEYS.main }, payload });
}

async function setTools(
  tools: Array<{ name: string; url: string; headers?: Record<string, string> }>,
  app = t,
) {
  await app.db
    .updateTable('agents')
    .set({ tools: JSON.stringify(tools.map((tool) => ({ type: 'mcp', ...tool }))) })
    .where('id', '=', 'agt_tools')
    .execute();
}

describe('MCP tools', () => {
  it('reports an unreachable MCP server as a warning and still answers', async () => {
    await setTools([{ name: 'search', url: await closedPortUrl() }]);
    const res = await post('/v1/chat', { agentId: 'agt_tools', messages: [userText('hi')] });
    expect(res.statusCode).toBe(200);
    expect(res.json().warnings).toEqual([
      { tool: 'search', code: 'mcp_unreachable', message: 'MCP server is unreachable (ECONNREFUSED)' },
    ]);
    expect(res.json().text).toBe(upstream.defaultText);
    expect(upstream.lastRequest().body.tools).toBeUndefined();
  });

  it('reports a failing and a stalling MCP server (connect timeout) as warnings', async () => {
    await setTools([
      { name: 'broken', url: failingMcp.url },
      { name: 'slow', url: stallingMcp.url },
    ]);
    const started = Date.now();
    const res = await post('/v1/chat', { agentId: 'agt_tools', messages: [userText('hi')] });
    expect(res.statusCode).toBe(200);
    expect(res.json().warnings).toEqual([
      { tool: 'broken', code: 'mcp_error', message: expect.stringContaining('500') },
      { tool: 'slow', code: 'mcp_timeout', message: `MCP server did not answer within ${MCP_TIMEOUT_MS} ms` },
    ]);
    expect(Date.now() - started).toBeLessThan(MCP_TIMEOUT_MS + 2000);
  });

  it('answers at the connect timeout, then ends the session of a server that answers initialize later', async () => {
    const late = deferred();
    const raw = await startRawMcpServer({
      tools: [{ name: 'lookup', inputSchema: { type: 'object', properties: {} } }],
      session: true,
      gate: () => late.promise,
    });
    try {
      await setTools([{ name: 'slow', url: raw.url }]);
      const started = Date.now();
      const res = await post('/v1/chat', { agentId: 'agt_tools', messages: [userText('hi')] });
      expect(res.statusCode).toBe(200);
      expect(res.json().warnings).toEqual([
        {
          tool: 'slow',
          code: 'mcp_timeout',
          message: `MCP server did not answer within ${MCP_TIMEOUT_MS} ms`,
        },
      ]);
      expect(Date.now() - started).toBeLessThan(MCP_TIMEOUT_MS + 2000);
      // The server answers only once the reply is done, and opens a session then.
      late.resolve();
      await expect.poll(() => raw.sessionEnds, { timeout: 5_000 }).toEqual(['raw-1']);
      expect(raw.requests).toEqual(['initialize', 'DELETE']);
    } finally {
      late.resolve();
      await raw.close();
    }
  });

  it('gives the model the tools of a live MCP server and runs them; a dead one beside it is a warning', async () => {
    await setTools([
      { name: 'live', url: mcp.url },
      { name: 'search', url: DEAD_MCP_URL },
    ]);
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'live_lookup', arguments: { term: 'atrium' } }] },
      { kind: 'text', text: 'An atrium is a hall.' },
    );
    const res = await post('/v1/chat', { agentId: 'agt_tools', messages: [userText('what is an atrium?')] });
    expect(res.statusCode).toBe(200);
    expect(res.json().text).toBe('An atrium is a hall.');
    expect(res.json().warnings).toEqual([
      expect.objectContaining({ tool: 'search', code: 'mcp_unreachable' }),
    ]);
    expect(mcp.calls).toEqual([{ term: 'atrium' }]);
    expect(upstream.requests[0]!.body.tools?.map((tool) => tool.function.name)).toEqual(['live_lookup']);
    const toolMessage = upstream.requests[1]!.body.messages?.find((m) => m.role === 'tool');
    expect(JSON.stringify(toolMessage?.content)).toContain('definition of atrium');
  });

  it('sends credentials in the url as Authorization: Basic (fetch refuses such a url); a set Authorization header wins', async () => {
    const withUser = (userinfo: string) => mcp.url.replace('http://', `http://${userinfo}@`);
    const basic = (text: string) => `Basic ${Buffer.from(text).toString('base64')}`;
    const cases: Array<[{ url: string; headers?: Record<string, string> }, string]> = [
      [{ url: withUser('svc:p%40ss%20word') }, basic('svc:p@ss word')],
      [{ url: withUser('ghp_token') }, basic('ghp_token:')],
      [{ url: withUser('svc:secret'), headers: { Authorization: 'Bearer own' } }, 'Bearer own'],
    ];
    for (const [tool, expected] of cases) {
      mcp.authorizations.length = 0;
      mcp.calls.length = 0;
      upstream.requests.length = 0;
      await setTools([{ name: 'live', ...tool }]);
      upstream.enqueue(
        { kind: 'tool-calls', calls: [{ name: 'live_lookup', arguments: { term: 'atrium' } }] },
        { kind: 'text', text: 'An atrium is a hall.' },
      );
      const res = await post('/v1/chat', {
        agentId: 'agt_tools',
        messages: [userText('what is an atrium?')],
      });
      // Before: the warning mcp_unreachable, and no tool.
      expect([res.statusCode, res.json().warnings]).toEqual([200, undefined]);
      expect(mcp.calls).toEqual([{ term: 'atrium' }]);
      expect(mcp.authorizations.length).toBeGreaterThan(0);
      expect(new Set(mcp.authorizations)).toEqual(new Set([expected]));
    }
  });

  it('calls no server of a stored header HTTP cannot send: a warning naming the header (never its value), not "unreachable"', async () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ authorization: 'Bearer secret-1\nsecret-2' }, 'authorization'],
      [{ authorization: 'Bearer s\u20acret' }, 'authorization'],
      [{ 'x api key': 'secret' }, 'x api key'],
      [{ 'transfer-encoding': 'chunked' }, 'transfer-encoding'],
    ];
    for (const [headers, name] of cases) {
      mcp.authorizations.length = 0;
      await setTools([{ name: 'live', url: mcp.url, headers }]);
      const res = await post('/v1/chat', { agentId: 'agt_tools', messages: [userText('hi')] });
      expect(res.statusCode).toBe(200);
      // Before: mcp_unreachable, "MCP server is unreachable", for a server nobody tried to reach.
      expect(res.json().warnings, JSON.stringify(headers)).toEqual([
        {
          tool: 'live',
          code: 'mcp_invalid_header',
          message: expect.stringContaining(`MCP server not called: its header "${name}" `),
        },
      ]);
      expect(res.body).not.toContain('secret');
      expect(mcp.authorizations).toEqual([]);
    }
    // A header fetch sends as it is (a value with surrounding whitespace, Latin-1) connects.
    await setTools([{ name: 'live', url: mcp.url, headers: { authorization: ' Bearer caf\u00e9\n' } }]);
    const res = await post('/v1/chat', { agentId: 'agt_tools', messages: [userText('hi')] });
    expect(res.json().warnings).toBeUndefined();
  });

  it('skips only the tools whose inputSchema is not an object schema, with a warning naming each', async () => {
    const lookup = { name: 'lookup', inputSchema: { type: 'object', properties: { q: { type: 'string' } } } };
    const raw = await startRawMcpServer({
      tools: [
        lookup,
        { name: 'scalar', inputSchema: { type: 'string' } },
        { name: 'odd', inputSchema: { type: 'object', properties: 5 } },
        { name: 'later', inputSchema: { type: 'object' } },
      ],
      // The tools come in pages: every page is read.
      pageSize: 2,
    });
    try {
      await setTools([{ name: 'srv', url: raw.url }]);
      upstream.enqueue({ kind: 'text', text: 'fine' });
      const res = await post('/v1/chat', { agentId: 'agt_tools', messages: [userText('hi')] });
      // One bad tool used to cost the server all of its tools (one mcp_error warning).
      expect(res.statusCode).toBe(200);
      expect(upstream.requests[0]!.body.tools?.map((tool) => tool.function.name)).toEqual([
        'srv_lookup',
        'srv_later',
      ]);
      expect(res.json().warnings).toEqual([
        { tool: 'srv_scalar', code: 'mcp_invalid_tool', message: expect.stringContaining('inputSchema') },
        { tool: 'srv_odd', code: 'mcp_invalid_tool', message: expect.stringContaining('inputSchema') },
      ]);
    } finally {
      await raw.close();
    }
  });

  it.each(['same-cursor', 'new-cursor'] as const)(
    'stops listing a server that pages in circles (%s), and counts many bad tools in one warning',
    async (endlessPages) => {
      const bad = Array.from({ length: 15 }, (_, i) => ({
        name: `bad${i}`,
        inputSchema: { type: 'string' },
      }));
      const raw = await startRawMcpServer({
        tools: [{ name: 'lookup', inputSchema: { type: 'object' } }, ...bad],
        endlessPages,
      });
      try {
        await setTools([{ name: 'srv', url: raw.url }]);
        upstream.enqueue({ kind: 'text', text: 'fine' });
        const res = await post('/v1/chat', { agentId: 'agt_tools', messages: [userText('hi')] });
        // A server repeating its cursor was listed until the connect timeout and lost every tool.
        expect(res.statusCode).toBe(200);
        expect(upstream.requests[0]!.body.tools?.map((tool) => tool.function.name)).toEqual(['srv_lookup']);
        const warnings = res.json().warnings as Array<{ tool: string; message: string }>;
        expect(warnings).toHaveLength(11);
        expect(warnings.at(-1)).toMatchObject({ tool: 'srv', message: expect.stringContaining('5 more') });
      } finally {
        await raw.close();
      }
    },
  );

  it('keeps at most 1,000 tools of one server, with a warning that says the listing was cut', async () => {
    const tools = Array.from({ length: 1_200 }, (_, i) => ({
      name: `t${i}`,
      inputSchema: { type: 'object' },
    }));
    const raw = await startRawMcpServer({ tools, pageSize: 100 });
    // Twelve pages within the connect timeout: more than MCP_TIMEOUT_MS on a loaded CI machine.
    const patient = await patientApp();
    try {
      await setTools([{ name: 'srv', url: raw.url }], patient);
      upstream.enqueue({ kind: 'text', text: 'fine' });
      const res = await post('/v1/chat', { agentId: 'agt_tools', messages: [userText('hi')] }, patient);
      expect(res.statusCode).toBe(200);
      const offered = upstream.requests[0]!.body.tools!.map((tool) => tool.function.name);
      expect(offered).toHaveLength(1_000);
      expect(offered.at(-1)).toBe('srv_t999');
      expect(res.json().warnings).toEqual([
        {
          tool: 'srv',
          code: 'mcp_too_many_tools',
          message:
            'MCP server lists more than 1000 tools, more than Atrium reads; its first 1000 usable tools are offered',
        },
      ]);
    } finally {
      await Promise.all([raw.close(), patient.close()]);
    }
  });

  it('answers without waiting for a server that never answers the end of its session', async () => {
    // The session's end has the connect timeout as its limit: here longer than a test may run, so
    // a reply that waited for it would never answer. (Not a bound on the run's time, which a
    // loaded CI machine took more than MCP_TIMEOUT_MS for.)
    const patient = await patientApp();
    try {
      await setTools([{ name: 'live', url: sessionMcp.url }], patient);
      upstream.enqueue(
        { kind: 'tool-calls', calls: [{ name: 'live_lookup', arguments: { term: 'atrium' } }] },
        { kind: 'text', text: 'A hall.' },
      );
      const res = await post('/v1/agents/agt_tools/runs', { message: 'what is an atrium?' }, patient);
      expect(res.statusCode).toBe(200);
      expect(res.json().data).toMatchObject({ status: 'completed', agentResponse: 'A hall.' });
      expect(sessionMcp.calls).toEqual([{ term: 'atrium' }]);
      // The reply released its place: the chat is not running any more.
      const chat = await patient.app.inject({
        method: 'GET',
        url: `/v1/chats/${res.json().data.chatId}`,
        headers: { 'x-service-api-key': CHAT_KEYS.main },
      });
      expect(chat.json().data.chat.active).toBe(false);
      await expect.poll(() => sessionMcp.sessionEnds).toBe(1);
    } finally {
      await patient.close();
    }
  });

  it('sends warnings in a stream as a data-warnings chunk after start, and stores them with the reply', async () => {
    await setTools([{ name: 'search', url: DEAD_MCP_URL }]);
    const res = await post('/v1/chat', { agentId: 'agt_tools', stream: true, messages: [userText('hi')] });
    expect(res.statusCode).toBe(200);
    const chunks = res.body
      .split('\n\n')
      .filter((line) => line.startsWith('data: {'))
      .map((line) => JSON.parse(line.slice(6)));
    expect(chunks[0].type).toBe('start');
    expect(chunks[1]).toEqual({
      type: 'data-warnings',
      data: [expect.objectContaining({ code: 'mcp_unreachable' })],
    });
    const chatId = res.headers['x-chat-id'];
    const stored = await t.app.inject({
      method: 'GET',
      url: `/v1/chats/${chatId}/messages`,
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    expect(stored.json().data.messages.at(-1).parts[0]).toEqual(chunks[1]);
  });
});

describe('stored tool settings', () => {
  it.each([
    ['tools', '[{"type":"mcp","url":'],
    ['tools', '{"type":"mcp"}'],
    ['orchestration', '"agt_plain"'],
  ] as const)(
    'refuses to run an agent whose %s value is corrupt (%s): 500, logged, no model call',
    async (column, value) => {
      const agentId = column === 'tools' ? 'agt_tools' : 'agt_lead';
      const before = await t.db
        .selectFrom('agents')
        .select(column)
        .where('id', '=', agentId)
        .executeTakeFirstOrThrow();
      await t.db
        .updateTable('agents')
        .set({ [column]: value })
        .where('id', '=', agentId)
        .execute();
      logLines.length = 0;
      try {
        const res = await post('/v1/chat', { agentId, messages: [userText('hi')] });
        expect(res.statusCode).toBe(500);
        expect(res.json()).toMatchObject({ code: 'internal_error' });
        expect(res.body).not.toContain(value);
        expect(upstream.requests).toHaveLength(0);
        expect(logLines.join('\n')).toContain(`Agent ${agentId} has a corrupt stored ${column} value`);
        expect(logLines.join('\n')).not.toContain(value);
      } finally {
        await t.db.updateTable('agents').set(before).where('id', '=', agentId).execute();
      }
    },
  );
});

describe('remember tool', () => {
  const projectMemory = async (projectId: string) =>
    (await t.db.selectFrom('projects').select('memory').where('id', '=', projectId).executeTakeFirstOrThrow())
      .memory;
  const setProjectMemory = (projectId: string, memory: string) =>
    t.db.updateTable('projects').set({ memory }).where('id', '=', projectId).execute();
  /** A turn in prj_docs whose model calls `remember` with each note in turn, then answers "Noted.". */
  const rememberTurn = (notes: string[], stream = false) => {
    upstream.enqueue(
      ...notes.map((note) => ({
        kind: 'tool-calls' as const,
        calls: [{ name: 'remember', arguments: { note } }],
      })),
      { kind: 'text', text: 'Noted.' },
    );
    return post('/v1/chat', {
      agentId: 'agt_plain',
      projectId: 'prj_docs',
      ...(stream ? { stream } : {}),
      messages: [userText('remember this')],
    });
  };

  it('appends a note to the project memory in project chats', async () => {
    const res = await rememberTurn(['Budget is 10k.']);
    expect(res.statusCode).toBe(200);
    expect(res.json().text).toBe('Noted.');
    expect(await projectMemory('prj_docs')).toBe('The launch is on Monday.\n\nBudget is 10k.');
    // The next project chat carries the new memory.
    await post('/v1/chat', { agentId: 'agt_plain', projectId: 'prj_docs', messages: [userText('and?')] });
    expect(upstream.lastRequest().body.messages?.[0]?.content).toContain('Budget is 10k.');
  });

  it('drops NUL from a note (PostgreSQL cannot store it; SQLite would count the memory short)', async () => {
    const before = await projectMemory('prj_docs');
    try {
      const res = await rememberTurn(['Null\u0000byte.']);
      expect(res.statusCode, res.body).toBe(200);
      expect(await projectMemory('prj_docs')).toBe(`${before}\n\nNullbyte.`);
    } finally {
      await setProjectMemory('prj_docs', before);
    }
  });

  it('saves nothing past the memory limit, and tells the model why', async () => {
    const before = await projectMemory('prj_docs');
    // Seven characters short of the limit: '\n\nFits.' takes it there exactly, leaving no room.
    const filled = `${before}\n\n${'m'.repeat(MAX_PROJECT_MEMORY_LENGTH - [...before].length - 2 - 7)}`;
    await setProjectMemory('prj_docs', filled);
    try {
      const res = await rememberTurn(['Fits.', 'No room.'], true);
      const outputs = res.body
        .split('\n\n')
        .filter((line) => line.startsWith('data: {'))
        .map((line) => JSON.parse(line.slice(6)) as { type: string; output?: unknown })
        .filter((chunk) => chunk.type === 'tool-output-available')
        .map((chunk) => chunk.output);
      expect(outputs).toEqual([
        { saved: true },
        {
          saved: false,
          reason: expect.stringContaining("The project's memory is full (100,000 characters)"),
        },
      ]);
      const after = await projectMemory('prj_docs');
      expect(after).toBe(`${filled}\n\nFits.`);
      expect([...after].length).toBe(MAX_PROJECT_MEMORY_LENGTH);
    } finally {
      await setProjectMemory('prj_docs', before);
    }
  });

  it('runs in a streamed reply too: tool chunks on the wire, the tool part stored', async () => {
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'remember', arguments: { note: 'Streams remember too.' } }] },
      { kind: 'text', text: 'Saved.' },
    );
    const res = await post('/v1/chat', {
      agentId: 'agt_plain',
      projectId: 'prj_empty',
      stream: true,
      messages: [userText('remember this')],
    });
    expect(res.statusCode).toBe(200);
    const chunks = res.body
      .split('\n\n')
      .filter((line) => line.startsWith('data: {'))
      .map((line) => JSON.parse(line.slice(6)) as { type: string; [key: string]: unknown });
    const types = chunks.map((c) => c.type);
    expect(types).toEqual(
      expect.arrayContaining(['tool-input-available', 'tool-output-available', 'text-delta', 'finish']),
    );
    expect(chunks.find((c) => c.type === 'tool-output-available')?.output).toEqual({ saved: true });
    expect(await projectMemory('prj_empty')).toBe('Streams remember too.');
    const chatId = res.headers['x-chat-id'] as string;
    await t.app.persistence.idle();
    const rows = await t.db.selectFrom('messages').selectAll().where('chat_id', '=', chatId).execute();
    expect(rows).toHaveLength(2);
    const parts = JSON.parse(rows.find((r) => r.role === 'assistant')!.parts) as Array<{
      type: string;
      state?: string;
    }>;
    expect(parts).toEqual(
      expect.arrayContaining([expect.objectContaining({ type: 'tool-remember', state: 'output-available' })]),
    );
  });

  it('charges a streamed reply that fails after its tool step for that step', async () => {
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'remember', arguments: { note: 'Charged anyway.' } }] },
      { kind: 'fail', status: 500 },
    );
    const res = await post('/v1/chat', {
      agentId: 'agt_plain',
      projectId: 'prj_empty',
      stream: true,
      messages: [userText('remember, then fail')],
    });
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('"type":"error"');
    const chatId = res.headers['x-chat-id'] as string;
    const chat = await t.db
      .selectFrom('chats')
      .select('spend_usd')
      .where('id', '=', chatId)
      .executeTakeFirstOrThrow();
    const step = estimateUsage(upstream.requests[0]!.body, 5);
    expect(Number(chat.spend_usd)).toBeCloseTo(
      (step.prompt_tokens * 1 + step.completion_tokens * 2) / 1e6,
      12,
    );
  });

  it('is not offered outside a project', async () => {
    await post('/v1/chat', { agentId: 'agt_plain', messages: [userText('hi')] });
    expect(upstream.lastRequest().body.tools).toBeUndefined();
  });
});

interface UsageTotals {
  inputTokens: number;
  outputTokens: number;
  costUsd: number;
  requests: number;
}
type UsageReport = UsageTotals & {
  byAgent: Array<UsageTotals & { agentId: string }>;
  byModel: Array<UsageTotals & { model: string }>;
};

/** The main workspace's usage report for this month. */
async function usageReport(): Promise<UsageReport> {
  const res = await t.app.inject({
    method: 'GET',
    url: '/v1/workspace/wsp_main/usage',
    headers: { 'x-service-api-key': CHAT_KEYS.main },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data;
}

/** What a report's row grew by since an earlier report (tests of this file share the workspace). */
function grewBy(before: UsageTotals | undefined, after: UsageTotals | undefined): UsageTotals {
  const zero = { inputTokens: 0, outputTokens: 0, costUsd: 0, requests: 0 };
  const [from, to] = [before ?? zero, after ?? zero];
  return {
    inputTokens: to.inputTokens - from.inputTokens,
    outputTokens: to.outputTokens - from.outputTokens,
    costUsd: Math.round((to.costUsd - from.costUsd) * 1e8) / 1e8,
    requests: to.requests - from.requests,
  };
}

function reportGrowth(before: UsageReport, after: UsageReport) {
  return {
    total: grewBy(before, after),
    agent: (agentId: string) =>
      grewBy(
        before.byAgent.find((row) => row.agentId === agentId),
        after.byAgent.find((row) => row.agentId === agentId),
      ),
    model: (model: string) =>
      grewBy(
        before.byModel.find((row) => row.model === model),
        after.byModel.find((row) => row.model === model),
      ),
  };
}

/** Runs the test with the sub-agent agt_plain on a model of its own (10/20 USD per MTok). */
async function withPlainOnLargeModel(test: () => Promise<void>) {
  const setModel = (model: string | null) =>
    t.db.updateTable('agents').set({ model }).where('id', '=', 'agt_plain').execute();
  await setModel('fake-large');
  try {
    await test();
  } finally {
    await setModel(null);
  }
}

describe('orchestration', () => {
  it('refuses stream: true for an orchestrating agent with 400, before calling anything', async () => {
    const res = await post('/v1/chat', { agentId: 'agt_lead', stream: true, messages: [userText('hi')] });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'bad_request', details: { issues: [{ path: 'body.stream' }] } });
    expect(upstream.requests).toHaveLength(0);
  });

  it('gives the lead agent its sub-agents as tools, records their runs, and warns about a missing one', async () => {
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'agt_plain', arguments: { message: 'Summarize the plan' } }] },
      { kind: 'text', text: 'Plan summary from plain.', usage: { prompt: 10, completion: 5 } },
      { kind: 'text', text: 'The plain agent says: Plan summary from plain.' },
    );
    // A member's request: the sub-agent's run is theirs too, so they can read it.
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/chat',
      headers: { 'x-service-api-key': CHAT_KEYS.mainMember },
      payload: { agentId: 'agt_lead', messages: [userText('What is the plan?')] },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.text).toBe('The plain agent says: Plan summary from plain.');
    expect(body.warnings).toEqual([expect.objectContaining({ tool: 'agt_gone', code: 'agent_unavailable' })]);
    expect(upstream.requests[0]!.body.tools?.map((tool) => tool.function.name)).toEqual(['agt_plain']);
    // The sub-agent's own call: its instructions (none) and the delegated message.
    expect(upstream.requests[1]!.body.messages).toEqual([{ role: 'user', content: 'Summarize the plan' }]);
    const runs = await t.db.selectFrom('agent_runs').selectAll().where('chat_id', '=', body.chatId).execute();
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({
      agent_id: 'agt_plain',
      status: 'completed',
      input: 'Summarize the plan',
      response: 'Plan summary from plain.',
      input_tokens: 10,
      output_tokens: 5,
      user_id: 'usr_max',
    });
    const history = await t.app.inject({
      method: 'GET',
      url: `/v1/agents/agt_plain/runs/${runs[0]!.id}`,
      headers: { 'x-service-api-key': CHAT_KEYS.mainMember },
    });
    expect(history.statusCode, history.body).toBe(200);
    // The sub-agent's usage counts toward the lead's reply.
    const reply = await t.db
      .selectFrom('messages')
      .selectAll()
      .where('id', '=', body.messageId)
      .executeTakeFirstOrThrow();
    expect(reply.input_tokens).toBeGreaterThan(10);
  });
  it('records a sub-agent run whose provider reports no usage with its estimate, counted in the lead reply', async () => {
    const summary = 'Plan summary from plain, without usage.';
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'agt_plain', arguments: { message: 'Summarize the plan' } }] },
      { kind: 'text', text: summary, noUsage: true },
      { kind: 'text', text: 'Done.', usage: { prompt: 0, completion: 0 } },
    );
    const res = await post('/v1/chat', { agentId: 'agt_lead', messages: [userText('What is the plan?')] });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    const [run] = await t.db
      .selectFrom('agent_runs')
      .selectAll()
      .where('chat_id', '=', body.chatId)
      .execute();
    // Its prompt and its text, at about four characters a token, priced as fake-small ($1 in,
    // $2 out per MTok).
    expect(run!.input_tokens).toBeGreaterThan(0);
    expect(run!.output_tokens).toBe(Math.ceil(summary.length / 4));
    expect(Number(run!.cost_usd)).toBeCloseTo((run!.input_tokens + 2 * run!.output_tokens) / 1e6, 12);
    const leadStep = estimateUsage(upstream.requests[0]!.body, 5);
    expect(body.usage).toMatchObject({
      inputTokens: leadStep.prompt_tokens + run!.input_tokens,
      outputTokens: leadStep.completion_tokens + run!.output_tokens,
    });
  });

  it('charges a failed lead reply for its finished step and its sub-agent run: ledger, chat spend, run record', async () => {
    const ledger = () =>
      t.db
        .selectFrom('usage_ledger')
        .select(['input_tokens', 'output_tokens', 'cost_usd'])
        .where('workspace_id', '=', 'wsp_main')
        .executeTakeFirst();
    const before = (await ledger()) ?? { input_tokens: 0, output_tokens: 0, cost_usd: 0 };
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'agt_plain', arguments: { message: 'Summarize the plan' } }] },
      { kind: 'text', text: 'Plan summary from plain.', usage: { prompt: 1000, completion: 500 } },
      { kind: 'fail', status: 500 },
    );
    const res = await post('/v1/agents/agt_lead/runs', { message: 'What is the plan?' });
    expect(res.statusCode).toBe(502);
    const runId = res.json().details.runId as string;

    // The lead's first step (its tool call) and the sub-agent's run were paid for; the failed
    // second step reported nothing. Both agents run on fake-small: $1 in, $2 out per MTok.
    const leadStep = estimateUsage(upstream.requests[0]!.body, 5);
    const inputTokens = leadStep.prompt_tokens + 1000;
    const outputTokens = leadStep.completion_tokens + 500;
    const cost = (inputTokens * 1 + outputTokens * 2) / 1e6;
    const after = await ledger();
    expect(after!.input_tokens - before.input_tokens).toBe(inputTokens);
    expect(after!.output_tokens - before.output_tokens).toBe(outputTokens);
    expect(Number(after!.cost_usd) - Number(before.cost_usd)).toBeCloseTo(cost, 12);

    const run = await t.db
      .selectFrom('agent_runs')
      .selectAll()
      .where('id', '=', runId)
      .executeTakeFirstOrThrow();
    expect(run).toMatchObject({ status: 'failed', input_tokens: inputTokens, output_tokens: outputTokens });
    expect(Number(run.cost_usd)).toBeCloseTo(cost, 12);
    const chat = await t.db
      .selectFrom('chats')
      .select('spend_usd')
      .where('id', '=', run.chat_id!)
      .executeTakeFirstOrThrow();
    expect(Number(chat.spend_usd)).toBeCloseTo(cost, 12);
    const subRuns = await t.db
      .selectFrom('agent_runs')
      .selectAll()
      .where('chat_id', '=', run.chat_id!)
      .where('agent_id', '=', 'agt_plain')
      .execute();
    expect(subRuns).toMatchObject([{ status: 'completed', input_tokens: 1000, output_tokens: 500 }]);
  });

  it('reports a sub-agent run under the sub-agent and its model; the lead message keeps the whole usage', () =>
    withPlainOnLargeModel(async () => {
      const before = await usageReport();
      upstream.enqueue(
        { kind: 'tool-calls', calls: [{ name: 'agt_plain', arguments: { message: 'Summarize' } }] },
        { kind: 'text', text: 'sub answer', usage: { prompt: 100000, completion: 50000 } },
        { kind: 'text', text: 'lead answer', usage: { prompt: 10, completion: 5 } },
      );
      const res = await post('/v1/chat', { agentId: 'agt_lead', messages: [userText('plan?')] });
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json();

      // The lead's two steps on fake-small ($1 in, $2 out per MTok), the sub-run on fake-large.
      const leadStep = estimateUsage(upstream.requests[0]!.body, 5);
      const lead = {
        inputTokens: leadStep.prompt_tokens + 10,
        outputTokens: leadStep.completion_tokens + 5,
        costUsd: 0,
        requests: 1,
      };
      lead.costUsd = (lead.inputTokens * 1 + lead.outputTokens * 2) / 1e6;
      const sub = { inputTokens: 100000, outputTokens: 50000, costUsd: 2, requests: 1 };
      const whole = {
        inputTokens: lead.inputTokens + sub.inputTokens,
        outputTokens: lead.outputTokens + sub.outputTokens,
        costUsd: lead.costUsd + sub.costUsd,
      };
      expect(body.usage).toEqual({ ...whole, costUsd: expect.closeTo(whole.costUsd, 12) });
      const message = await t.db
        .selectFrom('messages')
        .selectAll()
        .where('id', '=', body.messageId)
        .executeTakeFirstOrThrow();
      expect(message).toMatchObject({ model: 'fake-small', input_tokens: whole.inputTokens });
      expect(Number(message.cost_usd)).toBeCloseTo(whole.costUsd, 12);

      const grew = reportGrowth(before, await usageReport());
      expect(grew.model('fake-large')).toEqual(sub);
      expect(grew.agent('agt_plain')).toEqual(sub);
      expect(grew.model('fake-small')).toEqual({ ...lead, costUsd: expect.closeTo(lead.costUsd, 8) });
      expect(grew.agent('agt_lead')).toEqual({ ...lead, costUsd: expect.closeTo(lead.costUsd, 8) });
      // Counted once: the totals are the reply's usage, as the ledger and limits count it.
      expect(grew.total).toEqual({ ...whole, costUsd: expect.closeTo(whole.costUsd, 8), requests: 2 });
    }));

  it('reports a sub-agent run cut short by the lead’s stop under the sub-agent, at its estimate', () =>
    withPlainOnLargeModel(async () => {
      const before = await usageReport();
      upstream.enqueue(
        { kind: 'tool-calls', calls: [{ name: 'agt_plain', arguments: { message: 'Summarize' } }] },
        { kind: 'held', text: 'never sent', afterPieces: 0 },
      );
      const reply = post('/v1/chat', { agentId: 'agt_lead', messages: [userText('plan? (stopped)')] });
      await expect.poll(() => upstream.requests.length).toBe(2);
      const { chat_id: chatId } = await t.db
        .selectFrom('messages')
        .select('chat_id')
        .where('parts', 'like', '%plan? (stopped)%')
        .executeTakeFirstOrThrow();
      const stop = await post(`/v1/chat/${chatId}/stop`, {});
      expect(stop.json().data.stopped, stop.body).toBe(true);
      await reply;
      upstream.release();

      // The sub-run had its prompt sent: charged its estimate, under its own agent and model.
      const run = await t.db
        .selectFrom('agent_runs')
        .selectAll()
        .where('agent_id', '=', 'agt_plain')
        .where('chat_id', '=', chatId)
        .executeTakeFirstOrThrow();
      expect(run.input_tokens).toBeGreaterThan(0);
      const grew = reportGrowth(before, await usageReport());
      expect(grew.agent('agt_plain')).toMatchObject({ inputTokens: run.input_tokens, requests: 1 });
      expect(grew.model('fake-large')).toMatchObject({ inputTokens: run.input_tokens, requests: 1 });
    }));

  it('reports a failed lead reply’s sub-agent run under the sub-agent and its model too', () =>
    withPlainOnLargeModel(async () => {
      const before = await usageReport();
      upstream.enqueue(
        { kind: 'tool-calls', calls: [{ name: 'agt_plain', arguments: { message: 'Summarize' } }] },
        { kind: 'text', text: 'sub answer', usage: { prompt: 1000, completion: 500 } },
        { kind: 'fail', status: 500 },
      );
      const res = await post('/v1/chat', { agentId: 'agt_lead', messages: [userText('plan?')] });
      expect(res.statusCode).toBe(502);

      const leadStep = estimateUsage(upstream.requests[0]!.body, 5);
      const lead = { inputTokens: leadStep.prompt_tokens, outputTokens: leadStep.completion_tokens };
      const leadCost = (lead.inputTokens * 1 + lead.outputTokens * 2) / 1e6;
      const sub = { inputTokens: 1000, outputTokens: 500, costUsd: 0.02, requests: 1 };
      const grew = reportGrowth(before, await usageReport());
      expect(grew.agent('agt_plain')).toEqual(sub);
      expect(grew.model('fake-large')).toEqual(sub);
      expect(grew.agent('agt_lead')).toEqual({ ...lead, costUsd: expect.closeTo(leadCost, 8), requests: 1 });
      expect(grew.total).toEqual({
        inputTokens: lead.inputTokens + 1000,
        outputTokens: lead.outputTokens + 500,
        costUsd: expect.closeTo(leadCost + 0.02, 8),
        requests: 2,
      });
    }));
});
