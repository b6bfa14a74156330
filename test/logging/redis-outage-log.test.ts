import { connect, createServer, type Server, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestApp, freePort } from '../helpers/app.js';
import { REDIS_URL, redisReachable } from '../helpers/redis.js';

type LogLine = Record<string, unknown> & { level: number; msg: string };

/** A Redis that can be switched off and on: a port that refuses, or forwards to the real one. */
function switchableRedis(port: number) {
  const target = new URL(REDIS_URL);
  let server: Server | undefined;
  const sockets = new Set<Socket>();
  return {
    url: `redis://127.0.0.1:${port}`,
    async up() {
      server = createServer((client) => {
        const upstream = connect(Number(target.port || 6379), target.hostname);
        for (const socket of [client, upstream]) {
          sockets.add(socket);
          socket.on('close', () => sockets.delete(socket));
          socket.on('error', () => undefined);
        }
        client.pipe(upstream).pipe(client);
      });
      await new Promise<void>((resolve) => server!.listen(port, '127.0.0.1', resolve));
    },
    async down() {
      for (const socket of sockets) socket.destroy();
      if (server) await new Promise<void>((resolve) => server!.close(() => resolve()));
      server = undefined;
    },
  };
}

const available = await redisReachable();

/**
 * Before: each failed connection attempt was logged by each of the process's three Redis
 * connections ("Redis connection failed" once, "redis connection error" twice), about 8 lines a
 * second while Redis stayed down, for as long as it did.
 */
describe.skipIf(!available)('log of a Redis outage (REDIS_URL set)', () => {
  const lines: LogLine[] = [];
  const logStream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line));
      callback();
    },
  });
  let offsetMs = 0;
  const clock = () => new Date(Date.now() + offsetMs);
  let redis: ReturnType<typeof switchableRedis>;
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    redis = switchableRedis(await freePort());
    t = await createTestApp({
      env: { REDIS_URL: redis.url, LOG_LEVEL: 'info' },
      clock,
      logStream,
    });
  });
  afterAll(async () => {
    await t?.close();
    await redis?.down();
  });

  const redisLines = () => lines.filter((line) => /redis/i.test(line.msg) && line.reqId === undefined);

  it('logs the first failure once, then at most once per interval, and when Redis is back', async () => {
    await vi.waitFor(() => expect(redisLines().length).toBeGreaterThan(0), { timeout: 10_000, interval: 20 });
    // Reconnect attempts go on (every 50 ms, then slower): a second's worth of them.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(redisLines().map((line) => [line.level, line.msg])).toEqual([
      [40, 'Redis connection failed; retrying, logged again at most every 30 s while it stays down'],
    ]);

    offsetMs += 31_000;
    await vi.waitFor(() => expect(redisLines()).toHaveLength(2), { timeout: 10_000, interval: 20 });
    expect(redisLines()[1]).toMatchObject({
      level: 40,
      msg: 'Redis still unreachable',
      failures: expect.any(Number),
      downForMs: expect.any(Number),
    });
    expect(redisLines()[1]!.failures as number).toBeGreaterThan(1);

    await redis.up();
    await vi.waitFor(() => expect(redisLines()).toHaveLength(3), { timeout: 10_000, interval: 20 });
    expect(redisLines()[2]).toMatchObject({ level: 30, msg: 'Redis connection restored' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(redisLines()).toHaveLength(3);
  }, 30_000);
});
