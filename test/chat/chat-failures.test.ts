import { InvalidPromptError, MissingToolResultsError } from 'ai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { upstreamFailure } from '../../src/services/upstream-failure.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatRows, chatSetup, countRows, ledgerTokens, userText } from './fixtures.js';

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

function chat(payload: Record<string, unknown>) {
  return t.app.inject({
    method: 'POST',
    url: '/v1/chat',
    headers: { 'x-service-api-key': CHAT_KEYS.main },
    payload,
  });
}

async function onlyChatOf(before: Set<string>) {
  const chats = await t.db.selectFrom('chats').select('id').execute();
  const created = chats.filter((c) => !before.has(c.id));
  expect(created).toHaveLength(1);
  return created[0]!.id;
}

async function chatIds() {
  return new Set((await t.db.selectFrom('chats').select('id').execute()).map((c) => c.id));
}

describe('a prompt the AI SDK refuses before calling the provider', () => {
  // Requests are checked for these before anything is stored; a refusal that still gets through
  // is the request's fault (400, not retried), streamed or not, never a provider failure (502).
  it('is a 400 bad_request saying why, not a 502', () => {
    const refusals = [
      new MissingToolResultsError({ toolCallIds: ['call_1'] }),
      new InvalidPromptError({ prompt: [], message: 'messages must not be empty' }),
    ];
    for (const refusal of refusals) {
      const error = upstreamFailure(refusal, false, TIMEOUT_MS);
      expect(error).toMatchObject({ status: 400, code: 'bad_request' });
      expect(error.message).toContain(refusal.message);
      expect(error.cause).toBe(refusal);
    }
  });
});

