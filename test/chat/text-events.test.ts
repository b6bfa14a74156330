import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { LanguageModelV3 } from '@ai-sdk/provider';
import { tool, type UIMessageChunk } from 'ai';
import { createParser } from 'eventsource-parser';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createTestApp } from '../helpers/app.js';
import { startFakeUpstream } from '../helpers/fake-upstream.js';
import { createNodeFetch } from '../../src/models/node-fetch.js';
import { guardedFetch } from '../../src/models/stream-guard.js';
import { allowTextEvents, TextEventFilter } from '../../src/models/text-events.js';
import { CHAT_KEYS, chatSetup, userText } from './fixtures.js';
import { replyOf } from './stream-reply.js';

const chunk = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}, choice = {}) =>
  `data: ${JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'm',
    choices: [{ index: 0, delta, finish_reason: null, ...choice }],
    ...extra,
  })}\n\n`;
const text = (content: string) => chunk({ content });
const finish = (reason = 'stop') => chunk({}, {}, { finish_reason: reason });
const usageChunk = `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [], usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } })}\n\n`;
const DONE = 'data: [DONE]\n\n';

/** Runs bytes through the filter; returns what its listener heard and the events the provider gets. */
function filter(pieces: Array<string | Uint8Array>) {
  const held: Array<[number, string]> = [];
  const joined: number[] = [];
  const tap = new TextEventFilter({
    held: (after, piece) => held.push([after, piece]),
    joined: (event) => joined.push(event),
  });
  let given = '';
  for (const piece of pieces) given += tap.write(typeof piece === 'string' ? Buffer.from(piece) : piece);
  given += tap.end();
  const events: Array<{ event?: string; data: string }> = [];
  createParser({ onEvent: ({ event, data }) => events.push({ event, data }) }).feed(given);
  return { held, joined, events };
}

const dataOf = (event: string) => event.slice('data: '.length, -2);
const contentOf = (data: string) =>
  (JSON.parse(data) as { choices: Array<{ delta: { content: string } }> }).choices[0]!.delta.content;

describe('plain text events held back from the provider', () => {
  it('are the text events after a text event: their text goes out at once, and to the provider joined before the next event', () => {
    const { held, joined, events } = filter([
      chunk({ role: 'assistant', content: 'Hel' }),
      text('lo'),
      text(' there'),
      finish(),
      usageChunk,
      DONE,
    ]);
    expect(held).toEqual([
      [1, 'lo'],
      [1, ' there'],
    ]);
    // Events are numbered as the provider counts them: the joined one is its second.
    expect(joined).toEqual([2]);
    expect(events.map((event) => event.data)).toEqual([
      dataOf(chunk({ role: 'assistant', content: 'Hel' })),
      JSON.stringify({ choices: [{ index: 0, delta: { content: 'lo there' }, finish_reason: null }] }),
      dataOf(finish()),
      dataOf(usageChunk),
      '[DONE]',
    ]);
  });

  it('are the same whatever the network reads split (inside a character too)', () => {
    const stream = [text('Grüß '), text('dich '), text('🙂 '), text('wieder'), finish(), DONE].join('');
    const bytes = Buffer.from(stream);
    const whole = filter([bytes]);
    expect(whole.held.map(([, piece]) => piece)).toEqual(['dich ', '🙂 ', 'wieder']);
    for (let cut = 1; cut < bytes.length; cut += 7) {
      const split = filter([bytes.subarray(0, cut), bytes.subarray(cut, cut + 3), bytes.subarray(cut + 3)]);
      expect(split).toEqual(whole);
    }
  });

  it('end with the stream: text still held reaches the provider joined', () => {
    const { held, joined, events } = filter([text('a'), text('b'), text('c')]);
    expect(held).toEqual([
      [1, 'b'],
      [1, 'c'],
    ]);
    expect(joined).toEqual([2]);
    expect(events.map((event) => contentOf(event.data))).toEqual(['a', 'bc']);
  });

  it.each([
    ['log-probabilities', chunk({ content: 'x' }, {}, { logprobs: { content: [] } })],
    ['a tool call', chunk({ tool_calls: [{ index: 0, id: 'c', function: { name: 'f', arguments: '' } }] })],
    ['a tool call beside text', chunk({ content: 'x', tool_calls: [] })],
    ['a refusal', chunk({ refusal: 'no' })],
    ['reasoning', chunk({ content: 'x', reasoning_content: 'hmm' })],
    ['a finish with text', chunk({ content: 'x' }, {}, { finish_reason: 'stop' })],
    ['usage with text', chunk({ content: 'x' }, { usage: { prompt_tokens: 1 } })],
    ['a field the providers might read', chunk({ content: 'x' }, { x_groq: { id: 'q' } })],
    ['a second choice', chunk({ content: 'x' }, {}, { index: 1 })],
    ['another role', chunk({ role: 'tool', content: 'x' })],
    ['empty text', text('')],
    ['text as parts', chunk({ content: [{ type: 'text', text: 'x' }] })],
    ['a named event', `event: delta\n${text('x')}`],
    ['data that is not JSON', 'data: {"choices": [\n\n'],
    ['data on two lines', 'data: {"choices":\ndata: []}\n\n'],
    ['an error', `data: ${JSON.stringify({ error: { message: 'boom' } })}\n\n`],
  ])('leave events with %s, and the text event after them, to the provider as they came', (_, event) => {
    const { held, joined, events } = filter([text('a'), event, text('b'), DONE]);
    expect(held).toEqual([]);
    expect(joined).toEqual([]);
    const parsed: Array<{ event?: string; data: string }> = [];
    createParser({ onEvent: ({ event: name, data }) => parsed.push({ event: name, data }) }).feed(
      text('a') + event + text('b') + DONE,
    );
    expect(events).toEqual(parsed);
  });
});

