import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Coordination } from '../../src/coordination/coordination.js';
import { createMemoryCoordination } from '../../src/coordination/memory.js';
import { connectRedis } from '../../src/coordination/redis.js';
import { RunningReplies } from '../../src/services/running-replies.js';
import { deleteRedisKeys, REDIS_URL, redisReachable } from '../helpers/redis.js';

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
// Budgets for replays that end: a generous one costs a passing run nothing, and under load (a
// collection every 40 ms in three workers) 2 s of real time ran out before the steps were done.
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

/** A process's view of shared coordination that stops writing when the process "dies". */
function mortal(shared: Coordination) {
  const state = { dead: false };
  const publisher = new Proxy(shared.publisher, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      if (prop === 'set' || prop === 'publish' || prop === 'del' || prop === 'replace') {
        return (...args: unknown[]) =>
          state.dead ? Promise.resolve(0) : (value as (...a: unknown[]) => unknown).apply(target, args);
      }
      return (value as (...a: unknown[]) => unknown).bind(target);
    },
  });
  return { coordination: { ...shared, publisher } as Coordination, state };
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
    const read = await readFor(replay!, 10_000);
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

    const reading = readFor(replay!, 10_000);
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

describe('a replay of a reply whose process died', () => {
  for (const laterTurn of [false, true]) {
    it(`ends without its end, a minute on${laterTurn ? ', while a later turn of the chat runs on a third process' : ''}`, async () => {
      vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'Date'] });
      // Redis keeps the stream's sentinel a day; the memory stand-in caps it at 5 min by default.
      const shared = createMemoryCoordination({ maxTtlSeconds: 24 * 60 * 60 });
      const options = { maxConcurrent: 5, keyPrefix: 'died' };
      const a = mortal(shared);
      const A = new RunningReplies(a.coordination, options);
      const B = new RunningReplies(shared, options);
      const C = new RunningReplies(shared, options);
      const first = source();
      await A.admit('chat-x', 'msg-1', () => undefined).share(first.stream);
      first.controller.enqueue('data: one\n\n');
      const replay = await B.resume('chat-x');
      expect(replay).not.toBeNull();
      // The chat's marker then names the later turn, kept alive by C.
      const second = source();
      const secondTicket = laterTurn ? C.admit('chat-x', 'msg-2', () => undefined) : undefined;
      await secondTicket?.share(second.stream);
      // A dies: msg-1 never ends, and A writes nothing more.
      a.state.dead = true;
      const reading = readFor(replay!, 1_500);
      for (let i = 0; i < 60; i++) await vi.advanceTimersByTimeAsync(10_000);
      const read = await reading;
      second.controller.close();
      secondTicket?.release();
      expect(read).toEqual({ text: 'data: one\n\n', ended: true });
    }, 20_000);
  }
});

describe('resumable copies when Redis fails mid-reply', () => {
  it('leave the reply not resumable, never an unhandled rejection (which would end the process)', async () => {
    const shared = createMemoryCoordination();
    // Redis gone between the reply's start and its end: every later write fails.
    let failing = false;
    const publisher = new Proxy(shared.publisher, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) =>
          failing && prop !== 'get'
            ? Promise.reject(new Error('Connection is closed.'))
            : (value as (...a: unknown[]) => unknown).apply(target, args);
      },
    });
    const replies = new RunningReplies({ ...shared, publisher } as Coordination, {
      maxConcurrent: 5,
      keyPrefix: 'failing',
    });
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const reply = source();
      const ticket = replies.admit('chat-z', 'msg-1', () => undefined);
      await ticket.share(reply.stream);
      failing = true;
      reply.controller.enqueue('data: one\n\n');
      reply.controller.close();
      ticket.release();
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});

