import { afterEach, beforeEach, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
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

async function recorded() {
  const runs = await t.db.selectFrom('agent_runs').select(['status', 'error', 'response']).execute();
  const replies = await t.db.selectFrom('messages').select('id').where('role', '=', 'assistant').execute();
  return { runs, replies: replies.length };
}

it('answers 409 for a run stopped before its answer, and records it failed', async () => {
  const pending = startRun();
  await upstream.waitForRequests(1);
  const chat = await t.db.selectFrom('chats').select('id').executeTakeFirstOrThrow();
  const stop = await t.app.inject({
    method: 'POST',
    url: `/v1/chat/${chat.id}/stop`,
    headers: { 'x-service-api-key': CHAT_KEYS.main },
  });
  expect(stop.json().data.stopped).toBe(true);
  const res = await pending;
  expect(res.statusCode, res.body).toBe(409);
  expect(res.json()).toMatchObject({ code: 'conflict', details: { runId: expect.stringMatching(/^run_/) } });
  expect(await recorded()).toEqual({
    runs: [{ status: 'failed', error: expect.stringContaining('conflict'), response: '' }],
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
