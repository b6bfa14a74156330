import SQLite from 'better-sqlite3';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { createTestApp, type TestApp, testDatabaseUrl } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatSetup } from '../chat/fixtures.js';

/**
 * A run (a non-streamed reply) cut short before its answer: by a stop, or by the server shutting
 * down. The client gets an error saying so, the run is recorded `failed`, and no empty assistant
 * message is stored (once: 200 `completed` with an empty answer and a message id never stored).
 */
let upstream: FakeUpstream;
let t: TestApp;
beforeEach(async () => {
  upstream = await startFakeUpstream();
  t = await createTestApp({ setup: chatSetup(upstream), shutdownWaitMs: 100 });
});
afterEach(async () => {
  await t.close();
  await upstream.close();
});

function startRun() {
  upstream.enqueue({ kind: 'stall' });
  return t.app.inject({
    method: 'POST',
    url: '/v1/agents/agt_plain/runs',
    headers: { 'x-service-api-key': CHAT_KEYS.main },
    payload: { message: 'long job' },
  });
}

/** Stops the reply of the test's one chat, as POST /v1/chat/{chatId}/stop does. */
async function stopTheChat() {
  const chat = await t.db.selectFrom('chats').select('id').executeTakeFirstOrThrow();
  const stop = await t.app.inject({
    method: 'POST',
    url: `/v1/chat/${chat.id}/stop`,
    headers: { 'x-service-api-key': CHAT_KEYS.main },
  });
  expect(stop.json().data.stopped).toBe(true);
}

async function recorded() {
  const runs = await t.db.selectFrom('agent_runs').select(['status', 'error', 'response']).execute();
  const replies = await t.db.selectFrom('messages').select('id').where('role', '=', 'assistant').execute();
  return { runs, replies: replies.length };
}

it('answers 409 for a run stopped before its answer, and records it failed', async () => {
  const pending = startRun();
  await upstream.waitForRequests(1);
  await stopTheChat();
  const res = await pending;
  expect(res.statusCode, res.body).toBe(409);
  expect(res.json()).toMatchObject({ code: 'conflict', details: { runId: expect.stringMatching(/^run_/) } });
  expect(await recorded()).toEqual({
    runs: [{ status: 'failed', error: expect.stringContaining('conflict'), response: '' }],
    replies: 0,
  });
});

it('answers 404 for a run whose chat is deleted before its answer (no chat to go on with), and records it failed', async () => {
  const pending = startRun();
  await upstream.waitForRequests(1);
  const chat = await t.db.selectFrom('chats').select('id').executeTakeFirstOrThrow();
  const del = await t.app.inject({
    method: 'DELETE',
    url: `/v1/chats/${chat.id}`,
    headers: { 'x-service-api-key': CHAT_KEYS.main },
  });
  expect(del.statusCode).toBe(200);
  const res = await pending;
  expect(res.statusCode, res.body).toBe(404);
  expect(res.json()).toMatchObject({ code: 'not_found', details: { runId: expect.stringMatching(/^run_/) } });
  expect(await recorded()).toEqual({
    runs: [{ status: 'failed', error: expect.stringContaining('not_found'), response: '' }],
    replies: 0,
  });
});

it('answers 503 for a run the shutdown cut short, and records it failed', async () => {
  const pending = startRun();
  await upstream.waitForRequests(1);
  const closing = t.app.close();
  const res = await pending;
  await closing;
  expect(res.statusCode, res.body).toBe(503);
  expect(res.json().code).toBe('service_unavailable');
  expect(res.headers['retry-after']).toBe('1');
  const { runs, replies } = await recorded();
  expect(runs).toEqual([{ status: 'failed', error: expect.stringContaining('shut down'), response: '' }]);
  expect(replies).toBe(0);
});

/** A lead run whose sub-agent's call the upstream holds: the lead is cut short while it waits. */
function startLeadRun() {
  upstream.enqueue(
    { kind: 'tool-calls', calls: [{ name: 'agt_plain', arguments: { message: 'Summarize' } }] },
    { kind: 'stall' },
  );
  return t.app.inject({
    method: 'POST',
    url: '/v1/agents/agt_lead/runs',
    headers: { 'x-service-api-key': CHAT_KEYS.main },
    payload: { message: 'delegate' },
  });
}

function subRun() {
  return t.db
    .selectFrom('agent_runs')
    .select(['status', 'error', 'input_tokens'])
    .where('agent_id', '=', 'agt_plain')
    .executeTakeFirstOrThrow();
}

// The sub-agent's provider did nothing wrong: its run says it was stopped with its lead, and is
// charged the estimate of its prompt (reply-usage.ts).
it('records a sub-agent run the lead’s stop cut short as stopped, not as a provider failure', async () => {
  const pending = startLeadRun();
  await upstream.waitForRequests(2);
  await stopTheChat();
  expect((await pending).statusCode).toBe(409);
  const run = await subRun();
  expect(run).toMatchObject({
    status: 'failed',
    error: 'conflict: The lead reply was stopped before this run was done',
  });
  expect(run.input_tokens).toBeGreaterThan(0);
});

it('records a sub-agent run the shutdown cut short as interrupted by the shutdown', async () => {
  const pending = startLeadRun();
  await upstream.waitForRequests(2);
  const closing = t.app.close();
  expect((await pending).statusCode).toBe(503);
  await closing;
  expect(await subRun()).toMatchObject({
    status: 'failed',
    error: 'service_unavailable: The server shut down while this run was being generated',
  });
});

// docs/api.md: the database not answering is a 503 the client may retry, not a 500 ("a bug").
it.skipIf(testDatabaseUrl !== undefined)(
  'answers 503 with Retry-After, naming no run, when the database stays locked as the reply is stored',
  async () => {
    upstream.enqueue({ kind: 'held', text: 'the answer', afterPieces: 0 });
    const pending = t.app.inject({
      method: 'POST',
      url: '/v1/agents/agt_plain/runs',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
      payload: { message: 'long job' },
    });
    await upstream.waitForRequests(1);
    // Another process (an `atrium apply`, a second `serve`) holds the write lock past the busy timeout.
    const other = new SQLite((t.env.config.database as { file: string }).file);
    other.exec('BEGIN IMMEDIATE');
    try {
      upstream.release();
      const res = await pending;
      expect(res.statusCode, res.body).toBe(503);
      expect(res.json()).toMatchObject({ code: 'service_unavailable', details: { retryAfterSeconds: 5 } });
      expect(res.headers['retry-after']).toBe('5');
      // Nothing of the exchange was stored, so no run is named.
      expect(res.json().details.runId).toBeUndefined();
    } finally {
      other.exec('ROLLBACK');
      other.close();
    }
    expect(await recorded()).toEqual({ runs: [], replies: 0 });
  },
  30_000,
);
