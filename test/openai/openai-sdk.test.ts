import { createHash } from 'node:crypto';
import OpenAI from 'openai';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { MAX_JSON_CONTAINERS, MAX_JSON_KEY_NAMES } from '../../src/limits.js';
import type { TestApp } from '../helpers/app.js';
import { CHAT_KEYS, chatRows, countRows } from '../chat/fixtures.js';
import type { TestMcpServer } from '../chat/mcp-server.js';
import { type FakeUpstream, failsMidStreamThenGoesOn, type ReplyScript } from '../helpers/fake-upstream.js';
import { useOpenAIApp } from './openai-app.js';

/**
 * The official `openai` SDK as the client of `/v1/openai` (spec/openai-compatible.md), against
 * Atrium on a real port and the fake OpenAI-compatible upstream.
 */
let upstream: FakeUpstream;
let mcp: TestMcpServer;
let t: TestApp;
let baseURL: string;

useOpenAIApp({}, (app) => ({ upstream, mcp, t, baseURL } = app));
beforeEach(() => {
  upstream.requests.length = 0;
});

function client(
  apiKey: string = CHAT_KEYS.main,
  options: Partial<ConstructorParameters<typeof OpenAI>[0]> = {},
) {
  return new OpenAI({ apiKey, baseURL, maxRetries: 0, ...options });
}

/** What the SDK throws for a one-line "Hi" to agt_plain with `extra` fields (the error, not thrown). */
function refusalOf(extra: Record<string, unknown>): Promise<unknown> {
  return client()
    .chat.completions.create({
      model: 'agt_plain',
      messages: [{ role: 'user', content: 'Hi' }],
      ...extra,
    } as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming)
    .catch((e: unknown) => e);
}

/** A request's extra fields and the 400 they must get: its `param` and message. */
type Refusal = [Record<string, unknown>, { param: string; message: string }];

/** Each request is refused by the SDK with BadRequestError, naming its field and problem. */
async function expectRefused(refused: Refusal[]) {
  for (const [extra, expected] of refused) {
    const error = await refusalOf(extra);
    const label = JSON.stringify(extra);
    expect(error, label).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error, label).toMatchObject({ code: 'bad_request', param: expected.param });
    expect((error as InstanceType<typeof OpenAI.APIError>).error, label).toMatchObject({
      message: expected.message,
    });
  }
}

/** A fetch for the SDK that counts its requests: its retries show in `calls`. */
function countingFetch() {
  const counting = {
    calls: 0,
    fetch: ((input, init) => {
      counting.calls++;
      return fetch(input, init);
    }) as typeof fetch,
  };
  return counting;
}

const weatherTool = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

/** A conversation in which the client's `get_weather` was called and answered, then `then`. */
function afterWeatherCall(then: string) {
  return [
    { role: 'user' as const, content: 'Weather in Paris?' },
    {
      role: 'assistant' as const,
      content: null,
      tool_calls: [
        {
          id: 'call_paris',
          type: 'function' as const,
          function: { name: 'get_weather', arguments: '{"city":"Paris"}' },
        },
      ],
    },
    { role: 'tool' as const, tool_call_id: 'call_paris', content: '22°C, sunny' },
    { role: 'user' as const, content: then },
  ];
}

async function collect(stream: AsyncIterable<OpenAI.Chat.Completions.ChatCompletionChunk>) {
  const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

function text(chunks: OpenAI.Chat.Completions.ChatCompletionChunk[]) {
  return chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('');
}

describe('models', () => {
  it('lists the agents of the key as models, in the agent list order, and retrieves one', async () => {
    const page = await client().models.list();
    const ids = page.data.map((model) => model.id);
    expect(ids).toEqual(['agt_echo', 'agt_helper', 'agt_lead', 'agt_plain', 'agt_tools']);
    expect(page.data[1]).toEqual({
      id: 'agt_helper',
      object: 'model',
      created: expect.any(Number),
      owned_by: 'atrium',
      name: 'Helper',
      description: 'Answers questions',
    });
    const one = await client().models.retrieve('agt_plain');
    expect(one).toMatchObject({ id: 'agt_plain', object: 'model', owned_by: 'atrium', name: 'Plain' });
  });

  it('answers 404 model_not_found for an unknown agent and for another workspace’s agent', async () => {
    for (const id of ['agt_nope', 'agt_other']) {
      const error = await client()
        .models.retrieve(id)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.NotFoundError);
      expect(error).toMatchObject({ status: 404, code: 'model_not_found', param: 'model' });
    }
  });

  it('takes a lower-case bearer scheme (auth schemes are case-insensitive, RFC 9110 §11.1)', async () => {
    const response = await fetch(`${baseURL}/models`, {
      headers: { authorization: `bearer ${CHAT_KEYS.main}` },
    });
    expect(response.status).toBe(200);
  });

  it('an organization key names the workspace in x-workspace-id', async () => {
    const org = client(CHAT_KEYS.org, { defaultHeaders: { 'x-workspace-id': 'wsp_other' } });
    expect((await org.models.list()).data.map((model) => model.id)).toEqual(['agt_other']);
  });
});

