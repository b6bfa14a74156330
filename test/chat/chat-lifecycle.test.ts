import { Writable } from 'node:stream';
import { DefaultChatTransport, readUIMessageStream, type UIMessage } from 'ai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatRows, chatSetup, userText } from './fixtures.js';
import { EventReader, textDeltas } from './sse-reader.js';

let upstream: FakeUpstream;
let t: TestApp;
let baseUrl: string;
const logLines: Array<Record<string, unknown>> = [];

beforeAll(async () => {
  upstream = await startFakeUpstream();
  const logStream = new Writable({
    write(chunk, _encoding, callback) {
      for (const line of String(chunk).split('\n').filter(Boolean)) logLines.push(JSON.parse(line));
      callback();
    },
  });
  t = await createTestApp({ setup: chatSetup(upstream), logger: { level: 'info', stream: logStream } });
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await t.close();
  await upstream.close();
});
beforeEach(() => {
  upstream.requests.length = 0;
});

const headers = { 'content-type': 'application/json', 'x-service-api-key': CHAT_KEYS.main };
const WORDS = 'one two three four five six seven eight';

function post(body: Record<string, unknown>, signal?: AbortSignal) {
  return fetch(`${baseUrl}/v1/chat`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ stream: true, ...body }),
    signal,
  });
}

async function storedReply(chatId: string) {
  const rows = await chatRows(t.db, chatId);
  return rows.filter((row) => row.role === 'assistant');
}

