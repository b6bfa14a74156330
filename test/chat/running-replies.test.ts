import { afterEach, describe, expect, it, vi } from 'vitest';
import { createMemoryCoordination } from '../../src/coordination/memory.js';
import { RunningReplies } from '../../src/services/running-replies.js';

/** Two "processes" sharing one coordination (as two processes share Redis). */
function twoProcesses() {
  const coordination = createMemoryCoordination();
  const options = { maxConcurrent: 5, keyPrefix: 'replays' };
  return { a: new RunningReplies(coordination, options), b: new RunningReplies(coordination, options) };
}

function source() {
  let controller!: ReadableStreamDefaultController<string>;
  const stream = new ReadableStream<string>({
    start(c) {
      controller = c;
    },
  });
  return { stream, controller };
}

/** Reads the replay for up to `ms`: its text and whether it ended. */
async function readFor(replay: ReadableStream<string>, ms: number) {
  const reader = replay.getReader();
  let text = '';
  const deadline = Date.now() + ms;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) return { text, ended: false };
    const next = await Promise.race([
      reader.read(),
      new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), left)),
    ]);
    if (next === 'timeout') return { text, ended: false };
    if (next.done) return { text, ended: true };
    text += next.value;
  }
}

afterEach(() => {
  vi.useRealTimers();
});

/** Replays (resume) across two processes sharing one coordination, as two processes share Redis. */
describe('replays of a reply running on another process', () => {
  it('end on shutdown, also one still being set up when the drain ended', async () => {
    const { a, b } = twoProcesses();
    const src = source();
    const ticket = a.admit('chat-1', 'msg-1', () => undefined);
    await ticket.share(src.stream);
    src.controller.enqueue('data: one\n\n');

    // A resume request in flight (e.g. arrived just before SIGTERM) when B's drain ends.
    const resuming = b.resume('chat-1');
    await b.drain(0, 0);
    const replay = await resuming;
    expect(replay).not.toBeNull();
    const read = await readFor(replay!, 1_500);
    src.controller.close();
    ticket.release();
    // Else the replay follows A's reply for as long as it runs, holding B's shutdown.
    expect(read).toEqual({ text: 'data: one\n\n', ended: true });
  });

  it("are not cut while their reply runs because the chat's next turn took the marker", async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const { a, b } = twoProcesses();
    const first = source();
    const firstTicket = a.admit('chat-2', 'msg-1', () => undefined);
    await firstTicket.share(first.stream);
    first.controller.enqueue('data: one\n\n');
    const replay = await b.resume('chat-2');
    expect(replay).not.toBeNull();

    // A second turn of the chat starts while the first reply still runs (docs/chat.md allows it).
    const second = source();
    const secondTicket = a.admit('chat-2', 'msg-2', () => undefined);
    await secondTicket.share(second.stream);

    const reading = readFor(replay!, 2_000);
    for (let i = 0; i < 3; i++) {
      await vi.advanceTimersByTimeAsync(10_000);
    }
    // The first reply goes on and ends normally.
    first.controller.enqueue('data: two\n\n');
    first.controller.enqueue('data: [DONE]\n\n');
    first.controller.close();
    const read = await reading;
    firstTicket.release();
    second.controller.close();
    secondTicket.release();
    expect(read).toEqual({ text: 'data: one\n\ndata: two\n\ndata: [DONE]\n\n', ended: true });
  });
});
