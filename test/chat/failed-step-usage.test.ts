import type { LanguageModelV3StreamPart } from '@ai-sdk/provider';
import type { UIMessageChunk } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { replyOf } from './stream-reply.js';

/*
 * A streamed reply ends at its provider's first error, aborting the model call: the failed step
 * never finishes. It is charged as a step the provider failed (reply-usage.ts, docs/chat.md):
 * nothing when it had produced nothing before the error, else as one cut short.
 */

const finish: LanguageModelV3StreamPart = {
  type: 'finish',
  finishReason: { unified: 'stop', raw: 'stop' },
  usage: {
    inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: 4, text: 4, reasoning: 0 },
  },
};

/** A model streaming `parts` a millisecond apart; an abort fails its stream, as a fetch's. */
function model(parts: LanguageModelV3StreamPart[]) {
  return new MockLanguageModelV3({
    doStream: async ({ abortSignal }) => {
      const left = [...parts];
      return {
        stream: new ReadableStream<LanguageModelV3StreamPart>({
          async pull(controller) {
            await new Promise((resolve) => setTimeout(resolve, 1));
            const part = left.shift();
            if (abortSignal?.aborted)
              controller.error(new DOMException('This operation was aborted', 'AbortError'));
            else if (part) controller.enqueue(part);
            else controller.close();
          },
        }),
      };
    },
  });
}

/** The usage the reply's `finish` chunk reports: what is charged for it. */
function finishUsage(chunks: UIMessageChunk[]) {
  const last = chunks.at(-1) as Extract<UIMessageChunk, { type: 'finish' }>;
  expect(last).toMatchObject({ type: 'finish', finishReason: 'error' });
  return (last.messageMetadata as { usage: { inputTokens: number; outputTokens: number } }).usage;
}

describe.each([
  ['the model stream', undefined],
  ['streamText', 'sdk' as const],
])('a step the provider fails, through %s', (_name, pipeline) => {
  const options = pipeline ? { pipeline } : {};

  /** What the reply is charged when its provider streams `before`, then fails (and would go on). */
  async function chargedAfter(before: LanguageModelV3StreamPart[]) {
    const { chunks, stored } = await replyOf(
      model([...before, { type: 'error', error: 'overloaded' }, finish]),
      {},
      options,
    );
    expect(stored.ok).toBe(false);
    return finishUsage(chunks);
  }

  it('costs nothing when the error comes before any output', async () => {
    expect(await chargedAfter([])).toEqual({ inputTokens: 0, outputTokens: 0 });
  });

  it.each([
    ['the text streamed', 'text', 'partial'],
    ['its reasoning (never streamed)', 'reasoning', 'thinking it over'],
  ] as const)('is charged its prompt and %s when the error comes after it', async (_what, kind, delta) => {
    const usage = await chargedAfter([
      { type: `${kind}-start`, id: 'p' },
      { type: `${kind}-delta`, id: 'p', delta },
    ]);
    expect(usage.inputTokens).toBeGreaterThan(0);
    expect(usage.outputTokens).toBe(Math.ceil(delta.length / 4));
  });
});

describe.each([
  ['the model stream', undefined],
  ['streamText', 'sdk' as const],
])('a step stopped after its reasoning, through %s', (_name, pipeline) => {
  it('is charged the reasoning the provider streamed (never sent to the client) and the text sent', async () => {
    const reasoning = 'let me think this through with care '.repeat(10);
    const parts: LanguageModelV3StreamPart[] = [
      { type: 'reasoning-start', id: 'r' },
      { type: 'reasoning-delta', id: 'r', delta: reasoning },
      { type: 'reasoning-end', id: 'r' },
      { type: 'text-start', id: 't' },
    ];
    for (let i = 0; i < 20; i++) parts.push({ type: 'text-delta', id: 't', delta: `w${i} ` });
    parts.push({ type: 'text-end', id: 't' }, finish);
    const { chunks, stored } = await replyOf(
      model(parts),
      {},
      {
        ...(pipeline ? { pipeline } : {}),
        stopAfterChunks: 5,
      },
    );
    expect(stored).toMatchObject({ ok: true, finishReason: 'stopped' });
    const sent = chunks
      .filter((chunk) => chunk.type === 'text-delta')
      .map((chunk) => (chunk as { delta: string }).delta)
      .join('');
    expect(sent.length).toBeGreaterThan(0);
    const { usage } = stored as Extract<typeof stored, { ok: true }>;
    expect(usage.outputTokens).toBe(Math.ceil((reasoning.length + sent.length) / 4));
  });
});
