/**
 * A tool's error in a streamed reply (a tool the model made up, bad input, a failed call) was
 * shown and stored as "The model provider failed", while JSON mode stored the tool's own
 * words. Both store the tool's words now; the provider's own failures keep the 502 text.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.js';
import type { FakeUpstream } from '../helpers/fake-upstream.js';
import { chatRows, giveAgentMcpServer, postChat, useChatApp, userText } from './fixtures.js';

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
  const res = await postChat(t, { agentId: 'agt_tools', stream, messages: [userText('hi')] });
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

describe('a tool the model made up when no tools were offered', () => {
  // With no tools, the SDK's tool loop took one step: the reply ended on the made-up call, empty,
  // with finish reason `tool-calls` (a UI client's cue to send the tool's result back).
  it('is answered to the model as a tool error and the model answers, streamed or not', async () => {
    for (const stream of [false, true]) {
      upstream.requests.length = 0;
      upstream.enqueue(
        { kind: 'tool-calls', calls: [{ name: 'lookup_order', arguments: { id: 42 } }] },
        { kind: 'text', text: 'I cannot look orders up.' },
      );
      const res = await postChat(t, {
        agentId: 'agt_plain',
        stream,
        messages: [userText('Where is order 42?')],
      });
      expect(res.statusCode).toBe(200);
      expect(upstream.lastRequest().body.messages!.at(-1)).toMatchObject({
        role: 'tool',
        content: "Model tried to call unavailable tool 'lookup_order'. No tools are available.",
      });
      if (stream) {
        const chunks = res.body
          .split('\n\n')
          .filter((event) => event.startsWith('data: {'))
          .map(
            (event) => JSON.parse(event.slice(6)) as { type: string; delta?: string; finishReason?: string },
          );
        const text = chunks.map((chunk) => (chunk.type === 'text-delta' ? chunk.delta : '')).join('');
        expect(text).toBe('I cannot look orders up.');
        expect(chunks.find((chunk) => chunk.type === 'finish')).toMatchObject({ finishReason: 'stop' });
      } else {
        expect(res.json().text).toBe('I cannot look orders up.');
      }
      await t.app.persistence.idle();
      const chatId = (res.headers['x-chat-id'] as string | undefined) ?? res.json().chatId;
      const reply = (await chatRows(t.db, chatId)).find((row) => row.role === 'assistant')!;
      expect(reply.finish_reason).toBe('stop');
    }
  });
});