describe('stop', () => {
  it('aborts the provider call; the stored reply ends where the client saw it; the stream finishes', async () => {
    const abortedBefore = upstream.aborted();
    upstream.enqueue({ kind: 'held', text: WORDS, afterPieces: 3 });
    const response = await post({ agentId: 'agt_plain', messages: [userText('count')] });
    const chatId = response.headers.get('x-chat-id')!;
    const events = new EventReader(response);
    await events.until(textDeltas(3));
    // The chat is visible as active while its reply runs.
    const during = await fetch(`${baseUrl}/v1/chats/${chatId}`, { headers });
    expect((await during.json()).data.chat.active).toBe(true);
    const listed = await fetch(`${baseUrl}/v1/chats`, { headers });
    const listedChats = (await listed.json()).data.chats as Array<{ id: string; active: boolean }>;
    expect(listedChats.find((chat) => chat.id === chatId)?.active).toBe(true);
    expect(listedChats.filter((chat) => chat.id !== chatId).every((chat) => !chat.active)).toBe(true);

    const stop = await fetch(`${baseUrl}/v1/chat/${chatId}/stop`, {
      method: 'POST',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    const stopped = (await stop.json()).data;
    expect(stopped.stopped).toBe(true);
    await events.all();
    expect(events.chunks.at(-1)).toMatchObject({
      type: 'finish',
      messageMetadata: { finishReason: 'stopped' },
    });
    expect(events.done).toBe(true);
    await upstream.waitForAborted(abortedBefore + 1);

    const [reply] = await storedReply(chatId);
    expect(reply).toBeDefined();
    expect(reply!.id).toBe(stopped.messageId);
    expect(reply!.finish_reason).toBe('stopped');
    expect(JSON.parse(reply!.parts).filter((p: { type: string }) => p.type === 'text')[0].text).toBe(
      events.text(),
    );
    expect(events.text()).toBe('one two three ');

    const again = await fetch(`${baseUrl}/v1/chat/${chatId}/stop`, {
      method: 'POST',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    expect((await again.json()).data).toEqual({ stopped: false, messageId: null });
    upstream.release();
  });

  it('answers 404 for a chat the key cannot see', async () => {
    const res = await fetch(`${baseUrl}/v1/chat/cht_nope/stop`, {
      method: 'POST',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    expect(res.status).toBe(404);
  });
});

describe('resume', () => {
  it('goes on after the client disconnects; GET /stream replays from start; 204 once done', async () => {
    upstream.enqueue({ kind: 'held', text: WORDS, afterPieces: 2 });
    const abort = new AbortController();
    const response = await post(
      { agentId: 'agt_plain', id: 'resume-chat', messages: [userText('go')] },
      abort.signal,
    );
    const chatId = response.headers.get('x-chat-id')!;
    const first = new EventReader(response);
    await first.until(textDeltas(2));
    abort.abort();

    // The client id works too: useChat builds the resume URL from its own id.
    const resumed = await fetch(`${baseUrl}/v1/chat/resume-chat/stream`, {
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    expect(resumed.status).toBe(200);
    expect(resumed.headers.get('content-type')).toBe('text/event-stream');
    expect(resumed.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    expect(resumed.headers.get('x-chat-id')).toBe(chatId);
    const replay = new EventReader(resumed);
    await replay.until(textDeltas(2));
    expect(replay.chunks[0]).toMatchObject({ type: 'start', messageMetadata: { chatId } });
    upstream.release();
    await replay.all();
    expect(replay.done).toBe(true);
    expect(replay.text()).toBe(WORDS);
    expect(replay.chunks.at(-1)?.type).toBe('finish');

    const [reply] = await storedReply(chatId);
    expect(reply?.finish_reason).toBe('stop');
    const after = await fetch(`${baseUrl}/v1/chat/${chatId}/stream`, {
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    expect(after.status).toBe(204);
    expect(await after.text()).toBe('');
  });

  it('answers HEAD with the headers of the replay, at once, without holding a replay open', async () => {
    upstream.enqueue({ kind: 'held', text: WORDS, afterPieces: 1 });
    const response = await post({ agentId: 'agt_plain', id: 'head-chat', messages: [userText('go')] });
    const events = new EventReader(response);
    await events.until(textDeltas(1));
    // While the reply runs (it used to answer only when the reply had ended).
    const head = await t.app.inject({
      method: 'HEAD',
      url: '/v1/chat/head-chat/stream',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    expect(head.statusCode).toBe(200);
    expect(head.headers['content-type']).toBe('text/event-stream');
    expect(head.headers['x-chat-id']).toBe(response.headers.get('x-chat-id'));
    expect(head.body).toBe('');
    upstream.release();
    await events.all();
    await t.app.persistence.idle();
    const after = await t.app.inject({
      method: 'HEAD',
      url: '/v1/chat/head-chat/stream',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    expect(after.statusCode).toBe(204);
  });

  it('works with the AI SDK client: DefaultChatTransport.reconnectToStream', async () => {
    upstream.enqueue({ kind: 'held', text: WORDS, afterPieces: 1 });
    const response = await post({ agentId: 'agt_plain', id: 'transport-chat', messages: [userText('go')] });
    const events = new EventReader(response);
    await events.until(textDeltas(1));
    const transport = new DefaultChatTransport<UIMessage>({
      api: `${baseUrl}/v1/chat`,
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    const stream = await transport.reconnectToStream({ chatId: 'transport-chat' });
    expect(stream).not.toBeNull();
    upstream.release();
    let last: UIMessage | undefined;
    for await (const message of readUIMessageStream({ stream: stream! })) last = message;
    expect(last?.parts.find((p) => p.type === 'text')).toMatchObject({ text: WORDS });
    await events.all();
    expect(await transport.reconnectToStream({ chatId: 'transport-chat' })).toBeNull();
  });
});

describe('delete during a reply', () => {
  it('stops the reply and leaves nothing of the chat behind', async () => {
    upstream.enqueue({ kind: 'held', text: WORDS, afterPieces: 2 });
    const response = await post({ agentId: 'agt_plain', messages: [userText('bye')] });
    const chatId = response.headers.get('x-chat-id')!;
    const events = new EventReader(response);
    await events.until(textDeltas(2));
    const del = await fetch(`${baseUrl}/v1/chats/${chatId}`, {
      method: 'DELETE',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    expect(del.status).toBe(200);
    await events.all();
    // A stop, as spec/chats.md has a DELETE stop the reply: `finish` and `[DONE]`, nothing stored.
    expect(events.chunks.at(-1)).toMatchObject({
      type: 'finish',
      messageMetadata: { finishReason: 'stopped' },
    });
    expect(events.done).toBe(true);
    await t.app.inject({ method: 'GET', url: '/healthz' });
    expect(await chatRows(t.db, chatId)).toEqual([]);
    expect(await t.db.selectFrom('chats').select('id').where('id', '=', chatId).execute()).toEqual([]);
    upstream.release();
  });

  /** A JSON reply held by the upstream, on a new chat of client id `id`. */
  async function heldJsonReply(id: string) {
    upstream.enqueue({ kind: 'stall' });
    const pending = post({ stream: false, agentId: 'agt_plain', id, messages: [userText('bye')] });
    await upstream.waitForRequests(1);
    return { pending };
  }

  it('answers a JSON reply whose chat is deleted while it runs with 404 not_found, naming no chat', async () => {
    const { pending } = await heldJsonReply('deleted-json');
    const del = await fetch(`${baseUrl}/v1/chats/deleted-json`, {
      method: 'DELETE',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    expect(del.status).toBe(200);
    const res = await pending;
    // It was a 409 `conflict` with `details.chatId` of the deleted chat: a client retrying on that
    // chat got 404. The answer is the one any later request about the chat gets.
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({
      code: 'not_found',
      message: 'Chat not found: it was deleted while this reply was being generated',
      details: {},
    });
    const later = await fetch(`${baseUrl}/v1/chats/deleted-json`, { headers });
    expect(later.status).toBe(404);
  });

  it('still answers a JSON reply stopped (its chat kept) with 409 naming the chat, which goes on', async () => {
    const { pending } = await heldJsonReply('stopped-json');
    const stop = await fetch(`${baseUrl}/v1/chat/stopped-json/stop`, {
      method: 'POST',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    expect((await stop.json()).data.stopped).toBe(true);
    const res = await pending;
    expect(res.status).toBe(409);
    const { code, details } = await res.json();
    expect(code).toBe('conflict');
    const retry = await post({
      stream: false,
      agentId: 'agt_plain',
      chatId: details.chatId,
      messages: [userText('again')],
    });
    expect(retry.status).toBe(200);
  });
});

describe('what a reply cut short is charged', () => {
  const limited = { 'content-type': 'application/json', 'x-service-api-key': CHAT_KEYS.limited };
  // 40 words of 5 characters; the client reads 30 of them before the reply is cut short.
  const LONG_REPLY = 'word '.repeat(40);
  const LONG_PROMPT = 'x'.repeat(2000);

  beforeEach(async () => {
    await t.db.deleteFrom('usage_ledger').where('workspace_id', '=', 'wsp_limited').execute();
    await t.db.deleteFrom('usage_daily').where('workspace_id', '=', 'wsp_limited').execute();
  });

  async function startLimitedReply() {
    upstream.enqueue({ kind: 'held', text: LONG_REPLY, afterPieces: 30 });
    const response = await fetch(`${baseUrl}/v1/chat`, {
      method: 'POST',
      headers: limited,
      body: JSON.stringify({ stream: true, agentId: 'agt_limited', messages: [userText(LONG_PROMPT)] }),
    });
    expect(response.status).toBe(200);
    const events = new EventReader(response);
    await events.until(textDeltas(30));
    return { chatId: response.headers.get('x-chat-id')!, events };
  }

  async function limitedLedger() {
    const row = await t.db
      .selectFrom('usage_ledger')
      .selectAll()
      .where('workspace_id', '=', 'wsp_limited')
      .executeTakeFirst();
    return {
      inputTokens: Number(row?.input_tokens ?? 0),
      outputTokens: Number(row?.output_tokens ?? 0),
      costUsd: Number(row?.cost_usd ?? 0),
    };
  }

  async function expectNextRequestRefused() {
    const next = await fetch(`${baseUrl}/v1/chat`, {
      method: 'POST',
      headers: limited,
      body: JSON.stringify({ agentId: 'agt_limited', messages: [userText('more')] }),
    });
    expect(next.status).toBe(402);
    expect((await next.json()).code).toBe('usage_limit_exceeded');
  }

  it('charges a stopped reply its prompt and the output streamed, estimated; the limit then refuses', async () => {
    const { chatId, events } = await startLimitedReply();
    const stop = await fetch(`${baseUrl}/v1/chat/${chatId}/stop`, {
      method: 'POST',
      headers: { 'x-service-api-key': CHAT_KEYS.limited },
    });
    expect((await stop.json()).data.stopped).toBe(true);
    await events.all();
    upstream.release();
    expect(events.text()).toBe('word '.repeat(30));

    const [reply] = await storedReply(chatId);
    expect(reply?.finish_reason).toBe('stopped');
    // The prompt (2,000 characters and its JSON) at about four characters a token, and the 150
    // characters streamed; priced as fake-small (1 and 2 USD per million tokens).
    expect(reply!.input_tokens).toBeGreaterThanOrEqual(500);
    expect(reply!.output_tokens).toBe(Math.ceil(150 / 4));
    expect(reply!.cost_usd).toBeCloseTo((reply!.input_tokens + 2 * reply!.output_tokens) / 1e6, 12);
    expect(await limitedLedger()).toEqual({
      inputTokens: reply!.input_tokens,
      outputTokens: reply!.output_tokens,
      costUsd: expect.closeTo(reply!.cost_usd, 12),
    });
    const report = await fetch(`${baseUrl}/v1/workspace/wsp_limited/usage`, {
      headers: { 'x-service-api-key': CHAT_KEYS.limited },
    });
    expect((await report.json()).data).toMatchObject({
      inputTokens: reply!.input_tokens,
      outputTokens: reply!.output_tokens,
      requests: 1,
    });
    await expectNextRequestRefused();
  });

  it('charges a stopped reply an image in its prompt at the bounded estimate, not by its size', async () => {
    // About 1 MB of image: some 330,000 tokens if its base64 text were counted.
    const image = `data:image/png;base64,${Buffer.alloc(1_000_000, 7).toString('base64')}`;
    upstream.enqueue({ kind: 'held', text: LONG_REPLY, afterPieces: 3 });
    const response = await post({
      agentId: 'agt_plain',
      messages: [
        {
          role: 'user',
          parts: [
            { type: 'text', text: 'What is in this picture?' },
            { type: 'file', url: image, mediaType: 'image/png' },
          ],
        },
      ],
    });
    const chatId = response.headers.get('x-chat-id')!;
    const events = new EventReader(response);
    await events.until(textDeltas(3));
    const stop = await fetch(`${baseUrl}/v1/chat/${chatId}/stop`, { method: 'POST', headers });
    expect((await stop.json()).data.stopped).toBe(true);
    await events.all();
    upstream.release();

    const [reply] = await storedReply(chatId);
    expect(reply?.finish_reason).toBe('stopped');
    // 1,600 tokens for the image (usage-estimate.ts), a few for the text and the JSON around it.
    expect(reply!.input_tokens).toBeGreaterThanOrEqual(1600);
    expect(reply!.input_tokens).toBeLessThan(1600 + 200);
  });

  it('charges a reply whose chat is deleted while it runs, though no message keeps it', async () => {
    const { chatId, events } = await startLimitedReply();
    const del = await fetch(`${baseUrl}/v1/chats/${chatId}`, {
      method: 'DELETE',
      headers: { 'x-service-api-key': CHAT_KEYS.limited },
    });
    expect(del.status).toBe(200);
    await events.all();
    upstream.release();
    await t.app.inject({ method: 'GET', url: '/healthz' });

    const ledger = await limitedLedger();
    expect(ledger.inputTokens).toBeGreaterThanOrEqual(500);
    expect(ledger.outputTokens).toBe(Math.ceil(150 / 4));
    const report = await fetch(`${baseUrl}/v1/workspace/wsp_limited/usage`, {
      headers: { 'x-service-api-key': CHAT_KEYS.limited },
    });
    expect((await report.json()).data).toMatchObject({
      inputTokens: ledger.inputTokens,
      outputTokens: ledger.outputTokens,
    });
    await expectNextRequestRefused();
  });
});

describe('the chat exists from the first byte', () => {
  it('stores the chat and the user message before the model answers', async () => {
    upstream.enqueue({ kind: 'held', text: WORDS, afterPieces: 1 });
    const response = await post({ agentId: 'agt_plain', messages: [userText('early', 'early-1')] });
    const chatId = response.headers.get('x-chat-id')!;
    const events = new EventReader(response);
    await events.until(textDeltas(1));
    const messages = await fetch(`${baseUrl}/v1/chats/${chatId}/messages`, { headers });
    expect((await messages.json()).data.messages.map((m: { id: string }) => m.id)).toEqual(['early-1']);
    upstream.release();
    await events.all();
  });
});

describe('failures a streaming client must see', () => {
  it('sends an error chunk (not finish) and logs with the request id when the reply cannot be stored', async () => {
    upstream.enqueue({ kind: 'held', text: WORDS, afterPieces: 1 });
    const response = await post({ agentId: 'agt_plain', messages: [userText('store me')] });
    const requestId = response.headers.get('x-request-id');
    const chatId = response.headers.get('x-chat-id')!;
    const events = new EventReader(response);
    await events.until(textDeltas(1));
    // Injected failure: the usage ledger cannot be written, so the reply's transaction fails.
    await t.db.schema.alterTable('usage_ledger').renameTo('usage_ledger_away').execute();
    try {
      upstream.release();
      await events.all();
    } finally {
      await t.db.schema.alterTable('usage_ledger_away').renameTo('usage_ledger').execute();
    }
    expect(events.chunks.map((c) => c.type)).not.toContain('finish');
    expect(events.chunks.at(-1)).toEqual({ type: 'error', errorText: 'The reply could not be stored' });
    expect(await storedReply(chatId)).toEqual([]);
    // The user's turn stays whole: stored once, before the model call.
    expect((await chatRows(t.db, chatId)).map((r) => r.role)).toEqual(['user']);
    const line = logLines.find((l) => l.msg === 'storing the reply failed');
    expect(line).toMatchObject({ level: 50, reqId: requestId, chatId });
  });
});

describe('regenerate or edit while a reply of the chat is still running', () => {
  // Its user turn is stored and its reply is not yet: regenerating looked like answering an
  // unanswered turn, and stored a second answer to it beside the running one. An edit of an
  // earlier user message (useChat's submit-message with that message's id) is refused alike:
  // the running reply, stored when it ends, would read as the answer to the edited message.
  type Second = (id: string, startId: string) => Record<string, unknown>;
  const seconds: Array<[string, Second]> = [
    [
      "a regenerate naming the running reply's start id",
      (id, startId) => ({
        trigger: 'regenerate-message',
        messageId: startId,
        messages: [userText('first', `${id}-u1`), userText('second', `${id}-u2`)],
      }),
    ],
    [
      'a regenerate without messageId',
      (id) => ({
        trigger: 'regenerate-message',
        messages: [userText('first', `${id}-u1`), userText('second', `${id}-u2`)],
      }),
    ],
    [
      'an edit of the first user message',
      (id) => ({
        trigger: 'submit-message',
        messageId: `${id}-u1`,
        messages: [userText('first, edited', `${id}-u1`)],
      }),
    ],
  ];
  it.each(seconds)('%s is refused with 409 and changes nothing', async (name, second) => {
    const id = `running-${name.replace(/[^A-Za-z0-9]+/g, '-')}`;
    await new EventReader(
      await post({ agentId: 'agt_plain', id, messages: [userText('first', `${id}-u1`)] }),
    ).all();
    upstream.enqueue({ kind: 'held', text: 'one two three four', afterPieces: 1 });
    const running = await post({ agentId: 'agt_plain', id, messages: [userText('second', `${id}-u2`)] });
    const chatId = running.headers.get('x-chat-id')!;
    const events = new EventReader(running);
    await events.until(textDeltas(1));
    const start = events.chunks.find((c) => c.type === 'start') as { messageId: string };
    const refused = await post({ agentId: 'agt_plain', id, ...second(id, start.messageId) });
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({ code: 'conflict', details: { chatId } });
    upstream.release();
    await events.all();
    await t.app.persistence.idle();
    const rows = await chatRows(t.db, chatId);
    expect(rows.map((r) => r.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(rows[0]!.parts).toContain('"first"');
    expect(rows[0]!.parts).not.toContain('edited');
  });
});