/** An OpenAI-style upstream answering each request with the next scripted list of writes. */
async function scriptedUpstream(replies: string[][]) {
  const bodies: Array<{ messages: unknown[] }> = [];
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (data: Buffer) => {
      raw += data;
    });
    req.on('end', () => {
      bodies.push(JSON.parse(raw) as { messages: unknown[] });
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const writes = replies.shift() ?? [];
      const breakAfter = writes.indexOf('BREAK');
      if (breakAfter === -1) {
        res.end(writes.join(''));
        return;
      }
      res.write(writes.slice(0, breakAfter).join(''));
      setTimeout(() => req.socket.destroy(), 20);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    bodies,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

type Upstream = Awaited<ReturnType<typeof scriptedUpstream>>;

/** The two OpenAI-style providers as the model registry builds them. */
const providers: Array<[string, (baseURL: string) => LanguageModelV3]> = [
  [
    'openai-compatible',
    (baseURL) =>
      allowTextEvents(
        createOpenAICompatible({
          name: 'up',
          baseURL,
          includeUsage: true,
          fetch: guardedFetch(createNodeFetch(1 << 20)),
        }).chatModel('m'),
      ),
  ],
  [
    'openai',
    (baseURL) =>
      allowTextEvents(
        createOpenAI({
          apiKey: 'k',
          baseURL,
          name: 'up',
          fetch: guardedFetch(createNodeFetch(1 << 20)),
        }).chat('m'),
      ),
  ],
];

/** The chunks' text deltas joined, and the other chunks' types, in order (`T` marks text). */
function shape(chunks: UIMessageChunk[]) {
  const text = chunks.map((value) => (value.type === 'text-delta' ? value.delta : '')).join('');
  const types = chunks
    .map((value) => (value.type === 'text-delta' ? 'T' : value.type))
    .filter((type, i, all) => type !== 'T' || all[i - 1] !== 'T');
  return { text, types };
}

describe.each(providers)(
  'a streamed reply through the %s provider, its text events held back',
  (_, build) => {
    let upstream: Upstream | undefined;
    /** What the filter gave the provider for each network read. */
    let given: string[] = [];
    const write = TextEventFilter.prototype.write;
    beforeAll(() => {
      TextEventFilter.prototype.write = function (this: TextEventFilter, bytes: Uint8Array) {
        const out = write.call(this, bytes);
        given.push(out);
        return out;
      };
    });
    afterEach(async () => {
      await upstream?.close();
      upstream = undefined;
      given = [];
    });
    afterAll(() => {
      TextEventFilter.prototype.write = write;
    });

    /** How many events the provider was given. */
    const givenEvents = () => given.join('').split('\n\n').length - 1;

    it('reaches the client whole and in order, is stored whole, and the provider parsed a few events', async () => {
      const pieces = Array.from({ length: 200 }, (__, i) => `w${i} `);
      upstream = await scriptedUpstream([
        [
          // What OpenAI sends first: an empty text with the role.
          chunk({ role: 'assistant', content: '', refusal: null }, { obfuscation: 'x' }),
          ...pieces.map((piece) => chunk({ content: piece }, { obfuscation: 'abc' })),
          finish(),
          usageChunk,
          DONE,
        ],
      ]);
      const { chunks, stored } = await replyOf(build(upstream.baseURL));
      const whole = pieces.join('');
      expect(shape(chunks)).toEqual({
        text: whole,
        types: ['start', 'start-step', 'text-start', 'T', 'text-end', 'finish-step', 'finish'],
      });
      expect(stored).toMatchObject({ ok: true, text: whole, usage: { inputTokens: 3, outputTokens: 4 } });
      // Of the 204 events, the provider got the empty first, the first text, the rest joined into
      // one, the finish, the usage and [DONE].
      expect(givenEvents()).toBe(6);
    });

    it("hands text of a tool step to the next step's prompt, and keeps text before the tool call", async () => {
      upstream = await scriptedUpstream([
        [
          text('Let '),
          text('me '),
          text('look.'),
          chunk({
            tool_calls: [
              { index: 0, id: 'c1', type: 'function', function: { name: 'lookUp', arguments: '{"q":"x"}' } },
            ],
          }),
          finish('tool_calls'),
          usageChunk,
          DONE,
        ],
        [text('Found '), text('it'), text('.'), finish(), usageChunk, DONE],
      ]);
      const lookUp = tool({ inputSchema: z.object({ q: z.string() }), execute: async () => 'found' });
      const { chunks, stored } = await replyOf(build(upstream.baseURL), { lookUp });
      const { text: said, types } = shape(chunks);
      expect(said).toBe('Let me look.Found it.');
      expect(types.indexOf('tool-input-available')).toBeGreaterThan(types.indexOf('text-end'));
      expect(types.lastIndexOf('T')).toBeGreaterThan(types.indexOf('tool-output-available'));
      expect(JSON.stringify(upstream.bodies[1]!.messages)).toContain('Let me look.');
      expect(stored).toMatchObject({ ok: true, text: 'Let me look.Found it.' });
    });

    it('keeps text after a tool call in the same step once each and in order', async () => {
      upstream = await scriptedUpstream([
        [
          text('Let '),
          chunk({
            tool_calls: [
              { index: 0, id: 'c1', type: 'function', function: { name: 'lookUp', arguments: '{"q":"x"}' } },
            ],
          }),
          text('me '),
          text('see'),
          text('.'),
          finish('tool_calls'),
          usageChunk,
          DONE,
        ],
        [text('Done.'), finish(), usageChunk, DONE],
      ]);
      const lookUp = tool({ inputSchema: z.object({ q: z.string() }), execute: async () => 'found' });
      const { chunks, stored } = await replyOf(build(upstream.baseURL), { lookUp });
      expect(shape(chunks).text).toBe('Let me see.Done.');
      expect(stored).toMatchObject({ ok: true, text: 'Let me see.Done.' });
    });

    it('that breaks while text is held gives the client that text, then an error', async () => {
      upstream = await scriptedUpstream([[text('one '), text('two '), text('three'), 'BREAK']]);
      const { chunks, stored } = await replyOf(build(upstream.baseURL));
      const { text: said, types } = shape(chunks);
      expect(said).toBe('one two three');
      expect(types).toContain('error');
      expect(stored.ok).toBe(false);
    });
  },
);

describe('a provider of the setup file', () => {
  it('has its text events held back on POST /v1/chat', async () => {
    const upstream = await startFakeUpstream();
    const t = await createTestApp({ setup: chatSetup(upstream) });
    let given = 0;
    const write = TextEventFilter.prototype.write;
    TextEventFilter.prototype.write = function (this: TextEventFilter, bytes: Uint8Array) {
      const out = write.call(this, bytes);
      given += out.split('\n\n').length - 1;
      return out;
    };
    try {
      const pieces = Array.from({ length: 50 }, (_, i) => `p${i} `);
      upstream.enqueue({ kind: 'text', text: '', pieces });
      const res = await t.app.inject({
        method: 'POST',
        url: '/v1/chat',
        headers: { 'x-service-api-key': CHAT_KEYS.main },
        payload: { agentId: 'agt_plain', stream: true, messages: [userText('hi')] },
      });
      expect(res.statusCode).toBe(200);
      const said = [...res.body.matchAll(/"type":"text-delta","id":"[^"]*","delta":"([^"]*)"/g)]
        .map((match) => match[1])
        .join('');
      expect(said).toBe(pieces.join(''));
      // The first text event, the rest joined, the finish, the usage and [DONE].
      expect(given).toBe(5);
    } finally {
      TextEventFilter.prototype.write = write;
      await t.close();
      await upstream.close();
    }
  });
});