describe("a chat's marker with two turns on two processes", () => {
  it("is the earlier turn's again at its second heartbeat after the later turn's process died", async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const shared = createMemoryCoordination();
    const dead = { channel: '' };
    // Every other process sees nobody listen on the dead one's channel any more.
    const view = (): Coordination => ({
      ...shared,
      publisher: new Proxy(shared.publisher, {
        get(target, prop, receiver) {
          const value = Reflect.get(target, prop, receiver) as unknown;
          if (prop === 'subscriberCounts') {
            return async (channels: string[]) => {
              const counts = await target.subscriberCounts(channels);
              return counts.map((count, i) => (channels[i] === dead.channel ? 0 : count));
            };
          }
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      }),
    });
    const options = { maxConcurrent: 5, keyPrefix: 'dead' };
    const A = new RunningReplies(view(), options); // process 1: earlier turn
    const C = new RunningReplies(shared, options); // process 2: later turn, killed
    const B = new RunningReplies(view(), options);
    await Promise.all([A.start(), C.start(), B.start()]);
    const first = A.admit('chat-d', 'msg-1', () => undefined); // heartbeats at 10, 20 s
    await vi.advanceTimersByTimeAsync(5_000);
    C.admit('chat-d', 'msg-2', () => undefined);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await B.runningMessageId('chat-d')).toBe('msg-2');
    // Process 2 is killed at 6 s: its markers stay until they expire, its channel goes.
    dead.channel = `dead:process:${await shared.publisher.get('dead:owner:msg-2')}`;
    await vi.advanceTimersByTimeAsync(14_100); // t = 20.1 s
    expect(await B.runningMessageId('chat-d')).toBe('msg-1');
    first.release();
  });

  it("stays the later turn's while that turn's process reconnects its subscriber for a moment", async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const shared = createMemoryCoordination();
    const gap = { on: false };
    // Process 1's view: during the gap nobody listens on process 2's channel (it reconnects).
    const viewOfFirst: Coordination = {
      ...shared,
      publisher: new Proxy(shared.publisher, {
        get(target, prop, receiver) {
          const value = Reflect.get(target, prop, receiver) as unknown;
          if (prop === 'subscriberCounts') {
            return async (channels: string[]) =>
              gap.on ? channels.map(() => 0) : target.subscriberCounts(channels);
          }
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      }),
    };
    const options = { maxConcurrent: 5, keyPrefix: 'gap' };
    const A = new RunningReplies(viewOfFirst, options); // process 1: earlier turn
    const C = new RunningReplies(shared, options); // process 2: later turn
    const B = new RunningReplies(shared, options); // process 3: where stops and resumes land
    await Promise.all([A.start(), C.start(), B.start()]);
    const first = A.admit('chat-g', 'msg-1', () => undefined); // heartbeats at 10, 20, 30 s
    await vi.advanceTimersByTimeAsync(5_000);
    const second = C.admit('chat-g', 'msg-2', () => undefined); // heartbeats at 15, 25, 35 s
    await vi.advanceTimersByTimeAsync(4_900);
    expect(await B.runningMessageId('chat-g')).toBe('msg-2');
    gap.on = true; // across process 1's heartbeat at 10 s
    await vi.advanceTimersByTimeAsync(200);
    gap.on = false;
    await vi.advanceTimersByTimeAsync(10);
    expect(await B.runningMessageId('chat-g')).toBe('msg-2');
    await vi.advanceTimersByTimeAsync(4_000); // before process 2's own heartbeat at 15 s
    expect(await B.runningMessageId('chat-g')).toBe('msg-2');
    first.release();
    second.release();
  });

  it('keeps naming the later turn: the earlier one does not put its own id back at its heartbeat', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const shared = createMemoryCoordination();
    const options = { maxConcurrent: 5, keyPrefix: 'turns' };
    const A = new RunningReplies(shared, options);
    const C = new RunningReplies(shared, options);
    const first = A.admit('chat-t', 'msg-1', () => undefined);
    await vi.advanceTimersByTimeAsync(5_000);
    const second = C.admit('chat-t', 'msg-2', () => undefined);
    // Past A's heartbeats at 10, 20 and 30 s, before C's at 35 s.
    await vi.advanceTimersByTimeAsync(27_000);
    // What another process's resume and `active` read.
    expect(await new RunningReplies(shared, options).runningMessageId('chat-t')).toBe('msg-2');
    first.release();
    second.release();
  });

  it('names the later turn again after the key was lost (Redis restarted, evicted) while both ran', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'Date'] });
    const shared = createMemoryCoordination();
    const options = { maxConcurrent: 5, keyPrefix: 'lost' };
    const A = new RunningReplies(shared, options); // process 1: earlier turn
    const C = new RunningReplies(shared, options); // process 2: later turn
    const first = A.admit('chat-t', 'msg-1', () => undefined); // heartbeats at 10, 20, 30 s ...
    await vi.advanceTimersByTimeAsync(5_000);
    const second = C.admit('chat-t', 'msg-2', () => undefined); // heartbeats at 15, 25, 35 s ...
    await vi.advanceTimersByTimeAsync(11_000); // t = 16 s: past C's heartbeat at 15 s, before A's at 20 s
    // The chat's key is lost (Redis restarted without persistence, a failover, eviction).
    await shared.publisher.del('lost:active:chat-t');
    // Both turns keep running for a minute: the marker should name the latest turn again.
    await vi.advanceTimersByTimeAsync(60_000);
    const third = new RunningReplies(shared, options);
    expect(await third.runningMessageId('chat-t')).toBe('msg-2');
    first.release();
    second.release();
  });

  it("is taken back by the later turn from an earlier turn's renew that was in flight as it started", async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const shared = createMemoryCoordination();
    // Process 1's GET is answered by Redis at once but reaches the process a moment later (a
    // round trip): a write of process 2 can land in between.
    let hold: Promise<void> | null = null;
    const publisher = new Proxy(shared.publisher, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (typeof value !== 'function') return value;
        if (prop === 'get') {
          return async (key: string) => {
            const read = await target.get(key);
            if (hold) await hold;
            return read;
          };
        }
        return (value as (...a: unknown[]) => unknown).bind(target);
      },
    });
    const options = { maxConcurrent: 5, keyPrefix: 'race' };
    const A = new RunningReplies({ ...shared, publisher } as Coordination, options);
    const C = new RunningReplies(shared, options);
    const first = A.admit('chat-t', 'msg-1', () => undefined);
    let letGo!: () => void;
    hold = new Promise<void>((resolve) => (letGo = resolve));
    await vi.advanceTimersByTimeAsync(10_000); // A's heartbeat: GET (reads msg-1) in flight
    const second = C.admit('chat-t', 'msg-2', () => undefined); // the later turn: SET msg-2
    await Promise.resolve();
    hold = null;
    letGo(); // A's GET answer arrives: msg-1, so A SETs msg-1 over msg-2
    await vi.advanceTimersByTimeAsync(60_000);
    const third = new RunningReplies(shared, options);
    expect(await third.runningMessageId('chat-t')).toBe('msg-2');
    first.release();
    second.release();
  });
});

