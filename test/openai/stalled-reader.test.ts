import type { ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import type { UIMessageChunk } from 'ai';
import { createParser } from 'eventsource-parser';
import { expect, it } from 'vitest';
import { LiveEventStream } from '../../src/http/ui-message-sse.js';
import type { ChatMessageMetadata } from '../../src/services/chat.js';
import { completionChunks } from '../../src/services/openai-chat.js';

/**
 * A response whose client has stopped reading (its socket's buffers full): every write is kept
 * until `read()`, as Node keeps the writes of a socket the kernel takes no more of.
 */
class StalledResponse extends Writable {
  written = '';
  private held: Array<() => void> = [];

  constructor() {
    super({ highWaterMark: 1024, decodeStrings: false });
  }

  writeHead(): this {
    return this;
  }

  override _write(chunk: string, _encoding: BufferEncoding, done: () => void): void {
    this.written += chunk;
    this.held.push(done);
  }

  /** The client reads again, until the server has nothing left to send. */
  async read(): Promise<void> {
    while (this.held.length > 0) {
      for (const done of this.held.splice(0)) done();
      await nextTurn();
    }
  }
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function eventsOf(text: string): string[] {
  const events: string[] = [];
  createParser({ onEvent: ({ data }) => events.push(data) }).feed(text);
  return events;
}

it('holds a client that stopped reading to about the reply’s text: its content joins into one chunk, not one buffered event per token', async () => {
  const response = new StalledResponse();
  const live = new LiveEventStream(response as unknown as ServerResponse);
  live.open({});
  const sink = completionChunks(
    live,
    { messageId: 'msg_stalled', agent: { id: 'agt_plain' } as never, done: new Promise(() => {}) },
    { clientToolNames: new Set(), includeUsage: false, created: 1 },
    (error) => {
      throw error;
    },
  );
  const tokens = Array.from({ length: 2_000 }, (_, i) => `tok${i} `);
  // One token per turn of the event loop, as a provider's stream brings them: each would be an
  // event of its own (about 150 bytes) written to a socket that takes none.
  for (const token of tokens) {
    sink.chunk({ type: 'text-delta', id: 'text-1', delta: token } as UIMessageChunk<ChatMessageMetadata>);
    await nextTurn();
  }
  // Before, every token's event was queued on the socket: 2,000 events, about 300 KB for 20 KB
  // of text, and RSS grew by some 40 MB for a stalled client of a 60,000-token reply.
  // Now the socket holds its own buffer's worth (its high-water mark, 1 KiB here) and an event.
  expect(response.writableLength).toBeLessThan(2 * 1024);

  await response.read();
  sink.chunk({
    type: 'finish',
    messageMetadata: { finishReason: 'stop' },
  } as UIMessageChunk<ChatMessageMetadata>);
  sink.end();
  await nextTurn();
  await response.read();
  expect(response.writableEnded).toBe(true);

  const events = eventsOf(response.written);
  expect(events.at(-1)).toBe('[DONE]');
  const chunks = events
    .slice(0, -1)
    .map(
      (data) =>
        JSON.parse(data) as { choices: Array<{ delta: { content?: string }; finish_reason: string | null }> },
    );
  expect(chunks.map((chunk) => chunk.choices[0]!.delta.content ?? '').join('')).toBe(tokens.join(''));
  expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('stop');
  // The tokens made while the client did not read left as one chunk once it read again.
  expect(chunks.length).toBeLessThan(10);
});
