import { APICallError, type LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { simulateReadableStream, type UIMessageChunk } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeUpstream, type ReplyScript, startFakeUpstream } from '../helpers/fake-upstream.js';
import type { ReplyCall, ReplyResult } from '../../src/services/chat-reply.js';
import { replyOf } from './stream-reply.js';

/**
 * A turn without tools is streamed from the model's parts directly (plain-turn.ts) rather than
 * through `streamText` and `toUIMessageStream`. Each case gives one scripted model both paths
 * and asks for the same thing: the same chunks key for key (the bytes a client reads), the same
 * stored reply and usage, and the same model calls (prompt and settings).
 */

const usage = {
  inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 4, text: 4, reasoning: 0 },
};
const finish: LanguageModelV3StreamPart = {
  type: 'finish',
  finishReason: { unified: 'stop', raw: 'stop' },
  usage,
};

/** One model step: its parts, then (optionally) a failure of its stream; or a failing call. */
type Step =
  | LanguageModelV3StreamPart[]
  | { parts: LanguageModelV3StreamPart[]; thenFails: Error }
  | { parts: LanguageModelV3StreamPart[]; thenStalls: true }
  | { throws: Error };

function scripted(steps: Step[]) {
  let n = 0;
  return new MockLanguageModelV3({
    doStream: async ({ abortSignal }) => {
      const step = steps[Math.min(n++, steps.length - 1)]!;
      if ('throws' in step) throw step.throws;
      if (Array.isArray(step)) return { stream: simulateReadableStream({ chunks: step, chunkDelayInMs: 1 }) };
      const parts = [...step.parts];
      return {
        stream: new ReadableStream<LanguageModelV3StreamPart>({
          async pull(controller) {
            await new Promise((resolve) => setTimeout(resolve, 1));
            const part = parts.shift();
            if (part) controller.enqueue(part);
            else if ('thenFails' in step) controller.error(step.thenFails);
            else {
              // Silent until the reply is aborted, then the read fails as a fetch's does.
              await new Promise((resolve) => abortSignal?.addEventListener('abort', resolve));
              controller.error(new DOMException('This operation was aborted', 'AbortError'));
            }
          },
        }),
      };
    },
  });
}

type Outcome = { chunks: UIMessageChunk[]; stored: ReplyResult } | { failed: string };

/** The model's calls as the provider gets them (the abort signal is each path's own). */
function calls(model: MockLanguageModelV3) {
  return model.doStreamCalls.map(({ abortSignal, ...params }) => {
    expect(abortSignal).toBeInstanceOf(AbortSignal);
    return params;
  });
}

/** Made-up ids (a repeated part id) are each path's own: numbered by first appearance. */
function comparable(outcome: Outcome): string {
  const ids = new Map<string, string>();
  return JSON.stringify(outcome, (key, value: unknown) => {
    if (key === 'id' && typeof value === 'string' && /^aitxt-[A-Za-z0-9]{24}(-\d+)?$/.test(value)) {
      if (!ids.has(value)) ids.set(value, `generated-${ids.size}`);
      return ids.get(value);
    }
    return value;
  });
}

async function bothPaths(
  steps: Step[],
  options: {
    call?: Partial<Pick<ReplyCall, 'system' | 'messages' | 'temperature' | 'options'>>;
    stopAfterChunks?: number;
    idleTimeoutMs?: number;
  } = {},
) {
  const run = async (pipeline: 'sdk' | undefined) => {
    const model = scripted(steps);
    const outcome: Outcome = await replyOf(
      model,
      {},
      { ...options, ...(pipeline ? { pipeline } : {}) },
    ).catch((error: unknown) => ({ failed: String(error) }));
    return { outcome, calls: calls(model) };
  };
  const sdk = await run('sdk');
  const plain = await run(undefined);
  expect(comparable(plain.outcome)).toBe(comparable(sdk.outcome));
  expect(plain.calls).toEqual(sdk.calls);
  return sdk;
}