const hasRedis = await redisReachable();

/**
 * Waits until `other` sees the chat's reply running. A's markers are written without waiting, on
 * its own Redis connection: a resume sent on B's connection at once can reach Redis first. A real
 * client resumes a reply it has seen start, long after.
 */
async function seenRunning(other: RunningReplies, chatId: string, messageId: string) {
  await vi.waitFor(async () => expect(await other.runningMessageId(chatId)).toBe(messageId));
}

/**
 * Two processes that share one coordination (the in-memory stand-in, or Redis as two processes
 * connect to it). With `readTogether`, their reads of a chat's marker are answered only once both
 * have read it: two requests of one chat reaching two processes within one round trip. With
 * `sentTwice`, every `replace` runs twice, as a command resent after a dropped connection does.
 */
async function twoProcessesReadingTogether(
  backend: 'memory' | 'Redis',
  {
    maxConcurrent = 5,
    readTogether = true,
    sentTwice = false,
    setUpWaitMs = undefined as number | undefined,
  } = {},
) {
  const keyPrefix = `atrium-test-${randomBytes(6).toString('hex')}`;
  const memory = backend === 'memory' ? createMemoryCoordination() : undefined;
  const shared = memory
    ? [memory, memory]
    : [
        connectRedis(REDIS_URL, (connection) => connection.on('error', () => {})),
        connectRedis(REDIS_URL, (connection) => connection.on('error', () => {})),
      ];
  let reads = 0;
  let bothRead!: () => void;
  const together = new Promise<void>((resolve) => (bothRead = resolve));
  const [a, b] = shared.map((coordination) => {
    const publisher = new Proxy(coordination.publisher, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (prop === 'replace' && sentTwice) {
          // ioredis sends a command again when the connection dropped before its answer came:
          // the server runs it twice, and the caller gets the second answer.
          return async (...args: Parameters<typeof target.replace>) => {
            await target.replace(...args);
            return target.replace(...args);
          };
        }
        if (prop === 'get') {
          return async (key: string) => {
            const read = await target.get(key);
            if (readTogether && key.includes(':active:')) {
              if (++reads === 2) bothRead();
              await together;
            }
            return read;
          };
        }
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    return new RunningReplies({ ...coordination, publisher } as Coordination, {
      maxConcurrent,
      keyPrefix,
      setUpWaitMs,
    });
  });
  await Promise.all([a!.start(), b!.start()]);
  return {
    a: a!,
    b: b!,
    publisher: shared[0]!.publisher,
    keyPrefix,
    close: async () => {
      await Promise.all([...new Set(shared)].map((coordination) => coordination.close()));
      if (backend === 'Redis') await deleteRedisKeys(keyPrefix);
    },
  };
}

describe.each(['memory', 'Redis'] as const)(
  'a chat claimed alone (admitAlone) by two processes at once (%s)',
  (backend) => {
    it.skipIf(backend === 'Redis' && !hasRedis)(
      'admits one request of the two, refusing the other with 409',
      async () => {
        const { a, b, close } = await twoProcessesReadingTogether(backend);
        try {
          const results = await Promise.allSettled([
            a.admitAlone('chat-1', 'msg-1', () => undefined),
            b.admitAlone('chat-1', 'msg-2', () => undefined),
          ]);
          // Before, both read no marker and both were admitted: one turn answered and stored twice.
          const admitted = results.filter((result) => result.status === 'fulfilled');
          const refused = results.filter((result) => result.status === 'rejected');
          expect(admitted).toHaveLength(1);
          expect(refused.map((result) => (result.reason as { code: string }).code)).toEqual(['conflict']);
          for (const result of admitted) result.value.release();
        } finally {
          await close();
        }
      },
    );

    it.skipIf(backend === 'Redis' && !hasRedis)(
      'takes over the marker of a reply whose process is gone for one request of the two',
      async () => {
        const { a, b, publisher, keyPrefix, close } = await twoProcessesReadingTogether(backend);
        try {
          // A reply of a process that was killed: its marker and owner key live on, its channel is gone.
          await publisher.set(`${keyPrefix}:active:chat-2`, 'msg-0', { EX: 30 });
          await publisher.set(`${keyPrefix}:owner:msg-0`, 'killed-process', { EX: 30 });
          const results = await Promise.allSettled([
            a.admitAlone('chat-2', 'msg-1', () => undefined),
            b.admitAlone('chat-2', 'msg-2', () => undefined),
          ]);
          const admitted = results.flatMap((result, i) =>
            result.status === 'fulfilled' ? [{ i, ticket: result.value }] : [],
          );
          expect(admitted).toHaveLength(1);
          expect(await publisher.get(`${keyPrefix}:active:chat-2`)).toBe(`msg-${admitted[0]!.i + 1}`);
          admitted[0]!.ticket.release();
        } finally {
          await close();
        }
      },
    );

    it.skipIf(backend === 'Redis' && !hasRedis)(
      'admits a request whose claim reached the server twice (resent after a dropped connection)',
      async () => {
        const { a, b, publisher, keyPrefix, close } = await twoProcessesReadingTogether(backend, {
          readTogether: false,
          sentTwice: true,
        });
        try {
          // Before, the second run found the marker already this reply's and answered "not
          // claimed": the request got 409 and its marker refused the chat for 30 s.
          const ticket = await a.admitAlone('chat-4', 'msg-1', () => undefined);
          expect(await publisher.get(`${keyPrefix}:active:chat-4`)).toBe('msg-1');
          ticket.release();
          await vi.waitFor(async () => expect(await publisher.get(`${keyPrefix}:active:chat-4`)).toBeNull(), {
            timeout: 10_000,
          });
          (await b.admitAlone('chat-4', 'msg-2', () => undefined)).release();
        } finally {
          await close();
        }
      },
    );

    it.skipIf(backend === 'Redis' && !hasRedis)(
      'leaves no marker behind for a request refused as the process is busy (503)',
      async () => {
        const { a, b, close } = await twoProcessesReadingTogether(backend, {
          maxConcurrent: 1,
          readTogether: false,
        });
        try {
          const busy = a.admit('chat-other', 'msg-0', () => undefined);
          const refused = await a.admitAlone('chat-3', 'msg-1', () => undefined).catch((e: unknown) => e);
          expect(refused).toMatchObject({ code: 'service_unavailable' });
          busy.release();
          // Else the chat's marker named a reply that never ran, and its requests were refused (409).
          const ticket = await b.admitAlone('chat-3', 'msg-2', () => undefined);
          ticket.release();
        } finally {
          await close();
        }
      },
    );
  },
);

describe.skipIf(!hasRedis)('a resume reaching one process while another sets the reply up (Redis)', () => {
  it('waits for the set-up no longer than its bound, then answers that nothing runs', async () => {
    const { a, b, close } = await twoProcessesReadingTogether('Redis', {
      readTogether: false,
      setUpWaitMs: 1_500,
    });
    try {
      const ticket = a.admit('chat-s', 'msg-1', () => undefined, { resumable: true });
      await seenRunning(b, 'chat-s', 'msg-1');
      const started = Date.now();
      // A's set-up never ends (nor is the reply released): B waits for its bound, not for ever.
      expect(await b.resume('chat-s')).toBeNull();
      expect(Date.now() - started).toBeGreaterThanOrEqual(1_400);
      expect(Date.now() - started).toBeLessThan(5_000);
      ticket.release();
    } finally {
      await close();
    }
  });

  it('replays the reply once it starts, from its start', async () => {
    const { a, b, close } = await twoProcessesReadingTogether('Redis', { readTogether: false });
    try {
      const ticket = a.admit('chat-r', 'msg-1', () => undefined, { resumable: true });
      await seenRunning(b, 'chat-r', 'msg-1');
      const resumed = b.resume('chat-r');
      await new Promise((resolve) => setTimeout(resolve, 300));
      const { stream, controller } = source();
      controller.enqueue('data: start\n\n');
      await ticket.share(stream);
      const replay = await resumed;
      expect(replay).not.toBeNull();
      controller.enqueue('data: end\n\n');
      controller.close();
      expect(await readFor(replay!, 10_000)).toEqual({ text: 'data: start\n\ndata: end\n\n', ended: true });
      ticket.release();
    } finally {
      await close();
    }
  });

  it('asks again when the running process answers the replay later than the library waits (1 s)', async () => {
    const keyPrefix = `atrium-test-${randomBytes(6).toString('hex')}`;
    const [first, second] = [0, 1].map(() =>
      connectRedis(REDIS_URL, (connection) => connection.on('error', () => {})),
    );
    // A is busy when the first replay request comes (a loaded process): it hears it 1.5 s late.
    let delayed = 0;
    const subscriber = new Proxy(first!.subscriber, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (prop !== 'subscribe') return typeof value === 'function' ? value.bind(target) : value;
        return (channel: string, listener: (message: string) => void) =>
          target.subscribe(channel, (message: string) => {
            if (!channel.includes(':request:') || delayed++ > 0) return listener(message);
            setTimeout(() => listener(message), 1_500);
          });
      },
    });
    try {
      const a = new RunningReplies({ ...first!, subscriber }, { maxConcurrent: 5, keyPrefix });
      const b = new RunningReplies(second!, { maxConcurrent: 5, keyPrefix });
      await Promise.all([a.start(), b.start()]);
      const ticket = a.admit('chat-late', 'msg-1', () => undefined, { resumable: true });
      const { stream, controller } = source();
      controller.enqueue('data: start\n\n');
      await ticket.share(stream);
      const replay = await b.resume('chat-late');
      // Before, the library's "Timeout waiting for ack" was read as a process gone: nothing to resume.
      expect(replay).not.toBeNull();
      expect(delayed).toBeGreaterThanOrEqual(2);
      controller.enqueue('data: end\n\n');
      controller.close();
      expect(await readFor(replay!, 10_000)).toEqual({ text: 'data: start\n\ndata: end\n\n', ended: true });
      ticket.release();
    } finally {
      await Promise.all([first!.close(), second!.close()]);
      await deleteRedisKeys(keyPrefix);
    }
  });

  it('stops waiting within a second or so when the process setting the reply up is killed', async () => {
    const keyPrefix = `atrium-test-${randomBytes(6).toString('hex')}`;
    const [first, second] = [0, 1].map(() =>
      connectRedis(REDIS_URL, (connection) => connection.on('error', () => {})),
    );
    try {
      const a = new RunningReplies(first!, { maxConcurrent: 5, keyPrefix });
      const b = new RunningReplies(second!, { maxConcurrent: 5, keyPrefix });
      await Promise.all([a.start(), b.start()]);
      a.admit('chat-k', 'msg-1', () => undefined, { resumable: true });
      await seenRunning(b, 'chat-k', 'msg-1');
      const resumed = b.resume('chat-k');
      const early = await Promise.race([
        resumed,
        new Promise((resolve) => setTimeout(() => resolve('waiting'), 500)),
      ]);
      expect(early).toBe('waiting');
      // A is killed: its connections close; its markers live on until their expiry (30 s).
      await first!.close();
      const killedAt = Date.now();
      expect(await resumed).toBeNull();
      expect(Date.now() - killedAt).toBeLessThan(3_000);
    } finally {
      await Promise.all([first!.close(), second!.close()]);
      await deleteRedisKeys(keyPrefix);
    }
  });
});

