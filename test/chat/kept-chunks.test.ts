import { readUIMessageStream, type UIMessageChunk } from 'ai';
import { describe, expect, it } from 'vitest';
import { KeptChunks, textOnlyParts } from '../../src/services/kept-chunks.js';

type Chunk = UIMessageChunk;

/** The parts the AI SDK's own message reader makes of `chunks`: what the fold must equal. */
async function sdkParts(chunks: Chunk[]): Promise<unknown[]> {
  let last: { parts: unknown[] } | undefined;
  const stream = new ReadableStream<Chunk>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
  for await (const snapshot of readUIMessageStream({ stream })) last = snapshot;
  return last?.parts ?? [];
}

function kept(chunks: Chunk[]): KeptChunks {
  const keeper = new KeptChunks();
  for (const chunk of chunks) keeper.add(chunk as never);
  return keeper;
}

const meta = { openai: { id: 'resp_1' } };

/** Replies of text and steps only: folded directly, to exactly the SDK reader's parts. */
const textReplies: Record<string, Chunk[]> = {
  'one step of text, deltas joined': [
    { type: 'start', messageId: 'msg_1', messageMetadata: { chatId: 'cht_1' } },
    { type: 'start-step' },
    { type: 'text-start', id: '0' },
    { type: 'text-delta', id: '0', delta: 'Hel' },
    { type: 'text-delta', id: '0', delta: 'lo' },
    { type: 'text-end', id: '0' },
    { type: 'finish-step' },
    { type: 'finish', finishReason: 'stop', messageMetadata: { chatId: 'cht_1' } },
  ],
  'two steps, two text parts, provider metadata on start and end': [
    { type: 'start', messageId: 'msg_1' },
    { type: 'start-step' },
    { type: 'text-start', id: '0', providerMetadata: meta },
    { type: 'text-delta', id: '0', delta: 'One.' },
    { type: 'text-end', id: '0' },
    { type: 'finish-step' },
    { type: 'start-step' },
    { type: 'text-start', id: '0' },
    { type: 'text-delta', id: '0', delta: 'Two.' },
    { type: 'text-end', id: '0', providerMetadata: meta },
    { type: 'finish-step' },
    { type: 'finish', messageMetadata: { model: 'm' } },
  ],
  'an empty text part and interleaved parts': [
    { type: 'start' },
    { type: 'start-step' },
    { type: 'text-start', id: 'a' },
    { type: 'text-start', id: 'b' },
    { type: 'text-delta', id: 'b', delta: 'bee' },
    { type: 'text-end', id: 'a' },
    { type: 'text-delta', id: 'b', delta: '!' },
    { type: 'text-end', id: 'b' },
    { type: 'finish-step' },
    { type: 'finish', messageMetadata: { model: 'm' } },
  ],
  'a reply cut short (a text part left open)': [
    { type: 'start', messageId: 'msg_1' },
    { type: 'start-step' },
    { type: 'text-start', id: '0' },
    { type: 'text-delta', id: '0', delta: 'Half' },
  ],
  'no chunks at all': [],
};

/** Replies the fold leaves to the SDK's reader (other parts, or what the reader would not show). */
const otherReplies: Record<string, Chunk[]> = {
  'a tool call': [
    { type: 'start', messageId: 'msg_1' },
    { type: 'start-step' },
    { type: 'tool-input-available', toolCallId: 'c1', toolName: 'lookup', input: { q: 'x' } },
    { type: 'tool-output-available', toolCallId: 'c1', output: { found: true } },
    { type: 'finish-step' },
    { type: 'finish', messageMetadata: { model: 'm' } },
  ],
  'a source and a stop': [
    { type: 'start', messageId: 'msg_1' },
    { type: 'source-url', sourceId: 's1', url: 'https://example.com' },
    { type: 'start-step' },
    { type: 'text-start', id: '0' },
    { type: 'text-delta', id: '0', delta: 'Cut' },
    { type: 'abort' },
  ],
  'a step started and never shown (no snapshot after it)': [
    { type: 'start', messageId: 'msg_1' },
    { type: 'start-step' },
    { type: 'text-start', id: '0' },
    { type: 'text-end', id: '0' },
    { type: 'finish-step' },
    { type: 'start-step' },
    { type: 'finish-step' },
    { type: 'finish' },
  ],
};

describe('the stored parts of a reply', () => {
  for (const [name, chunks] of Object.entries(textReplies)) {
    it(`are folded directly, as the SDK reads them: ${name}`, async () => {
      const folded = textOnlyParts(chunks);
      expect(folded).toBeDefined();
      expect(folded).toEqual(await sdkParts(chunks));
      expect(await kept(chunks).parts()).toEqual(await sdkParts(chunks));
    });
  }

  for (const [name, chunks] of Object.entries(otherReplies)) {
    it(`are read by the SDK's reader: ${name}`, async () => {
      expect(textOnlyParts(chunks)).toBeUndefined();
      expect(await kept(chunks).parts()).toEqual(await sdkParts(chunks));
    });
  }

  it('come out as the SDK reader makes them of a delta of a part that never started', async () => {
    const chunks: Chunk[] = [{ type: 'start-step' }, { type: 'text-delta', id: 'x', delta: 'orphan' }];
    expect(textOnlyParts(chunks)).toBeUndefined();
    expect(await kept(chunks).parts()).toEqual(await sdkParts(chunks));
  });

  it('keep one joined delta per run of deltas of one part', async () => {
    const keeper = new KeptChunks();
    keeper.add({ type: 'start-step' });
    keeper.add({ type: 'text-start', id: '0' });
    for (let i = 0; i < 1000; i++) keeper.add({ type: 'text-delta', id: '0', delta: 'x' });
    keeper.add({ type: 'text-end', id: '0' });
    expect(await keeper.parts()).toEqual([
      { type: 'step-start' },
      { type: 'text', text: 'x'.repeat(1000), state: 'done', providerMetadata: undefined },
    ]);
  });
});
