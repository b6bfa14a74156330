/**
 * A chat deleted (DELETE /v1/chats/{id}, another tab) while a turn on it is being set up (here:
 * its agent's MCP server connecting). The turn's messages are then inserted for a chat that no
 * longer exists: the foreign key refuses them and the client gets a 500 for what is a 404.
 * The same setup holds a turn that is stopped before it reaches the provider. Either way the MCP
 * client the turn opened is closed: its session is ended.
 */
import { describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.js';
import { deferred } from '../helpers/deferred.js';
import { CHAT_KEYS, chatRows, postChat, giveAgentMcpServer, useChatApp, userText } from './fixtures.js';
import type { FakeUpstream } from '../helpers/fake-upstream.js';
import type { startRawMcpServer } from './raw-mcp-server.js';

let connecting = deferred(); // the turn reached its MCP connect (its chat was found by then)
let release = deferred();

let t: TestApp;
let upstream: FakeUpstream;
let mcp: Awaited<ReturnType<typeof startRawMcpServer>>;
let mcpUrl: string;
useChatApp(
  (app) => {
    t = app.t;
    upstream = app.upstream;
    mcp = app.mcp!;
    mcpUrl = mcp.url;
  },
  {
    mcp: {
      tools: [{ name: 'lookup', inputSchema: { type: 'object', properties: {} } }],
      session: true,
      gate: async () => {
        connecting.resolve();
        await release.promise;
      },
    },
    mcpConnectTimeoutMs: 10_000,
    beforeClose: () => release.resolve(),
  },
);

/** Deletes the chat once the turn on it waits for its MCP server, then lets the server answer. */
async function deleteWhileConnecting(chatId: string) {
  await connecting.promise;
  const deleted = await t.app.inject({
    method: 'DELETE',
    url: `/v1/chats/${chatId}`,
    headers: { 'x-service-api-key': CHAT_KEYS.main },
  });
  expect(deleted.statusCode).toBe(200);
  release.resolve();
}

describe('a chat deleted while a turn on it is being set up', () => {
  it('answers 404 not_found and stores nothing, not a 500', async () => {
    const opening = await postChat(t, { agentId: 'agt_plain', messages: [userText('u0', 'u0')] });
    expect(opening.statusCode).toBe(200);
    const chatId = opening.json().chatId as string;
    await giveAgentMcpServer(t.db, 'agt_plain', mcpUrl);

    const turn = postChat(t, { agentId: 'agt_plain', chatId, messages: [userText('u1', 'u1')] });
    await deleteWhileConnecting(chatId);

    const res = await turn;
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ code: 'not_found' });
    expect(await chatRows(t.db, chatId)).toHaveLength(0);
    await expect.poll(() => mcp.sessionEnds).toEqual(['raw-1']);
  });

  it('closes the MCP client of a regenerate whose message went with the chat (404)', async () => {
    release.resolve();
    const opening = await postChat(t, { agentId: 'agt_plain', messages: [userText('w0', 'w0')] });
    expect(opening.statusCode).toBe(200);
    const chatId = opening.json().chatId as string;
    [connecting, release] = [deferred(), deferred()];
    // The session the regenerate's MCP client gets (the opening turn's is ended meanwhile).
    const session = `raw-${mcp.requests.filter((method) => method === 'initialize').length + 1}`;

    const turn = postChat(t, {
      agentId: 'agt_plain',
      chatId,
      trigger: 'regenerate-message',
      messageId: opening.json().messageId,
      messages: [userText('w0', 'w0')],
    });
    await deleteWhileConnecting(chatId);

    const res = await turn;
    // The delete's stop ends the set-up at once, and the turn is refused as its chat's: the chat,
    // not only the message to replace, is gone. (It used to go on until the server answered, and
    // its history, read again then, no longer held that message: 404 `Message`.)
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ code: 'not_found', message: expect.stringContaining('Chat') });
    await expect.poll(() => mcp.sessionEnds).toContain(session);
  });
});

describe('a turn stopped while it is being set up', () => {
  // The provider was never asked: a call whose signal was cut short before it began sends nothing.
  it('charges nothing', async () => {
    // The agent has the gated MCP server since the test above: the opening turn passes the gate.
    release.resolve();
    const opening = await postChat(t, { agentId: 'agt_plain', messages: [userText('v0', 'v0')] });
    expect(opening.statusCode).toBe(200);
    const chatId = opening.json().chatId as string;
    [connecting, release] = [deferred(), deferred()];
    const ledger = () =>
      t.db
        .selectFrom('usage_ledger')
        .select(['input_tokens', 'output_tokens'])
        .where('workspace_id', '=', 'wsp_main')
        .execute();
    const before = await ledger();
    upstream.requests.length = 0;

    const turn = postChat(t, {
      agentId: 'agt_plain',
      chatId,
      messages: [userText(`v1 ${'long '.repeat(2000)}`, 'v1')],
    });
    await connecting.promise;
    const stop = await t.app.inject({
      method: 'POST',
      url: `/v1/chat/${chatId}/stop`,
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    expect(stop.json().data.stopped).toBe(true);
    release.resolve();
    await turn;
    expect(upstream.requests).toHaveLength(0);
    expect(await ledger()).toEqual(before);
  });
});
