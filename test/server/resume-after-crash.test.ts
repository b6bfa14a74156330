import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatSetup, CHAT_KEYS, userText } from '../chat/fixtures.js';
import { EventReader, textDeltas } from '../chat/sse-reader.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { type ServeCluster, startServeCluster } from '../helpers/serve-processes.js';

const REDIS_URL = process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379';

let upstream: FakeUpstream;
let cluster: ServeCluster;
beforeAll(async () => {
  upstream = await startFakeUpstream();
  cluster = await startServeCluster({
    processes: 2,
    setup: chatSetup(upstream),
    env: { REDIS_URL, ATRIUM_REDIS_PREFIX: `atrium-test-${randomBytes(4).toString('hex')}` },
  });
}, 120_000);
afterAll(async () => {
  upstream?.release();
  await cluster?.close();
  await upstream?.close();
});

const key = { 'x-service-api-key': CHAT_KEYS.main };

/**
 * A reply resumed through process B while process A generates it; A is killed. B's replay gets no
 * end from A: it must not hold B's shutdown (nor its client) for ever.
 */
describe('a resumed reply whose generating process crashed', () => {
  it('does not keep the resuming process from shutting down (SIGTERM exits within its 15 s bound)', async () => {
    const [a, b] = cluster.servers;
    upstream.enqueue({ kind: 'held', text: 'alpha beta gamma delta', afterPieces: 1 });
    const response = await fetch(`${a!.url}/v1/chat`, {
      method: 'POST',
      headers: { ...key, 'content-type': 'application/json' },
      body: JSON.stringify({
        agentId: 'agt_plain',
        stream: true,
        id: 'crash-resume',
        messages: [userText('go')],
      }),
    });
    const events = new EventReader(response);
    await events.until(textDeltas(1));
    let resumed = await fetch(`${b!.url}/v1/chat/crash-resume/stream`, { headers: key });
    for (let attempt = 1; resumed.status === 204 && attempt < 5; attempt++) {
      resumed = await fetch(`${b!.url}/v1/chat/crash-resume/stream`, { headers: key });
    }
    expect(resumed.status).toBe(200);
    const replay = new EventReader(resumed);
    await replay.until(textDeltas(1));
    void replay.all().catch(() => undefined);

    await a!.stop('SIGKILL');
    const started = Date.now();
    const exited = await Promise.race([
      b!.stop('SIGTERM').then(() => `exited after ${Math.round((Date.now() - started) / 1000)} s`),
      new Promise((resolve) => setTimeout(() => resolve('still running after 25 s'), 25_000)),
    ]);
    expect(exited).toMatch(/^exited/);
  }, 60_000);
});
