/**
 * A stop reaching a turn while it is being set up, here while its agent's MCP server takes its
 * time to list its tools. The set-up used to go on to its end (the MCP connect timeout, 5 s by
 * default, minutes for a file download), and the stop, which answers once the stopped turn is
 * stored and the chat released, waited for it up to its 10 s bound. The set-up now gives up at
 * once: the listing's request is closed, the session the server opened ended, and the turn ends
 * as a turn stopped right after its set-up does (spec/chats.md, "Stop").
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { deferred } from '../helpers/deferred.js';
import { giveAgentMcpServer, userText } from './fixtures.js';
import { listeningChatApp } from './listening-app.js';
import { startRawMcpServer } from './raw-mcp-server.js';
import { EventReader } from './sse-reader.js';

let app: Awaited<ReturnType<typeof listeningChatApp>>;
let mcp: Awaited<ReturnType<typeof startRawMcpServer>>;
/** Resolved when the server is asked for its tools; the answer waits for `answer`. */
let listing = deferred();
/** Lets the server answer its listings: only once the tests are done. */
const answer = deferred();
/** Whether `tools/list` is held: not for the turns that open the chats. */
let holding = false;
/** Resolved when a file download starts; downloads never answer, their signals are kept. */
let downloading = deferred();
const downloads: AbortSignal[] = [];

beforeAll(async () => {
  mcp = await startRawMcpServer({
    tools: [{ name: 'lookup', inputSchema: { type: 'object', properties: {} } }],
    session: true,
    hold: (method) => {
      if (method !== 'tools/list' || !holding) return undefined;
      listing.resolve();
      return answer.promise;
    },
  });
  // Far past the stop's bound: the set-up ends with the stop, or not within the test.
  app = await listeningChatApp({
    mcpConnectTimeoutMs: 60_000,
    fileDownloader: (_url, signal) => {
      downloads.push(signal);
      downloading.resolve();
      return new Promise(() => {});
    },
  });
  await giveAgentMcpServer(app.t.db, 'agt_plain', mcp.url);
});
afterAll(async () => {
  answer.resolve();
  await app?.close();
  await mcp?.close();
});
beforeEach(() => {
  holding = false;
  listing = deferred();
  downloading = deferred();
});

interface StoredMessage {
  id: string;
  role: string;
  metadata: { finishReason?: string };
}

/** A chat of `agt_plain` with one turn answered: its id. */
async function openChat(id: string) {
  const opening = await app.post({ agentId: 'agt_plain', id, messages: [userText('first', `${id}-u0`)] });
  expect(opening.status).toBe(200);
  return ((await opening.json()) as { chatId: string }).chatId;
}

/** A chat with one turn answered, whose next turn is then sent and held in its MCP listing. */
async function turnHeldInSetUp(id: string, stream: boolean) {
  const chatId = await openChat(id);
  holding = true;
  const turn = app.post({ agentId: 'agt_plain', chatId, stream, messages: [userText('second', `${id}-u1`)] });
  // Awaited by the test; a test that fails first must not leave it rejecting unhandled.
  turn.catch(() => undefined);
  await listing.promise;
  // The session this turn's client opened, not ended yet (the opening turn's is ended as it is
  // stored, not waited for).
  const session = `raw-${mcp.requests.filter((method) => method === 'initialize').length}`;
  expect(mcp.sessionEnds).not.toContain(session);
  return { chatId, turn, session };
}

