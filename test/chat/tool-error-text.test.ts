/**
 * A tool's error in a streamed reply (a tool the model made up, bad input, a failed call) was
 * shown and stored as "The model provider failed", while JSON mode stored the tool's own
 * words. Both store the tool's words now; the provider's own failures keep the 502 text.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.js';
import type { FakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatRows, giveAgentMcpServer, useChatApp, userText } from './fixtures.js';

let upstream: FakeUpstream;
let t: TestApp;
let mcpUrl: string;
useChatApp(
  (app) => {
    ({ upstream, t } = app);
    mcpUrl = app.mcp!.url;
  },
  {
    mcp: { tools: [{ name: 'lookup', inputSchema: { type: 'object', properties: {} } }] },
    mcpConnectTimeoutMs: 3_000,
  },
);
beforeAll(async () => {
  await giveAgentMcpServer(t.db, 'agt_tools', mcpUrl);
});

async function storedToolError(stream: boolean): Promise<string | undefined> {
  upstream.enqueue(
    { kind: 'tool-calls', calls: [{ name: 'nope', arguments: {} }] },
    { kind: 'text', text: 'ok' },
  );
  const res = await t.app.inject({
    method: 'POST',
    url: '/v1/chat',
    headers: { 'x-service-api-key': CHAT_KEYS.main },
    payload: { agentId: 'agt_tools', stream, messages: [userText('hi')] },
  });
  expect(res.statusCode).toBe(200);
  await t.app.persistence.idle();
  const chatId = (res.headers['x-chat-id'] as string | undefined) ?? res.json().chatId;
  const reply = (await chatRows(t.db, chatId)).find((row) => row.role === 'assistant')!;
  const parts = JSON.parse(reply.parts) as Array<{ errorText?: string }>;
  return parts.find((part) => part.errorText !== undefined)?.errorText;
}

describe('a tool error in a streamed reply', () => {
  it('is stored (and shown) as the tool error, as in JSON mode, not as a provider failure', async () => {
    const json = await storedToolError(false);
    const streamed = await storedToolError(true);
    expect(json).toContain("unavailable tool 'nope'");
    expect(streamed).toBe(json);
  });
});