describe('a stop published to the process running the reply', () => {
  it('says a deletion as a stop with a flag, so a process of an older version still ends the reply as a stop', async () => {
    const coordination = createMemoryCoordination();
    const options = { maxConcurrent: 5, keyPrefix: 'replays' };
    const a = new RunningReplies(coordination, options);
    const b = new RunningReplies(coordination, options);
    const published: string[] = [];
    await coordination.subscriber.subscribe('replays:stop', (message) => published.push(message));
    const reasons: string[] = [];
    const src = source();
    const ticket = a.admit('chat-del', 'msg-1', (reason) => reasons.push(reason));
    await ticket.share(src.stream);
    await a.start();
    await b.start();

    expect(await b.stop('chat-del', 'deleted')).toEqual({ stopped: true, messageId: 'msg-1' });
    await vi.waitFor(() => expect(reasons).toEqual(['deleted']));
    // What an older process reads: `reason` alone.
    expect(published.map((message) => (JSON.parse(message) as { reason: string }).reason)).toEqual([
      'stopped',
    ]);

    await b.stop('chat-del');
    await vi.waitFor(() => expect(reasons).toEqual(['deleted', 'stopped']));
    src.controller.close();
    ticket.release();
  });
});

/** A stop answers once the reply it stopped is stored and released (spec/chats.md, "Stop"). */
describe('a stop that waits for the stopped reply', () => {
  /** Two "processes" on one coordination that says it is shared, as Redis does. */
  function sharedProcesses() {
    const coordination = { ...createMemoryCoordination(), shared: true };
    const options = { maxConcurrent: 5, keyPrefix: 'settle' };
    return { a: new RunningReplies(coordination, options), b: new RunningReplies(coordination, options) };
  }

  it('answers a stop of a reply running here once that reply is released', async () => {
    const { a } = sharedProcesses();
    const ticket = a.admit('chat-here', 'msg-1', () => undefined);
    let answered = false;
    const stopping = a.stopAndWait('chat-here').then((result) => {
      answered = true;
      return result;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(answered).toBe(false);
    ticket.release();
    expect(await stopping).toEqual({ stopped: true, messageId: 'msg-1', settled: true });
    expect(await a.runningMessageId('chat-here')).toBeNull();
  });

  it('answers a stop of a reply running on another process once that process has released it', async () => {
    const { a, b } = sharedProcesses();
    await Promise.all([a.start(), b.start()]);
    const reasons: string[] = [];
    const ticket = a.admit('chat-there', 'msg-2', (reason) => reasons.push(reason));
    let answered = false;
    const stopping = b.stopAndWait('chat-there').then((result) => {
      answered = true;
      return result;
    });
    // A has the stop, and has not stored the reply yet: B's stop does not answer.
    await vi.waitFor(() => expect(reasons).toEqual(['stopped']));
    expect(answered).toBe(false);
    ticket.release();
    expect(await stopping).toEqual({ stopped: true, messageId: 'msg-2', settled: true });
    // The chat's marker is gone by then: B admits the chat's next turn.
    expect(await b.runningMessageId('chat-there')).toBeNull();
  });

  it('answers at the end of its bound, not settled, when the reply is not released', async () => {
    const { a, b } = sharedProcesses();
    await Promise.all([a.start(), b.start()]);
    const ticket = a.admit('chat-slow', 'msg-3', () => undefined);
    expect(await b.stopAndWait('chat-slow', 200)).toEqual({
      stopped: true,
      messageId: 'msg-3',
      settled: false,
    });
    expect(await a.stopAndWait('chat-slow', 200)).toEqual({
      stopped: true,
      messageId: 'msg-3',
      settled: false,
    });
    ticket.release();
  });

  it('answers at once when no reply runs', async () => {
    const { b } = sharedProcesses();
    expect(await b.stopAndWait('chat-none')).toEqual({ stopped: false, messageId: null, settled: true });
  });
});

/**
 * A stop reaching a process other than the one running the reply, when that process releases the
 * reply without writing its settled marker: a process of an earlier version (a rolling deploy),
 * or that write failing. The reply's own marker gone and the chat's no longer naming it say the
 * reply is released as well; before, the stop waited out its whole bound.
 */
describe.each(['memory', 'Redis'] as const)(
  'a stop waiting for a reply released without its settled marker (%s)',
  (backend) => {
    for (const marker of ['never written', 'failing'] as const) {
      it.skipIf(backend === 'Redis' && !hasRedis)(
        `answers settled once the reply is released, its settled marker ${marker}`,
        async () => {
          const keyPrefix = `atrium-test-${randomBytes(6).toString('hex')}`;
          const memory = backend === 'memory' ? { ...createMemoryCoordination(), shared: true } : undefined;
          const [first, second] = memory
            ? [memory, memory]
            : [0, 1].map(() => connectRedis(REDIS_URL, (connection) => connection.on('error', () => {})));
          // The generating process: its settled marker never reaches Redis.
          const publisher = new Proxy(first!.publisher, {
            get(target, prop, receiver) {
              const value = Reflect.get(target, prop, receiver) as unknown;
              if (prop === 'set') {
                return (key: string, ...rest: unknown[]) => {
                  if (!key.includes(':settled:'))
                    return (value as (...a: unknown[]) => unknown).call(target, key, ...rest);
                  return marker === 'failing'
                    ? Promise.reject(new Error('Connection is closed.'))
                    : Promise.resolve('OK');
                };
              }
              return typeof value === 'function'
                ? (value as (...a: unknown[]) => unknown).bind(target)
                : value;
            },
          });
          try {
            const a = new RunningReplies({ ...first!, publisher } as Coordination, {
              maxConcurrent: 5,
              keyPrefix,
            });
            const b = new RunningReplies(second!, { maxConcurrent: 5, keyPrefix });
            await Promise.all([a.start(), b.start()]);
            const reasons: string[] = [];
            const ticket = a.admit('chat-old', 'msg-1', (reason) => reasons.push(reason));
            await seenRunning(b, 'chat-old', 'msg-1');
            const stopping = b.stopAndWait('chat-old', 5_000);
            await vi.waitFor(() => expect(reasons).toEqual(['stopped']));
            ticket.release();
            // Settled, not the bound reached (settled: false).
            expect(await stopping).toEqual({ stopped: true, messageId: 'msg-1', settled: true });
            expect(await b.runningMessageId('chat-old')).toBeNull();
          } finally {
            if (!memory) {
              await Promise.all([first!.close(), second!.close()]);
              await deleteRedisKeys(keyPrefix);
            }
          }
        },
      );
    }
  },
);

/**
 * ioredis rejects a SUBSCRIBE it had queued when the connection fails for good at that moment (a
 * wrong password, a ready check refused: it flushes its queue), and resubscribes on reconnect only
 * to channels it had subscribed to. A process whose first subscriptions were so rejected never
 * listened, after Redis answered again too: stops sent to other processes never reached its
 * replies (the stop answered `stopped: true` after its wait, the reply ran on), until a restart.
 */
describe('listening for stops when the first subscriptions fail', () => {
  it('subscribes again until it listens, and a stop from another process then reaches its reply', async () => {
    const shared = { ...createMemoryCoordination(), shared: true };
    let refusals = 2;
    const failing: Coordination = {
      ...shared,
      subscriber: {
        ...shared.subscriber,
        subscribe: (channel, callback) =>
          refusals-- > 0
            ? Promise.reject(new Error('WRONGPASS invalid username-password pair or user is disabled.'))
            : shared.subscriber.subscribe(channel, callback),
      },
    };
    const options = { maxConcurrent: 5, keyPrefix: 'relisten' };
    const a = new RunningReplies(failing, options);
    const b = new RunningReplies(shared, options);
    const failures: unknown[] = [];
    // As the app starts it: its promise is not waited for.
    void a.start((error) => failures.push(error)).catch(() => undefined);
    await b.start();
    const reasons: string[] = [];
    const ticket = a.admit('chat-relisten', 'msg-1', (reason) => reasons.push(reason));

    await vi.waitFor(async () => {
      expect(await b.stop('chat-relisten')).toMatchObject({ stopped: true });
      expect(reasons).toContain('stopped');
    }, 10_000);
    expect(failures.length).toBeGreaterThan(0);
    ticket.release();
  });
});