describe('a turn without tools, outside streamText, against the same turn through it', () => {
  it('text: the same chunks, stored reply, usage and model call', async () => {
    const { outcome, calls: made } = await bothPaths([
      [
        { type: 'stream-start', warnings: [] },
        { type: 'response-metadata', id: 'r1', modelId: 'm' },
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: 'Hel' },
        { type: 'text-delta', id: 't', delta: '' },
        { type: 'text-delta', id: 't', delta: 'lo' },
        { type: 'text-end', id: 't' },
        finish,
      ],
    ]);
    expect(outcome).toMatchObject({
      stored: { ok: true, text: 'Hello', usage: { inputTokens: 3, outputTokens: 4 } },
    });
    expect(made).toHaveLength(1);
  });

  it('a system prompt, system and multi-part messages, and every sampling setting', async () => {
    await bothPaths(
      [
        [
          { type: 'text-start', id: 't' },
          { type: 'text-delta', id: 't', delta: 'ok' },
          { type: 'text-end', id: 't' },
          finish,
        ],
      ],
      {
        call: {
          system: 'Be brief.',
          temperature: 0.3,
          messages: [
            { role: 'system', content: 'Also be kind.' },
            {
              role: 'user',
              content: [
                { type: 'text', text: 'Hi' },
                { type: 'text', text: 'there' },
              ],
            },
            { role: 'assistant', content: 'Hello.' },
            { role: 'user', content: 'Again' },
          ],
          options: {
            maxOutputTokens: 50,
            topP: 0.9,
            stopSequences: ['END'],
            seed: 7,
            presencePenalty: 0.1,
            frequencyPenalty: 0.2,
          },
        },
      },
    );
  });

  it('metadata on text parts, reasoning (not sent), sources, files and several text parts', async () => {
    await bothPaths([
      [
        { type: 'stream-start', warnings: [{ type: 'other', message: 'w' }] },
        { type: 'reasoning-start', id: 'r' },
        { type: 'reasoning-delta', id: 'r', delta: 'thinking' },
        { type: 'reasoning-end', id: 'r' },
        { type: 'text-start', id: 't', providerMetadata: { p: { a: 1 } } },
        { type: 'text-delta', id: 't', delta: 'See ', providerMetadata: { p: { b: 2 } } },
        { type: 'source', sourceType: 'url', id: 's1', url: 'https://example.com/a', title: 'A' },
        {
          type: 'source',
          sourceType: 'document',
          id: 's2',
          mediaType: 'text/plain',
          title: 'Doc',
          filename: 'd.txt',
        },
        { type: 'text-delta', id: 't', delta: 'there' },
        { type: 'text-end', id: 't', providerMetadata: { p: { c: 3 } } },
        { type: 'file', mediaType: 'image/png', data: 'aGVsbG8=' },
        { type: 'file', mediaType: 'image/png', data: new Uint8Array([1, 2, 3]) },
        { type: 'text-start', id: 'u' },
        { type: 'text-delta', id: 'u', delta: ' and more' },
        { type: 'text-end', id: 'u' },
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: ' (again)' },
        { type: 'text-end', id: 't' },
        { type: 'finish', finishReason: { unified: 'length', raw: 'max_tokens' }, usage },
      ],
    ]);
  });

  it('a stream that ends without its finish: after output, and with none', async () => {
    await bothPaths([
      [
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: 'cut' },
      ],
    ]);
    await bothPaths([[{ type: 'stream-start', warnings: [] }]]);
    await bothPaths([[]]);
  });

  it("the provider's error part, after text and before any", async () => {
    const error = new APICallError({
      message: 'overloaded',
      url: 'http://x',
      requestBodyValues: {},
      statusCode: 529,
    });
    await bothPaths([
      [
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: 'par' },
        { type: 'error', error },
        finish,
      ],
    ]);
    await bothPaths([[{ type: 'error', error: 'boom' }]]);
  });

  it('a call the provider refuses, and a stream that breaks', async () => {
    const refused = new APICallError({
      message: 'bad key',
      url: 'http://x',
      requestBodyValues: {},
      statusCode: 401,
    });
    const { outcome } = await bothPaths([{ throws: refused }]);
    expect(outcome).toMatchObject({ stored: { ok: false } });
    await bothPaths([
      {
        parts: [
          { type: 'text-start', id: 't' },
          { type: 'text-delta', id: 't', delta: 'half' },
        ],
        thenFails: new Error('socket hang up'),
      },
    ]);
  });

  it('a stop while text streams', async () => {
    const parts: LanguageModelV3StreamPart[] = [{ type: 'text-start', id: 't' }];
    for (let i = 0; i < 20; i++) parts.push({ type: 'text-delta', id: 't', delta: `w${i} ` });
    parts.push({ type: 'text-end', id: 't' }, finish);
    const { outcome } = await bothPaths([parts], { stopAfterChunks: 6 });
    expect(outcome).toMatchObject({ stored: { ok: true, finishReason: 'stopped' } });
  });

  it('the upstream falling silent past the idle timeout', async () => {
    const { outcome } = await bothPaths(
      [
        {
          parts: [
            { type: 'text-start', id: 't' },
            { type: 'text-delta', id: 't', delta: 'wai' },
          ],
          thenStalls: true,
        },
      ],
      { idleTimeoutMs: 100 },
    );
    expect(outcome).toMatchObject({ stored: { ok: false } });
  });

  it('a tool call the model makes up: a tool error, and the model answers in another step', async () => {
    const { outcome, calls: made } = await bothPaths([
      [
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: 'Let me look. ' },
        { type: 'text-end', id: 't' },
        { type: 'tool-input-start', id: 'c1', toolName: 'lookup' },
        { type: 'tool-input-delta', id: 'c1', delta: '{"id":42}' },
        { type: 'tool-input-end', id: 'c1' },
        { type: 'tool-call', toolCallId: 'c1', toolName: 'lookup', input: '{"id":42}' },
        { type: 'tool-call', toolCallId: 'c2', toolName: 'other', input: 'not json' },
        { type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage },
      ],
      [
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: 'I cannot.' },
        { type: 'text-end', id: 't' },
        finish,
      ],
    ]);
    expect(made).toHaveLength(2);
    expect(outcome).toMatchObject({
      stored: { ok: true, finishReason: 'stop', usage: { inputTokens: 6, outputTokens: 8 } },
    });
  });

  it('a model that makes up tool calls at every step: as many steps as the tool loop allows', async () => {
    const { calls: made } = await bothPaths([
      [
        { type: 'tool-call', toolCallId: 'c', toolName: 'lookup', input: '{}' },
        { type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage },
      ],
    ]);
    expect(made).toHaveLength(8);
  });
});