describe('chat completions', () => {
  it('answers a JSON completion with usage, stores nothing and counts usage', async () => {
    const before = await countRows(t.db);
    upstream.enqueue({ kind: 'text', text: 'Hi there.', usage: { prompt: 11, completion: 7 } });
    const { data, response } = await client()
      .chat.completions.create({ model: 'agt_plain', messages: [{ role: 'user', content: 'Hello' }] })
      .withResponse();
    expect(data).toMatchObject({
      object: 'chat.completion',
      model: 'agt_plain',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hi there.' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 },
    });
    expect(data.id).toMatch(/^chatcmpl-/);
    expect(response.headers.get('x-request-id')).toBeTruthy();
    expect(response.headers.get('x-atrium-chat-id')).toBeNull();
    const after = await countRows(t.db);
    expect({ chats: after.chats, messages: after.messages }).toEqual({
      chats: before.chats,
      messages: before.messages,
    });
    const ledger = await t.db
      .selectFrom('usage_ledger')
      .selectAll()
      .where('workspace_id', '=', 'wsp_main')
      .executeTakeFirstOrThrow();
    expect(Number(ledger.input_tokens)).toBeGreaterThanOrEqual(11);
  });

  it('streams chunks: role first, text deltas, finish_reason, the usage chunk, [DONE]', async () => {
    upstream.enqueue({ kind: 'text', text: 'One two three.', usage: { prompt: 9, completion: 3 } });
    const stream = await client().chat.completions.create({
      model: 'agt_plain',
      messages: [{ role: 'user', content: 'Count' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = await collect(stream);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(text(chunks)).toBe('One two three.');
    const finishing = chunks.filter((chunk) => chunk.choices[0]?.finish_reason);
    expect(finishing.map((chunk) => chunk.choices[0]!.finish_reason)).toEqual(['stop']);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual({ prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 });
    expect(new Set(chunks.map((chunk) => chunk.id)).size).toBe(1);
    expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk')).toBe(true);
  });

  it('streams from any configured provider through the AI SDK (the atrium/echo model)', async () => {
    const chunks = await collect(
      await client().chat.completions.create({
        model: 'agt_echo',
        messages: [{ role: 'user', content: 'Ping' }],
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    expect(text(chunks)).toContain('You said: "Ping"');
    expect(chunks.at(-1)!.usage!.completion_tokens).toBeGreaterThan(0);
    expect(upstream.requests).toHaveLength(0);
  });

  it('sends no usage chunk without include_usage', async () => {
    const chunks = await collect(
      await client().chat.completions.create({
        model: 'agt_plain',
        messages: [{ role: 'user', content: 'Hi' }],
        stream: true,
      }),
    );
    expect(chunks.some((chunk) => chunk.usage)).toBe(false);
    expect(text(chunks)).toBe(upstream.defaultText);
  });

  it('puts system and developer messages after the agent instructions, and passes sampling settings', async () => {
    const sampling = {
      max_tokens: 5,
      temperature: 0.2,
      top_p: 0.5,
      stop: ['END'],
      seed: 7,
      presence_penalty: 0.1,
      frequency_penalty: 0.3,
    };
    await client().chat.completions.create({
      model: 'agt_helper',
      messages: [
        { role: 'system', content: 'Answer in French.' },
        { role: 'developer', content: 'Be brief.' },
        { role: 'user', content: 'Hello' },
      ],
      ...sampling,
      user: 'end-user-1',
    });
    const body = upstream.lastRequest().body;
    const systems = body.messages!.filter((m) => m.role === 'system').map((m) => String(m.content));
    expect(systems).toHaveLength(3);
    expect(systems[0]).toContain('You help');
    expect(systems.slice(1)).toEqual(['Answer in French.', 'Be brief.']);
    expect(body.messages!.at(-1)).toEqual({ role: 'user', content: 'Hello' });
    // Sent to the provider as they came.
    expect(body).toMatchObject(sampling);
    // `user` is the acting user of `{{user.id}}`.
    expect(systems[0]).toContain('end-user-1');
  });

  it('takes an assistant message sent back with a refusal (a content part, or the message’s field) as that text', async () => {
    const refused: OpenAI.Chat.Completions.ChatCompletionAssistantMessageParam[] = [
      { role: 'assistant', content: [{ type: 'refusal', refusal: 'I cannot share that.' }], refusal: null },
      { role: 'assistant', content: null, refusal: 'I cannot share that.' },
    ];
    for (const assistant of refused) {
      await client().chat.completions.create({
        model: 'agt_plain',
        messages: [
          { role: 'user', content: 'Tell me a secret' },
          assistant,
          { role: 'user', content: 'Then a joke' },
        ],
      });
      expect(upstream.lastRequest().body.messages!.slice(-2)).toEqual([
        { role: 'assistant', content: 'I cannot share that.' },
        { role: 'user', content: 'Then a joke' },
      ]);
    }
  });

  it('accepts max_completion_tokens and reports finish_reason length', async () => {
    upstream.enqueue({ kind: 'text', text: 'One two three', finishReason: 'length' });
    const json = await client().chat.completions.create({
      model: 'agt_plain',
      messages: [{ role: 'user', content: 'Hello' }],
      max_completion_tokens: 3,
    });
    expect(upstream.lastRequest().body.max_tokens).toBe(3);
    expect(json.choices[0]).toMatchObject({ finish_reason: 'length', message: { content: 'One two three' } });
  });

  it.each(['length', 'content_filter'] as const)(
    'relays the provider’s finish_reason %s, JSON and streamed (the stream helper’s final completion too)',
    async (finishReason) => {
      const request = { model: 'agt_plain', messages: [{ role: 'user' as const, content: 'Hello' }] };
      upstream.enqueue({ kind: 'text', text: 'Cut short', finishReason });
      const json = await client().chat.completions.create(request);
      expect(json.choices[0]!.finish_reason).toBe(finishReason);
      upstream.enqueue({ kind: 'text', text: 'Cut short', finishReason });
      const chunks = await collect(await client().chat.completions.create({ ...request, stream: true }));
      const reasons = chunks.map((chunk) => chunk.choices[0]?.finish_reason).filter(Boolean);
      expect(reasons).toEqual([finishReason]);
      upstream.enqueue({ kind: 'text', text: 'Cut short', finishReason });
      const final = await client().chat.completions.stream(request).finalChatCompletion();
      expect(final.choices[0]).toMatchObject({
        finish_reason: finishReason,
        message: { content: 'Cut short' },
      });
    },
  );

  it('sends an image part to the model', async () => {
    const png =
      'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    await client().chat.completions.create({
      model: 'agt_plain',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is this?' },
            { type: 'image_url', image_url: { url: png } },
          ],
        },
      ],
    });
    const user = upstream.lastRequest().body.messages!.at(-1)!;
    expect(user.content).toEqual([
      { type: 'text', text: 'What is this?' },
      { type: 'image_url', image_url: { url: png } },
    ]);
  });
});

describe('errors', () => {
  it('refuses unsupported parameters with 400 BadRequestError carrying Atrium’s code', async () => {
    const refused: Array<[Record<string, unknown>, string]> = [
      [{ n: 2 }, 'n'],
      [{ logprobs: true }, 'logprobs'],
      [{ response_format: { type: 'json_object' } }, 'response_format'],
      [{ modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'mp3' } }, 'audio'],
      // A forced function the request does not declare (once a 502 from the SDK's check).
      [
        {
          tools: [{ type: 'function', function: { name: 'f' } }],
          tool_choice: { type: 'function', function: { name: 'zzz' } },
        },
        'tool_choice',
      ],
      // Two functions of one name: the model would see one of them (Anthropic and Gemini refuse
      // such a request: "tools: Tool names must be unique").
      [
        {
          tools: [
            { type: 'function', function: { name: 'f', description: 'one' } },
            { type: 'function', function: { name: 'g' } },
            { type: 'function', function: { name: 'f', description: 'two' } },
          ],
        },
        'tools.2.function.name',
      ],
      // Inline images OpenAI would not take (once a 502: the SDK failed to decode them), and
      // https: URLs that are no URL (once a 500).
      ...[
        'data:image/png;base64,!!!',
        // Base64 the fetch standard fails: one character over a group, padding inside a group.
        'data:image/png;base64,a',
        'data:image/png;base64,YQ=',
        'data:,hello',
        'data:text/plain;base64,aGk=',
        'data:image/png,raw',
        'https://',
        'https://exa mple.com/a.png',
      ].map((url): [Record<string, unknown>, string] => [
        { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }] }] },
        'messages.0.content.0',
      ]),
    ];
    for (const [extra, param] of refused) {
      const error = await refusalOf(extra);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error).toMatchObject({ status: 400, code: 'bad_request', param, type: 'invalid_request_error' });
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it('refuses an assistant tool call not followed by its tool result with 400 (not retried), calling no provider and storing nothing', async () => {
    const call = {
      id: 'call_1',
      type: 'function' as const,
      function: { name: 'get_weather', arguments: '{}' },
    };
    const asked = { role: 'assistant' as const, content: null, tool_calls: [call] };
    const cases: OpenAI.Chat.Completions.ChatCompletionMessageParam[][] = [
      // A user message where the tool result belongs.
      [{ role: 'user', content: 'Weather?' }, asked, { role: 'user', content: 'Never mind, hi.' }],
      // A system message between the call and its result.
      [
        { role: 'user', content: 'Weather?' },
        asked,
        { role: 'system', content: 'Be brief.' },
        { role: 'tool', tool_call_id: 'call_1', content: 'Sunny' },
      ],
      // The request ends with the call.
      [{ role: 'user', content: 'Weather?' }, asked],
      // One of two calls answered.
      [
        { role: 'user', content: 'Weather?' },
        { ...asked, tool_calls: [call, { ...call, id: 'call_2' }] },
        { role: 'tool', tool_call_id: 'call_2', content: 'Sunny' },
        { role: 'user', content: 'And?' },
      ],
    ];
    const before = await countRows(t.db);
    // With the SDK's default retries: a 400 is not retried (the 502 it was got two retries).
    const sdk = client(CHAT_KEYS.main, {
      maxRetries: 2,
      defaultHeaders: { 'x-atrium-conversation-key': 'unanswered-call' },
    });
    for (const messages of cases) {
      for (const stream of [false, true]) {
        const error = await sdk.chat.completions
          .create({ model: 'agt_plain', messages, stream })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(OpenAI.BadRequestError);
        expect(error).toMatchObject({
          status: 400,
          type: 'invalid_request_error',
          code: 'bad_request',
          param: 'messages.1.tool_calls',
        });
        expect((error as Error).message).toContain('not answered: call_1');
      }
    }
    expect(upstream.requests).toHaveLength(0);
    expect(await countRows(t.db)).toEqual(before);
  });

  it('refuses a tool message that does not answer the assistant message right before it: 400, no provider call', async () => {
    const asked = {
      role: 'assistant' as const,
      content: null,
      tool_calls: [
        { id: 'call_1', type: 'function' as const, function: { name: 'get_weather', arguments: '{}' } },
      ],
    };
    const answered = [
      { role: 'user' as const, content: 'Weather?' },
      asked,
      { role: 'tool' as const, tool_call_id: 'call_1', content: 'Sunny' },
    ];
    const cases: Array<[OpenAI.Chat.Completions.ChatCompletionMessageParam[], string]> = [
      // After a later user message, naming the earlier call.
      [[...answered, { role: 'user', content: 'And tomorrow?' }, answered[2]!], 'messages.4.tool_call_id'],
      // The same call answered twice.
      [[...answered, answered[2]!], 'messages.3.tool_call_id'],
      // No call at all.
      [[{ role: 'user', content: 'Hi' }, answered[2]!], 'messages.1.tool_call_id'],
    ];
    for (const [messages, param] of cases) {
      for (const stream of [false, true]) {
        const error = await client()
          .chat.completions.create({ model: 'agt_plain', messages, stream })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(OpenAI.BadRequestError);
        expect(error).toMatchObject({ status: 400, code: 'bad_request', param });
      }
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it('holds a tool call’s arguments (JSON inside a string) to the body’s limits: 400, nothing stored', async () => {
    const withArguments = (args: string[]): OpenAI.Chat.Completions.ChatCompletionMessageParam[] => [
      { role: 'user', content: 'Go' },
      {
        role: 'assistant',
        content: null,
        tool_calls: args.map((text, i) => ({
          id: `call_${i}`,
          type: 'function' as const,
          function: { name: 'get_weather', arguments: text },
        })),
      },
      ...args.map((_, i) => ({ role: 'tool' as const, tool_call_id: `call_${i}`, content: 'ok' })),
      { role: 'user', content: 'Next' },
    ];
    const namedKeys = (count: number, prefix: string) =>
      `{${Array.from({ length: count }, (_, i) => `"${prefix}${i}":0`).join(',')}}`;
    const half = `[${Array(MAX_JSON_CONTAINERS / 2)
      .fill('[]')
      .join(',')}]`;
    const cases: Array<[string[], string, string]> = [
      // Before: 200 after seconds of parsing, then every later turn of the chat slow again.
      [
        [
          `[${Array(MAX_JSON_CONTAINERS + 1)
            .fill('[]')
            .join(',')}]`,
        ],
        'messages.1.tool_calls.0.function.arguments',
        'objects and arrays',
      ],
      // Counted over the request's calls together.
      [[half, half], 'messages.1.tool_calls.1.function.arguments', 'objects and arrays'],
      // Before: a million different names took seconds to parse. A name counts once over the
      // calls: the second call's names are the first's, the third's are new.
      [
        [
          namedKeys(MAX_JSON_KEY_NAMES / 2 + 1, 'a'),
          namedKeys(MAX_JSON_KEY_NAMES / 2 + 1, 'a'),
          namedKeys(MAX_JSON_KEY_NAMES / 2, 'b'),
        ],
        'messages.1.tool_calls.2.function.arguments',
        'different key names',
      ],
      // Before: a 500 (named chat) or a 502 (retried), JSON.stringify overflowing its stack.
      [
        ['['.repeat(5_000) + ']'.repeat(5_000)],
        'messages.1.tool_calls.0.function.arguments',
        'nested more than 64',
      ],
      // A NUL escaped inside the arguments: PostgreSQL cannot store it.
      [['{"city":"a\\u0000b"}'], 'messages.1.tool_calls.0.function.arguments.city', 'NUL'],
    ];
    const before = await countRows(t.db);
    const sdk = client(CHAT_KEYS.main, { defaultHeaders: { 'x-atrium-conversation-key': 'big-arguments' } });
    for (const [args, param, message] of cases) {
      const error = await sdk.chat.completions
        .create({ model: 'agt_plain', messages: withArguments(args) })
        .catch((e: unknown) => e);
      expect(error, param).toBeInstanceOf(OpenAI.BadRequestError);
      // The param names the call's arguments (and, inside them, where the problem is).
      expect(error).toMatchObject({ status: 400, code: 'bad_request' });
      expect((error as { param: string }).param.startsWith(param)).toBe(true);
      expect((error as Error).message).toContain(message);
    }
    expect(upstream.requests).toHaveLength(0);
    expect(await countRows(t.db)).toEqual(before);
  });

  it('names the request’s own message and field in param when a user message has no content', async () => {
    const leading: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      { role: 'system', content: 'Be brief.' },
      { role: 'developer', content: 'Be kind.' },
    ];
    for (const content of [null, [], undefined]) {
      const error = await client()
        .chat.completions.create({
          model: 'agt_plain',
          messages: [...leading, { role: 'user', content } as never],
        })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      // Once `messages.0.parts`: the index and field of the list stored, not of the request.
      expect(error).toMatchObject({ code: 'bad_request', param: 'messages.2.content' });
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it('takes null for an optional field as left out, as clients that pass None send it', async () => {
    const completion = await client().chat.completions.create({
      model: 'agt_plain',
      messages: [{ role: 'user', content: 'Hi' }],
      temperature: null,
      top_p: null,
      max_tokens: null,
      max_completion_tokens: null,
      seed: null,
      presence_penalty: null,
      frequency_penalty: null,
      user: null,
      tools: null,
      tool_choice: null,
      stream: null,
      logprobs: false,
      top_logprobs: 0,
    } as unknown as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming);
    expect(completion.choices[0]!.message.content).toBeTruthy();
  });

  it('ignores unknown fields and refuses a malformed body as a 400 in OpenAI’s shape', async () => {
    await client().chat.completions.create({
      model: 'agt_plain',
      messages: [{ role: 'user', content: 'Hi' }],
      some_future_field: true,
    } as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming);
    const error = await client()
      .chat.completions.create({ model: 'agt_plain', messages: [] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({ code: 'bad_request', param: 'messages' });
  });

  it('says what is wrong with a field that may take several shapes, not only that it is not the first shape', async () => {
    const refused: Refusal[] = [
      // An array, so past the array's limit (it said "must be string").
      [
        { stop: ['a', 'b', 'c', 'd', 'e'] },
        { param: 'stop', message: 'body.stop must NOT have more than 4 items' },
      ],
      // Parts, so the part's missing field (it said "messages.0.content must be string").
      [
        { messages: [{ role: 'user', content: [{ text: 'Hi' }] }] },
        {
          param: 'messages.0.content.0.type',
          message: 'body.messages.0.content.0.type is required',
        },
      ],
      // None of the shapes: all of them (it said "must be equal to constant").
      [
        { tool_choice: 'sometimes' },
        { param: 'tool_choice', message: 'body.tool_choice must be "none", "auto", "required" or object' },
      ],
      [{ stop: 5 }, { param: 'stop', message: 'body.stop must be string, array or null' }],
      [
        { messages: [{ role: 'function', content: 'Hi' }] },
        {
          param: 'messages.0.role',
          message: 'body.messages.0.role must be "system", "developer", "user", "assistant" or "tool"',
        },
      ],
    ];
    await expectRefused(refused);
  });

  it('refuses an empty tools list, an empty stop sequence and a logprobs that is no boolean: 400 naming the field', async () => {
    const refused: Refusal[] = [
      // OpenAI: "[] is too short - 'tools'" (it was accepted, and no tools were offered).
      [{ tools: [] }, { param: 'tools', message: 'body.tools must NOT have fewer than 1 items' }],
      // An empty stop sequence means nothing, and providers refuse it (it was passed on).
      [{ stop: '' }, { param: 'stop', message: 'body.stop must NOT have fewer than 1 characters' }],
      [
        { stop: ['END', ''] },
        { param: 'stop.1', message: 'body.stop.1 must NOT have fewer than 1 characters' },
      ],
      // Only `true` was refused: a truthy 1 or "true" asked for log probabilities and got none.
      ...[1, 0, 'true', {}].map((logprobs): Refusal => [
        { logprobs },
        { param: 'logprobs', message: 'body.logprobs must be boolean' },
      ]),
    ];
    await expectRefused(refused);
    expect(upstream.requests).toHaveLength(0);
    // A blank but not empty stop sequence is one (a space), and `logprobs: false` asks for none.
    await client().chat.completions.create({
      model: 'agt_plain',
      messages: [{ role: 'user', content: 'Hi' }],
      stop: [' ', 'END'],
      logprobs: false,
    });
    expect(upstream.lastRequest().body.stop).toEqual([' ', 'END']);
  });

  it('says the type an object tool_choice or tool takes when its type is another, and the problem of one whose type is right', async () => {
    const refused: Refusal[] = [
      // The object's `type` is wrong: the type it takes (it said "must have required property
      // 'function'", the first problem of the object shape, and "must be string" for a number).
      ...['fn', 5, null, 'auto'].map((type): Refusal => [
        { tool_choice: { type } },
        { param: 'tool_choice.type', message: 'body.tool_choice.type must be "function"' },
      ]),
      [
        { tool_choice: { type: 'fn', function: { name: 'get_weather' } } },
        { param: 'tool_choice.type', message: 'body.tool_choice.type must be "function"' },
      ],
      // The type is right: what is wrong inside the object.
      [
        { tool_choice: { type: 'function' } },
        { param: 'tool_choice.function', message: 'body.tool_choice.function is required' },
      ],
      [
        { tool_choice: { type: 'function', function: {} } },
        { param: 'tool_choice.function.name', message: 'body.tool_choice.function.name is required' },
      ],
      [
        { tool_choice: { type: 'function', function: { name: 5 } } },
        { param: 'tool_choice.function.name', message: 'body.tool_choice.function.name must be string' },
      ],
      [
        { tool_choice: { function: { name: 'get_weather' } } },
        { param: 'tool_choice.type', message: 'body.tool_choice.type is required' },
      ],
      // A tool's fixed type, whatever the kind of value sent in its place.
      ...[5, null, 'fn'].map((type): Refusal => [
        { tools: [{ ...weatherTool, type }] },
        { param: 'tools.0.type', message: 'body.tools.0.type must be "function"' },
      ]),
    ];
    await expectRefused(refused);
    expect(upstream.requests).toHaveLength(0);
  });

  it('answers an unknown agent and another workspace’s agent with NotFoundError, param model', async () => {
    for (const [key, model] of [
      [CHAT_KEYS.main, 'agt_nope'],
      [CHAT_KEYS.other, 'agt_helper'],
    ] as const) {
      const error = await client(key)
        .chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }] })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.NotFoundError);
      expect(error).toMatchObject({ status: 404, code: 'model_not_found', param: 'model' });
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it('answers an unknown path with 404 and a wrong method with 405, in OpenAI’s shape', async () => {
    const headers = { authorization: `Bearer ${CHAT_KEYS.main}` };
    const missing = await fetch(`${baseURL}/embeddings`, { method: 'POST', headers });
    expect(missing.status).toBe(404);
    expect((await missing.json()).error).toMatchObject({ code: 'not_found', type: 'invalid_request_error' });
    const wrong = await fetch(`${baseURL}/chat/completions`, { headers });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('POST');
    expect((await wrong.json()).error).toMatchObject({ code: 'method_not_allowed' });
  });

  it('answers a path the router refuses (bad percent-encoding, an overlong id) in OpenAI’s shape', async () => {
    const error = await client()
      .models.retrieve('x'.repeat(2000))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({ status: 400, code: 'bad_request', type: 'invalid_request_error' });
    // The SDK encodes what it is given: a broken encoding only comes from a hand-made path.
    const res = await fetch(`${baseURL}/models/%E2%82`, {
      headers: { authorization: `Bearer ${CHAT_KEYS.main}` },
    });
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code: 'bad_request', type: 'invalid_request_error' });
  });

  it('answers a bad key with 401 AuthenticationError', async () => {
    const error = await client('atr_ws_not_a_real_key_000000000000000000000')
      .models.list()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(error).toMatchObject({ status: 401, code: 'not_authenticated' });
  });

  it('answers 402 with x-should-retry: false, and the SDK does not retry it', async () => {
    upstream.enqueue({ kind: 'text', text: 'ok', usage: { prompt: 90, completion: 20 } });
    await client(CHAT_KEYS.limited).chat.completions.create({
      model: 'agt_limited',
      messages: [{ role: 'user', content: 'Hi' }],
    });
    const counting = countingFetch();
    const sdk = client(CHAT_KEYS.limited, { maxRetries: 3, fetch: counting.fetch });
    const error = await sdk.chat.completions
      .create({ model: 'agt_limited', messages: [{ role: 'user', content: 'Again' }] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect(error).toMatchObject({ status: 402, code: 'usage_limit_exceeded', type: 'insufficient_quota' });
    expect((error as InstanceType<typeof OpenAI.APIError>).headers?.get('x-should-retry')).toBe('false');
    expect(counting.calls).toBe(1);
  });

  it('answers a streamed request over the limit with 402 before any stream', async () => {
    const error = await client(CHAT_KEYS.limited)
      .chat.completions.create({
        model: 'agt_limited',
        messages: [{ role: 'user', content: 'x' }],
        stream: true,
      })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 402, code: 'usage_limit_exceeded' });
  });

  it('tells the SDK not to retry a provider’s refusal of the request (its 4xx), and leaves its 429 and 5xx to retries', async () => {
    // A prompt past the model's context window, say: the same request is refused every time.
    for (const providerStatus of [400, 401, 404, 422]) {
      upstream.enqueue({ kind: 'fail', status: providerStatus, message: 'context_length_exceeded' });
      const counting = countingFetch();
      const error = await client(CHAT_KEYS.main, { maxRetries: 2, fetch: counting.fetch })
        .chat.completions.create({
          model: 'agt_plain',
          messages: [{ role: 'user', content: 'x'.repeat(1000) }],
        })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.InternalServerError);
      expect(error).toMatchObject({ status: 502, code: 'upstream_error', type: 'api_error' });
      expect((error as InstanceType<typeof OpenAI.APIError>).headers?.get('x-should-retry')).toBe('false');
      expect(counting.calls).toBe(1);
    }
    for (const providerStatus of [408, 429, 500, 503]) {
      upstream.enqueue({ kind: 'fail', status: providerStatus });
      const error = await client()
        .chat.completions.create({ model: 'agt_plain', messages: [{ role: 'user', content: 'Hi' }] })
        .catch((e: unknown) => e);
      expect(error).toMatchObject({ status: 502, code: 'upstream_error' });
      expect((error as InstanceType<typeof OpenAI.APIError>).headers?.get('x-should-retry')).toBeNull();
    }
  });

  it('surfaces an upstream failure before the reply as 502, and one mid-stream as an error event', async () => {
    upstream.enqueue({ kind: 'fail', status: 500 });
    const failed = await client()
      .chat.completions.create({ model: 'agt_plain', messages: [{ role: 'user', content: 'Hi' }] })
      .catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(OpenAI.InternalServerError);
    expect(failed).toMatchObject({ status: 502, code: 'upstream_error', type: 'api_error' });

    upstream.enqueue({ kind: 'disconnect', text: 'one two three four', afterPieces: 2 });
    const seen: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    const stream = await client().chat.completions.create({
      model: 'agt_plain',
      messages: [{ role: 'user', content: 'Hi' }],
      stream: true,
    });
    const error = await (async () => {
      for await (const chunk of stream) seen.push(chunk);
    })().catch((e: unknown) => e);
    expect(text(seen)).toBe('one two ');
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect(error).toMatchObject({ code: 'upstream_error', type: 'api_error' });
  });

  it('answers 429 with Retry-After, seen by the SDK', async () => {
    await t.db
      .updateTable('workspaces')
      .set({ rate_limit_per_minute: 1 })
      .where('id', '=', 'wsp_capped')
      .execute();
    try {
      const sdk = client(CHAT_KEYS.capped);
      await sdk.models.list();
      const error = await sdk.models.list().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.RateLimitError);
      expect(error).toMatchObject({ status: 429, code: 'rate_limited', type: 'rate_limit_error' });
      expect(
        Number((error as InstanceType<typeof OpenAI.APIError>).headers?.get('retry-after')),
      ).toBeGreaterThan(0);
    } finally {
      await t.db
        .updateTable('workspaces')
        .set({ rate_limit_per_minute: null })
        .where('id', '=', 'wsp_capped')
        .execute();
    }
  });
});

