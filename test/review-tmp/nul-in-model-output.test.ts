/**
 * REVIEW (PostgreSQL): the input guard keeps NUL characters out of requests, but nothing keeps
 * them out of what the model answers. An agent run stores the reply text raw in
 * `agent_runs.response` (a text column); PostgreSQL refuses a NUL in text, so the reply's whole
 * transaction fails: the caller gets 500 `internal_error`, no run is recorded, and the tokens
 * the provider billed are never charged to the workspace (ledger, limits). SQLite stores it.
 * (Sub-agent runs store `answer.text` the same way.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatSetup } from '../chat/fixtures.js';

let upstream: FakeUpstream;
let t: TestApp;
beforeAll(async () => {
  upstream = await startFakeUpstream();
  t = await createTestApp({ setup: chatSetup(upstream) });
});
afterAll(async () => {
  await t.close();
  await upstream.close();
});

describe(`a model reply holding a NUL character (${engineName})`, () => {
  it('is recorded as an agent run and charged, not a 500 with the usage lost', async () => {
    upstream.enqueue({ kind: 'text', text: 'before\u0000after', usage: { prompt: 10, completion: 7 } });
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/agents/agt_plain/runs',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
      payload: { message: 'say it' },
    });
    const ledger = await t.db
      .selectFrom('usage_ledger')
      .selectAll()
      .where('workspace_id', '=', 'wsp_main')
      .execute();
    const runs = await t.db.selectFrom('agent_runs').select('id').execute();
    expect({
      status: res.statusCode,
      code: res.json().code,
      runs: runs.length,
      outputTokens: ledger.reduce((s, r) => s + Number(r.output_tokens), 0),
    }).toEqual({
      status: 200,
      code: undefined,
      runs: 1,
      outputTokens: 7,
    });
  });
});