async function stop(chatId: string) {
  const response = await fetch(`${app.baseUrl}/v1/chat/${chatId}/stop`, {
    method: 'POST',
    headers: { 'x-service-api-key': app.headers['x-service-api-key'] },
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { data: { stopped: boolean; messageId: string | null } }).data;
}

async function chatState(chatId: string) {
  const [chat, messages] = await Promise.all([
    fetch(`${app.baseUrl}/v1/chats/${chatId}`, { headers: app.headers }),
    fetch(`${app.baseUrl}/v1/chats/${chatId}/messages`, { headers: app.headers }),
  ]);
  expect(chat.status).toBe(200);
  expect(messages.status).toBe(200);
  return {
    active: ((await chat.json()) as { data: { chat: { active: boolean } } }).data.chat.active,
    messages: ((await messages.json()) as { data: { messages: StoredMessage[] } }).data.messages,
  };
}

/** Stops the chat's turn, then reads at once: the chat idle, ending on the user's turn `userId`, no reply. */
async function expectStoppedAfter(chatId: string, userId: string) {
  expect(await stop(chatId)).toEqual({ stopped: true, messageId: expect.any(String) });
  const state = await chatState(chatId);
  expect(state.active).toBe(false);
  expect(state.messages.map((message) => message.id).at(-1)).toBe(userId);
  expect(state.messages).toHaveLength(3);
}

describe('a turn stopped while its MCP server lists its tools', () => {
  it('streamed: the stop answers once the turn has ended; the listing is closed, the session ended', async () => {
    const { chatId, turn, session } = await turnHeldInSetUp('setup-stop-stream', true);
    expect(mcp.openLists).toBeGreaterThan(0);
    const asked = app.upstream.requests.length;

    const stopped = await stop(chatId);
    expect(stopped).toEqual({ stopped: true, messageId: expect.any(String) });
    // Read at once: the chat no longer runs the turn, and holds its user message, no reply (a
    // reply stopped before its first token stores nothing).
    const state = await chatState(chatId);
    expect(state.active).toBe(false);
    expect(state.messages.map((message) => [message.id, message.role])).toEqual([
      ['setup-stop-stream-u0', 'user'],
      [expect.any(String), 'assistant'],
      ['setup-stop-stream-u1', 'user'],
    ]);

    // The turn's own answer: the stream of a stopped reply, ended.
    const response = await turn;
    expect(response.status).toBe(200);
    const events = new EventReader(response);
    const chunks = await events.all();
    expect(events.done).toBe(true);
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', messageMetadata: { finishReason: 'stopped' } });
    expect(chunks.some((chunk) => chunk.type === 'start')).toBe(true);
    expect(chunks.filter((chunk) => chunk.type === 'text-delta')).toEqual([]);
    // The server is not told its listing failed (no warning for a server that did nothing wrong).
    expect(chunks.filter((chunk) => chunk.type === 'data-warnings')).toEqual([]);
    // The provider was never asked.
    expect(app.upstream.requests).toHaveLength(asked);

    // The server saw the held listing's connection closed (it never answered it), and the
    // session ended.
    await expect.poll(() => mcp.openLists).toBe(0);
    await expect.poll(() => mcp.sessionEnds).toContain(session);
  }, 30_000);

  it('JSON: answers 409 conflict with the chat id, its user turn stored', async () => {
    const { chatId, turn, session } = await turnHeldInSetUp('setup-stop-json', false);

    await expectStoppedAfter(chatId, 'setup-stop-json-u1');

    const response = await turn;
    expect(response.status).toBe(409);
    expect(await response.json()).toMatchObject({
      code: 'conflict',
      message: 'The reply was stopped before it was done',
      details: { chatId },
    });
    await expect.poll(() => mcp.sessionEnds).toContain(session);
  }, 30_000);
});

describe('a turn stopped while a file of its is being downloaded for the model', () => {
  it('gives the download up and connects no MCP server: a stopped turn, not a 400 for the file', async () => {
    const chatId = await openChat('setup-stop-file');
    const picture = {
      id: 'setup-stop-file-u1',
      role: 'user',
      parts: [
        { type: 'text', text: 'what is on this picture?' },
        { type: 'file', url: 'https://files.example/picture.png', mediaType: 'image/png' },
      ],
    };
    const turn = app.post({ agentId: 'agt_plain', chatId, stream: true, messages: [picture] });
    turn.catch(() => undefined);
    await downloading.promise;
    const mcpRequests = mcp.requests.length;
    const asked = app.upstream.requests.length;

    await expectStoppedAfter(chatId, 'setup-stop-file-u1');

    const response = await turn;
    expect(response.status).toBe(200);
    const events = new EventReader(response);
    const chunks = await events.all();
    expect(events.done).toBe(true);
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', messageMetadata: { finishReason: 'stopped' } });
    // The download was told to stop (the default downloader's abort closes its connection).
    expect(downloads.at(-1)?.aborted).toBe(true);
    // Nothing more was set up: the agent's MCP server was not asked, nor the provider.
    expect(mcp.requests).toHaveLength(mcpRequests);
    expect(app.upstream.requests).toHaveLength(asked);
  }, 30_000);
});
