/**
 * A chat deleted (DELETE /v1/chats/{id}, another tab) while a turn on it is being set up (here:
 * its agent's MCP server connecting). The turn's messages are then inserted for a chat that no
 * longer exists: the foreign key refuses them and the client gets a 500 for what is a 404.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatRows, chatSetup, postChat, userText } from './fixtures.js';
import { startRawMcpServer } from './raw-mcp-server.js';
import { deferred } from '../helpers/deferred.js';

const connecting = deferred(); // the turn reached its MCP connect (its chat was found by then)
const release = deferred();

let upstream: FakeUpstream;
let t: TestApp;
let mcp: Awaited<ReturnType<typeof startRawMcpServer>>;
beforeAll(async () => {
  upstream = await startFakeUpstream();
  mcp = await startRawMcpServer({
    tools: [{ name: 'lookup', inputSchema: { type: 'object', properties: {} } }],
    gate: async () => {
      connecting.resolve();
      await release.promise;
    },
  });
  t = await createTestApp({ setup: chatSetup(upstream), mcpConnectTimeoutMs: 10_000 });
});
afterAll(async () => {
  release.resolve();
  await t.close();
  await upstream.close();
  await mcp.close();
});

describe('a chat deleted while a turn on it is being set up', () => {
  it('answers 404 not_found and stores nothing, not a 500', async () => {
    const opening = await postChat(t, { agentId: 'agt_plain', messages: [userText('u0', 'u0')] });
    expect(opening.statusCode).toBe(200);
    const chatId = opening.json().chatId as string;
    await t.db
      .updateTable('agents')
      .set({ tools: JSON.stringify([{ type: 'mcp', name: 'srv', url: mcp.url }]) })
      .where('id', '=', 'agt_plain')
      .execute();

    const turn = postChat(t, { agentId: 'agt_plain', chatId, messages: [userText('u1', 'u1')] });
    await connecting.promise;
    const deleted = await t.app.inject({
      method: 'DELETE',
      url: `/v1/chats/${chatId}`,
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    expect(deleted.statusCode).toBe(200);
    release.resolve();

    const res = await turn;
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ code: 'not_found' });
    expect(await chatRows(t.db, chatId)).toHaveLength(0);
  });
});
