/**
 * Shutdown when a background part (here the file indexer) fails to stop. Before, the shutdown
 * closed the database as soon as that stop failed, while `app.close()` was still letting
 * in-flight replies finish (they then failed to be stored), and while the vector search check
 * started after listening could still be running (it then logged "vector search unavailable"
 * because of the closed database).
 */
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Db } from '../../src/db/database.js';
import { type IndexerDeps, startIndexer } from '../../src/knowledge/indexer.js';
import { detectVectorSupport } from '../../src/knowledge/vector-store.js';
import { startServer } from '../../src/server.js';
import { CHAT_KEYS, chatRows, chatSetup, userText } from '../chat/fixtures.js';
import { EventReader, textDeltas } from '../chat/sse-reader.js';
import { applyFixture, createTestEnv, engineName, type TestEnv } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';

const STOP_FAILURE = 'the extraction workers did not end';

let env: TestEnv;
let upstream: FakeUpstream;
beforeAll(async () => {
  upstream = await startFakeUpstream();
  env = await createTestEnv({ HOST: '127.0.0.1', PORT: '0' });
  await applyFixture(env, chatSetup(upstream));
});
afterAll(async () => {
  upstream?.release();
  await env?.close();
  await upstream?.close();
});

/**
 * The real indexer, but its stop fails at once, as a stop failing partway would. The real stop
 * still runs: `stopped()` waits for it, so that nothing of it outlives the test.
 */
function indexerFailingToStop() {
  let realStop: Promise<void> = Promise.resolve();
  return {
    start: (deps: IndexerDeps) => {
      const indexer = startIndexer(deps);
      return {
        ...indexer,
        stop() {
          realStop = indexer.stop();
          return Promise.reject(new Error(STOP_FAILURE));
        },
      };
    },
    stopped: () => realStop,
  };
}

describe(`shutdown with a background part failing to stop (${engineName})`, () => {
  it('lets a streamed reply in flight finish and be stored, then fails with that stop’s error', async () => {
    const indexer = indexerFailingToStop();
    const server = await startServer(env.config, { startIndexer: indexer.start });
    upstream.enqueue({ kind: 'held', text: 'one two three four', afterPieces: 2 });
    const res = await fetch(`${server.address}/v1/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-service-api-key': CHAT_KEYS.main },
      body: JSON.stringify({ agentId: 'agt_plain', stream: true, messages: [userText('hello')] }),
    });
    expect(res.status).toBe(200);
    const chatId = res.headers.get('x-chat-id')!;
    const events = new EventReader(res);
    await events.until(textDeltas(2));

    let released = false;
    let settledWhileReplyHeld = false;
    const outcome = server.close().then(
      () => undefined,
      (error: unknown) => {
        settledWhileReplyHeld = !released;
        return error;
      },
    );
    // The indexer's stop has failed by now (the stops are called at once), and only the reply is
    // left to wait for: a shutdown that did not wait for it would settle well within this window.
    await Promise.race([outcome, delay(500)]);
    released = true;
    upstream.release();
    await events.all();

    expect(settledWhileReplyHeld).toBe(false);
    expect(events.done).toBe(true);
    expect(events.text()).toBe('one two three four');
    expect(events.chunks.at(-1)).toMatchObject({ type: 'finish' });
    expect(events.chunks.some((chunk) => chunk.type === 'error')).toBe(false);
    const reply = (await chatRows(env.database.db as Db, chatId)).find((row) => row.role === 'assistant');
    expect(reply).toMatchObject({ finish_reason: 'stop' });
    expect(await outcome).toMatchObject({ message: STOP_FAILURE });
    await indexer.stopped();
  });

  it('right after start, waits for the vector search check, which never reports the closed database', async () => {
    const indexer = indexerFailingToStop();
    const server = await startServer(env.config, { startIndexer: indexer.start });
    const info = vi.spyOn(server.app.log, 'info');
    await expect(server.close()).rejects.toThrow(STOP_FAILURE);
    await indexer.stopped();
    // Whatever the check logged, it is what this database really offers.
    const genuine = await detectVectorSupport(env.database.db as Db);
    const unavailable = info.mock.calls.filter(
      ([, message]) => typeof message === 'string' && message.startsWith('vector search unavailable'),
    );
    for (const [details] of unavailable) {
      expect(details).toEqual({ reason: genuine.available ? 'none expected' : genuine.reason });
    }
  });
});
