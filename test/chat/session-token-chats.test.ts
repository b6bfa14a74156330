import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { engineName, createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatSetup, userText } from './fixtures.js';
import { EventReader, textDeltas } from './sse-reader.js';

/**
 * Session tokens (management.md) on the chat history API: a token acts as a member for its
 * user, and one limited with `agentIds` sees nothing of other agents' chats.
 */
let upstream: FakeUpstream;
let t: TestApp;
let baseUrl: string;

const WORDS = 'one two three four five six';

async function call(method: string, path: string, key: string, body?: unknown) {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: {
      'x-service-api-key': key,
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

async function sessionToken(userId: string, agentIds?: string[]): Promise<string> {
  const res = await call('POST', '/v1/workspace/wsp_main/session-tokens', CHAT_KEYS.main, {
    userId,
    ...(agentIds && { agentIds }),
  });
  expect(res.status).toBe(201);
  return res.body.data.token;
}

async function newChat(key: string, agentId: string): Promise<string> {
  const res = await call('POST', '/v1/chat', key, { agentId, messages: [userText('hi')] });
  expect(res.status).toBe(200);
  return res.body.chatId;
}

const listedIds = async (key: string, query = '') =>
  (await call('GET', `/v1/chats?limit=100${query}`, key)).body.data.chats.map((c: { id: string }) => c.id);

/** A reply held by the fake upstream after two words, so it is running while the test asks. */
async function runningReply(key: string, agentId: string) {
  upstream.enqueue({ kind: 'held', text: WORDS, afterPieces: 2 });
  const response = await fetch(`${baseUrl}/v1/chat`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-service-api-key': key },
    body: JSON.stringify({ stream: true, agentId, messages: [userText('count')] }),
  });
  const chatId = response.headers.get('x-chat-id')!;
  const events = new EventReader(response);
  await events.until(textDeltas(2));
  return { chatId, events };
}

let limited: string; // usr_max, only agt_plain
let maxSession: string; // usr_max, any agent
let oliviaSession: string; // the workspace owner, yet a member through the token
let maxPlain: string;
let maxEcho: string;
let oliviaPlain: string;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  t = await createTestApp({ setup: chatSetup(upstream) });
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
  limited = await sessionToken('usr_max', ['agt_plain']);
  maxSession = await sessionToken('usr_max');
  oliviaSession = await sessionToken('usr_olivia');
  maxPlain = await newChat(CHAT_KEYS.mainMember, 'agt_plain');
  maxEcho = await newChat(CHAT_KEYS.mainMember, 'agt_echo');
  oliviaPlain = await newChat(CHAT_KEYS.main, 'agt_plain');
});
afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

describe(`a session token limited with agentIds, on the chat history API (${engineName})`, () => {
  it('lists only its user’s chats of those agents, also when filtering by another agent', async () => {
    expect(await listedIds(limited)).toEqual([maxPlain]);
    expect(await listedIds(limited, '&agentId=agt_echo')).toEqual([]);
    // Without the limit, the same user sees both of their chats.
    expect((await listedIds(maxSession)).sort()).toEqual([maxPlain, maxEcho].sort());
  });

  it('reads its own agent’s chat', async () => {
    expect((await call('GET', `/v1/chats/${maxPlain}`, limited)).status).toBe(200);
    expect((await call('GET', `/v1/chats/${maxPlain}/messages`, limited)).status).toBe(200);
  });

  it.each([
    ['GET', ''],
    ['GET', '/messages'],
    ['PATCH', ''],
    ['DELETE', ''],
  ])('answers 404 to %s /v1/chats/{id}%s for another agent’s chat', async (method, tail) => {
    const res = await call(
      method,
      `/v1/chats/${maxEcho}${tail}`,
      limited,
      method === 'PATCH' ? { title: 'taken' } : undefined,
    );
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ code: 'not_found', message: 'Chat not found', details: {} });
    // Still there, untouched.
    const seen = await call('GET', `/v1/chats/${maxEcho}`, CHAT_KEYS.mainMember);
    expect(seen.body.data.chat.title).not.toBe('taken');
  });

  it('cannot continue another agent’s chat: 404, not the 400 that would tell it exists', async () => {
    const echoChat = await newChat(CHAT_KEYS.mainMember, 'agt_echo');
    const res = await call('POST', '/v1/chat', limited, {
      agentId: 'agt_plain',
      chatId: echoChat,
      messages: [userText('more')],
    });
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('not_found');
  });

  it('cannot stop or resume a reply running in another agent’s chat', async () => {
    const { chatId, events } = await runningReply(CHAT_KEYS.mainMember, 'agt_helper');
    try {
      const stop = await call('POST', `/v1/chat/${chatId}/stop`, limited);
      expect(stop.status).toBe(404);
      expect(stop.body.code).toBe('not_found');
      const resume = await call('GET', `/v1/chat/${chatId}/stream`, limited);
      expect(resume.status).toBe(404);
      expect(resume.body.code).toBe('not_found');
      // The reply goes on: the refused stop did nothing.
      const seen = await call('GET', `/v1/chats/${chatId}`, CHAT_KEYS.mainMember);
      expect(seen.body.data.chat.active).toBe(true);
    } finally {
      upstream.release();
    }
    await events.all();
    expect(events.text()).toBe(WORDS);
  });

  it('stops and resumes a reply of its own agent', async () => {
    const { chatId, events } = await runningReply(limited, 'agt_plain');
    try {
      const resumed = await fetch(`${baseUrl}/v1/chat/${chatId}/stream`, {
        headers: { 'x-service-api-key': limited },
      });
      expect(resumed.status).toBe(200);
      await resumed.body?.cancel();
      const stop = await call('POST', `/v1/chat/${chatId}/stop`, limited);
      expect(stop.status).toBe(200);
      expect(stop.body.data.stopped).toBe(true);
    } finally {
      upstream.release();
    }
    await events.all();
  });
});

describe(`a session token on the chat history API: the member rule (${engineName})`, () => {
  it('sees only its own user’s chats, even for the workspace owner', async () => {
    const ownerSees = await listedIds(CHAT_KEYS.main);
    expect(ownerSees).toEqual(expect.arrayContaining([maxPlain, maxEcho, oliviaPlain]));
    const tokenSees = await listedIds(oliviaSession);
    expect(tokenSees).toContain(oliviaPlain);
    expect(tokenSees).not.toContain(maxPlain);
    expect(tokenSees).not.toContain(maxEcho);
    expect((await call('GET', `/v1/chats/${maxPlain}`, oliviaSession)).status).toBe(404);
    expect((await call('GET', `/v1/chats/${oliviaPlain}`, limited)).status).toBe(404);
    expect(await listedIds(limited)).not.toContain(oliviaPlain);
  });
});

describe(`a session token on the OpenAI-compatible door (${engineName})`, () => {
  it.each([
    ['GET', '/v1/openai/models', undefined],
    ['GET', '/v1/openai/models/agt_plain', undefined],
    [
      'POST',
      '/v1/openai/chat/completions',
      { model: 'agt_plain', messages: [{ role: 'user', content: 'hi' }] },
    ],
  ])('answers %s %s with 401 in OpenAI’s error shape', async (method, path, body) => {
    for (const token of [limited, maxSession]) {
      const res = await fetch(`${baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body && { 'content-type': 'application/json' }),
        },
        ...(body && { body: JSON.stringify(body) }),
      });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({
        error: {
          message: expect.stringContaining('session token'),
          type: 'invalid_request_error',
          param: null,
          code: 'unauthorized',
        },
      });
    }
  });
});
