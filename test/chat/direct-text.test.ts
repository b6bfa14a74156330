import type { LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { simulateReadableStream, tool, type ToolSet } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { replyOf } from './stream-reply.js';

const usage = {
  inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 4, text: 4, reasoning: 0 },
};

/**
 * Streams a reply from a model yielding each step's parts one per tick; returns what a client
 * reads, what is stored, and the model's calls.
 */
async function reply(steps: LanguageModelV3StreamPart[][], tools: ToolSet = {}) {
  let step = 0;
  const model = new MockLanguageModelV3({
    doStream: async () => ({
      stream: simulateReadableStream({ chunks: steps[step++]!, chunkDelayInMs: 1 }),
    }),
  });
  const { chunks, stored } = await replyOf(model, tools);
  return { chunks, stored, prompts: model.doStreamCalls };
}

describe('text deltas taken straight from the provider', () => {
  it('reach the client once each, after their text-start and before their text-end, and are stored whole', async () => {
    const { chunks, stored } = await reply([
      [
        { type: 'stream-start', warnings: [] },
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: 'Hel' },
        { type: 'text-delta', id: 't', delta: 'lo ' },
        { type: 'text-delta', id: 't', delta: 'you' },
        { type: 'text-end', id: 't' },
        { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
      ],
    ]);
    const types = chunks.map((chunk) => chunk.type);
    expect(types.filter((type) => type !== 'text-delta')).toEqual([
      'start',
      'start-step',
      'text-start',
      'text-end',
      'finish-step',
      'finish',
    ]);
    const first = types.indexOf('text-delta');
    expect(first).toBeGreaterThan(types.indexOf('text-start'));
    expect(types.lastIndexOf('text-delta')).toBeLessThan(types.indexOf('text-end'));
    const text = chunks.map((chunk) => (chunk.type === 'text-delta' ? chunk.delta : '')).join('');
    expect(text).toBe('Hello you');
    expect(stored).toMatchObject({ ok: true, text: 'Hello you', usage: { inputTokens: 3, outputTokens: 4 } });
  });

  it('keep their place around another part inside the text part', async () => {
    const { chunks, stored } = await reply([
      [
        { type: 'stream-start', warnings: [] },
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: 'See ' },
        { type: 'source', sourceType: 'url', id: 's1', url: 'https://example.com/a' },
        { type: 'text-delta', id: 't', delta: 'there' },
        { type: 'text-end', id: 't' },
        { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
      ],
    ]);
    expect(
      chunks
        .filter((chunk) => chunk.type !== 'start' && chunk.type !== 'start-step')
        .map((chunk) => (chunk.type === 'text-delta' ? `delta:${chunk.delta}` : chunk.type)),
    ).toEqual(['text-start', 'delta:See ', 'source-url', 'delta:there', 'text-end', 'finish-step', 'finish']);
    expect(stored).toMatchObject({ ok: true, text: 'See there' });
  });

  it("of a tool step reach the next step's prompt, and the next step's text part keeps its own place", async () => {
    const lookUp = tool({
      inputSchema: z.object({ q: z.string() }),
      execute: async () => 'found',
    });
    const { chunks, stored, prompts } = await reply(
      [
        [
          { type: 'stream-start', warnings: [] },
          { type: 'text-start', id: 't' },
          { type: 'text-delta', id: 't', delta: 'Let me ' },
          { type: 'text-delta', id: 't', delta: 'look.' },
          { type: 'text-end', id: 't' },
          { type: 'tool-call', toolCallId: 'c1', toolName: 'lookUp', input: '{"q":"x"}' },
          { type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage },
        ],
        [
          { type: 'stream-start', warnings: [] },
          { type: 'text-start', id: 't' },
          { type: 'text-delta', id: 't', delta: 'Found ' },
          { type: 'text-delta', id: 't', delta: 'it.' },
          { type: 'text-end', id: 't' },
          { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
        ],
      ],
      { lookUp },
    );
    const secondPrompt = JSON.stringify(prompts[1]!.prompt);
    expect(secondPrompt).toContain('"text":"Let me look."');
    const seen: string[] = [];
    for (const chunk of chunks) {
      if (chunk.type === 'text-delta') seen.push(`${chunk.id}:${chunk.delta}`);
      else if (
        chunk.type === 'text-start' ||
        chunk.type === 'text-end' ||
        chunk.type === 'tool-output-available'
      ) {
        seen.push(`${chunk.type}${'id' in chunk ? `:${chunk.id}` : ''}`);
      }
    }
    const [first, second] = [
      chunks.find((c) => c.type === 'text-start'),
      chunks.findLast((c) => c.type === 'text-start'),
    ];
    const [a, b] = [(first as { id: string }).id, (second as { id: string }).id];
    expect(seen.join(' ')).toBe(
      [
        `text-start:${a}`,
        `${a}:Let me `,
        `${a}:look.`,
        `text-end:${a}`,
        'tool-output-available',
        `text-start:${b}`,
        `${b}:Found `,
        `${b}:it.`,
        `text-end:${b}`,
      ].join(' '),
    );
    expect(stored).toMatchObject({ ok: true, text: 'Let me look.Found it.' });
  });
});

describe('a stop that lands while the ended reply is being stored', () => {
  for (const reason of ['stopped', 'interrupted'] as const) {
    it(`(${reason}) changes nothing the client is told: it gets the finish of what was stored`, async () => {
      const model = new MockLanguageModelV3({
        doStream: async () => ({
          stream: simulateReadableStream({
            chunks: [
              { type: 'stream-start', warnings: [] },
              { type: 'text-start', id: 't' },
              { type: 'text-delta', id: 't', delta: 'Hello' },
              { type: 'text-end', id: 't' },
              { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
            ] as LanguageModelV3StreamPart[],
            chunkDelayInMs: 1,
          }),
        }),
      });
      const { chunks, stored } = await replyOf(model, {}, { stopWhileStoring: reason });
      expect(stored).toMatchObject({ ok: true, text: 'Hello', finishReason: 'stop' });
      expect(chunks.some((chunk) => chunk.type === 'error')).toBe(false);
      expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'stop' });
    });
  }
});
