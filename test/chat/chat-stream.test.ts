import {
  DefaultChatTransport,
  parseJsonEventStream,
  readUIMessageStream,
  type UIMessage,
  type UIMessageChunk,
  uiMessageChunkSchema,
} from 'ai';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, failsMidStreamThenGoesOn, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatRows, chatSetup, ledgerTokens, userText } from './fixtures.js';

let upstream: FakeUpstream;
let t: TestApp;
let baseUrl: string;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  t = await createTestApp({ setup: chatSetup(upstream) });
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

function post(body: Record<string, unknown>, signal?: AbortSignal) {
  return fetch(`${baseUrl}/v1/chat`, { method: 'POST', headers, body: JSON.stringify(body), signal });
}

async function chunksOf(response: Response): Promise<{ events: string[]; chunks: UIMessageChunk[] }> {
  const [raw, parsed] = response.body!.tee();
  const eventsPromise = (async () => {
    const events: string[] = [];
    const reader = raw
      .pipeThrough(new TextDecoderStream())
      .pipeThrough(new EventSourceParserStream())
      .getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return events;
      events.push(value.data);
    }
  })();
  const chunks: UIMessageChunk[] = [];
  const reader = parseJsonEventStream({ stream: parsed, schema: uiMessageChunkSchema }).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (value.success) chunks.push(value.value as UIMessageChunk);
    else if (value.rawValue !== '[DONE]') throw value.error;
  }
  return { events: await eventsPromise, chunks };
}

