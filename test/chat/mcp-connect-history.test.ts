/**
 * A turn reads the chat's history, then connects the agent's MCP servers (seconds, at worst the
 * connect timeout). A second turn sent meanwhile read the same history: even when the first
 * turn's message and reply were stored before the second turn stored anything, its model never
 * saw them. The history is read again once the servers answered.
 */
import { describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.js';
import { deferred } from '../helpers/deferred.js';
import type { FakeUpstream } from '../helpers/fake-upstream.js';
import { chatRows, postChat, giveAgentMcpServer, useChatApp, userText } from './fixtures.js';

const firstInit = deferred(); // T1 reached its MCP connect
const secondInit = deferred(); // T2 reached its MCP connect (its history is read by then)
const releaseFirst = deferred();
const releaseSecond = deferred();

let upstream: FakeUpstream;
let t: TestApp;
let mcpUrl: string;
useChatApp(
  (app) => {
    ({ upstream, t } = app);
    mcpUrl = app.mcp!.url;
  },
  {
    mcp: {
      tools: [{ name: 'lookup', inputSchema: { type: 'object', properties: { q: { type: 'string' } } } }],
      gate: async (n) => {
        if (n === 0) {
          firstInit.resolve();
          await releaseFirst.promise;
        } else if (n === 1) {
          secondInit.resolve();
          await releaseSecond.promise;
        }
      },
    },
    mcpConnectTimeoutMs: 10_000,
    beforeClose: () => {
      releaseFirst.resolve();
      releaseSecond.resolve();
    },
  },
);

const post = (payload: Record<string, unknown>) => postChat(t, payload);

describe('two turns on one chat while the first connects its MCP server', () => {
  it('the second reply is generated from the history stored before its own turn', async () => {
    // A chat with one exchange, made before the agent has the slow MCP server.
    const opening = await post({ agentId: 'agt_plain', messages: [userText('u0', 'u0')] });
    const chatId = opening.json().chatId as string;
    await giveAgentMcpServer(t.db, 'agt_plain', mcpUrl);
    upstream.requests.length = 0;
    upstream.enqueue({ kind: 'text', text: 'a1' }, { kind: 'text', text: 'a2' });

    const first = post({ agentId: 'agt_plain', chatId, messages: [userText('u1', 'u1')] });
    await firstInit.promise;
    const second = post({ agentId: 'agt_plain', chatId, messages: [userText('u2', 'u2')] });
    await secondInit.promise;
    // The first turn goes on and ends (u1 and a1 stored) before the second stores anything.
    releaseFirst.resolve();
    expect((await first).statusCode).toBe(200);
    releaseSecond.resolve();
    expect((await second).statusCode).toBe(200);

    const rows = await chatRows(t.db, chatId);
    const texts = rows.map(
      (r) =>
        (JSON.parse(r.parts) as Array<{ type: string; text?: string }>).find((p) => p.type === 'text')?.text,
    );
    // Stored order looks serial: u0 a0 u1 a1 u2 a2.
    expect(texts).toEqual(['u0', upstream.defaultText, 'u1', 'a1', 'u2', 'a2']);

    // What the model was asked for a2: everything stored before u2, then u2.
    const secondCall = upstream.requests.find((r) => JSON.stringify(r.body.messages).includes('"u2"'))!;
    const seen = secondCall.body.messages!.filter((m) => m.role !== 'system').map((m) => m.content);
    expect(seen).toEqual(['u0', upstream.defaultText, 'u1', 'a1', 'u2']);
  });
});
