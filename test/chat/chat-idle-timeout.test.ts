import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatRows, chatSetup, userText } from './fixtures.js';
import { EventReader } from './sse-reader.js';

/** A listening app with an upstream of its own and the given idle timeout, for the tests after it. */
function appWithUpstreamTimeout(timeoutMs: number) {
  const app = {} as { upstream: FakeUpstream; t: TestApp; url: string };
  beforeAll(async () => {
    app.upstream = await startFakeUpstream();
    app.t = await createTestApp({
      setup: chatSetup(app.upstream),
      env: { ATRIUM_UPSTREAM_TIMEOUT_MS: String(timeoutMs) },
    });
    app.url = await app.t.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await app.t.close();
    await app.upstream.close();
  });
  return app;
}

// An app of its own: its short idle timeout would cut the held replies of other tests short. Not
// shorter: under load (CI runs three test files at once on two cores) the fake provider's first
// chunk came more than 400 ms after the call started, so a reply meant to stall after 30 pieces
// timed out before any, and the test after it was answered with the script queued for it.
const main = appWithUpstreamTimeout(1500);
let upstream: FakeUpstream;
let t: TestApp;
let baseUrl: string;
beforeAll(() => {
  ({ upstream, t, url: baseUrl } = main);
});

const headers = { 'content-type': 'application/json', 'x-service-api-key': CHAT_KEYS.main };
const post = (body: Record<string, unknown>) =>
  fetch(`${baseUrl}/v1/chat`, { method: 'POST', headers, body: JSON.stringify({ stream: true, ...body }) });

describe('an upstream that goes silent mid-stream', () => {
  it('ends an upstream idle timeout with an error chunk carrying the 504 message, not abort', async () => {
    upstream.enqueue({ kind: 'stall' });
    const response = await post({ agentId: 'agt_plain', messages: [userText('hello?')] });
    const events = new EventReader(response);
    await events.all();
    const types = events.chunks.map((c) => c.type);
    expect(types).not.toContain('abort');
    expect(events.chunks.at(-1)).toEqual({
      type: 'error',
      errorText: 'The model provider did not answer within 1500 ms',
    });
  });
});

describe('what a reply cut short by the idle timeout is charged', () => {
  it('its prompt and the output streamed, estimated: the ledger counts them and the limit then refuses', async () => {
    upstream.enqueue({ kind: 'held', text: 'word '.repeat(40), afterPieces: 30 });
    const limited = { 'content-type': 'application/json', 'x-service-api-key': CHAT_KEYS.limited };
    const response = await fetch(`${baseUrl}/v1/chat`, {
      method: 'POST',
      headers: limited,
      body: JSON.stringify({ stream: true, agentId: 'agt_limited', messages: [userText('x'.repeat(2000))] }),
    });
    const events = new EventReader(response);
    await events.all();
    upstream.release();
    expect(events.text()).toBe('word '.repeat(30));
    expect(events.chunks.at(-1)).toMatchObject({ type: 'error' });
    await t.app.persistence.idle();
    // The text streamed is stored as the reply, errored, carrying what is charged.
    const rows = await chatRows(t.db, response.headers.get('x-chat-id')!);
    expect(rows.map((r) => [r.role, r.finish_reason])).toEqual([
      ['user', null],
      ['assistant', 'error'],
    ]);
    const parts = JSON.parse(rows[1]!.parts) as Array<{ type: string; text?: string }>;
    expect(parts.filter((p) => p.type === 'text').map((p) => p.text)).toEqual(['word '.repeat(30)]);

    const ledger = await t.db
      .selectFrom('usage_ledger')
      .selectAll()
      .where('workspace_id', '=', 'wsp_limited')
      .executeTakeFirstOrThrow();
    // The prompt (2,000 characters and its JSON) and the 150 characters streamed, at about four
    // characters a token, priced as fake-small (1 and 2 USD per million tokens).
    expect(Number(ledger.input_tokens)).toBeGreaterThanOrEqual(500);
    expect(Number(ledger.output_tokens)).toBe(Math.ceil(150 / 4));
    expect(Number(ledger.cost_usd)).toBeCloseTo(
      (Number(ledger.input_tokens) + 2 * Number(ledger.output_tokens)) / 1e6,
      12,
    );
    expect([rows[1]!.input_tokens, rows[1]!.output_tokens]).toEqual([
      Number(ledger.input_tokens),
      Number(ledger.output_tokens),
    ]);
    const next = await fetch(`${baseUrl}/v1/chat`, {
      method: 'POST',
      headers: limited,
      body: JSON.stringify({ agentId: 'agt_limited', messages: [userText('more')] }),
    });
    expect(next.status).toBe(402);
  });
});

describe('a sub-agent whose provider stays silent past the timeout', () => {
  it('fails the lead run with 504, and records the sub-agent run as timed out at its estimate', async () => {
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'agt_plain', arguments: { message: 'Summarize' } }] },
      { kind: 'stall' },
    );
    const res = await fetch(`${baseUrl}/v1/agents/agt_lead/runs`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ message: 'delegate (idle)' }),
    });
    expect(res.status).toBe(504);
    const { chatId } = await t.db
      .selectFrom('agent_runs')
      .select('chat_id as chatId')
      .where('id', '=', (await res.json()).details.runId)
      .executeTakeFirstOrThrow();
    const run = await t.db
      .selectFrom('agent_runs')
      .select(['status', 'error', 'input_tokens'])
      .where('agent_id', '=', 'agt_plain')
      .where('chat_id', '=', chatId)
      .executeTakeFirstOrThrow();
    // The lead only waited for the sub-agent's provider: its silence is the timeout, as the lead says.
    expect(run).toMatchObject({
      status: 'failed',
      error: 'upstream_timeout: The model provider did not answer within 1500 ms',
    });
    expect(run.input_tokens).toBeGreaterThan(0);
  });
});

describe('a lead and its sub-agent each answering within the timeout', () => {
  // An app of its own: the requests it waits for are this test's only. A longer timeout than the
  // others', so each answer is well within it on a loaded machine (with 1,500 ms and answers after
  // 900 ms, only 600 ms were left for the requests' own way there and back), while the two
  // together still take longer than it.
  const slowApp = appWithUpstreamTimeout(3000);

  it('succeed together, though the two answers take longer than the timeout', async () => {
    // The lead's model answers after 1,600 ms, its sub-agent's after 1,600 ms more: each provider
    // within 3,000 ms. Before, one window covered both (the lead's timer was touched only when
    // its step ended, after its tools ran), and the run failed with 504 at 3,000 ms.
    slowApp.upstream.enqueue(
      {
        kind: 'tool-calls',
        calls: [{ name: 'agt_plain', arguments: { message: 'Summarize' } }],
        delayMs: 1600,
      },
      { kind: 'held', text: 'sub answer', afterPieces: 0 },
      { kind: 'text', text: 'Lead done.' },
    );
    const started = performance.now();
    const pending = fetch(`${slowApp.url}/v1/agents/agt_lead/runs`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ message: 'delegate (slow but alive)' }),
    });
    await slowApp.upstream.waitForRequests(2);
    await new Promise((resolve) => setTimeout(resolve, 1600));
    slowApp.upstream.release();
    const res = await pending;
    expect(res.status, await res.clone().text()).toBe(200);
    expect((await res.json()).data.agentResponse).toBe('Lead done.');
    // The premise: the run outlasted one timeout window.
    expect(performance.now() - started).toBeGreaterThan(3000);
  });
});
