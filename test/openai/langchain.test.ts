import type { AddressInfo } from 'node:net';
import { ChatOpenAI } from '@langchain/openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { CHAT_KEYS, chatSetup } from '../chat/fixtures.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';

/** LangChain's OpenAI chat model pointed at `/v1/openai` works unchanged. */
let upstream: FakeUpstream;
let t: TestApp;
let baseURL: string;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  t = await createTestApp({ setup: chatSetup(upstream) });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  baseURL = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/v1/openai`;
});
afterAll(async () => {
  await t.close();
  await upstream.close();
});

function model(options: { streamUsage?: boolean } = {}) {
  return new ChatOpenAI({
    model: 'agt_plain',
    apiKey: CHAT_KEYS.main,
    configuration: { baseURL },
    maxRetries: 0,
    ...options,
  });
}

describe('LangChain ChatOpenAI', () => {
  it('invokes an agent and reads its usage', async () => {
    upstream.enqueue({ kind: 'text', text: 'Hello from LangChain.', usage: { prompt: 6, completion: 4 } });
    const message = await model().invoke([
      ['system', 'Be short.'],
      ['human', 'Hi'],
    ]);
    expect(message.content).toBe('Hello from LangChain.');
    expect(message.usage_metadata).toMatchObject({ input_tokens: 6, output_tokens: 4, total_tokens: 10 });
  });

  it('streams an agent reply with usage', async () => {
    upstream.enqueue({ kind: 'text', text: 'Streaming works fine.', usage: { prompt: 5, completion: 3 } });
    let text = '';
    let usage: unknown;
    for await (const chunk of await model({ streamUsage: true }).stream('Hi')) {
      text += String(chunk.content);
      usage ??= chunk.usage_metadata;
    }
    expect(text).toBe('Streaming works fine.');
    expect(usage).toMatchObject({ input_tokens: 5, output_tokens: 3 });
  });

  it('returns a bound tool call', async () => {
    upstream.enqueue({ kind: 'tool-calls', calls: [{ name: 'get_weather', arguments: { city: 'Rome' } }] });
    const message = await model()
      .bindTools([
        {
          type: 'function',
          function: {
            name: 'get_weather',
            description: 'The weather in a city',
            parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
          },
        },
      ])
      .invoke('Weather in Rome?');
    expect(message.tool_calls).toEqual([
      expect.objectContaining({ name: 'get_weather', args: { city: 'Rome' } }),
    ]);
  });
});
