import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatRows, chatSetup, countRows, userText } from '../chat/fixtures.js';

// Long enough that a loaded CI machine never times out a healthy upstream; the stall test waits it out.
const TIMEOUT_MS = 2000;
let upstream: FakeUpstream;
let t: TestApp;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  t = await createTestApp({
    setup: chatSetup(upstream),
    env: { ATRIUM_UPSTREAM_TIMEOUT_MS: String(TIMEOUT_MS) },
  });
});
afterAll(async () => {
  await t.close();
  await upstream.close();
});
beforeEach(() => {
  upstream.requests.length = 0;
});

/** A run read back by `GET /v1/agents/{agentId}/runs/{runId}`, and as the run list shows it. */
async function readBack(agentId: string, runId: string) {
  const get = (url: string) =>
    t.app.inject({ method: 'GET', url, headers: { 'x-service-api-key': CHAT_KEYS.main } });
  const one = await get(`/v1/agents/${agentId}/runs/${runId}`);
  expect(one.statusCode, one.body).toBe(200);
  const list = await get(`/v1/agents/${agentId}/runs?limit=100`);
  expect(list.statusCode, list.body).toBe(200);
  const listed = (list.json().data.runs as Array<{ id: string }>).find((r) => r.id === runId);
  expect(listed).toEqual(one.json().data);
  return one.json().data;
}

function run(agentId: string, payload: unknown, key: string = CHAT_KEYS.main) {
  return t.app.inject({
    method: 'POST',
    url: `/v1/agents/${agentId}/runs`,
    headers: { 'x-service-api-key': key, 'content-type': 'application/json' },
    payload: JSON.stringify(payload),
  });
}