describe('a turn without tools, through a real provider against an HTTP upstream, on both paths', () => {
  let upstream: FakeUpstream;
  beforeAll(async () => {
    upstream = await startFakeUpstream();
  });
  afterAll(() => upstream.close());

  /** Each path's requests to the upstream and what its client reads, for the same scripts. */
  async function viaUpstream(scripts: ReplyScript[], call?: Partial<Pick<ReplyCall, 'system' | 'messages'>>) {
    const run = async (pipeline: 'sdk' | undefined) => {
      upstream.requests.length = 0;
      upstream.enqueue(...scripts);
      const model = createOpenAICompatible({
        name: 'up',
        baseURL: upstream.baseURL,
        includeUsage: true,
      }).chatModel('m');
      const outcome: Outcome = await replyOf(model, {}, { ...(pipeline ? { pipeline } : {}), call }).catch(
        (error: unknown) => ({ failed: String(error) }),
      );
      return { outcome, requests: upstream.requests.map((request) => request.body) };
    };
    const sdk = await run('sdk');
    const plain = await run(undefined);
    // The provider and the upstream name text parts and tool calls themselves (per response).
    const named = (text: string) =>
      text.replace(/"id":"[^"]+"/g, '"id":"x"').replace(/call_\d+_\d+/g, 'call_x');
    expect(named(comparable(plain.outcome))).toBe(named(comparable(sdk.outcome)));
    expect(named(JSON.stringify(plain.requests))).toBe(named(JSON.stringify(sdk.requests)));
    return sdk;
  }

  it('a text reply in pieces, with a system prompt and history', async () => {
    const { outcome, requests } = await viaUpstream(
      [{ kind: 'text', text: 'Hello there, you.', pieces: ['Hel', 'lo there', ', you.'] }],
      {
        system: 'Be brief.',
        messages: [
          { role: 'user', content: 'Hi' },
          { role: 'assistant', content: 'Hello.' },
          { role: 'user', content: 'Again' },
        ],
      },
    );
    expect(requests).toHaveLength(1);
    expect(outcome).toMatchObject({ stored: { ok: true, text: 'Hello there, you.' } });
  });

  it('a made-up tool call, then the answer', async () => {
    const { requests } = await viaUpstream([
      { kind: 'tool-calls', calls: [{ name: 'lookup_order', arguments: { id: 42 } }] },
      { kind: 'text', text: 'I cannot look orders up.' },
    ]);
    expect(requests).toHaveLength(2);
  });

  it('an error answer, and a connection dropped mid-reply', async () => {
    await viaUpstream([{ kind: 'fail', status: 500, message: 'upstream broke' }]);
    await viaUpstream([{ kind: 'disconnect', text: 'one two three four', afterPieces: 2 }]);
  });
});
