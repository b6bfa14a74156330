/**
 * What a model answers may hold NUL characters, which PostgreSQL text cannot: an agent run
 * stored them raw, so on PostgreSQL the reply's transaction failed (500, no run, the usage
 * never charged). Runs store them as U+FFFD on both engines.
 */
import { describe, expect, it } from 'vitest';
import { engineName, type TestApp } from '../helpers/app.js';
import { type FakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, useChatApp } from '../chat/fixtures.js';

let upstream: FakeUpstream;
let t: TestApp;
useChatApp((app) => ({ upstream, t } = app));

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
    const runs = await t.db.selectFrom('agent_runs').select(['id', 'response']).execute();
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
    expect(runs[0]!.response).toBe('before\uFFFDafter');
  });

  it("stores a sub-agent run whose input (the lead model's tool argument) holds NUL", async () => {
    await t.db.deleteFrom('agent_runs').execute();
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'agt_plain', arguments: { message: 'ask\u0000this' } }] },
      { kind: 'text', text: 'sub answer' },
      { kind: 'text', text: 'final answer' },
    );
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/agents/agt_lead/runs',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
      payload: { message: 'delegate it' },
    });
    expect(res.statusCode).toBe(200);
    const runs = await t.db
      .selectFrom('agent_runs')
      .select(['agent_id', 'input'])
      .orderBy('agent_id')
      .execute();
    expect(runs).toEqual([
      { agent_id: 'agt_lead', input: 'delegate it' },
      { agent_id: 'agt_plain', input: 'ask\uFFFDthis' },
    ]);
  });
});
