import { readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';
import { TextBuilder } from '../text-builder.js';
import type { ChatMessageMetadata } from './chat.js';

type Chunk = UIMessageChunk<ChatMessageMetadata>;

/**
 * The UI message chunks of a reply, kept to build the stored message at its end: consecutive
 * text deltas of one part are joined as they arrive (text-builder.ts), so a long reply keeps a
 * few strings per part.
 */
export class KeptChunks {
  private readonly chunks: Chunk[] = [];
  /** The last kept chunk when it is a text delta, with its text still growing. */
  private text:
    { chunk: { type: 'text-delta'; id: string; delta: string }; builder: TextBuilder } | undefined;

  add(chunk: Chunk): void {
    if (chunk.type !== 'text-delta') {
      this.endText();
      this.chunks.push(chunk);
    } else if (this.text?.chunk.id === chunk.id) {
      this.text.builder.add(chunk.delta);
    } else {
      this.endText();
      const kept = { type: 'text-delta' as const, id: chunk.id, delta: '' };
      this.text = { chunk: kept, builder: new TextBuilder() };
      this.text.builder.add(chunk.delta);
      this.chunks.push(kept);
    }
  }

  /** The growing text delta gets its whole text. */
  private endText(): void {
    if (!this.text) return;
    this.text.chunk.delta = this.text.builder.toString();
    this.text = undefined;
  }

  /**
   * The assistant message's parts, as the SDK's message reader makes them from these chunks. A
   * reply of text and steps only (nearly every reply) is folded here directly: the reader runs
   * its web streams and clones the message once per chunk, a quarter of a millisecond of every
   * reply (BENCHMARKS.md, 2026-11-28 18:15). Any other chunk goes through the reader.
   */
  async parts(): Promise<unknown[]> {
    this.endText();
    return textOnlyParts(this.chunks) ?? (await readerParts(this.chunks));
  }
}

/** The parts the SDK's own reader makes of `chunks` (its last message snapshot). */
async function readerParts(chunks: readonly Chunk[]): Promise<unknown[]> {
  let last: UIMessage<ChatMessageMetadata> | undefined;
  for await (const snapshot of readUIMessageStream<UIMessage<ChatMessageMetadata>>({
    stream: new ReadableStream<Chunk>({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(chunk);
        controller.close();
      },
    }),
  })) {
    last = snapshot;
  }
  return last?.parts ?? [];
}

interface TextPart {
  type: 'text';
  text: string;
  providerMetadata: unknown;
  state: 'streaming' | 'done';
}

/**
 * The parts the SDK's reader (`processUIMessageStream`, ai 6) makes of a reply whose chunks are
 * all of the kinds below, built the same way and with the same objects. Undefined for any other
 * reply, for a delta or end of a text part that did not start (the reader reports it and stops),
 * and where the reader would not have shown the last change (its result is its last snapshot,
 * and a step's start alone takes none). The test holds the two to the same result, so a change
 * in the SDK shows there.
 */
export function textOnlyParts(chunks: readonly UIMessageChunk<unknown>[]): unknown[] | undefined {
  const parts: unknown[] = [];
  let active = new Map<string, TextPart>();
  /** A change the reader made without taking a snapshot after it. */
  let unshown = false;
  for (const chunk of chunks) {
    switch (chunk.type) {
      case 'start':
        if (chunk.messageId != null || chunk.messageMetadata != null) unshown = false;
        break;
      case 'finish':
        if (chunk.messageMetadata != null) unshown = false;
        break;
      case 'start-step':
        parts.push({ type: 'step-start' });
        unshown = true;
        break;
      case 'finish-step':
        active = new Map();
        break;
      case 'text-start': {
        const part: TextPart = {
          type: 'text',
          text: '',
          providerMetadata: chunk.providerMetadata,
          state: 'streaming',
        };
        active.set(chunk.id, part);
        parts.push(part);
        unshown = false;
        break;
      }
      case 'text-delta': {
        const part = active.get(chunk.id);
        if (!part) return undefined;
        part.text += chunk.delta;
        part.providerMetadata = chunk.providerMetadata ?? part.providerMetadata;
        unshown = false;
        break;
      }
      case 'text-end': {
        const part = active.get(chunk.id);
        if (!part) return undefined;
        part.state = 'done';
        part.providerMetadata = chunk.providerMetadata ?? part.providerMetadata;
        active.delete(chunk.id);
        unshown = false;
        break;
      }
      default:
        return undefined;
    }
  }
  return unshown ? undefined : parts;
}