describe('POST /v1/chat with stream: true', () => {
  it('answers the UI message stream protocol v1 with chat id, message id and [DONE]', async () => {
    const response = await post({ agentId: 'agt_plain', stream: true, messages: [userText('hi')] });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    expect(response.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    const chatId = response.headers.get('x-chat-id');
    expect(chatId).toMatch(/^cht_/);
    expect(response.headers.get('x-request-id')).toMatch(/^req_/);

    const { events, chunks } = await chunksOf(response);
    expect(events.at(-1)).toBe('[DONE]');
    const types = chunks.map((c) => c.type);
    expect(types[0]).toBe('start');
    expect(types.at(-1)).toBe('finish');
    expect(types).toEqual(expect.arrayContaining(['text-start', 'text-delta', 'text-end']));
    const start = chunks[0] as Extract<UIMessageChunk, { type: 'start' }>;
    expect(start.messageId).toMatch(/^msg_/);
    expect(start.messageMetadata).toEqual({ chatId });
    // The upstream sends its pieces in one burst: they may share text-delta events, in order.
    const deltas = chunks.filter((c) => c.type === 'text-delta').map((c) => (c as { delta: string }).delta);
    expect(deltas.join('')).toBe('Hello from the fake upstream.');
    expect(deltas.length).toBeGreaterThanOrEqual(1);
    const finish = chunks.at(-1) as Extract<UIMessageChunk, { type: 'finish' }>;
    expect(finish.messageMetadata).toMatchObject({ chatId, model: 'fake-small', usage: { outputTokens: 5 } });

    expect(upstream.lastRequest().body.stream).toBe(true);
    expect(upstream.lastRequest().body.stream_options).toEqual({ include_usage: true });
    await t.app.persistence.idle();
    const rows = await chatRows(t.db, chatId!);
    expect(rows).toHaveLength(2);
    expect(rows[1]!.id).toBe(start.messageId);
    expect(rows[1]!.output_tokens).toBe(5);
  });

  it('is consumed by the AI SDK client (DefaultChatTransport) with the same text as JSON mode', async () => {
    const json = await post({ agentId: 'agt_echo', messages: [userText('Same words both ways', 'u-json')] });
    const jsonText = (await json.json()).text as string;

    const transport = new DefaultChatTransport<UIMessage>({
      api: `${baseUrl}/v1/chat`,
      headers: { 'x-service-api-key': CHAT_KEYS.main },
      body: { agentId: 'agt_echo', stream: true },
    });
    const userMessage: UIMessage = {
      id: 'u-sse',
      role: 'user',
      parts: [{ type: 'text', text: 'Same words both ways' }],
    };
    const stream = await transport.sendMessages({
      chatId: 'client-side-chat-id',
      messages: [userMessage],
      trigger: 'submit-message',
      messageId: undefined,
      abortSignal: undefined,
    });
    let last: UIMessage | undefined;
    for await (const message of readUIMessageStream({ stream, terminateOnError: true })) last = message;
    expect(last?.role).toBe('assistant');
    const text = last!.parts.map((p) => (p.type === 'text' ? p.text : '')).join('');
    expect(text).toBe(jsonText);
    expect(text).toContain('Same words both ways');
    expect((last!.metadata as { chatId: string }).chatId).toMatch(/^cht_/);
  });

  it('continues a chat the useChat way: the client resends the whole history, nothing is stored twice', async () => {
    const transport = (chatId?: string) =>
      new DefaultChatTransport<UIMessage>({
        api: `${baseUrl}/v1/chat`,
        headers: { 'x-service-api-key': CHAT_KEYS.main },
        body: { agentId: 'agt_plain', stream: true, ...(chatId ? { chatId } : {}) },
      });
    const read = async (stream: ReadableStream<UIMessageChunk>) => {
      let last: UIMessage | undefined;
      for await (const message of readUIMessageStream({ stream, terminateOnError: true })) last = message;
      return last!;
    };
    const history: UIMessage[] = [{ id: 'c-1', role: 'user', parts: [{ type: 'text', text: 'first' }] }];
    const first = await read(
      await transport().sendMessages({
        chatId: 'local',
        messages: history,
        trigger: 'submit-message',
        messageId: undefined,
        abortSignal: undefined,
      }),
    );
    const chatId = (first.metadata as { chatId: string }).chatId;
    history.push(first, { id: 'c-2', role: 'user', parts: [{ type: 'text', text: 'second' }] });
    await read(
      await transport(chatId).sendMessages({
        chatId: 'local',
        messages: history,
        trigger: 'submit-message',
        messageId: undefined,
        abortSignal: undefined,
      }),
    );
    expect(upstream.lastRequest().body.messages).toEqual([
      { role: 'user', content: 'first' },
      { role: 'assistant', content: upstream.defaultText },
      { role: 'user', content: 'second' },
    ]);
    await t.app.persistence.idle();
    const rows = await chatRows(t.db, chatId);
    expect(rows).toHaveLength(4);
    expect(rows.map((r) => r.id).slice(0, 3)).toEqual(['c-1', first.id, 'c-2']);
  });

  it('stores the whole reply when the client disconnects mid-stream', async () => {
    const text = 'one two three four five six seven eight';
    upstream.enqueue({ kind: 'held', text, afterPieces: 3 });
    const abort = new AbortController();
    const response = await post(
      { agentId: 'agt_plain', stream: true, messages: [userText('long please')] },
      abort.signal,
    );
    const chatId = response.headers.get('x-chat-id')!;
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let seen = '';
    // The first three pieces, in one text-delta event or several.
    while (!seen.includes('three ')) {
      const { value, done } = await reader.read();
      if (done) throw new Error('stream ended early');
      seen += value;
    }
    abort.abort();
    await reader.cancel().catch(() => {});
    upstream.release();
    await t.app.persistence.idle();
    const rows = await chatRows(t.db, chatId);
    expect(rows.map((r) => r.role)).toEqual(['user', 'assistant']);
    const parts = JSON.parse(rows[1]!.parts) as Array<{ type: string; text?: string }>;
    expect(
      parts
        .filter((p) => p.type === 'text')
        .map((p) => p.text)
        .join(''),
    ).toBe(text);
    expect(rows[1]!.output_tokens).toBe(8);
  });

  it('turns an upstream 500 into an error chunk and keeps only the user message', async () => {
    upstream.enqueue({ kind: 'fail', status: 500, message: 'boom' });
    const response = await post({ agentId: 'agt_plain', stream: true, messages: [userText('fail please')] });
    expect(response.status).toBe(200);
    const chatId = response.headers.get('x-chat-id')!;
    const { events, chunks } = await chunksOf(response);
    expect(chunks.map((c) => c.type)).toEqual(['start', 'error']);
    expect((chunks[1] as { errorText: string }).errorText).toBe('The model provider answered HTTP 500');
    expect(events.at(-1)).toBe('[DONE]');
    await t.app.persistence.idle();
    const rows = await chatRows(t.db, chatId);
    expect(rows.map((r) => r.role)).toEqual(['user']);
  });

  it('charges a reply whose upstream breaks mid-stream its prompt and the output streamed, once; one refused at once nothing', async () => {
    const ledger = () => ledgerTokens(t.db);
    /** The usage report's rollup for the workspace, all days and agents together. */
    const reported = async () => {
      const rows = await t.db
        .selectFrom('usage_daily')
        .selectAll()
        .where('workspace_id', '=', 'wsp_main')
        .execute();
      return {
        inputTokens: rows.reduce((sum, row) => sum + Number(row.input_tokens), 0),
        outputTokens: rows.reduce((sum, row) => sum + Number(row.output_tokens), 0),
      };
    };
    const before = await ledger();
    upstream.enqueue({ kind: 'fail', status: 500 });
    await chunksOf(await post({ agentId: 'agt_plain', stream: true, messages: [userText('fail')] }));
    await t.app.persistence.idle();
    expect(await ledger()).toEqual(before);

    const reportedBefore = await reported();
    upstream.enqueue({ kind: 'disconnect', text: 'this reply will be cut', afterPieces: 2 });
    const response = await post({
      agentId: 'agt_plain',
      stream: true,
      messages: [userText('x'.repeat(400))],
    });
    const chatId = response.headers.get('x-chat-id')!;
    const { chunks } = await chunksOf(response);
    expect(chunks.map((c) => (c.type === 'text-delta' ? c.delta : '')).join('')).toBe('this reply ');
    await t.app.persistence.idle();
    const after = await ledger();
    const charged = {
      inputTokens: after.inputTokens - before.inputTokens,
      outputTokens: after.outputTokens - before.outputTokens,
    };
    // The prompt (400 characters and its JSON) and the 11 characters streamed, at about four
    // characters a token: the provider reported nothing before the stream broke.
    expect(charged.inputTokens).toBeGreaterThan(100);
    expect(charged.outputTokens).toBe(Math.ceil('this reply '.length / 4));
    // The stored reply carries what was charged, and the report counts it once.
    const rows = await chatRows(t.db, chatId);
    expect(rows[1]).toMatchObject({
      input_tokens: charged.inputTokens,
      output_tokens: charged.outputTokens,
      finish_reason: 'error',
    });
    const reportedAfter = await reported();
    expect({
      inputTokens: reportedAfter.inputTokens - reportedBefore.inputTokens,
      outputTokens: reportedAfter.outputTokens - reportedBefore.outputTokens,
    }).toEqual(charged);
  });

  it('stores the text streamed before an upstream disconnect as the assistant message, finishReason error; the client still gets error and finish', async () => {
    upstream.enqueue({ kind: 'disconnect', text: 'this reply will be cut', afterPieces: 2 });
    const response = await post({ agentId: 'agt_plain', stream: true, messages: [userText('cut please')] });
    const chatId = response.headers.get('x-chat-id')!;
    const { events, chunks } = await chunksOf(response);
    const types = chunks.map((c) => c.type);
    expect(types[0]).toBe('start');
    expect(chunks.find((c) => c.type === 'error')).toEqual({
      type: 'error',
      errorText: 'The model provider failed',
    });
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'error' });
    expect(events.at(-1)).toBe('[DONE]');
    expect(chunks.map((c) => (c.type === 'text-delta' ? c.delta : '')).join('')).toBe('this reply ');
    await t.app.persistence.idle();
    const rows = await chatRows(t.db, chatId);
    expect(rows.map((r) => [r.role, r.finish_reason])).toEqual([
      ['user', null],
      ['assistant', 'error'],
    ]);
    const start = chunks[0] as Extract<UIMessageChunk, { type: 'start' }>;
    expect(rows[1]!.id).toBe(start.messageId);
    const parts = JSON.parse(rows[1]!.parts) as Array<{ type: string; text?: string }>;
    expect(parts.filter((p) => p.type === 'text').map((p) => p.text)).toEqual(['this reply ']);
    const chat = await t.app.inject({
      method: 'GET',
      url: `/v1/chats/${chatId}`,
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    expect(chat.json().data.chat).toMatchObject({ active: false, messageCount: 2 });
    // Nothing runs any more: a resume answers 204, as after any reply.
    const resume = await fetch(`${baseUrl}/v1/chat/${chatId}/stream`, { headers });
    expect(resume.status).toBe(204);
  });

  it.each([
    ['an error event', `data: ${JSON.stringify({ error: { message: 'hiccup', type: 'server_error' } })}\n\n`],
    ['an event that is no JSON', 'data: {"id":"chatcmpl-x","choi\n\n'],
  ])(
    'charges nothing for a reply whose upstream sends %s first, before any output (as providers bill it)',
    async (_name, event) => {
      upstream.enqueue({ kind: 'inserted', text: 'never sent', afterPieces: 0, event });
      const before = await ledgerTokens(t.db);
      const response = await post({ agentId: 'agt_plain', stream: true, messages: [userText('nothing')] });
      const chatId = response.headers.get('x-chat-id')!;
      const { chunks } = await chunksOf(response);
      expect(chunks.filter((c) => c.type === 'error')).toEqual([
        { type: 'error', errorText: 'The model provider failed' },
      ]);
      await t.app.persistence.idle();
      expect(await ledgerTokens(t.db)).toEqual(before);
      expect((await chatRows(t.db, chatId)).map((r) => r.role)).toEqual(['user']);
    },
  );

  it.each([
    ['an error event', `data: ${JSON.stringify({ error: { message: 'hiccup', type: 'server_error' } })}\n\n`],
    ['an event that is no JSON', 'data: {"id":"chatcmpl-x","choi\n\n'],
  ])(
    'ends a reply at %s its upstream sends mid-stream (the provider call aborted, not read to its finish): what came before is what is sent and stored, with finish reason error',
    async (_name, event) => {
      upstream.enqueue(failsMidStreamThenGoesOn(event));
      const abortedBefore = upstream.aborted();
      const response = await post({ agentId: 'agt_plain', stream: true, messages: [userText('glitch')] });
      const chatId = response.headers.get('x-chat-id')!;
      const { events, chunks } = await chunksOf(response);
      expect(chunks.filter((c) => c.type === 'error')).toEqual([
        { type: 'error', errorText: 'The model provider failed' },
      ]);
      expect(events.at(-1)).toBe('[DONE]');
      await upstream.waitForAborted(abortedBefore + 1);
      expect(chunks.map((c) => (c.type === 'text-delta' ? c.delta : '')).join('')).toBe('one two ');
      await t.app.persistence.idle();
      const rows = await chatRows(t.db, chatId);
      expect(rows.map((r) => [r.role, r.finish_reason])).toEqual([
        ['user', null],
        ['assistant', 'error'],
      ]);
      // useChat stops reading at the error chunk: a reload shows the text it showed.
      const parts = JSON.parse(rows[1]!.parts) as Array<{ type: string; text?: string }>;
      expect(parts.filter((p) => p.type === 'text').map((p) => p.text)).toEqual(['one two ']);
      // What the client was told of how the reply ended is what a reload shows.
      const finish = chunks.at(-1) as Extract<UIMessageChunk, { type: 'finish' }>;
      expect(finish).toMatchObject({
        type: 'finish',
        finishReason: 'error',
        messageMetadata: { chatId, finishReason: 'error' },
      });
      const page = await fetch(`${baseUrl}/v1/chats/${chatId}/messages`, { headers });
      const stored = (await page.json()) as {
        data: { messages: Array<{ metadata: { finishReason?: string } }> };
      };
      expect(stored.data.messages.at(-1)!.metadata.finishReason).toBe('error');
    },
  );
});
