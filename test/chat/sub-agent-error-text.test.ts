/**
 * A sub-agent's provider failure: the lead's own provider failure reaches the client as
 * "The model provider answered HTTP 401" (upstream-failure.ts), and the sub-agent's run records
 * that same sanitized text, but the tool error stored with the reply (and shown by
 * GET /v1/chats/{id}/messages, and given to the lead model) is the provider's raw error body.
 */
import { describe, expect, it } from 'vitest';
import { type TestApp } from '../helpers/app.js';
import { type FakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, postChat, useChatApp, userText } from './fixtures.js';

let upstream: FakeUpstream;
let t: TestApp;

useChatApp((app) => ({ upstream, t } = app));

const PROVIDER_TEXT = 'Incorrect API key provided: sk-live-OPERATOR-KEY; proxy 10.0.3.4:4000';

describe('an orchestrating agent whose sub-agent’s provider fails', () => {
  it('never shows the provider’s own error text to the client or the lead model', async () => {
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'agt_plain', arguments: { message: 'help' } }] },
      { kind: 'fail', status: 401, message: PROVIDER_TEXT },
      { kind: 'text', text: 'done' },
    );
    const res = await postChat(t, { agentId: 'agt_lead', messages: [userText('delegate')] });
    expect(res.statusCode).toBe(200);

    const messages = await t.app.inject({
      method: 'GET',
      url: `/v1/chats/${res.json().chatId}/messages`,
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    expect(messages.statusCode).toBe(200);
    expect(messages.body).not.toContain('sk-live-OPERATOR-KEY');
    expect(JSON.stringify(upstream.lastRequest().body.messages)).not.toContain('sk-live-OPERATOR-KEY');

    // The sub-agent's failed run, read back, says why in the service's words, with their code.
    const runs = await t.app.inject({
      method: 'GET',
      url: '/v1/agents/agt_plain/runs?limit=100',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    expect(runs.statusCode).toBe(200);
    const subRun = (runs.json().data.runs as Array<{ chatId: string }>).find(
      (run) => run.chatId === res.json().chatId,
    );
    expect(subRun).toMatchObject({
      status: 'failed',
      error: { code: 'upstream_error', message: 'The model provider answered HTTP 401' },
    });
    expect(runs.body).not.toContain('sk-live-OPERATOR-KEY');
  });
});