describe('provider failures in JSON mode', () => {
  it('answers 502 upstream_error for an upstream HTTP 500, keeps the user message, stores no assistant message', async () => {
    const before = await chatIds();
    upstream.enqueue({ kind: 'fail', status: 500, message: 'model exploded' });
    const res = await chat({ agentId: 'agt_plain', messages: [userText('please', 'u-500')] });
    expect(res.statusCode).toBe(502);
    const chatId = await onlyChatOf(before);
    // The chat holding the stored turn, to retry on (before: no way to learn it from the answer).
    expect(res.json()).toEqual({
      code: 'upstream_error',
      message: 'The model provider answered HTTP 500',
      details: { providerStatus: 500, chatId },
    });
    expect(upstream.requests).toHaveLength(1);
    expect((await chatRows(t.db, chatId)).map((r) => [r.id, r.role])).toEqual([['u-500', 'user']]);
  });

  it('answers 504 upstream_timeout when the upstream stalls past the configured timeout', async () => {
    const before = await chatIds();
    upstream.enqueue({ kind: 'stall' });
    const started = Date.now();
    const res = await chat({ agentId: 'agt_plain', messages: [userText('anyone there?')] });
    expect(res.statusCode).toBe(504);
    expect(res.json()).toMatchObject({ code: 'upstream_timeout' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
    const chatId = await onlyChatOf(before);
    expect((await chatRows(t.db, chatId)).map((r) => r.role)).toEqual(['user']);
  });

  it('answers 502 when the upstream disconnects mid-stream, without a half assistant message', async () => {
    const before = await chatIds();
    upstream.enqueue({ kind: 'disconnect', text: 'a reply that breaks', afterPieces: 2 });
    const res = await chat({ agentId: 'agt_plain', messages: [userText('go')] });
    expect(res.statusCode).toBe(502);
    expect(res.json().code).toBe('upstream_error');
    const chatId = await onlyChatOf(before);
    expect((await chatRows(t.db, chatId)).map((r) => r.role)).toEqual(['user']);
  });

  describe('a failure after a completed tool step', () => {
    const ledger = () => ledgerTokens(t.db);
    const toolStepThenFailure = () =>
      upstream.enqueue(
        {
          kind: 'tool-calls',
          calls: [{ name: 'remember', arguments: { note: 'Kept before the failure.' } }],
        },
        { kind: 'fail', status: 500 },
      );

    it('stores the steps so far as the assistant message (finishReason error), charged once, and names it in the 502', async () => {
      const before = await ledger();
      toolStepThenFailure();
      const res = await chat({
        agentId: 'agt_plain',
        projectId: 'prj_empty',
        messages: [userText('note it')],
      });
      expect(res.statusCode).toBe(502);
      const body = res.json();
      expect(body).toEqual({
        code: 'upstream_error',
        message: 'The model provider answered HTTP 500',
        details: {
          providerStatus: 500,
          chatId: expect.any(String),
          messageId: expect.stringMatching(/^msg_/),
        },
      });
      const rows = await chatRows(t.db, body.details.chatId);
      expect(rows.map((r) => [r.role, r.finish_reason])).toEqual([
        ['user', null],
        ['assistant', 'error'],
      ]);
      expect(rows[1]!.id).toBe(body.details.messageId);
      const parts = JSON.parse(rows[1]!.parts) as Array<{ type: string; state?: string; output?: unknown }>;
      expect(parts.find((p) => p.type === 'tool-remember')).toMatchObject({
        state: 'output-available',
        output: { saved: true },
      });
      const after = await ledger();
      expect(rows[1]!.input_tokens).toBeGreaterThan(0);
      expect({ input: rows[1]!.input_tokens, output: rows[1]!.output_tokens }).toEqual({
        input: after.inputTokens - before.inputTokens,
        output: after.outputTokens - before.outputTokens,
      });
    });

    it('records the agent run as failed as before, its error naming the stored message', async () => {
      toolStepThenFailure();
      const res = await t.app.inject({
        method: 'POST',
        url: '/v1/agents/agt_plain/runs',
        headers: { 'x-service-api-key': CHAT_KEYS.main },
        payload: { message: 'note it', projectId: 'prj_empty' },
      });
      expect(res.statusCode).toBe(502);
      const { details } = res.json();
      expect(details).toEqual({
        providerStatus: 500,
        runId: expect.stringMatching(/^run_/),
        messageId: expect.stringMatching(/^msg_/),
      });
      const run = await t.db
        .selectFrom('agent_runs')
        .selectAll()
        .where('id', '=', details.runId)
        .executeTakeFirstOrThrow();
      expect(run).toMatchObject({
        status: 'failed',
        response: '',
        error: 'upstream_error: The model provider answered HTTP 500',
      });
      const rows = await chatRows(t.db, run.chat_id!);
      expect(rows.map((r) => [r.id, r.role, r.finish_reason])).toEqual([
        [expect.any(String), 'user', null],
        [details.messageId, 'assistant', 'error'],
      ]);
      expect({ input: rows[1]!.input_tokens, output: rows[1]!.output_tokens }).toEqual({
        input: run.input_tokens,
        output: run.output_tokens,
      });
    });
  });

  it('keeps the chat usable after a failure: the next turn sees the kept user message', async () => {
    upstream.enqueue({ kind: 'fail', status: 503 });
    const failed = await chat({ agentId: 'agt_plain', messages: [userText('first try', 'u-a')] });
    expect(failed.statusCode).toBe(502);
    const rows = await t.db.selectFrom('messages').select('chat_id').where('id', '=', 'u-a').execute();
    expect(rows).toHaveLength(1);
    const chatId = rows[0]!.chat_id;
    const retry = await chat({
      agentId: 'agt_plain',
      chatId,
      messages: [userText('first try', 'u-a'), userText('again', 'u-b')],
    });
    expect(retry.statusCode).toBe(200);
    expect(upstream.lastRequest().body.messages).toEqual([
      { role: 'user', content: 'first try' },
      { role: 'user', content: 'again' },
    ]);
  });

  it('answers 502 (not 500) when the upstream cannot be reached and records no usage', async () => {
    const counts = await countRows(t.db);
    const ledgerBefore = await t.db.selectFrom('usage_ledger').selectAll().execute();
    await t.db
      .updateTable('providers')
      .set({ base_url: 'http://127.0.0.1:9/v1' })
      .where('id', '=', 'fake')
      .execute();
    try {
      const res = await chat({ agentId: 'agt_plain', messages: [userText('hello?')] });
      expect(res.statusCode).toBe(502);
      expect(res.json()).toMatchObject({
        code: 'upstream_error',
        message: 'The model provider could not be reached',
      });
    } finally {
      await t.db
        .updateTable('providers')
        .set({ base_url: upstream.baseURL })
        .where('id', '=', 'fake')
        .execute();
    }
    const after = await countRows(t.db);
    expect(after.messages).toBe(counts.messages + 1);
    expect(await t.db.selectFrom('usage_ledger').selectAll().execute()).toEqual(ledgerBefore);
  });
});