describe('POST /v1/agents/:agentId/runs', () => {
  it('runs the agent with the chat context rules and records a completed run', async () => {
    upstream.enqueue({ kind: 'text', text: 'Run reply', usage: { prompt: 200, completion: 100 } });
    const res = await run('agt_helper', {
      message: 'Status?',
      projectId: 'prj_docs',
      temperature: 1.1,
      variables: { company: 'Acme', tier: 'gold', beta: false },
    });
    expect(res.statusCode).toBe(200);
    const { data } = res.json();
    expect(data).toEqual({
      id: expect.stringMatching(/^run_/),
      status: 'completed',
      agentId: 'agt_helper',
      agentName: 'Helper',
      agentResponse: 'Run reply',
      error: null,
      chatId: expect.stringMatching(/^cht_/),
      input: 'Status?',
      executionTime: expect.any(Number),
      createdAt: expect.stringMatching(/Z$/),
      completedAt: expect.stringMatching(/Z$/),
      usage: { inputTokens: 200, outputTokens: 100, costUsd: 0.0004 },
    });
    expect(Number.isInteger(data.executionTime)).toBe(true);
    expect(data.executionTime).toBeGreaterThanOrEqual(0);
    expect(Date.parse(data.completedAt)).toBeGreaterThanOrEqual(Date.parse(data.createdAt));

    const sent = upstream.lastRequest().body;
    expect(sent.temperature).toBe(1.1);
    expect(sent.messages?.[0]?.content).toBe(
      'You help Olivia (olivia@acme.test, usr_olivia) at Acme. Tier gold, beta false. Keep {{unknown}} as is.\n\n' +
        '<project_instructions>\nCite file names.\n</project_instructions>\n\n' +
        '<project_memory>\nThe launch is on Monday.\n</project_memory>',
    );
    expect(sent.messages?.[1]).toEqual({ role: 'user', content: 'Status?' });

    const row = await t.db
      .selectFrom('agent_runs')
      .selectAll()
      .where('id', '=', data.id)
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({
      workspace_id: 'wsp_main',
      agent_id: 'agt_helper',
      chat_id: data.chatId,
      status: 'completed',
      input: 'Status?',
      response: 'Run reply',
      error: null,
      execution_time_ms: data.executionTime,
      input_tokens: 200,
      output_tokens: 100,
    });
    expect(row.cost_usd).toBeCloseTo((200 * 1 + 100 * 2) / 1e6, 12);
    const messages = await chatRows(t.db, data.chatId);
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    const chat = await t.db
      .selectFrom('chats')
      .selectAll()
      .where('id', '=', data.chatId)
      .executeTakeFirstOrThrow();
    expect(chat.title).toBe('Status?');
    expect(chat.project_id).toBe('prj_docs');
  });

  it('continues an existing chat', async () => {
    const first = await run('agt_plain', { message: 'one' });
    const chatId = first.json().data.chatId;
    const second = await run('agt_plain', { message: 'two', chatId });
    expect(second.statusCode).toBe(200);
    expect(second.json().data.chatId).toBe(chatId);
    expect(upstream.lastRequest().body.messages).toEqual([
      { role: 'user', content: 'one' },
      { role: 'assistant', content: upstream.defaultText },
      { role: 'user', content: 'two' },
    ]);
  });

  it('records a failed run and answers 502 with details.runId on an upstream error', async () => {
    upstream.enqueue({ kind: 'fail', status: 500 });
    const res = await run('agt_plain', { message: 'break' });
    expect(res.statusCode).toBe(502);
    const error = res.json();
    expect(error).toMatchObject({
      code: 'upstream_error',
      details: { runId: expect.stringMatching(/^run_/), providerStatus: 500 },
    });
    const row = await t.db
      .selectFrom('agent_runs')
      .selectAll()
      .where('id', '=', error.details.runId)
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'failed', response: '', input: 'break' });
    expect(row.error).toContain('upstream_error');
    const messages = await chatRows(t.db, row.chat_id!);
    expect(messages.map((m) => m.role)).toEqual(['user']);
    // Read back, the run says why it failed: the code and message the POST answered, no more.
    expect(await readBack('agt_plain', error.details.runId)).toMatchObject({
      status: 'failed',
      agentResponse: '',
      error: { code: 'upstream_error', message: error.message },
    });
    expect(error.message).toBe('The model provider answered HTTP 500');
  });

  it('reads a failed run back without the provider’s own error text', async () => {
    upstream.enqueue({ kind: 'fail', status: 401, message: 'Incorrect API key provided: sk-leaked-1234' });
    const res = await run('agt_plain', { message: 'break' });
    expect(res.statusCode).toBe(502);
    const { runId } = res.json().details;
    const read = await readBack('agt_plain', runId);
    expect(read.error).toEqual({ code: 'upstream_error', message: 'The model provider answered HTTP 401' });
    expect(JSON.stringify(read)).not.toContain('sk-leaked');
  });

  it('reads a completed run back with error null', async () => {
    const res = await run('agt_plain', { message: 'fine' });
    expect(res.statusCode).toBe(200);
    expect(res.json().data.error).toBeNull();
    expect(await readBack('agt_plain', res.json().data.id)).toEqual(res.json().data);
  });

  it('records a failed run and answers 504 with details.runId on a timeout', async () => {
    upstream.enqueue({ kind: 'stall' });
    const res = await run('agt_plain', { message: 'wait' });
    expect(res.statusCode).toBe(504);
    const error = res.json();
    expect(error).toMatchObject({
      code: 'upstream_timeout',
      details: { runId: expect.stringMatching(/^run_/) },
    });
    const row = await t.db
      .selectFrom('agent_runs')
      .selectAll()
      .where('id', '=', error.details.runId)
      .executeTakeFirstOrThrow();
    expect(row.status).toBe('failed');
    expect(row.execution_time_ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect((await readBack('agt_plain', error.details.runId)).error).toEqual({
      code: 'upstream_timeout',
      message: `The model provider did not answer within ${TIMEOUT_MS} ms`,
    });
    expect(error.message).toBe(`The model provider did not answer within ${TIMEOUT_MS} ms`);
  });

  it('runs an orchestrating agent (no stream involved)', async () => {
    const res = await run('agt_lead', { message: 'hi' });
    expect(res.statusCode).toBe(200);
    expect(res.json().data.warnings).toEqual([expect.objectContaining({ tool: 'agt_gone' })]);
  });

  it('reads a run back with the warnings its POST answered (one by id, and in the run list)', async () => {
    const res = await run('agt_lead', { message: 'who is there?' });
    expect(res.statusCode).toBe(200);
    expect(res.json().data.warnings).toEqual([
      {
        tool: 'agt_gone',
        code: 'agent_unavailable',
        message: 'Agent "agt_gone" does not exist in this workspace',
      },
    ]);
    expect(await readBack('agt_lead', res.json().data.id)).toEqual(res.json().data);
  });

  it('answers with the model’s text when the model calls a tool nobody offered (it reads the tool error), not an empty completed run', async () => {
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'lookup_order', arguments: { id: 42 } }] },
      { kind: 'text', text: 'I cannot look orders up.' },
    );
    const res = await run('agt_plain', { message: 'Where is order 42?' });
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ status: 'completed', agentResponse: 'I cannot look orders up.' });
    expect(upstream.lastRequest().body.messages!.at(-1)).toMatchObject({
      role: 'tool',
      content: expect.stringContaining("unavailable tool 'lookup_order'"),
    });
    const reply = (await chatRows(t.db, res.json().data.chatId)).find((row) => row.role === 'assistant')!;
    expect(reply.finish_reason).toBe('stop');
  });

  it('gives the lead the sub-agent’s answer when the sub-agent calls a tool it does not have', async () => {
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'agt_plain', arguments: { message: 'Find order 42' } }] },
      { kind: 'tool-calls', calls: [{ name: 'lookup_order', arguments: { id: 42 } }] },
      { kind: 'text', text: 'I have no order tool.' },
      { kind: 'text', text: 'The plain agent has no order tool.' },
    );
    const res = await run('agt_lead', { message: 'Where is order 42?' });
    expect(res.statusCode).toBe(200);
    expect(res.json().data.agentResponse).toBe('The plain agent has no order tool.');
    // The lead's last call carries the sub-agent's answer as its tool result.
    expect(JSON.stringify(upstream.lastRequest().body.messages!.at(-1))).toContain('I have no order tool.');
    const subRun = await t.db
      .selectFrom('agent_runs')
      .selectAll()
      .where('chat_id', '=', res.json().data.chatId)
      .where('agent_id', '=', 'agt_plain')
      .executeTakeFirstOrThrow();
    expect(subRun).toMatchObject({ status: 'completed', response: 'I have no order tool.' });
  });

  it.each([
    ['message missing', {}],
    ['message empty', { message: '' }],
    ['message blank', { message: '   ' }],
    ['message not a string', { message: 42 }],
    ['message over 100,000 characters', { message: 'x'.repeat(100_001) }],
    ['temperature over 2', { message: 'hi', temperature: 3 }],
    ['temperature a string', { message: 'hi', temperature: '1' }],
    ['chatId a number', { message: 'hi', chatId: 5 }],
    ['variables with an array value', { message: 'hi', variables: { a: [1] } }],
    ['systemVariables.user.email a number', { message: 'hi', systemVariables: { user: { email: 1 } } }],
    ['systemVariables.user.id empty', { message: 'hi', systemVariables: { user: { id: '' } } }],
  ])('400 when %s, with nothing stored', async (_name, body) => {
    const before = await countRows(t.db);
    const res = await run('agt_plain', body);
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('bad_request');
    expect(await countRows(t.db)).toEqual(before);
  });

  it('accepts a message of exactly 100,000 characters', async () => {
    const res = await run('agt_plain', { message: 'x'.repeat(100_000) });
    expect(res.statusCode).toBe(200);
  });

  it('answers 404 for an agent of another workspace, an unknown chat, a project of another workspace', async () => {
    expect((await run('agt_other', { message: 'hi' })).statusCode).toBe(404);
    expect((await run('agt_nope', { message: 'hi' })).statusCode).toBe(404);
    // An id longer than any id is malformed, as on the other agent routes.
    expect((await run('a'.repeat(201), { message: 'hi' })).statusCode).toBe(400);
    expect((await run('agt_plain', { message: 'hi', chatId: 'cht_nope' })).statusCode).toBe(404);
    expect((await run('agt_plain', { message: 'hi', projectId: 'prj_other' })).statusCode).toBe(404);
    expect(upstream.requests).toHaveLength(0);
  });

  it('answers 400 for a chat of another agent', async () => {
    const chat = await t.app.inject({
      method: 'POST',
      url: '/v1/chat',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
      payload: { agentId: 'agt_plain', messages: [userText('hi')] },
    });
    const res = await run('agt_helper', { message: 'hi', chatId: chat.json().chatId });
    expect(res.statusCode).toBe(400);
  });
});