describe('tools', () => {
  it('returns a client tool call and continues with the tool message (JSON)', async () => {
    upstream.enqueue({ kind: 'tool-calls', calls: [{ name: 'get_weather', arguments: { city: 'Paris' } }] });
    const first = await client().chat.completions.create({
      model: 'agt_plain',
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [weatherTool],
    });
    expect(first.choices[0]!.finish_reason).toBe('tool_calls');
    const call = first.choices[0]!.message.tool_calls![0]!;
    expect(call).toMatchObject({ type: 'function', function: { name: 'get_weather' } });
    expect(JSON.parse((call as { function: { arguments: string } }).function.arguments)).toEqual({
      city: 'Paris',
    });
    expect(upstream.lastRequest().body.tools?.map((tool) => tool.function.name)).toEqual(['get_weather']);

    upstream.enqueue({ kind: 'text', text: 'Sunny in Paris.' });
    const second = await client().chat.completions.create({
      model: 'agt_plain',
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        first.choices[0]!.message,
        { role: 'tool', tool_call_id: call.id, content: '22°C, sunny' },
      ],
      tools: [weatherTool],
    });
    expect(second.choices[0]!.message.content).toBe('Sunny in Paris.');
    const sent = upstream.lastRequest().body.messages!;
    expect(sent.find((m) => m.role === 'tool')).toMatchObject({
      tool_call_id: call.id,
      content: '22°C, sunny',
    });
    expect(sent.find((m) => m.role === 'assistant')?.tool_calls).toEqual([
      expect.objectContaining({ id: call.id, function: expect.objectContaining({ name: 'get_weather' }) }),
    ]);
  });

  it('passes a function tool’s strict flag to the provider (the SDK’s zodFunction sets it for parse())', async () => {
    const strictTool = {
      type: 'function' as const,
      function: {
        ...weatherTool.function,
        parameters: { ...weatherTool.function.parameters, additionalProperties: false },
        strict: true,
      },
    };
    const lax = {
      type: 'function' as const,
      function: { ...weatherTool.function, name: 'get_time', strict: false },
    };
    await client().chat.completions.create({
      model: 'agt_plain',
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [
        strictTool,
        lax,
        // null is left out, as for the request's own fields.
        { ...weatherTool, function: { ...weatherTool.function, name: 'get_news', strict: null } },
      ],
    });
    // Once dropped: the model's arguments were not held to the schema the client asked for.
    expect(
      upstream.lastRequest().body.tools?.map((tool) => (tool.function as { strict?: boolean }).strict),
    ).toEqual([true, false, undefined]);
  });

  it('takes a tool call sent back with blank arguments as a call with none ({}), not the JSON string ""', async () => {
    // A function without parameters; clients that build the history themselves may send ''. A
    // string input is no object, which Anthropic's API refuses (a 502 on every later turn).
    for (const blank of ['', '  ']) {
      await client().chat.completions.create({
        model: 'agt_plain',
        messages: [
          { role: 'user', content: 'What time is it?' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'call_now', type: 'function', function: { name: 'now', arguments: blank } }],
          },
          { role: 'tool', tool_call_id: 'call_now', content: '12:00' },
        ],
        tools: [{ type: 'function', function: { name: 'now' } }],
      });
      const assistant = upstream.lastRequest().body.messages!.find((m) => m.role === 'assistant');
      expect(assistant?.tool_calls).toEqual([
        { id: 'call_now', type: 'function', function: { name: 'now', arguments: '{}' } },
      ]);
    }
  });

  it('streams a client tool call as delta.tool_calls with finish_reason tool_calls', async () => {
    upstream.enqueue({ kind: 'tool-calls', calls: [{ name: 'get_weather', arguments: { city: 'Oslo' } }] });
    const chunks = await collect(
      await client().chat.completions.create({
        model: 'agt_plain',
        messages: [{ role: 'user', content: 'Weather in Oslo?' }],
        tools: [weatherTool],
        stream: true,
      }),
    );
    const calls = chunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? []);
    expect(calls).toEqual([
      {
        index: 0,
        id: expect.any(String),
        type: 'function',
        function: { name: 'get_weather', arguments: '{"city":"Oslo"}' },
      },
    ]);
    expect(chunks.find((chunk) => chunk.choices[0]?.finish_reason)?.choices[0]!.finish_reason).toBe(
      'tool_calls',
    );

    upstream.enqueue({ kind: 'text', text: 'Cold in Oslo.' });
    const next = await collect(
      await client().chat.completions.create({
        model: 'agt_plain',
        messages: [
          { role: 'user', content: 'Weather in Oslo?' },
          { role: 'assistant', content: null, tool_calls: [{ ...calls[0]!, index: undefined } as never] },
          { role: 'tool', tool_call_id: calls[0]!.id!, content: '-3°C' },
        ],
        tools: [weatherTool],
        stream: true,
      }),
    );
    expect(text(next)).toBe('Cold in Oslo.');
  });

  it('ends a reply with client tool calls with finish_reason tool_calls also when the provider said stop (a forced named function)', async () => {
    // OpenAI itself answers a forced named function with `stop`, and several OpenAI-compatible
    // servers any call; clients that go by finish_reason would not run the calls.
    const request = {
      model: 'agt_plain',
      messages: [{ role: 'user' as const, content: 'Weather in Paris?' }],
      tools: [weatherTool],
      tool_choice: { type: 'function' as const, function: { name: 'get_weather' } },
    };
    const called = {
      kind: 'tool-calls' as const,
      calls: [{ name: 'get_weather', arguments: { city: 'Paris' } }],
      finishReason: 'stop',
    };
    upstream.enqueue(called);
    const json = await client().chat.completions.create(request);
    expect(json.choices[0]).toMatchObject({
      finish_reason: 'tool_calls',
      message: { tool_calls: [{ function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
    });
    upstream.enqueue(called);
    const chunks = await collect(await client().chat.completions.create({ ...request, stream: true }));
    expect(chunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? [])).toHaveLength(1);
    expect(chunks.map((chunk) => chunk.choices[0]?.finish_reason).filter(Boolean)).toEqual(['tool_calls']);
    upstream.enqueue(called);
    const final = await client().chat.completions.stream(request).finalChatCompletion();
    expect(final.choices[0]!.finish_reason).toBe('tool_calls');
  });

  it('runs the agent’s MCP tool inside Atrium: never a tool_call, streamed or not', async () => {
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'live_lookup', arguments: { term: 'atrium' } }] },
      { kind: 'text', text: 'An atrium is a hall.' },
    );
    const json = await client().chat.completions.create({
      model: 'agt_tools',
      messages: [{ role: 'user', content: 'What is an atrium?' }],
      tools: [weatherTool],
    });
    expect(json.choices[0]).toMatchObject({
      finish_reason: 'stop',
      message: { role: 'assistant', content: 'An atrium is a hall.' },
    });
    expect(json.choices[0]!.message.tool_calls).toBeUndefined();
    expect(upstream.requests[0]!.body.tools?.map((tool) => tool.function.name).sort()).toEqual([
      'get_weather',
      'live_lookup',
    ]);

    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'live_lookup', arguments: { term: 'hall' } }] },
      { kind: 'text', text: 'A hall is big.' },
    );
    const chunks = await collect(
      await client().chat.completions.create({
        model: 'agt_tools',
        messages: [{ role: 'user', content: 'And a hall?' }],
        stream: true,
      }),
    );
    expect(chunks.some((chunk) => chunk.choices[0]?.delta.tool_calls)).toBe(false);
    expect(text(chunks)).toBe('A hall is big.');
    expect(mcp.calls).toEqual([{ term: 'atrium' }, { term: 'hall' }]);
  });

  it('answers on the last step of the tool loop, which offers no tool: finish_reason stop, not length', async () => {
    // A model that calls the agent's MCP tool at every step it may: the last step (8) says
    // `tool_choice: "none"`, so it answers from the tool results.
    upstream.respond = (request) =>
      request.body.tools?.length && request.body.tool_choice !== 'none'
        ? { kind: 'tool-calls', calls: [{ name: 'live_lookup', arguments: { term: 'loop' } }] }
        : { kind: 'text', text: 'Found it.' };
    try {
      const json = await client().chat.completions.create({
        model: 'agt_tools',
        messages: [{ role: 'user', content: 'Look everything up' }],
        tools: [weatherTool],
      });
      expect(json.choices[0]).toMatchObject({
        finish_reason: 'stop',
        message: { role: 'assistant', content: 'Found it.' },
      });
      expect(json.choices[0]!.message.tool_calls).toBeUndefined();
      expect(upstream.requests).toHaveLength(8);
      expect(upstream.requests.map((request) => request.body.tool_choice ?? 'auto')).toEqual([
        ...Array(7).fill('auto'),
        'none',
      ]);

      const chunks = await collect(
        await client().chat.completions.create({
          model: 'agt_tools',
          messages: [{ role: 'user', content: 'Look everything up' }],
          stream: true,
        }),
      );
      expect(upstream.requests).toHaveLength(16);
      expect(upstream.requests.at(-1)!.body.tool_choice).toBe('none');
      expect(text(chunks)).toBe('Found it.');
      expect(chunks.map((chunk) => chunk.choices[0]?.finish_reason).filter(Boolean)).toEqual(['stop']);
    } finally {
      upstream.respond = undefined;
    }
  });

  it('ends a reply whose model calls tools even when told to call none with finish_reason length, never tool_calls without tool_calls', async () => {
    // Every step of the tool loop (8) calls the agent's own MCP tool, the last one too, although
    // it said `tool_choice: "none"` (the fake upstream's queue ignores it): the reply ends on a call.
    const lookups = (prefix: string) =>
      Array.from({ length: 8 }, (_, i) => ({
        kind: 'tool-calls' as const,
        calls: [{ name: 'live_lookup', arguments: { term: `${prefix}${i}` } }],
      }));
    upstream.enqueue(...lookups('j'));
    const json = await client().chat.completions.create({
      model: 'agt_tools',
      messages: [{ role: 'user', content: 'Look everything up' }],
      tools: [weatherTool],
    });
    expect(upstream.requests).toHaveLength(8);
    expect(json.choices[0]!.finish_reason).toBe('length');
    expect(json.choices[0]!.message.tool_calls).toBeUndefined();

    upstream.enqueue(...lookups('s'));
    const chunks = await collect(
      await client().chat.completions.create({
        model: 'agt_tools',
        messages: [{ role: 'user', content: 'Look everything up' }],
        stream: true,
      }),
    );
    expect(upstream.requests).toHaveLength(16);
    expect(chunks.some((chunk) => chunk.choices[0]?.delta.tool_calls)).toBe(false);
    expect(chunks.map((chunk) => chunk.choices[0]?.finish_reason).filter(Boolean)).toEqual(['length']);
  });

  it('answers a call of a tool nobody declared with a tool error the model reads, then its answer: finish_reason stop, not length', async () => {
    // No tools at all: an agent without tools, no client tools (or `tool_choice: "none"`).
    const requests = [
      { model: 'agt_plain', messages: [{ role: 'user' as const, content: 'Where is order 42?' }] },
      {
        model: 'agt_plain',
        messages: [{ role: 'user' as const, content: 'Where is order 42?' }],
        tools: [weatherTool],
        tool_choice: 'none' as const,
      },
    ];
    for (const request of requests) {
      upstream.requests.length = 0;
      upstream.enqueue(
        { kind: 'tool-calls', calls: [{ name: 'lookup_order', arguments: { id: 42 } }] },
        { kind: 'text', text: 'I cannot look orders up.' },
      );
      const json = await client().chat.completions.create(request);
      expect(json.choices[0]).toMatchObject({
        finish_reason: 'stop',
        message: { role: 'assistant', content: 'I cannot look orders up.' },
      });
      expect(json.choices[0]!.message.tool_calls).toBeUndefined();
      expect(upstream.requests).toHaveLength(2);
      expect(upstream.lastRequest().body.messages!.at(-1)).toMatchObject({
        role: 'tool',
        content: expect.stringContaining("unavailable tool 'lookup_order'"),
      });

      upstream.enqueue(
        { kind: 'tool-calls', calls: [{ name: 'lookup_order', arguments: { id: 42 } }] },
        { kind: 'text', text: 'I cannot look orders up.' },
      );
      const chunks = await collect(await client().chat.completions.create({ ...request, stream: true }));
      expect(text(chunks)).toBe('I cannot look orders up.');
      expect(chunks.some((chunk) => chunk.choices[0]?.delta.tool_calls)).toBe(false);
      expect(chunks.map((chunk) => chunk.choices[0]?.finish_reason).filter(Boolean)).toEqual(['stop']);
      expect(upstream.requests).toHaveLength(4);
    }
  });

  it('never relays a call of a tool the client did not declare: the model reads its error, declared calls still go to the client', async () => {
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'get_forecast', arguments: { city: 'Rome' } }] },
      { kind: 'text', text: 'No forecast tool; ask me for the weather.' },
    );
    const json = await client().chat.completions.create({
      model: 'agt_plain',
      messages: [{ role: 'user', content: 'Forecast for Rome?' }],
      tools: [weatherTool],
    });
    expect(json.choices[0]).toMatchObject({
      finish_reason: 'stop',
      message: { content: 'No forecast tool; ask me for the weather.' },
    });
    expect(json.choices[0]!.message.tool_calls).toBeUndefined();
    expect(upstream.lastRequest().body.messages!.at(-1)).toMatchObject({
      role: 'tool',
      content: expect.stringContaining('Available tools: get_weather.'),
    });

    // With a declared call beside it, the declared one is the client's to run: only it is relayed.
    upstream.enqueue({
      kind: 'tool-calls',
      calls: [
        { name: 'get_forecast', arguments: { city: 'Rome' } },
        { name: 'get_weather', arguments: { city: 'Rome' } },
      ],
    });
    const chunks = await collect(
      await client().chat.completions.create({
        model: 'agt_plain',
        messages: [{ role: 'user', content: 'Forecast for Rome?' }],
        tools: [weatherTool],
        stream: true,
      }),
    );
    const calls = chunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? []);
    expect(calls.map((call) => call.function?.name)).toEqual(['get_weather']);
    expect(chunks.map((chunk) => chunk.choices[0]?.finish_reason).filter(Boolean)).toEqual(['tool_calls']);
  });

  it('sends the client tools with tool_choice none, on every model call, so a history with tool calls stays valid', async () => {
    // Providers (Anthropic's API among them) refuse tool calls in the history of a request that
    // defines no tools: `none` used to send none.
    const request = {
      model: 'agt_plain',
      messages: afterWeatherCall('Summarise it.'),
      tools: [weatherTool],
      tool_choice: 'none' as const,
    };
    upstream.enqueue({ kind: 'text', text: 'Sunny, 22°C.' });
    const json = await client().chat.completions.create(request);
    expect(json.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: 'Sunny, 22°C.' } });
    upstream.enqueue({ kind: 'text', text: 'Sunny, 22°C.' });
    const chunks = await collect(await client().chat.completions.create({ ...request, stream: true }));
    expect(text(chunks)).toBe('Sunny, 22°C.');
    for (const sent of upstream.requests) {
      expect(sent.body.tools?.map((tool) => tool.function.name)).toEqual(['get_weather']);
      expect(sent.body.tool_choice).toBe('none');
    }
    expect(upstream.requests).toHaveLength(2);

    // Each model call of the reply: a later step too (here after a made-up call the model was
    // answered with an error).
    upstream.requests.length = 0;
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'lookup_order', arguments: { id: 42 } }] },
      { kind: 'text', text: 'Done.' },
    );
    await client().chat.completions.create(request);
    expect(upstream.requests.map((sent) => sent.body.tool_choice)).toEqual(['none', 'none']);
    expect(upstream.requests.map((sent) => sent.body.tools?.map((tool) => tool.function.name))).toEqual([
      ['get_weather'],
      ['get_weather'],
    ]);
  });

  it('with tools of the agent’s own, tool_choice none holds back the client tools only: the agent’s tools are offered (auto) and run', async () => {
    // The provider's `none` covers every tool of the call: sending the client tools with it
    // switched the agent's own tools off for the reply. The agent's tools define tools for a
    // history holding tool calls, so the client's need not be sent.
    const request = {
      model: 'agt_tools',
      messages: afterWeatherCall('Look up what an atrium is.'),
      tools: [weatherTool],
      tool_choice: 'none' as const,
    };
    mcp.calls.length = 0;
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'live_lookup', arguments: { term: 'atrium' } }] },
      { kind: 'text', text: 'An atrium is a hall.' },
    );
    const json = await client().chat.completions.create(request);
    expect(json.choices[0]).toMatchObject({
      finish_reason: 'stop',
      message: { role: 'assistant', content: 'An atrium is a hall.' },
    });
    expect(json.choices[0]!.message.tool_calls).toBeUndefined();
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'live_lookup', arguments: { term: 'hall' } }] },
      { kind: 'text', text: 'A hall is big.' },
    );
    const chunks = await collect(await client().chat.completions.create({ ...request, stream: true }));
    expect(chunks.some((chunk) => chunk.choices[0]?.delta.tool_calls)).toBe(false);
    expect(text(chunks)).toBe('A hall is big.');
    expect(mcp.calls).toEqual([{ term: 'atrium' }, { term: 'hall' }]);
    expect(upstream.requests).toHaveLength(4);
    for (const sent of upstream.requests) {
      expect(sent.body.tools?.map((tool) => tool.function.name)).toEqual(['live_lookup']);
      expect(sent.body.tool_choice ?? 'auto').toBe('auto');
    }

    // A client tool named like the agent's is not offered, so it collides with nothing: 200 (it
    // was a 400), and the tool offered is the agent's.
    upstream.requests.length = 0;
    upstream.enqueue({ kind: 'text', text: 'Hi.' });
    const named = await client().chat.completions.create({
      model: 'agt_tools',
      messages: [{ role: 'user', content: 'Hi' }],
      tools: [{ type: 'function', function: { name: 'live_lookup', parameters: { type: 'object' } } }],
      tool_choice: 'none',
    });
    expect(named.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: 'Hi.' } });
    expect(upstream.lastRequest().body.tools).toMatchObject([
      { function: { name: 'live_lookup', description: 'Looks a term up' } },
    ]);
    expect(upstream.lastRequest().body.tool_choice ?? 'auto').toBe('auto');
  });

  it('answers a client tool call whose arguments are no JSON to the model (as runTools() does): the client never gets it', async () => {
    // OpenAI would hand the call over as it is; the SDKs' `parse()` then throws, and `runTools()`
    // answers the model with the parse error. Atrium does the latter within the request.
    const broken = { name: 'get_weather', arguments: {}, rawArguments: '{"city": "Par' };
    upstream.enqueue(
      { kind: 'tool-calls', calls: [broken] },
      { kind: 'tool-calls', calls: [{ name: 'get_weather', arguments: { city: 'Paris' } }] },
    );
    const json = await client().chat.completions.create({
      model: 'agt_plain',
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [weatherTool],
    });
    expect(json.choices[0]!.finish_reason).toBe('tool_calls');
    expect(json.choices[0]!.message.tool_calls?.map((c) => (c as { function: unknown }).function)).toEqual([
      { name: 'get_weather', arguments: '{"city":"Paris"}' },
    ]);
    expect(upstream.requests).toHaveLength(2);
    expect(upstream.lastRequest().body.messages!.at(-1)).toMatchObject({
      role: 'tool',
      content: expect.stringContaining('Invalid input for tool get_weather: JSON parsing failed'),
    });

    upstream.enqueue({ kind: 'tool-calls', calls: [broken] }, { kind: 'text', text: 'Which city?' });
    const chunks = await collect(
      await client().chat.completions.create({
        model: 'agt_plain',
        messages: [{ role: 'user', content: 'Weather in Paris?' }],
        tools: [weatherTool],
        stream: true,
      }),
    );
    expect(chunks.some((chunk) => chunk.choices[0]?.delta.tool_calls)).toBe(false);
    expect(text(chunks)).toBe('Which city?');
    expect(chunks.map((chunk) => chunk.choices[0]?.finish_reason).filter(Boolean)).toEqual(['stop']);
    expect(upstream.requests).toHaveLength(4);

    // JSON that does not fit `parameters` is the client's to check, as with OpenAI: relayed.
    upstream.enqueue({ kind: 'tool-calls', calls: [{ name: 'get_weather', arguments: { town: 'Paris' } }] });
    const misfit = await client().chat.completions.create({
      model: 'agt_plain',
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [weatherTool],
    });
    expect(misfit.choices[0]!.message.tool_calls?.map((c) => (c as { function: unknown }).function)).toEqual([
      { name: 'get_weather', arguments: '{"town":"Paris"}' },
    ]);
    expect(upstream.requests).toHaveLength(5);
  });

  it('forces a tool choice on the first model call only, so the model can answer after the tool ran', async () => {
    upstream.requests.length = 0;
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'live_lookup', arguments: { term: 'forced' } }] },
      { kind: 'text', text: 'Looked it up.' },
    );
    const json = await client().chat.completions.create({
      model: 'agt_tools',
      messages: [{ role: 'user', content: 'Look it up' }],
      tool_choice: 'required',
    });
    expect(json.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: 'Looked it up.' } });
    expect(upstream.requests.map((request) => request.body.tool_choice)).toEqual(['required', 'auto']);
  });

  // A model may answer in text despite a forced choice (atrium/echo always does, as do many
  // OpenAI-compatible servers): the AI SDK's generateText threw on it, a 502 the SDKs retried,
  // where the same request streamed was answered.
  it('answers a model that ignores a forced tool choice with its text, in JSON as streamed', async () => {
    const forced = [
      'required' as const,
      { type: 'function' as const, function: { name: weatherTool.function.name } },
    ];
    for (const toolChoice of forced) {
      upstream.enqueue(
        { kind: 'text', text: 'No tool for that.' },
        { kind: 'text', text: 'No tool for that.' },
      );
      const request = {
        model: 'agt_plain',
        messages: [{ role: 'user' as const, content: 'Weather in Rome?' }],
        tools: [weatherTool],
        tool_choice: toolChoice,
      };
      const json = await client().chat.completions.create(request);
      expect(json.choices[0]).toMatchObject({
        finish_reason: 'stop',
        message: { content: 'No tool for that.' },
      });
      const chunks = await collect(await client().chat.completions.create({ ...request, stream: true }));
      expect(text(chunks)).toBe('No tool for that.');
    }
    const echo = await client().chat.completions.create({
      model: 'agt_echo',
      messages: [{ role: 'user', content: 'Weather in Rome?' }],
      tools: [weatherTool],
      tool_choice: 'required',
    });
    expect(echo.choices[0]!.message.content).toContain('You said: "Weather in Rome?"');
  });

  it('runs an orchestrating agent’s sub-agent inside Atrium: never a tool_call, usage included', async () => {
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'agt_plain', arguments: { message: 'Summarize the plan' } }] },
      { kind: 'text', text: 'Plan summary.', usage: { prompt: 4, completion: 2 } },
      { kind: 'text', text: 'The plan is ready.', usage: { prompt: 10, completion: 5 } },
    );
    const completion = await client().chat.completions.create({
      model: 'agt_lead',
      messages: [{ role: 'user', content: 'Plan it' }],
      tools: [weatherTool],
    });
    expect(completion.choices[0]).toMatchObject({
      finish_reason: 'stop',
      message: { content: 'The plan is ready.' },
    });
    expect(completion.choices[0]!.message.tool_calls).toBeUndefined();
    expect(upstream.requests).toHaveLength(3);
    // The sub-agent's tokens are part of the usage the client is told.
    expect(completion.usage!.prompt_tokens).toBeGreaterThanOrEqual(14);
  });

  it('offers client tools named like JavaScript’s own object properties (valid OpenAI names)', async () => {
    for (const name of ['toString', 'constructor', '__proto__']) {
      upstream.requests.length = 0;
      upstream.enqueue({ kind: 'tool-calls', calls: [{ name, arguments: {} }] });
      const completion = await client().chat.completions.create({
        model: 'agt_plain',
        messages: [{ role: 'user', content: 'Hi' }],
        tools: [{ type: 'function', function: { name, parameters: { type: 'object', properties: {} } } }],
      });
      expect(upstream.requests[0]!.body.tools?.map((offered) => offered.function.name)).toEqual([name]);
      expect(completion.choices[0]).toMatchObject({ finish_reason: 'tool_calls' });
      expect(completion.choices[0]!.message.tool_calls).toMatchObject([{ function: { name } }]);
    }
  });

  it('refuses a client tool named like one of the agent’s tools, storing nothing for a named chat', async () => {
    const before = await countRows(t.db);
    const named = { defaultHeaders: { 'x-atrium-conversation-key': 'collide-1' } };
    for (const sdk of [client(), client(CHAT_KEYS.main, named)]) {
      const error = await sdk.chat.completions
        .create({
          model: 'agt_tools',
          messages: [{ role: 'user', content: 'Hi' }],
          tools: [{ type: 'function', function: { name: 'live_lookup', parameters: { type: 'object' } } }],
        })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error).toMatchObject({ code: 'bad_request', param: 'tools' });
    }
    // The agent's tools are connected before a named chat's turn is stored (once it was stored).
    const after = await countRows(t.db);
    expect({ chats: after.chats, messages: after.messages }).toEqual({
      chats: before.chats,
      messages: before.messages,
    });
  });
});

