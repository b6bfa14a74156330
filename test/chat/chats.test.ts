import { DefaultChatTransport, readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';
import { beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { commitOnOtherConnection, createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream } from '../helpers/fake-upstream.js';
import * as messages from '../../src/db/repositories/messages.js';
import { storeReply } from '../../src/services/chat-persist.js';
import { CHAT_KEYS, chatRows, chatSetup, postChat, useChatApp, userText } from './fixtures.js';
import { NodeChat } from './node-chat.js';

let upstream: FakeUpstream;
let t: TestApp;

useChatApp((app) => ({ upstream, t } = app));
beforeEach(() => {
  upstream.requests.length = 0;
});

function chat(body: Record<string, unknown>, key: string = CHAT_KEYS.main) {
  return t.app.inject({
    method: 'POST',
    url: '/v1/chat',
    headers: { 'x-service-api-key': key },
    payload: body,
  });
}

function get(url: string, key: string = CHAT_KEYS.main, headers: Record<string, string> = {}) {
  return t.app.inject({ method: 'GET', url, headers: { 'x-service-api-key': key, ...headers } });
}

function assistantText(text: string, id: string) {
  return { id, role: 'assistant' as const, parts: [{ type: 'text', text }] };
}

/** useChat's own transport on the test app, so the bodies are exactly what useChat posts. */
function chatTransport(agentId: string) {
  return new DefaultChatTransport<UIMessage>({
    api: 'http://atrium.test/v1/chat',
    headers: { 'x-service-api-key': CHAT_KEYS.main },
    body: { agentId, stream: true },
    fetch: (async (input: string | URL, init?: RequestInit) => {
      const res = await t.app.inject({
        method: 'POST',
        url: new URL(String(input)).pathname,
        headers: init?.headers as Record<string, string>,
        payload: init?.body as string,
      });
      const headers = Object.entries(res.headers).map(([name, value]) => [name, String(value)]);
      return new Response(new Uint8Array(res.rawPayload), {
        status: res.statusCode,
        headers: headers as [string, string][],
      });
    }) as typeof fetch,
  });
}

describe('the client chat id (useChat sends its own id and the whole history)', () => {
  it('keeps three turns in one chat, found by its clientId', async () => {
    const history: Array<Record<string, unknown>> = [];
    let chatId = '';
    for (const [i, text] of ['one', 'two', 'three'].entries()) {
      history.push(userText(text, `u${i}`));
      const res = await chat({ agentId: 'agt_plain', id: 'useChat-abc_1', messages: history });
      expect(res.statusCode).toBe(200);
      chatId ||= res.json().chatId;
      expect(res.json().chatId).toBe(chatId);
      history.push(assistantText(res.json().text, res.json().messageId));
    }
    const listed = await get('/v1/chats?limit=100');
    expect(
      listed.json().data.chats.filter((c: { clientId: string }) => c.clientId === 'useChat-abc_1'),
    ).toHaveLength(1);
    const byClientId = await get('/v1/chats/useChat-abc_1');
    expect(byClientId.statusCode).toBe(200);
    expect(byClientId.json().data.chat).toMatchObject({
      id: chatId,
      clientId: 'useChat-abc_1',
      messageCount: 6,
      active: false,
      createdBy: 'usr_olivia',
      agentId: 'agt_plain',
    });
    expect(upstream.lastRequest().body.messages).toHaveLength(5);
  });

  it('refuses an id outside 1–128 of A–Z a–z 0–9 _ - with 400', async () => {
    for (const id of ['has space', 'x'.repeat(129), 'dot.dot']) {
      const res = await chat({ agentId: 'agt_plain', id, messages: [userText('hi')] });
      expect(res.statusCode).toBe(400);
      expect(res.json().details.issues[0].path).toBe('body.id');
    }
  });

  it('answers 404 for the clientId of a chat the key cannot see, and reaches no other tenant', async () => {
    const owner = await chat({ agentId: 'agt_plain', id: 'shared-id-1', messages: [userText('mine')] });
    expect(owner.statusCode).toBe(200);
    const member = await chat(
      { agentId: 'agt_plain', id: 'shared-id-1', messages: [userText('yours?')] },
      CHAT_KEYS.mainMember,
    );
    expect(member.statusCode).toBe(404);
    const other = await chat(
      { agentId: 'agt_other', id: 'shared-id-1', messages: [userText('elsewhere')] },
      CHAT_KEYS.other,
    );
    expect(other.statusCode).toBe(200);
    expect(other.json().chatId).not.toBe(owner.json().chatId);
    const rows = await t.db
      .selectFrom('chats')
      .select(['id', 'workspace_id'])
      .where('client_id', '=', 'shared-id-1')
      .execute();
    expect(rows.map((r) => r.workspace_id).sort()).toEqual(['wsp_main', 'wsp_other']);
  });

  it('prefers chatId when both are sent', async () => {
    const first = await chat({ agentId: 'agt_plain', messages: [userText('a')] });
    const res = await chat({
      agentId: 'agt_plain',
      chatId: first.json().chatId,
      id: 'ignored-id',
      messages: [userText('b')],
    });
    expect(res.json().chatId).toBe(first.json().chatId);
    expect(await get('/v1/chats/ignored-id').then((r) => r.statusCode)).toBe(404);
  });

  it('creates one chat for concurrent first requests with the same id', async () => {
    const results = await Promise.all(
      [0, 1, 2, 3].map((i) =>
        chat({ agentId: 'agt_plain', id: 'racing-id', messages: [userText(`hi ${i}`, `r${i}`)] }),
      ),
    );
    expect(results.map((r) => r.statusCode)).toEqual([200, 200, 200, 200]);
    expect(new Set(results.map((r) => r.json().chatId)).size).toBe(1);
    expect(await chatRows(t.db, results[0]!.json().chatId)).toHaveLength(8);
  });
});

describe('leftovers and the turn stored first', () => {
  it('ignores an assistant message with no parts (a failed reply) and goes on', async () => {
    upstream.enqueue({ kind: 'fail', status: 500 });
    const failed = await chat({
      agentId: 'agt_plain',
      id: 'leftover-chat',
      messages: [userText('q1', 'l1')],
    });
    expect(failed.statusCode).toBe(502);
    // The user's turn was stored before the model call.
    expect(
      (await get('/v1/chats/leftover-chat/messages')).json().data.messages.map((m: { id: string }) => m.id),
    ).toEqual(['l1']);
    const next = await chat({
      agentId: 'agt_plain',
      id: 'leftover-chat',
      messages: [userText('q1', 'l1'), { id: 'empty-a', role: 'assistant', parts: [] }, userText('q2', 'l2')],
    });
    expect(next.statusCode).toBe(200);
    expect(upstream.lastRequest().body.messages).toEqual([
      { role: 'user', content: 'q1' },
      { role: 'user', content: 'q2' },
    ]);
  });

  it('ignores what a client holds of a reply that failed before its first token in a chat with tool warnings: only the parts the service added', async () => {
    const transport = chatTransport('agt_tools');
    const message = (id: string, text: string): UIMessage => ({
      id,
      role: 'user',
      parts: [{ type: 'text', text }],
    });
    const send = (messages: UIMessage[]) =>
      transport.sendMessages({
        chatId: 'warned-leftover',
        messages,
        trigger: 'submit-message',
        messageId: undefined,
        abortSignal: undefined,
      });
    upstream.enqueue({ kind: 'fail', status: 500 });
    // What useChat holds of the failed reply: the message its chunks built, error and all.
    let held: UIMessage | undefined;
    for await (const snapshot of readUIMessageStream({
      stream: await send([message('w1', 'q1')]),
      onError: () => undefined,
    }))
      held = snapshot;
    expect(held?.parts.map((part) => part.type)).toEqual(['data-warnings']);

    const next = await send([message('w1', 'q1'), held!, message('w2', 'q2')]);
    for await (const _ of readUIMessageStream({ stream: next, terminateOnError: true }));
    expect(upstream.lastRequest().body.messages).toEqual([
      { role: 'user', content: 'q1' },
      { role: 'user', content: 'q2' },
    ]);
    const stored = (await get('/v1/chats/warned-leftover/messages')).json().data.messages as UIMessage[];
    expect(stored.map((m) => m.id)).toEqual(['w1', 'w2', expect.any(String)]);
    expect(stored.map((m) => m.id)).not.toContain(held!.id);
    expect(stored.at(-1)!.parts.map((part) => part.type)).toEqual(['data-warnings', 'step-start', 'text']);
  });

  it("counts a new chat's first turn in its row: messageCount and lastMessageAt before any reply is stored", async () => {
    upstream.enqueue({ kind: 'fail', status: 500 });
    const failed = await chat({
      agentId: 'agt_plain',
      id: 'first-turn-counted',
      messages: [userText('q1', 'f1'), userText('q2', 'f2')],
    });
    expect(failed.statusCode).toBe(502);
    const row = await t.db
      .selectFrom('chats')
      .selectAll()
      .where('client_id', '=', 'first-turn-counted')
      .executeTakeFirstOrThrow();
    const turn = await chatRows(t.db, row.id);
    expect(turn.map((message) => [message.id, message.position])).toEqual([
      ['f1', 0],
      ['f2', 1],
    ]);
    // The failed reply stored no message: the count and the last message's time are the turn's.
    expect(row).toMatchObject({ message_count: 2, last_message_at: row.created_at, spend_usd: 0 });
    expect(turn[1]!.created_at).toBe(row.created_at);
  });

  it('still refuses a user message with no parts', async () => {
    const res = await chat({ agentId: 'agt_plain', messages: [{ role: 'user', parts: [] }] });
    expect(res.statusCode).toBe(400);
    expect(res.json().details.issues[0].path).toBe('body.messages.0.parts');
  });
});

describe("editing a user message (useChat's sendMessage({ text, messageId }))", () => {
  const texts = (messages: UIMessage[]) =>
    messages.map((m) => [
      m.id,
      m.role,
      m.parts.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join(''),
    ]);

  it('replaces that message and every message after it; the model sees the history before it and the edit', async () => {
    const chat = new NodeChat({ id: 'edited-chat', transport: chatTransport('agt_plain') });
    upstream.enqueue(
      { kind: 'text', text: 'A1' },
      { kind: 'text', text: 'A2' },
      { kind: 'text', text: 'A3' },
    );
    await chat.sendMessage({ text: 'first' });
    await chat.sendMessage({ text: 'second' });
    await chat.sendMessage({ text: 'third' });
    const second = chat.messages[2]!;
    upstream.enqueue({ kind: 'text', text: 'A2, edited' });
    await chat.sendMessage({ text: 'second, edited', messageId: second.id });
    expect(chat.status).toBe('ready');
    expect(upstream.lastRequest().body.messages).toEqual([
      { role: 'user', content: 'first' },
      { role: 'assistant', content: 'A1' },
      { role: 'user', content: 'second, edited' },
    ]);
    // What a reload shows is what the page showed.
    const stored = (await get('/v1/chats/edited-chat/messages')).json().data.messages as UIMessage[];
    expect(texts(stored)).toEqual(texts(chat.messages));
    expect(texts(stored).map(([, , text]) => text)).toEqual(['first', 'A1', 'second, edited', 'A2, edited']);
    expect((await get('/v1/chats/edited-chat')).json().data.chat.messageCount).toBe(4);
  });

  it('keeps the edit when the reply to it fails, as the page does', async () => {
    const chat = new NodeChat({ id: 'edited-failed', transport: chatTransport('agt_plain') });
    upstream.enqueue({ kind: 'text', text: 'A1' });
    await chat.sendMessage({ text: 'first' });
    upstream.enqueue({ kind: 'fail', status: 500 });
    await chat.sendMessage({ text: 'first, edited', messageId: chat.messages[0]!.id });
    expect(chat.status).toBe('error');
    const stored = (await get('/v1/chats/edited-failed/messages')).json().data.messages as UIMessage[];
    expect(texts(stored)).toEqual([[chat.messages[0]!.id, 'user', 'first, edited']]);
    expect((await get('/v1/chats/edited-failed')).json().data.chat.messageCount).toBe(1);
  });

  it('stores the reply to an edit that fails after some text, with finishReason error, as the page shows it', async () => {
    const chat = new NodeChat({ id: 'edited-half', transport: chatTransport('agt_plain') });
    upstream.enqueue({ kind: 'text', text: 'A1' });
    await chat.sendMessage({ text: 'first' });
    upstream.enqueue({ kind: 'disconnect', text: 'half of an answer', afterPieces: 2 });
    await chat.sendMessage({ text: 'first, edited', messageId: chat.messages[0]!.id });
    expect(chat.status).toBe('error');
    await t.app.persistence.idle();
    // The edit replaced A1 as its turn was stored, before the model was called: the reply to it
    // is a new turn's, stored as any reply that fails after some output.
    const stored = (await get('/v1/chats/edited-half/messages')).json().data.messages as UIMessage[];
    expect(texts(stored)).toEqual(texts(chat.messages));
    expect(texts(stored).map(([, , text]) => text)).toEqual(['first, edited', 'half of ']);
    expect(stored[1]!.metadata).toMatchObject({ finishReason: 'error' });
  });
});

describe('a reply the provider fails after some text (useChat)', () => {
  const texts = (messages: UIMessage[]) =>
    messages.map((m) => [
      m.id,
      m.role,
      m.parts.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join(''),
    ]);

  it('is stored as the page shows it, with finishReason error, and the next turn gives it to the model', async () => {
    const chat = new NodeChat({ id: 'failed-midway', transport: chatTransport('agt_plain') });
    upstream.enqueue({ kind: 'disconnect', text: 'half of an answer', afterPieces: 2 });
    await chat.sendMessage({ text: 'first' });
    expect(chat.status).toBe('error');
    expect(texts(chat.messages).at(-1)).toEqual([expect.any(String), 'assistant', 'half of ']);
    await t.app.persistence.idle();
    // A reload shows what the page showed.
    let stored = (await get('/v1/chats/failed-midway/messages')).json().data.messages as UIMessage[];
    expect(texts(stored)).toEqual(texts(chat.messages));
    expect(stored[1]!.metadata).toMatchObject({ model: 'fake-small', finishReason: 'error' });
    expect((await get('/v1/chats/failed-midway')).json().data.chat).toMatchObject({
      active: false,
      messageCount: 2,
    });

    upstream.enqueue({ kind: 'text', text: 'The rest.' });
    await chat.sendMessage({ text: 'go on' });
    expect(chat.status).toBe('ready');
    expect(upstream.lastRequest().body.messages).toEqual([
      { role: 'user', content: 'first' },
      { role: 'assistant', content: 'half of ' },
      { role: 'user', content: 'go on' },
    ]);
    stored = (await get('/v1/chats/failed-midway/messages')).json().data.messages as UIMessage[];
    expect(texts(stored)).toEqual(texts(chat.messages));
    expect(texts(stored).map(([, , text]) => text)).toEqual(['first', 'half of ', 'go on', 'The rest.']);
  });

  it('is replaced by regenerate like any reply', async () => {
    const chat = new NodeChat({ id: 'failed-regenerated', transport: chatTransport('agt_plain') });
    upstream.enqueue({ kind: 'disconnect', text: 'half of an answer', afterPieces: 2 });
    await chat.sendMessage({ text: 'first' });
    expect(chat.status).toBe('error');
    const failed = chat.messages.at(-1)!;
    upstream.enqueue({ kind: 'text', text: 'A whole answer.' });
    await chat.regenerate({ messageId: failed.id });
    expect(chat.status).toBe('ready');
    expect(upstream.lastRequest().body.messages).toEqual([{ role: 'user', content: 'first' }]);
    const stored = (await get('/v1/chats/failed-regenerated/messages')).json().data.messages as UIMessage[];
    expect(texts(stored)).toEqual(texts(chat.messages));
    expect(texts(stored).map(([, , text]) => text)).toEqual(['first', 'A whole answer.']);
    expect(stored.map((m) => m.id)).not.toContain(failed.id);
  });

  it('stores nothing of a reply that failed before its first token', async () => {
    const chat = new NodeChat({ id: 'failed-at-once', transport: chatTransport('agt_plain') });
    upstream.enqueue({ kind: 'disconnect', text: 'never seen', afterPieces: 0 });
    await chat.sendMessage({ text: 'first' });
    expect(chat.status).toBe('error');
    await t.app.persistence.idle();
    const stored = (await get('/v1/chats/failed-at-once/messages')).json().data.messages as UIMessage[];
    expect(texts(stored).map(([, role]) => role)).toEqual(['user']);
  });
});

describe('regenerate', () => {
  async function conversation(id: string) {
    const a = await chat({ agentId: 'agt_plain', id, messages: [userText('first', `${id}-u1`)] });
    const b = await chat({ agentId: 'agt_plain', id, messages: [userText('second', `${id}-u2`)] });
    return {
      chatId: a.json().chatId as string,
      a1: a.json().messageId as string,
      a2: b.json().messageId as string,
    };
  }

  it('replaces the last assistant message when messageId is absent; the model sees the history before it', async () => {
    const { chatId, a2 } = await conversation('regen-last');
    upstream.enqueue({ kind: 'text', text: 'A better answer.' });
    const res = await chat({
      agentId: 'agt_plain',
      id: 'regen-last',
      trigger: 'regenerate-message',
      messages: [userText('first', 'regen-last-u1'), userText('second', 'regen-last-u2')],
    });
    expect(res.statusCode).toBe(200);
    const sent = upstream.lastRequest().body.messages!;
    expect(sent.at(-1)).toEqual({ role: 'user', content: 'second' });
    expect(sent).toHaveLength(3);
    const rows = await chatRows(t.db, chatId);
    expect(rows.map((r) => r.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(rows.map((r) => r.id)).not.toContain(a2);
    expect(rows.at(-1)!.parts).toContain('A better answer.');
    expect((await get(`/v1/chats/${chatId}`)).json().data.chat.messageCount).toBe(4);
  });

  it('replaces a named assistant message and everything after it', async () => {
    const { chatId, a1 } = await conversation('regen-named');
    const res = await chat({
      agentId: 'agt_plain',
      chatId,
      trigger: 'regenerate-message',
      messageId: a1,
      messages: [userText('first', 'regen-named-u1')],
    });
    expect(res.statusCode).toBe(200);
    expect(upstream.lastRequest().body.messages).toEqual([{ role: 'user', content: 'first' }]);
    const rows = await chatRows(t.db, chatId);
    expect(rows.map((r) => r.id)).toEqual(['regen-named-u1', res.json().messageId]);
  });

  it("regenerates from a named user message as useChat's regenerate({ messageId }) asks: the replies after it are replaced", async () => {
    const chat = new NodeChat({ id: 'regen-from-user', transport: chatTransport('agt_plain') });
    upstream.enqueue({ kind: 'text', text: 'One.' });
    await chat.sendMessage({ text: 'first' });
    upstream.enqueue({ kind: 'text', text: 'Two.' });
    await chat.sendMessage({ text: 'second' });
    const firstUser = chat.messages[0]!;
    upstream.enqueue({ kind: 'text', text: 'One, again.' });
    // The client keeps the messages up to and including that user message and posts its id.
    await chat.regenerate({ messageId: firstUser.id });
    expect(chat.status).toBe('ready');
    expect(upstream.lastRequest().body.messages).toEqual([{ role: 'user', content: 'first' }]);
    await t.app.persistence.idle();
    const stored = (await get('/v1/chats/regen-from-user/messages')).json().data.messages as UIMessage[];
    const texts = (messages: UIMessage[]) =>
      messages.map((m) => m.parts.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join(''));
    expect(texts(stored)).toEqual(['first', 'One, again.']);
    expect(stored.map((m) => m.id)).toEqual(chat.messages.map((m) => m.id));
    expect((await get('/v1/chats/regen-from-user')).json().data.chat.messageCount).toBe(2);
  });

  it('stores a turn of 3,000 messages and regenerates over them (more rows than one statement binds)', async () => {
    const { chatId, a1 } = await conversation('regen-many');
    const many = Array.from({ length: 3_000 }, (_, i) => userText(`note ${i}`, `regen-many-n${i}`));
    const long = await chat({ agentId: 'agt_plain', chatId, messages: many });
    expect(long.statusCode, long.body).toBe(200);
    expect(await chatRows(t.db, chatId)).toHaveLength(4 + 3_000 + 1);
    const res = await chat({
      agentId: 'agt_plain',
      chatId,
      trigger: 'regenerate-message',
      messageId: a1,
      messages: [userText('first', 'regen-many-u1')],
    });
    expect(res.statusCode, res.body).toBe(200);
    expect((await chatRows(t.db, chatId)).map((r) => r.id)).toEqual(['regen-many-u1', res.json().messageId]);
    // Past what either engine binds in one statement (SQLite 32,766 values, PostgreSQL 65,535).
    const ids = Array.from({ length: 70_000 }, (_, i) => `msg_none_${i}`);
    await t.db.transaction().execute((trx) => messages.deleteChatMessages(trx, chatId, ids));
  });

  it("regenerates a reply that was never stored (failed before its first token) as a new reply to the last user turn, as useChat's regenerate() asks", async () => {
    // useChat's own transport, so the bodies are exactly what regenerate() posts.
    const transport = chatTransport('agt_plain');
    async function replyText(stream: ReadableStream<UIMessageChunk>) {
      let last: UIMessage | undefined;
      for await (const message of readUIMessageStream({ stream, terminateOnError: true })) last = message;
      return last?.parts.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join('');
    }
    for (const named of [true, false]) {
      const id = `regen-lost-${named}`;
      const { chatId, a1 } = await conversation(id);
      const message = (id: string, role: 'user' | 'assistant', text: string): UIMessage => ({
        id,
        role,
        parts: [{ type: 'text', text }],
      });
      const held = [
        message(`${id}-u1`, 'user', 'first'),
        message(a1, 'assistant', 'answer'),
        message(`${id}-u2`, 'user', 'second'),
      ];
      const u3 = message(`${id}-u3`, 'user', 'third');
      // The third turn's reply fails before its first token: only the user's message is stored.
      upstream.enqueue({ kind: 'fail', status: 503 });
      const failed = await transport.sendMessages({
        chatId: id,
        messages: [...held, u3],
        trigger: 'submit-message',
        messageId: undefined,
        abortSignal: undefined,
      });
      const chunks: UIMessageChunk[] = [];
      const reader = failed.getReader();
      for (let next = await reader.read(); !next.done; next = await reader.read()) chunks.push(next.value);
      const lost = chunks.find((chunk) => chunk.type === 'start')?.messageId;
      expect(lost).toEqual(expect.any(String));
      expect(chunks.map((chunk) => chunk.type)).toContain('error');
      // regenerate({ messageId }) or regenerate() on that (empty) reply: useChat drops it and
      // sends the rest.
      upstream.enqueue({ kind: 'text', text: 'The third answer.' });
      const again = await transport.sendMessages({
        chatId: id,
        messages: [...held, u3],
        trigger: 'regenerate-message',
        messageId: named ? lost : undefined,
        abortSignal: undefined,
      });
      expect(await replyText(again)).toBe('The third answer.');
      expect(upstream.lastRequest().body.messages!.at(-1)).toEqual({ role: 'user', content: 'third' });
      const rows = await chatRows(t.db, chatId);
      expect(rows.map((r) => r.id).slice(0, 5)).toEqual([
        `${id}-u1`,
        a1,
        `${id}-u2`,
        expect.any(String),
        `${id}-u3`,
      ]);
      expect(rows.map((r) => r.role)).toEqual([
        'user',
        'assistant',
        'user',
        'assistant',
        'user',
        'assistant',
      ]);
      expect(rows.at(-1)!.parts).toContain('The third answer.');
    }
  });

  it('answers 404 for an unknown messageId, and deletes nothing when the new reply fails', async () => {
    const { chatId } = await conversation('regen-fail');
    const before = await chatRows(t.db, chatId);
    const unknown = await chat({
      agentId: 'agt_plain',
      chatId,
      trigger: 'regenerate-message',
      messageId: 'msg_nope',
      messages: [userText('first', 'regen-fail-u1')],
    });
    expect(unknown.statusCode).toBe(404);
    upstream.enqueue({ kind: 'fail', status: 503 });
    const failed = await chat({
      agentId: 'agt_plain',
      chatId,
      trigger: 'regenerate-message',
      messages: [userText('first', 'regen-fail-u1')],
    });
    expect(failed.statusCode).toBe(502);
    expect(await chatRows(t.db, chatId)).toEqual(before);
  });

  it('keeps the regenerated reply when the new one fails after some text (nothing is deleted when the new reply fails)', async () => {
    const chat = new NodeChat({ id: 'regen-broken', transport: chatTransport('agt_plain') });
    upstream.enqueue({ kind: 'text', text: 'A first answer.' });
    await chat.sendMessage({ text: 'first' });
    upstream.enqueue({ kind: 'disconnect', text: 'half of an answer', afterPieces: 2 });
    await chat.regenerate();
    expect(chat.status).toBe('error');
    await t.app.persistence.idle();
    const stored = (await get('/v1/chats/regen-broken/messages')).json().data.messages as UIMessage[];
    expect(stored.map((m) => m.parts.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join(''))).toEqual([
      'first',
      'A first answer.',
    ]);
    expect(stored[1]!.metadata).toMatchObject({ finishReason: 'stop' });
  });
});

describe('the stored history a turn reads', () => {
  /** In every part the model never gets: no query of a later turn may hand it to Node. */
  const NEVER_SENT = 'never-given-to-the-model';
  /** Makes a message's parts long enough to be filtered in the database (shorter ones come whole). */
  const PAD = 'p'.repeat(messages.WHOLE_PARTS_MAX_CHARS);
  const png = 'data:image/png;base64,iVBORw0KGgo=';
  const txt = `data:text/plain;base64,${Buffer.from('file body').toString('base64')}`;
  /** A conversation mixing the parts the model gets (text, files) with the ones it never does. */
  const mixed = [
    {
      id: 'mix-u1',
      role: 'user',
      parts: [
        { type: 'text', text: 'Look at ' },
        { type: 'data-blob', data: { note: `${NEVER_SENT} 1`, pad: PAD } },
        { type: 'file', url: png, mediaType: 'image/png', filename: 'a.png' },
        { type: 'text', text: 'and read ü "😀" \\ \n ' },
        { type: 'file', url: txt, mediaType: 'text/plain', filename: 'notes.txt' },
      ],
    },
    {
      id: 'mix-a1',
      role: 'assistant',
      parts: [
        { type: 'step-start' },
        { type: 'reasoning', text: `${NEVER_SENT} 2`, state: 'done' },
        {
          type: 'tool-lookup',
          toolCallId: 'call_1',
          state: 'output-available',
          input: { q: 'x' },
          output: `${NEVER_SENT} 3 ${PAD}`,
        },
        { type: 'text', text: 'Looked it up.', state: 'done' },
        { type: 'source-url', sourceId: 's1', url: `https://example.test/${NEVER_SENT}` },
      ],
    },
    // Nothing in it for the model: it is left out of the prompt, and still replaced by id.
    { id: 'mix-a2', role: 'assistant', parts: [{ type: 'data-only', data: `${NEVER_SENT} 4 ${PAD}` }] },
    {
      id: 'mix-u2',
      role: 'user',
      parts: [
        { type: 'text', text: 'Summarize.' },
        { type: 'data-blob', data: `${NEVER_SENT} 5 ${PAD}` },
      ],
    },
  ];

  /** Runs `turn`; every row the database handed to Node meanwhile, as JSON text. */
  async function rowsReadDuring(turn: () => Promise<unknown>): Promise<string> {
    const executor = t.db.getExecutor();
    const execute = executor.executeQuery.bind(executor);
    const read: string[] = [];
    const spy = vi.spyOn(executor, 'executeQuery').mockImplementation(async (query) => {
      const result = await execute(query);
      read.push(JSON.stringify(result.rows));
      return result as never;
    });
    try {
      await turn();
    } finally {
      spy.mockRestore();
    }
    return read.join('\n');
  }

  it('gives the model what it got from the request, without reading the stored parts it never gets', async () => {
    const first = await chat({ agentId: 'agt_plain', messages: mixed });
    expect(first.statusCode, first.body).toBe(200);
    const { chatId } = first.json();
    const prompt = upstream.lastRequest().body.messages!;
    expect(JSON.stringify(prompt)).not.toContain(NEVER_SENT);
    await t.app.persistence.idle();

    let next: Awaited<ReturnType<typeof chat>> | undefined;
    const read = await rowsReadDuring(async () => {
      next = await chat({ agentId: 'agt_plain', chatId, messages: [userText('And now?', 'mix-u3')] });
    });
    expect(next!.statusCode, next!.body).toBe(200);
    expect(upstream.lastRequest().body.messages).toEqual([
      ...prompt,
      { role: 'assistant', content: first.json().text },
      { role: 'user', content: 'And now?' },
    ]);
    expect(read).toContain('Looked it up.');
    expect(read).not.toContain(NEVER_SENT);
    // Stored whole all the same, for the client reading the chat back.
    const rows = await chatRows(t.db, chatId);
    expect(rows.map((row) => JSON.parse(row.parts))).toEqual([
      ...mixed.map((message) => message.parts),
      expect.any(Array),
      [{ type: 'text', text: 'And now?' }],
      expect.any(Array),
    ]);
  });

  it('regenerates over such a history: the same prompt, the replies replaced by id', async () => {
    const first = await chat({ agentId: 'agt_plain', id: 'mix-regen', messages: mixed });
    expect(first.statusCode, first.body).toBe(200);
    const prompt = upstream.lastRequest().body.messages!;
    await t.app.persistence.idle();

    let again: Awaited<ReturnType<typeof chat>> | undefined;
    const read = await rowsReadDuring(async () => {
      again = await chat({
        agentId: 'agt_plain',
        id: 'mix-regen',
        trigger: 'regenerate-message',
        messageId: 'mix-a1',
        messages: mixed.slice(0, 1),
      });
    });
    expect(again!.statusCode, again!.body).toBe(200);
    expect(upstream.lastRequest().body.messages).toEqual(prompt.slice(0, 1));
    expect(read).not.toContain(NEVER_SENT);
    const rows = await chatRows(t.db, first.json().chatId);
    expect(rows.map((row) => row.id)).toEqual(['mix-u1', again!.json().messageId]);
  });

  // Short rows come whole and are read in Node; long ones are filtered in the database, and on
  // PostgreSQL a long one that is not JSON makes the chat come whole.
  it.each([
    ['short', ''],
    ['long', PAD],
  ])('reads a %s stored row that is not a JSON array of parts as no parts, as before', async (_, pad) => {
    const first = await chat({ agentId: 'agt_plain', messages: [userText('one', 'odd-u1')] });
    const { chatId, messageId } = first.json();
    await chat({ agentId: 'agt_plain', chatId, messages: [userText('two', 'odd-u2')] });
    await t.app.persistence.idle();
    // Written by hand (the service writes JSON arrays only): an object, odd elements, not JSON.
    const set = (id: string, parts: string) =>
      t.db
        .updateTable('messages')
        .set({ parts })
        .where('chat_id', '=', chatId)
        .where('id', '=', id)
        .execute();
    await set(messageId, `{"type":"text","text":"an object","pad":"${pad}"}`);
    await set('odd-u2', `[1, "text", [], {"type":"text","text":"two"}, {"type":"data-x","pad":"${pad}"}]`);
    const turn = async (text: string) => {
      const res = await chat({ agentId: 'agt_plain', chatId, messages: [userText(text)] });
      expect(res.statusCode, res.body).toBe(200);
      return upstream.lastRequest().body.messages;
    };
    expect(await turn('three')).toEqual([
      { role: 'user', content: 'one' },
      { role: 'user', content: 'two' },
      { role: 'assistant', content: expect.any(String) },
      { role: 'user', content: 'three' },
    ]);
    await set('odd-u1', `[{"type":"text","text":"cut${pad}`);
    expect(await turn('four')).toEqual([
      { role: 'user', content: 'two' },
      { role: 'assistant', content: expect.any(String) },
      { role: 'user', content: 'three' },
      { role: 'assistant', content: expect.any(String) },
      { role: 'user', content: 'four' },
    ]);
  });

  it('reads a long stored message whole where the database cannot filter it (a \\u0000, JSON nested past 1,000 levels)', async () => {
    const first = await chat({ agentId: 'agt_plain', messages: [userText('one', 'deep-u1')] });
    const { chatId, messageId } = first.json();
    await t.app.persistence.idle();
    const set = (parts: string) =>
      t.db
        .updateTable('messages')
        .set({ parts })
        .where('chat_id', '=', chatId)
        .where('id', '=', messageId)
        .execute();
    const deep = `${'['.repeat(1_100)}1${']'.repeat(1_100)}`;
    const turn = async (text: string) => {
      const res = await chat({ agentId: 'agt_plain', chatId, messages: [userText(text)] });
      expect(res.statusCode, res.body).toBe(200);
      return upstream.lastRequest().body.messages!.slice(0, 2);
    };
    // Stored as a tool's result can be: PostgreSQL's `->>` failed the turn on the \u0000 (500), and
    // SQLite took the deep JSON for invalid and read the answer as no parts.
    await set(`[{"type":"tool-x","output":"a\\u0000b ${PAD}"},{"type":"text","text":"with a nul"}]`);
    expect(await turn('two')).toEqual([
      { role: 'user', content: 'one' },
      { role: 'assistant', content: 'with a nul' },
    ]);
    await set(`[{"type":"tool-x","output":${deep},"pad":"${PAD}"},{"type":"text","text":"deep"}]`);
    expect(await turn('three')).toEqual([
      { role: 'user', content: 'one' },
      { role: 'assistant', content: 'deep' },
    ]);
  });
});

describe('GET /v1/chats/{id}/messages', () => {
  /** A page budget a few turns of test size pass, and an app of its own holding it. */
  const SMALL_PAGE_BYTES = 64 * 1024;
  const appWithSmallPages = () =>
    createTestApp({
      env: { ATRIUM_MESSAGE_PAGE_BYTES: String(SMALL_PAGE_BYTES) },
      setup: chatSetup(upstream),
    });

  it('returns UI messages oldest first with metadata, paged back by cursor', async () => {
    let chatId: string | undefined;
    for (let i = 0; i < 3; i++) {
      upstream.enqueue({ kind: 'text', text: `answer ${i}`, usage: { prompt: 10, completion: 3 } });
      const res = await chat({
        agentId: 'agt_plain',
        ...(chatId ? { chatId } : {}),
        messages: [userText(`q${i}`, `pg${i}`)],
      });
      chatId = res.json().chatId;
    }
    const page1 = (await get(`/v1/chats/${chatId}/messages?limit=4`)).json().data;
    expect(page1.messages.map((m: { role: string }) => m.role)).toEqual([
      'user',
      'assistant',
      'user',
      'assistant',
    ]);
    expect(page1.messages[0]).toEqual({
      id: 'pg1',
      role: 'user',
      parts: [{ type: 'text', text: 'q1' }],
      metadata: { createdAt: expect.any(String) },
    });
    expect(page1.messages[3].metadata).toMatchObject({
      model: 'fake-small',
      usage: { inputTokens: 10, outputTokens: 3 },
      finishReason: 'stop',
    });
    expect(page1.messages[3].metadata.costUsd).toBeCloseTo((10 * 1 + 3 * 2) / 1e6, 12);
    expect(page1.pagination).toMatchObject({ limit: 4, hasMore: true });
    const page2 = (
      await get(`/v1/chats/${chatId}/messages?limit=4&cursor=${page1.pagination.nextCursor}`)
    ).json().data;
    expect(page2.messages.map((m: { id: string }) => m.id)[0]).toBe('pg0');
    expect(page2.messages).toHaveLength(2);
    expect(page2.pagination).toEqual({ limit: 4, hasMore: false, nextCursor: null });
    expect((await get(`/v1/chats/${chatId}/messages?limit=900`)).json().data.pagination.limit).toBe(500);
    for (const bad of ['limit=0', 'limit=-1', 'limit=abc', 'cursor=%21%21']) {
      const res = await get(`/v1/chats/${chatId}/messages?${bad}`);
      expect(res.statusCode, bad).toBe(400);
      expect(res.json().code).toBe('bad_request');
    }
  });

  it('stops a page before its stored parts pass ATRIUM_MESSAGE_PAGE_BYTES, with the cursor to go on', async () => {
    // 37 turns of 15 MB each, sent one by one, once made the default page a 500 (one string
    // past V8's longest); the same with a budget of 64 KiB and turns a third of it.
    const budget = SMALL_PAGE_BYTES;
    const small = await appWithSmallPages();
    try {
      const blob = 'x'.repeat(Math.floor(budget / 3) + 1);
      let chatId: string | undefined;
      const send = async (turn: number, data: string) => {
        const res = await postChat(small, {
          agentId: 'agt_echo',
          ...(chatId ? { chatId } : {}),
          messages: [
            {
              id: `big${turn}`,
              role: 'user',
              parts: [
                { type: 'text', text: `turn ${turn}` },
                { type: 'data-blob', data },
              ],
            },
          ],
        });
        expect(res.statusCode).toBe(200);
        chatId ??= res.json().chatId;
      };
      for (let i = 0; i < 4; i++) await send(i, blob);
      const page = async (query: string) => {
        const res = await small.app.inject({
          method: 'GET',
          url: `/v1/chats/${chatId}/messages${query}`,
          headers: { 'x-service-api-key': CHAT_KEYS.main },
        });
        expect(res.statusCode).toBe(200);
        const data = res.json().data as {
          messages: Array<{ id: string; role: string; parts: Array<{ data?: string }> }>;
          pagination: Record<string, unknown>;
        };
        return { ...data, ids: data.messages.map((m) => (m.role === 'user' ? m.id : 'reply')) };
      };
      // Newest first: the replies are small, and a third blob would pass the budget.
      const page1 = await page('');
      expect(page1.ids).toEqual(['reply', 'big2', 'reply', 'big3', 'reply']);
      expect(page1.messages[1].parts[1].data).toBe(blob);
      expect(page1.pagination).toMatchObject({ limit: 100, hasMore: true });
      const page2 = await page(`?cursor=${page1.pagination.nextCursor}`);
      expect(page2.ids).toEqual(['big0', 'reply', 'big1']);
      expect(page2.pagination).toEqual({ limit: 100, hasMore: false, nextCursor: null });
      expect((await page('?limit=2')).ids).toEqual(['big3', 'reply']);
      // A message larger than the budget still makes a page, of its own.
      await send(4, 'x'.repeat(2 * budget));
      const latest = await page('');
      expect(latest.ids).toEqual(['reply']);
      const alone = await page(`?cursor=${latest.pagination.nextCursor}`);
      expect(alone.ids).toEqual(['big4']);
      expect(alone.messages[0].parts[1].data).toHaveLength(2 * budget);
      expect((await page(`?cursor=${alone.pagination.nextCursor}`)).ids).toEqual(page1.ids);
    } finally {
      await small.close();
    }
  });

  it('reads a page from one snapshot: a regenerate committed between its two reads neither shows nor breaks its budget', async () => {
    const budget = SMALL_PAGE_BYTES;
    const small = await appWithSmallPages();
    try {
      const res = await postChat(small, { agentId: 'agt_echo', messages: [userText('short', 'snap0')] });
      expect(res.statusCode).toBe(200);
      const chatId = res.json().chatId as string;
      // Each read with a limit of its own: a page read before is answered from the listing cache.
      const page = async (limit: number) => {
        const read = await small.app.inject({
          method: 'GET',
          url: `/v1/chats/${chatId}/messages?limit=${limit}`,
          headers: { 'x-service-api-key': CHAT_KEYS.main },
        });
        expect(read.statusCode).toBe(200);
        return read.json().data as {
          messages: Array<{ id: string; parts: unknown[] }>;
          pagination: { hasMore: boolean };
        };
      };
      const before = await page(10);
      const [, reply] = before.messages;
      // A regenerate of the reply, with one larger than the whole budget, committed by another
      // process after the page has chosen its messages by their sizes and before it reads them.
      const regenerated = { type: 'text', text: 'x'.repeat(2 * budget) };
      const readSizes = messages.listChatMessageSizes;
      const regenerate = () =>
        commitOnOtherConnection(small.env, (db) =>
          storeReply(db, {
            workspaceId: 'wsp_main',
            chatId,
            finishedAt: new Date(),
            message: {
              id: 'snap_regenerated',
              parts: [regenerated],
              model: 'atrium/echo',
              finishReason: 'stop',
            },
            usage: { inputTokens: 0, outputTokens: 0, costUsd: 0 },
            reportAs: { agentId: 'agt_echo', model: 'atrium/echo' },
            replaces: [reply!.id],
            subRuns: [],
          }),
        );
      // Run between the page's two reads (a spy, not vi.mock: test files share their worker's
      // modules, so the app may hold the real module already).
      const between = vi.spyOn(messages, 'listChatMessageSizes').mockImplementationOnce(async (...args) => {
        const sizes = await readSizes(...args);
        await regenerate();
        return sizes;
      });
      const during = await page(11);
      expect(between).toHaveBeenCalledOnce();
      // The chat as it was when the page began: the short reply, within the budget (without
      // one snapshot, the page held the user's message and the regenerated reply: 2 × budget).
      expect(during.messages.map((message) => message.id)).toEqual(['snap0', reply!.id]);
      expect(during.messages).toEqual(before.messages);
      expect(during.pagination.hasMore).toBe(false);
      // The next read sees the regenerated reply, on a page of its own.
      const after = await page(12);
      expect(after.messages.map((message) => message.id)).toEqual(['snap_regenerated']);
      expect(after.pagination.hasMore).toBe(true);
    } finally {
      vi.restoreAllMocks();
      await small.close();
    }
  });
});

describe('visibility by role and tenant', () => {
  let ownerChat: string;
  let memberChat: string;
  beforeAll(async () => {
    ownerChat = (await chat({ agentId: 'agt_plain', messages: [userText('owner secret')] })).json().chatId;
    memberChat = (
      await chat(
        {
          agentId: 'agt_plain',
          messages: [userText('member note')],
          systemVariables: { user: { id: 'ext-42' } },
        },
        CHAT_KEYS.mainMember,
      )
    ).json().chatId;
  });

  async function ids(key: string, query = '', headers: Record<string, string> = {}) {
    const res = await get(`/v1/chats?limit=100${query}`, key, headers);
    expect(res.statusCode).toBe(200);
    return res.json().data.chats.map((c: { id: string }) => c.id) as string[];
  }

  it('shows owners and admins every chat, members their own', async () => {
    expect(await ids(CHAT_KEYS.main)).toEqual(expect.arrayContaining([ownerChat, memberChat]));
    expect(await ids(CHAT_KEYS.mainAdmin)).toEqual(expect.arrayContaining([ownerChat, memberChat]));
    const mine = await ids(CHAT_KEYS.mainMember);
    expect(mine).toContain(memberChat);
    expect(mine).not.toContain(ownerChat);
    expect((await get(`/v1/chats/${ownerChat}`, CHAT_KEYS.mainMember)).statusCode).toBe(404);
    expect((await get(`/v1/chats/${ownerChat}/messages`, CHAT_KEYS.mainMember)).statusCode).toBe(404);
    const cont = await chat(
      { agentId: 'agt_plain', chatId: ownerChat, messages: [userText('peek')] },
      CHAT_KEYS.mainMember,
    );
    expect(cont.statusCode).toBe(404);
  });

  it('lets an organization key read the workspace it names in x-workspace-id, and only then', async () => {
    const noHeader = await get('/v1/chats', CHAT_KEYS.org);
    expect(noHeader.statusCode).toBe(401);
    expect(noHeader.json().code).toBe('unauthorized');
    expect(await ids(CHAT_KEYS.org, '', { 'x-workspace-id': 'wsp_main' })).toEqual(
      expect.arrayContaining([ownerChat, memberChat]),
    );
    expect(
      (await get(`/v1/chats/${ownerChat}`, CHAT_KEYS.org, { 'x-workspace-id': 'wsp_other' })).statusCode,
    ).toBe(404);
  });

  it('never shows another workspace its chats', async () => {
    expect(await ids(CHAT_KEYS.other)).not.toContain(ownerChat);
    expect((await get(`/v1/chats/${ownerChat}`, CHAT_KEYS.other)).statusCode).toBe(404);
    const del = await t.app.inject({
      method: 'DELETE',
      url: `/v1/chats/${ownerChat}`,
      headers: { 'x-service-api-key': CHAT_KEYS.other },
    });
    expect(del.statusCode).toBe(404);
  });

  it('filters by agent, project and end user; unknown ids match nothing', async () => {
    expect(await ids(CHAT_KEYS.main, '&user=ext-42')).toEqual([memberChat]);
    expect(await ids(CHAT_KEYS.main, '&agentId=agt_nope')).toEqual([]);
    expect(await ids(CHAT_KEYS.main, '&projectId=prj_nope')).toEqual([]);
    expect((await get(`/v1/chats/${memberChat}`)).json().data.chat.user).toBe('ext-42');
  });

  it('finds the chats of an end user named with the longest id a chat takes (200 characters)', async () => {
    const user = 'u'.repeat(200);
    const res = await chat({
      agentId: 'agt_plain',
      systemVariables: { user: { id: user } },
      messages: [userText('hi')],
    });
    expect(res.statusCode).toBe(200);
    expect(await ids(CHAT_KEYS.main, `&user=${user}`)).toEqual([res.json().chatId]);
  });
});

describe('paging, renaming and deleting', () => {
  it('pages by cursor without repeats or gaps while chats are added', async () => {
    const key = CHAT_KEYS.other;
    const created: string[] = [];
    for (let i = 0; i < 5; i++) {
      created.push(
        (await chat({ agentId: 'agt_other', messages: [userText(`page ${i}`)] }, key)).json().chatId,
      );
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    let round = 0;
    do {
      const res = await get(`/v1/chats?limit=2${cursor ? `&cursor=${cursor}` : ''}`, key);
      expect(res.statusCode).toBe(200);
      const data = res.json().data;
      seen.push(...data.chats.map((c: { id: string }) => c.id));
      cursor = data.pagination.nextCursor;
      // A chat added while paging goes to the top: it is not in the later pages.
      if (round++ === 0) await chat({ agentId: 'agt_other', messages: [userText('meanwhile')] }, key);
    } while (cursor);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual(expect.arrayContaining(created));
    expect((await get('/v1/chats?cursor=bm9wZQ', key)).statusCode).toBe(400);
    // A well-formed cursor whose values no page could hold reaches no query: on PostgreSQL a
    // NUL or a number past the position column would be the database's error (a 500).
    const cursorOf = (position: unknown[]) => Buffer.from(JSON.stringify(position)).toString('base64url');
    const refused = async (url: string) => {
      const res = await get(url, key);
      return { status: res.statusCode, path: res.json().details?.issues?.[0]?.path };
    };
    const badCursor = { status: 400, path: 'query.cursor' };
    expect(
      await refused(`/v1/chats?cursor=${cursorOf(['2026-11-22T10:00:00.000Z\u0000', 'cht_x'])}`),
    ).toEqual(badCursor);
    // Nor a time no chat was ever updated at: compared as text, it answered some page.
    for (const updatedAt of ['next week', 'x', '2026-11-22', '2026-11-22T10:00:00Z']) {
      expect(await refused(`/v1/chats?cursor=${cursorOf([updatedAt, 'cht_x'])}`)).toEqual(badCursor);
    }
    for (const position of [2 ** 31, 1e21, -1, 1.5]) {
      expect(await refused(`/v1/chats/${created[0]}/messages?cursor=${cursorOf([position])}`)).toEqual(
        badCursor,
      );
    }
    expect((await get('/v1/chats?limit=0', key)).statusCode).toBe(400);
    expect((await get('/v1/chats?limit=1000', key)).json().data.pagination.limit).toBe(100);
  });

  it('renames a chat (1–100 characters once trimmed, one line) and deletes it with its messages; a second delete is 404', async () => {
    const { chatId } = (await chat({ agentId: 'agt_plain', messages: [userText('to rename')] })).json();
    const patch = (title: unknown) =>
      t.app.inject({
        method: 'PATCH',
        url: `/v1/chats/${chatId}`,
        headers: { 'x-service-api-key': CHAT_KEYS.main },
        payload: { title },
      });
    expect((await patch('')).statusCode).toBe(400);
    expect((await patch('x'.repeat(101))).statusCode).toBe(400);
    const renamed = await patch('Renamed');
    expect(renamed.statusCode).toBe(200);
    expect(renamed.json().data.chat.title).toBe('Renamed');
    // The limit is the trimmed title's, and a title is one line of text.
    const padded = await patch(`  ${'y'.repeat(100)}  `);
    expect(padded.statusCode).toBe(200);
    expect(padded.json().data.chat.title).toBe('y'.repeat(100));
    expect((await patch(`\n Trimmed \n`)).json().data.chat.title).toBe('Trimmed');
    expect((await patch('😀'.repeat(100))).statusCode).toBe(200);
    const tooLong = await patch(` ${'z'.repeat(101)} `);
    expect(tooLong.statusCode).toBe(400);
    expect(tooLong.json().details.issues).toEqual([
      { path: 'body.title', message: 'must be at most 100 characters (after trimming)' },
    ]);
    for (const title of ['two\nlines', 'a\ttab', 'carriage\rreturn', 'bell\u0007', 'c1\u0085']) {
      const res = await patch(title);
      expect(res.statusCode, JSON.stringify(title)).toBe(400);
      expect(res.json(), JSON.stringify(title)).toEqual({
        code: 'bad_request',
        message: 'body.title must not contain control characters (newlines, tabs)',
        details: {
          issues: [{ path: 'body.title', message: 'must not contain control characters (newlines, tabs)' }],
        },
      });
    }
    expect((await patch('   ')).json().details.issues).toEqual([
      { path: 'body.title', message: 'must not be blank' },
    ]);
    // Invisible format characters alone (zero-width space, word joiner, a direction mark) are
    // as blank: such a title showed as an empty line in every list.
    // So are the blank fillers (Hangul U+3164, U+115F, U+1160, U+FFA0, braille U+2800),
    // variation selectors, tag characters and the combining grapheme joiner, which render as nothing.
    for (const title of [
      '\u200b',
      ' \u200b\u2060 ',
      '\u200e\u200f',
      '\u3164',
      '\u115f\u1160',
      '\uffa0',
      '\u2800',
      '\u180e',
      '\ufe00\ufe0f',
      '\u{e0001}\u{e0041}',
      '\u034f',
    ]) {
      expect((await patch(title)).json().details?.issues, JSON.stringify(title)).toEqual([
        { path: 'body.title', message: 'must not be blank' },
      ]);
    }
    // Such characters within a visible title stay (a ZWJ joins an emoji sequence).
    expect((await patch('👩\u200d💻 notes')).json().data.chat.title).toBe('👩\u200d💻 notes');
    // Unknown fields are ignored, as in every other JSON body of the API (a PATCH of an agent or
    // a project included); they were a 400 "body must NOT have additional properties" here only.
    const withExtra = await t.app.inject({
      method: 'PATCH',
      url: `/v1/chats/${chatId}`,
      headers: { 'x-service-api-key': CHAT_KEYS.main },
      payload: { title: 'Pinned', pinned: true },
    });
    expect(withExtra.statusCode).toBe(200);
    expect(withExtra.json().data.chat.title).toBe('Pinned');
    expect(withExtra.json().data.chat).not.toHaveProperty('pinned');
    const del = () =>
      t.app.inject({
        method: 'DELETE',
        url: `/v1/chats/${chatId}`,
        headers: { 'x-service-api-key': CHAT_KEYS.main },
      });
    expect((await del()).json()).toEqual({ data: { deleted: true } });
    expect(await chatRows(t.db, chatId)).toEqual([]);
    expect((await del()).statusCode).toBe(404);
  });
});

describe('body limit of POST /v1/chat', () => {
  it('takes bodies beyond 1 MB (attachments as data: URLs) up to 16 MB', async () => {
    const attachment = Buffer.alloc(450 * 1024, 7).toString('base64');
    const file = {
      type: 'file',
      mediaType: 'application/octet-stream',
      filename: 'a.bin',
      url: `data:application/octet-stream;base64,${attachment}`,
    };
    const ok = await chat({
      agentId: 'agt_plain',
      messages: [{ role: 'user', parts: [{ type: 'text', text: 'two files' }, file, file] }],
    });
    expect(ok.statusCode).toBe(200);
    const huge = 'x'.repeat(16 * 1024 * 1024 + 1);
    const tooBig = await chat({ agentId: 'agt_plain', messages: [userText(huge)] });
    expect(tooBig.statusCode).toBe(413);
    expect(tooBig.json().code).toBe('payload_too_large');
    const otherRoute = await t.app.inject({
      method: 'POST',
      url: '/v1/projects',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
      payload: { name: 'x', description: 'y'.repeat(1024 * 1024) },
    });
    expect(otherRoute.statusCode).toBe(413);
  });
});