describe('storing', () => {
  /** Alternating user and assistant messages, the user's first: a conversation so far. */
  function conversation(...contents: string[]): OpenAI.Chat.Completions.ChatCompletionMessageParam[] {
    return contents.map((content, i) =>
      i % 2 === 0 ? { role: 'user', content } : { role: 'assistant', content },
    );
  }

  /** The first turn of a chat named by a conversation key: the client that sends the key, the chat. */
  async function firstKeyedTurn(key: string, question: string, answer: string) {
    const sdk = client(CHAT_KEYS.main, { defaultHeaders: { 'x-atrium-conversation-key': key } });
    upstream.enqueue({ kind: 'text', text: answer });
    const { response } = await sdk.chat.completions
      .create({ model: 'agt_plain', messages: [{ role: 'user', content: question }] })
      .withResponse();
    return { sdk, chatId: response.headers.get('x-atrium-chat-id')! };
  }

  async function storedTexts(chatId: string) {
    return (await chatRows(t.db, chatId)).map((row) => {
      const parts = JSON.parse(row.parts) as Array<{ type: string; text?: string }>;
      return `${row.role}: ${parts.map((part) => part.text ?? '').join('')}`;
    });
  }

  it('takes an empty `user` as none (OpenAI takes it), and refuses an empty system_variables.user.id (400)', async () => {
    // The chat list's `user` filter takes 1–200 characters: an end user stored as "" could never
    // be found by it. The OpenAI field is left out when empty, so no such chat is made.
    const { response } = await client(CHAT_KEYS.main, {
      defaultHeaders: { 'x-atrium-conversation-key': 'empty-user' },
    })
      .chat.completions.create({ model: 'agt_plain', messages: [{ role: 'user', content: 'Hi' }], user: '' })
      .withResponse();
    const chatId = response.headers.get('x-atrium-chat-id')!;
    const chat = await fetch(`${baseURL.replace('/openai', '')}/chats/${chatId}`, {
      headers: { authorization: `Bearer ${CHAT_KEYS.main}` },
    });
    expect((await chat.json()).data.chat.user).toBeNull();

    const error = await refusalOf({ system_variables: { user: { id: '' } } });
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({ code: 'bad_request', param: 'system_variables.user.id' });
  });

  it('stores one chat per conversation key over several turns, without duplicated messages', async () => {
    const { sdk, chatId } = await firstKeyedTurn('thread 42 / ü', 'First question', 'First answer.');
    expect(chatId).toMatch(/^cht_/);

    upstream.enqueue({ kind: 'text', text: 'Second answer.' });
    const two = await sdk.chat.completions
      .create({
        model: 'agt_plain',
        messages: [
          { role: 'system', content: 'Be kind.' },
          ...conversation('First question', 'First answer.', 'Second question'),
        ],
        stream: true,
      })
      .withResponse();
    expect(two.response.headers.get('x-atrium-chat-id')).toBe(chatId);
    expect(two.response.headers.get('content-type')).toBe('text/event-stream');
    expect(two.response.headers.get('x-vercel-ai-ui-message-stream')).toBeNull();
    expect(text(await collect(two.data))).toBe('Second answer.');

    expect(await storedTexts(chatId)).toEqual([
      'user: First question',
      'assistant: First answer.',
      'user: Second question',
      'assistant: Second answer.',
    ]);
    // The same key for another agent is another conversation.
    const other = await sdk.chat.completions
      .create({ model: 'agt_helper', messages: [{ role: 'user', content: 'First question' }] })
      .withResponse();
    expect(other.response.headers.get('x-atrium-chat-id')).not.toBe(chatId);
  });

  it('a conversation key names the chat of its own user: owner, member and admin sending one key each get theirs', async () => {
    const keyed = (apiKey: string, headers: Record<string, string> = {}) =>
      client(apiKey, { defaultHeaders: { 'x-atrium-conversation-key': 'support', ...headers } });
    const turn = async (
      sdk: OpenAI,
      messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[],
      answer: string,
    ) => {
      upstream.enqueue({ kind: 'text', text: answer });
      const { response } = await sdk.chat.completions.create({ model: 'agt_plain', messages }).withResponse();
      expect(response.headers.get('x-atrium-chat-persisted')).toBeNull();
      return response.headers.get('x-atrium-chat-id')!;
    };
    const owner = await turn(keyed(CHAT_KEYS.main), conversation('Owner asks'), 'To the owner.');
    // Before, the member got 404 (the owner's chat, which a member cannot see), and the admin
    // wrote into the owner's chat, or got it unstored.
    const member = await turn(keyed(CHAT_KEYS.mainMember), conversation('Member asks'), 'To the member.');
    const admin = await turn(keyed(CHAT_KEYS.mainAdmin), conversation('Admin asks'), 'To the admin.');
    expect(new Set([owner, member, admin]).size).toBe(3);
    const createdBy = await t.db
      .selectFrom('chats')
      .select(['id', 'created_by'])
      .where('id', 'in', [owner, member, admin])
      .execute();
    expect(Object.fromEntries(createdBy.map((chat) => [chat.id, chat.created_by]))).toEqual({
      [owner]: 'usr_olivia',
      [member]: 'usr_max',
      [admin]: 'usr_ada',
    });
    // The owner's organization key acting in the workspace is the same user: the same chat.
    const org = keyed(CHAT_KEYS.org, { 'x-workspace-id': 'wsp_main' });
    expect(await turn(org, conversation('Owner asks', 'To the owner.', 'Again'), 'Again to the owner.')).toBe(
      owner,
    );
    expect(
      await turn(keyed(CHAT_KEYS.mainMember), conversation('Member asks', 'To the member.', 'More'), 'More.'),
    ).toBe(member);
    expect(await storedTexts(owner)).toEqual([
      'user: Owner asks',
      'assistant: To the owner.',
      'user: Again',
      'assistant: Again to the owner.',
    ]);
    expect(await storedTexts(member)).toEqual([
      'user: Member asks',
      'assistant: To the member.',
      'user: More',
      'assistant: More.',
    ]);
    expect(await storedTexts(admin)).toEqual(['user: Admin asks', 'assistant: To the admin.']);
  });

  it('continues a chat stored under the key’s former client id (agent and key only) for its own user only', async () => {
    // A chat from before conversation keys named their user: its client id was this hash.
    const { chatId } = await firstKeyedTurn('will be former', 'Q1', 'A.');
    const former = `oak_${createHash('sha256').update('agt_plain\u0000former thread').digest('base64url')}`;
    await t.db.updateTable('chats').set({ client_id: former }).where('id', '=', chatId).execute();
    const keyed = (apiKey: string) =>
      client(apiKey, { defaultHeaders: { 'x-atrium-conversation-key': 'former thread' } });

    // Another user of the workspace, even one who may see the chat, gets a chat of their own.
    for (const apiKey of [CHAT_KEYS.mainAdmin, CHAT_KEYS.mainMember]) {
      upstream.enqueue({ kind: 'text', text: 'Theirs.' });
      const { response } = await keyed(apiKey)
        .chat.completions.create({ model: 'agt_plain', messages: conversation('Q1', 'A.', 'Q2') })
        .withResponse();
      expect(response.headers.get('x-atrium-chat-id')).not.toBe(chatId);
      expect(response.headers.get('x-atrium-chat-persisted')).toBeNull();
    }
    upstream.enqueue({ kind: 'text', text: 'B.' });
    const { response } = await keyed(CHAT_KEYS.main)
      .chat.completions.create({ model: 'agt_plain', messages: conversation('Q1', 'A.', 'Q2') })
      .withResponse();
    expect(response.headers.get('x-atrium-chat-id')).toBe(chatId);
    expect(await storedTexts(chatId)).toEqual(['user: Q1', 'assistant: A.', 'user: Q2', 'assistant: B.']);
  });

  it('never continues another user’s chat that holds the client id of the caller’s key (a /v1/chat client chose it): 404', async () => {
    const member = client(CHAT_KEYS.mainMember, { defaultHeaders: { 'x-atrium-conversation-key': 'taken' } });
    upstream.enqueue({ kind: 'text', text: 'A.' });
    const { response } = await member.chat.completions
      .create({ model: 'agt_plain', messages: conversation('Q1') })
      .withResponse();
    const chatId = response.headers.get('x-atrium-chat-id')!;
    const ownersId = `oak_${createHash('sha256').update('usr_olivia\u0000agt_plain\u0000taken').digest('base64url')}`;
    await t.db.updateTable('chats').set({ client_id: ownersId }).where('id', '=', chatId).execute();

    const error = await client(CHAT_KEYS.main, { defaultHeaders: { 'x-atrium-conversation-key': 'taken' } })
      .chat.completions.create({ model: 'agt_plain', messages: conversation('Q1', 'A.', 'Q2') })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect(await storedTexts(chatId)).toEqual(['user: Q1', 'assistant: A.']);
  });

  it('refuses a /v1/chat id that would take the client id of another user’s conversation key (oak_): 400, the key still works', async () => {
    const ownersId = `oak_${createHash('sha256').update('usr_olivia\u0000agt_plain\u0000squatted').digest('base64url')}`;
    const postChat = (apiKey: string, id: string) =>
      t.app.inject({
        method: 'POST',
        url: '/v1/chat',
        headers: { 'x-service-api-key': apiKey },
        payload: {
          agentId: 'agt_plain',
          id,
          messages: [{ role: 'user', parts: [{ type: 'text', text: 'Q1' }] }],
        },
      });
    // A member who knows the owner's user id and key tries to create that chat first.
    const squat = await postChat(CHAT_KEYS.mainMember, ownersId);
    expect(squat.statusCode).toBe(400);
    expect(squat.json()).toMatchObject({ code: 'bad_request', details: { issues: [{ path: 'body.id' }] } });
    expect(await t.db.selectFrom('chats').select('id').where('client_id', '=', ownersId).execute()).toEqual(
      [],
    );

    upstream.enqueue({ kind: 'text', text: 'A.' });
    const { response } = await client(CHAT_KEYS.main, {
      defaultHeaders: { 'x-atrium-conversation-key': 'squatted' },
    })
      .chat.completions.create({ model: 'agt_plain', messages: conversation('Q1') })
      .withResponse();
    const chatId = response.headers.get('x-atrium-chat-id')!;
    expect(await storedTexts(chatId)).toEqual(['user: Q1', 'assistant: A.']);
    // The prefix is refused for a new chat only: its user still names the chat by its client id.
    upstream.enqueue({ kind: 'text', text: 'B.' });
    const continued = await postChat(CHAT_KEYS.main, ownersId);
    expect(continued.statusCode).toBe(200);
    expect(continued.json().chatId).toBe(chatId);
  });

  it('continues a stored chat by chat_id and by x-atrium-chat-id', async () => {
    const { chatId } = await firstKeyedTurn('by-id', 'Q1', 'A.');

    upstream.enqueue({ kind: 'text', text: 'B.' });
    await client().chat.completions.create({
      model: 'agt_plain',
      messages: conversation('Q1', 'A.', 'Q2'),
      chat_id: chatId,
    } as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming);
    upstream.enqueue({ kind: 'text', text: 'C.' });
    await client(CHAT_KEYS.main, { defaultHeaders: { 'x-atrium-chat-id': chatId } }).chat.completions.create({
      model: 'agt_plain',
      messages: conversation('Q1', 'A.', 'Q2', 'B.', 'Q3'),
    });
    expect(await storedTexts(chatId)).toEqual([
      'user: Q1',
      'assistant: A.',
      'user: Q2',
      'assistant: B.',
      'user: Q3',
      'assistant: C.',
    ]);
  });

  it('continues a chat whose stored messages hold parts the model never gets (data, tools, reasoning)', async () => {
    // Stored through /v1/chat; the history check compares only what the model gets (text, files).
    upstream.enqueue({ kind: 'text', text: 'A.' });
    const first = await t.app.inject({
      method: 'POST',
      url: '/v1/chat',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
      payload: {
        agentId: 'agt_plain',
        messages: [
          {
            id: 'p-u0',
            role: 'user',
            parts: [{ type: 'text', text: 'Q0' }],
          },
          {
            id: 'p-a0',
            role: 'assistant',
            parts: [
              { type: 'reasoning', text: 'thinking', state: 'done' },
              { type: 'tool-lookup', toolCallId: 'c1', state: 'output-available', input: {}, output: 'x' },
              { type: 'text', text: 'A0.' },
              { type: 'data-note', data: { kept: true } },
            ],
          },
          {
            id: 'p-u1',
            role: 'user',
            parts: [
              { type: 'data-blob', data: 'big' },
              { type: 'text', text: 'Q1' },
            ],
          },
        ],
      },
    });
    expect(first.statusCode, first.body).toBe(200);
    const chatId = first.json().chatId as string;

    upstream.enqueue({ kind: 'text', text: 'B.' });
    const next = await client()
      .chat.completions.create({
        model: 'agt_plain',
        messages: conversation('Q0', 'A0.', 'Q1', 'A.', 'Q2'),
        chat_id: chatId,
      } as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming)
      .withResponse();
    expect(next.response.headers.get('x-atrium-chat-persisted')).toBeNull();
    expect(await storedTexts(chatId)).toEqual([
      'user: Q0',
      'assistant: thinkingA0.',
      'user: Q1',
      'assistant: A.',
      'user: Q2',
      'assistant: B.',
    ]);
  });

  it('answers a diverged conversation without storing it (x-atrium-chat-persisted: false)', async () => {
    const { sdk, chatId } = await firstKeyedTurn('diverged', 'Q1', 'A.');
    upstream.enqueue({ kind: 'text', text: 'Edited answer.' });
    const edited = await sdk.chat.completions
      .create({
        model: 'agt_plain',
        messages: conversation('Q1 edited', 'A.', 'Q2'),
      })
      .withResponse();
    expect(edited.data.choices[0]!.message.content).toBe('Edited answer.');
    expect(edited.response.headers.get('x-atrium-chat-persisted')).toBe('false');
    expect(edited.response.headers.get('x-atrium-chat-id')).toBeNull();
    expect(await storedTexts(chatId)).toEqual(['user: Q1', 'assistant: A.']);
  });

  it('charges a diverged (unstored) call to the named chat’s spend, so the chat’s spend cap holds', async () => {
    const sdk = client(CHAT_KEYS.capped, {
      defaultHeaders: { 'x-atrium-conversation-key': 'capped-diverged' },
    });
    upstream.enqueue({ kind: 'text', text: 'A.' });
    const first = await sdk.chat.completions
      .create({ model: 'agt_capped', messages: [{ role: 'user', content: 'Q1' }] })
      .withResponse();
    const chatId = first.response.headers.get('x-atrium-chat-id')!;
    const chatRow = () =>
      t.db
        .selectFrom('chats')
        .select(['spend_usd', 'message_count'])
        .where('id', '=', chatId)
        .executeTakeFirstOrThrow();
    const setSpend = (usd: number) =>
      t.db.updateTable('chats').set({ spend_usd: usd }).where('id', '=', chatId).execute();
    // The refused call never reaches the upstream: nothing is queued for it.
    const diverged = (answered = true) => {
      if (answered) upstream.enqueue({ kind: 'text', text: 'Edited.' });
      return sdk.chat.completions
        .create({ model: 'agt_capped', messages: conversation('Q1 edited', 'A.', 'Q2') })
        .withResponse();
    };

    await setSpend(0);
    const one = await diverged();
    expect(one.response.headers.get('x-atrium-chat-persisted')).toBe('false');
    // fake-large: $10 per million input tokens, $20 per million output tokens.
    const usage = one.data.usage!;
    const cost = (usage.prompt_tokens * 10 + usage.completion_tokens * 20) / 1e6;
    expect(cost).toBeGreaterThan(0);
    // Before, the chat's spend stayed at 0: unstored calls never brought it nearer its cap.
    expect(Number((await chatRow()).spend_usd)).toBeCloseTo(cost, 12);
    expect((await chatRow()).message_count).toBe(2);

    // Half a call below the cap ($0.001): admitted, and charged past it; the next one is refused.
    await setSpend(0.001 - cost / 2);
    expect((await diverged()).response.status).toBe(200);
    const refused = await diverged(false).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.APIError);
    expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(402);
    expect((refused as InstanceType<typeof OpenAI.APIError>).code).toBe('spend_cap_exceeded');
  });

  it('a named chat’s streamed reply is stopped by POST /v1/chat/{chatId}/stop, like any chat', async () => {
    upstream.enqueue({ kind: 'held', text: 'one two three four five', afterPieces: 2 });
    const { data, response } = await client(CHAT_KEYS.main, {
      defaultHeaders: { 'x-atrium-conversation-key': 'to-stop' },
    })
      .chat.completions.create({
        model: 'agt_plain',
        messages: [{ role: 'user', content: 'Go' }],
        stream: true,
      })
      .withResponse();
    const chatId = response.headers.get('x-atrium-chat-id')!;
    const seen: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    let stopped = false;
    for await (const chunk of data) {
      seen.push(chunk);
      if (!stopped && text(seen) === 'one two ') {
        const stop = await fetch(`${baseURL.replace('/openai', '')}/chat/${chatId}/stop`, {
          method: 'POST',
          headers: { authorization: `Bearer ${CHAT_KEYS.main}` },
        });
        expect((await stop.json()).data).toMatchObject({ stopped: true });
        stopped = true;
      }
    }
    expect(text(seen)).toBe('one two ');
    expect(seen.at(-1)!.choices[0]!.finish_reason).toBe('stop');
    expect(await storedTexts(chatId)).toEqual(['user: Go', 'assistant: one two ']);
  });

  it('a named chat’s JSON reply stopped by POST /v1/chat/{chatId}/stop is a 409 the SDK does not retry (x-should-retry: false)', async () => {
    const { chatId } = await firstKeyedTurn('stop-json', 'Q1', 'A.');
    const counting = countingFetch();
    // The SDK's default retries: it retries a 409 unless told not to.
    const sdk = client(CHAT_KEYS.main, {
      maxRetries: 2,
      fetch: counting.fetch,
      defaultHeaders: { 'x-atrium-conversation-key': 'stop-json' },
    });
    upstream.requests.length = 0;
    upstream.enqueue({ kind: 'held', text: 'A long answer.', afterPieces: 0 });
    const pending = sdk.chat.completions
      .create({ model: 'agt_plain', messages: conversation('Q1', 'A.', 'Q2') })
      .catch((e: unknown) => e);
    await upstream.waitForRequests(1);
    const stop = await fetch(`${baseURL.replace('/openai', '')}/chat/${chatId}/stop`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CHAT_KEYS.main}` },
    });
    expect((await stop.json()).data).toMatchObject({ stopped: true });
    const error = await pending;
    // Before, the SDK sent the request again: the model ran again and the client got a 200, the
    // stop undone and the reply paid for twice.
    expect(error).toBeInstanceOf(OpenAI.ConflictError);
    expect(error).toMatchObject({ status: 409, code: 'conflict' });
    expect((error as InstanceType<typeof OpenAI.APIError>).headers?.get('x-should-retry')).toBe('false');
    expect(counting.calls).toBe(1);
    expect(upstream.requests).toHaveLength(1);
    expect(await storedTexts(chatId)).toEqual(['user: Q1', 'assistant: A.', 'user: Q2']);
  });

  it('a named chat’s JSON reply whose chat is deleted while it runs is a 404 NotFoundError, not a 409 on a gone chat', async () => {
    const { sdk, chatId } = await firstKeyedTurn('delete-json', 'Q1', 'A.');
    upstream.requests.length = 0;
    upstream.enqueue({ kind: 'stall' });
    const pending = sdk.chat.completions
      .create({ model: 'agt_plain', messages: conversation('Q1', 'A.', 'Q2') })
      .catch((e: unknown) => e);
    await upstream.waitForRequests(1);
    const del = await fetch(`${baseURL.replace('/openai', '')}/chats/${chatId}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${CHAT_KEYS.main}` },
    });
    expect(del.status).toBe(200);
    const error = await pending;
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect(error).toMatchObject({ status: 404, code: 'not_found' });
  });

  describe('a streamed reply the provider breaks after some text', () => {
    /** A named chat's streamed turn on `script`: what the client saw, how its stream ended. */
    async function streamedTurn(key: string, script: ReplyScript) {
      const sdk = client(CHAT_KEYS.main, { defaultHeaders: { 'x-atrium-conversation-key': key } });
      upstream.enqueue(script);
      const { data, response } = await sdk.chat.completions
        .create({ model: 'agt_plain', messages: [{ role: 'user', content: 'Count' }], stream: true })
        .withResponse();
      const chatId = response.headers.get('x-atrium-chat-id')!;
      const seen: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
      const error = await (async () => {
        for await (const chunk of data) seen.push(chunk);
      })().catch((e: unknown) => e);
      return { sdk, chatId, seen: text(seen), error };
    }

    /** A named chat whose first reply broke after "one two ": what the client saw, and the chat. */
    async function brokenFirstTurn(key: string) {
      const turn = await streamedTurn(key, {
        kind: 'disconnect',
        text: 'one two three four',
        afterPieces: 2,
      });
      expect(turn.error).toMatchObject({ code: 'upstream_error' });
      expect(turn.seen).toBe('one two ');
      await t.app.persistence.idle();
      return turn;
    }

    it('stores what the client saw as an errored reply; a next turn that holds it is stored after it', async () => {
      const { sdk, chatId, seen } = await brokenFirstTurn('broken-kept');
      expect(await storedTexts(chatId)).toEqual(['user: Count', 'assistant: one two ']);
      expect((await chatRows(t.db, chatId))[1]!.finish_reason).toBe('error');

      upstream.enqueue({ kind: 'text', text: 'three.' });
      const next = await sdk.chat.completions
        .create({ model: 'agt_plain', messages: conversation('Count', seen, 'Go on') })
        .withResponse();
      expect(next.response.headers.get('x-atrium-chat-persisted')).toBeNull();
      expect(await storedTexts(chatId)).toEqual([
        'user: Count',
        'assistant: one two ',
        'user: Go on',
        'assistant: three.',
      ]);
    });

    it('drops the errored reply when the client goes on without it (a retry, or a next turn): the chat stays stored', async () => {
      const retried = await brokenFirstTurn('broken-retried');
      upstream.enqueue({ kind: 'text', text: 'One two three.' });
      const retry = await retried.sdk.chat.completions
        .create({ model: 'agt_plain', messages: conversation('Count') })
        .withResponse();
      expect(retry.response.headers.get('x-atrium-chat-persisted')).toBeNull();
      expect(await storedTexts(retried.chatId)).toEqual(['user: Count', 'assistant: One two three.']);

      const dropped = await brokenFirstTurn('broken-dropped');
      upstream.enqueue({ kind: 'text', text: 'Fine.' });
      const next = await dropped.sdk.chat.completions
        .create({
          model: 'agt_plain',
          messages: [...conversation('Count'), { role: 'user', content: 'Again?' }],
        })
        .withResponse();
      expect(next.response.headers.get('x-atrium-chat-persisted')).toBeNull();
      expect(await storedTexts(dropped.chatId)).toEqual(['user: Count', 'user: Again?', 'assistant: Fine.']);
      expect(
        (
          await t.app.inject({
            method: 'GET',
            url: `/v1/chats/${dropped.chatId}`,
            headers: { 'x-service-api-key': CHAT_KEYS.main },
          })
        ).json().data.chat.messageCount,
      ).toBe(3);
    });

    it.each([
      [
        'an error event',
        `data: ${JSON.stringify({ error: { message: 'hiccup', type: 'server_error' } })}\n\n`,
      ],
      ['a line that is no JSON', 'data: {"id":"chatcmpl-x","choi\n\n'],
    ])(
      'ends the reply at %s mid-stream: the provider call is aborted, the client gets its error at once, the chat stores what it was sent',
      async (name, event) => {
        // The provider would go on to its own finish, but only once released: the client's error
        // must not wait for it.
        const abortedBefore = upstream.aborted();
        const { chatId, seen, error } = await streamedTurn(
          `ended at ${name}`,
          failsMidStreamThenGoesOn(event),
        );
        expect(error).toBeInstanceOf(OpenAI.APIError);
        expect(error).toMatchObject({ code: 'upstream_error', type: 'api_error' });
        expect(seen).toBe('one two ');
        await upstream.waitForAborted(abortedBefore + 1);
        await t.app.persistence.idle();
        expect(await storedTexts(chatId)).toEqual(['user: Count', 'assistant: one two ']);
        expect((await chatRows(t.db, chatId))[1]!.finish_reason).toBe('error');
      },
    );
  });

  it('a client that aborts a stream stops the reply: the provider call ends, the named chat keeps what the client saw, charged its estimate', async () => {
    const sdk = client(CHAT_KEYS.main, { defaultHeaders: { 'x-atrium-conversation-key': 'aborted' } });
    upstream.enqueue({ kind: 'held', text: 'one two three four five six', afterPieces: 2 });
    const abortedBefore = upstream.aborted();
    const abort = new AbortController();
    const { data, response } = await sdk.chat.completions
      .create(
        { model: 'agt_plain', messages: [{ role: 'user', content: 'Count' }], stream: true },
        { signal: abort.signal },
      )
      .withResponse();
    const chatId = response.headers.get('x-atrium-chat-id')!;
    let seen = '';
    await (async () => {
      for await (const chunk of data) {
        seen += chunk.choices[0]?.delta.content ?? '';
        if (seen === 'one two ') abort.abort();
      }
    })().catch(() => undefined);
    // No OpenAI client can resume the reply: it is not generated (and charged) to its end.
    await upstream.waitForAborted(abortedBefore + 1);
    await vi.waitFor(
      async () => expect(await storedTexts(chatId)).toEqual(['user: Count', 'assistant: one two ']),
      { timeout: 10_000 },
    );
    const stored = await chatRows(t.db, chatId);
    expect(stored[1]!.finish_reason).toBe('stopped');
    // The provider reported no usage for the step cut short: its prompt and the 8 characters
    // streamed are charged, at about four characters a token.
    expect(stored[1]!.input_tokens).toBeGreaterThan(0);
    expect(stored[1]!.output_tokens).toBe(2);

    // The client's next turn holds what it saw: the stored chat is its prefix, so it is stored.
    upstream.enqueue({ kind: 'text', text: 'three.' });
    const next = await sdk.chat.completions
      .create({
        model: 'agt_plain',
        messages: [
          { role: 'user', content: 'Count' },
          { role: 'assistant', content: seen },
          { role: 'user', content: 'Go on' },
        ],
      })
      .withResponse();
    expect(next.response.headers.get('x-atrium-chat-persisted')).toBeNull();
    expect(next.response.headers.get('x-atrium-chat-id')).toBe(chatId);
    expect(await storedTexts(chatId)).toEqual([
      'user: Count',
      'assistant: one two ',
      'user: Go on',
      'assistant: three.',
    ]);
  });

  it('a JSON client that leaves stops its reply: its retry answers the stored turn once, and the chat goes on stored', async () => {
    const sdk = client(CHAT_KEYS.main, { defaultHeaders: { 'x-atrium-conversation-key': 'json-left' } });
    const question: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Hi' }];
    const inputTokens = async () =>
      Number(
        (
          await t.db
            .selectFrom('usage_ledger')
            .select('input_tokens')
            .where('workspace_id', '=', 'wsp_main')
            .executeTakeFirst()
        )?.input_tokens ?? 0,
      );
    const chargedBefore = await inputTokens();
    upstream.enqueue({ kind: 'held', text: 'An answer nobody reads.', afterPieces: 0 });
    const abortedBefore = upstream.aborted();
    const abort = new AbortController();
    const left = sdk.chat.completions
      .create({ model: 'agt_plain', messages: question }, { signal: abort.signal })
      .catch((e: unknown) => e);
    await upstream.waitForRequests(1);
    // The client's own timeout, or a proxy's 504: the SDK then sends the same request again.
    abort.abort();
    expect(await left).toBeInstanceOf(OpenAI.APIUserAbortError);
    // Before, the reply ran on to its end (nobody could read it), and the retry answered the same
    // stored turn beside it: two answers stored, the chat diverged for every later turn.
    await upstream.waitForAborted(abortedBefore + 1);
    await t.app.persistence.idle();
    expect(await inputTokens()).toBeGreaterThan(chargedBefore);

    upstream.enqueue({ kind: 'text', text: 'The answer.' });
    const retry = await sdk.chat.completions
      .create({ model: 'agt_plain', messages: question })
      .withResponse();
    expect(retry.data.choices[0]!.message.content).toBe('The answer.');
    const chatId = retry.response.headers.get('x-atrium-chat-id')!;
    expect(await storedTexts(chatId)).toEqual(['user: Hi', 'assistant: The answer.']);

    upstream.enqueue({ kind: 'text', text: 'More.' });
    const next = await sdk.chat.completions
      .create({ model: 'agt_plain', messages: conversation('Hi', 'The answer.', 'And?') })
      .withResponse();
    expect(next.response.headers.get('x-atrium-chat-persisted')).toBeNull();
    expect(await storedTexts(chatId)).toEqual([
      'user: Hi',
      'assistant: The answer.',
      'user: And?',
      'assistant: More.',
    ]);
  });

  it('refuses a request on a named chat while a reply of it runs: 409 the SDK does not retry, one answer stored', async () => {
    const { chatId } = await firstKeyedTurn('racing', 'Q1', 'A.');
    const messages = conversation('Q1', 'A.', 'Q2');
    upstream.requests.length = 0;
    upstream.enqueue({ kind: 'held', text: 'The first answer.', afterPieces: 0 });
    const first = client(CHAT_KEYS.main, { defaultHeaders: { 'x-atrium-chat-id': chatId } })
      .chat.completions.create({ model: 'agt_plain', messages })
      .withResponse();
    await upstream.waitForRequests(1);
    // The same request again (a client still waiting behind a proxy that gave up, a second tab),
    // with the SDK's default retries.
    const counting = countingFetch();
    const sdk = client(CHAT_KEYS.main, {
      maxRetries: 2,
      fetch: counting.fetch,
      defaultHeaders: { 'x-atrium-conversation-key': 'racing' },
    });
    for (const stream of [false, true]) {
      const error = await sdk.chat.completions
        .create({ model: 'agt_plain', messages, stream })
        .catch((e: unknown) => e);
      // Before, it answered the stored turn a second time, and both answers were stored.
      expect(error).toBeInstanceOf(OpenAI.ConflictError);
      expect(error).toMatchObject({ status: 409, code: 'conflict' });
      expect((error as InstanceType<typeof OpenAI.APIError>).headers?.get('x-should-retry')).toBe('false');
    }
    expect(counting.calls).toBe(2);
    expect(upstream.requests).toHaveLength(1);

    upstream.release();
    expect((await first).data.choices[0]!.message.content).toBe('The first answer.');
    expect(await storedTexts(chatId)).toEqual([
      'user: Q1',
      'assistant: A.',
      'user: Q2',
      'assistant: The first answer.',
    ]);
  });

  it('refuses an unknown or another workspace’s chat_id with 404, another agent’s with 400 (param: the field or header that named it)', async () => {
    const error = await client()
      .chat.completions.create({
        model: 'agt_plain',
        messages: [{ role: 'user', content: 'Hi' }],
        chat_id: 'cht_nope',
      } as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect(error).toMatchObject({ code: 'not_found', param: 'chat_id' });
    const byHeader = await client(CHAT_KEYS.main, { defaultHeaders: { 'x-atrium-chat-id': 'cht_nope' } })
      .chat.completions.create({ model: 'agt_plain', messages: [{ role: 'user', content: 'Hi' }] })
      .catch((e: unknown) => e);
    expect(byHeader).toBeInstanceOf(OpenAI.NotFoundError);
    expect(byHeader).toMatchObject({ code: 'not_found', param: 'x-atrium-chat-id' });

    const helperChat = await client(CHAT_KEYS.main, {
      defaultHeaders: { 'x-atrium-conversation-key': 'helper' },
    })
      .chat.completions.create({ model: 'agt_helper', messages: [{ role: 'user', content: 'Hi' }] })
      .withResponse();
    const chatId = helperChat.response.headers.get('x-atrium-chat-id')!;
    const otherAgent = await client()
      .chat.completions.create({
        model: 'agt_plain',
        messages: [{ role: 'user', content: 'Hi' }],
        chat_id: chatId,
      } as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming)
      .catch((e: unknown) => e);
    expect(otherAgent).toBeInstanceOf(OpenAI.BadRequestError);
    expect(otherAgent).toMatchObject({ code: 'bad_request', param: 'chat_id' });
    // Named by the header, the header is the param (it was `chat_id`, a field the request lacks).
    const otherAgentByHeader = await client(CHAT_KEYS.main, {
      defaultHeaders: { 'x-atrium-chat-id': chatId },
    })
      .chat.completions.create({ model: 'agt_plain', messages: [{ role: 'user', content: 'Hi' }] })
      .catch((e: unknown) => e);
    expect(otherAgentByHeader).toBeInstanceOf(OpenAI.BadRequestError);
    expect(otherAgentByHeader).toMatchObject({ code: 'bad_request', param: 'x-atrium-chat-id' });
    const otherTenant = await client(CHAT_KEYS.other)
      .chat.completions.create({
        model: 'agt_other',
        messages: [{ role: 'user', content: 'Hi' }],
        chat_id: chatId,
      } as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming)
      .catch((e: unknown) => e);
    expect(otherTenant).toBeInstanceOf(OpenAI.NotFoundError);
    expect(otherTenant).toMatchObject({ code: 'not_found', param: 'chat_id' });
  });

  it('names project_id in param when the project is unknown or another workspace’s: 404', async () => {
    for (const [key, projectId] of [
      [CHAT_KEYS.main, 'prj_nope'],
      [CHAT_KEYS.other, 'prj_docs'],
    ] as const) {
      const error = await client(key)
        .chat.completions.create({
          model: key === CHAT_KEYS.main ? 'agt_plain' : 'agt_other',
          messages: [{ role: 'user', content: 'Hi' }],
          project_id: projectId,
        } as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.NotFoundError);
      expect(error).toMatchObject({ status: 404, code: 'not_found', param: 'project_id' });
    }
  });
});
