import { EventEmitter } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Indexer, type IndexerDeps, startIndexer } from '../../src/knowledge/indexer.js';
import { startServer, type StopSignals } from '../../src/server.js';
import { applyFixture, createTestEnv, engineName, type TestEnv } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

let env: TestEnv;
let server: Awaited<ReturnType<typeof startServer>>;
beforeAll(async () => {
  env = await createTestEnv({ HOST: '127.0.0.1', PORT: '0' });
  await applyFixture(env, TENANCY_SETUP);
  server = await startServer(env.config);
});
afterAll(async () => {
  await server?.close();
  await env.close();
});

describe(`startServer (${engineName})`, () => {
  it('with PORT=0, signs URLs for the port it really listens on, and they work', async () => {
    expect(server.address).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(server.address).not.toMatch(/:0$/);
    const res = await fetch(`${server.address}/v1/projects/prj_docs/files/upload`, {
      method: 'POST',
      headers: { 'x-service-api-key': KEYS.mainOwner, 'content-type': 'application/json' },
      body: JSON.stringify({ filename: 'port.txt', contentType: 'text/plain', sizeBytes: 2 }),
    });
    expect(res.status).toBe(200);
    const { uploadUrl } = (await res.json()).data as { uploadUrl: string };
    expect(new URL(uploadUrl).origin).toBe(server.address);
    const put = await fetch(uploadUrl, {
      method: 'PUT',
      headers: { 'content-type': 'text/plain' },
      body: 'ok',
    });
    expect(put.status).toBe(200);
  });
});

/** Signals for one server: `emit('SIGTERM')` stops it as the process's would; exits are noted. */
class TestSignals extends EventEmitter implements StopSignals {
  readonly exits: number[] = [];
  exit(code: number) {
    this.exits.push(code);
  }
}

describe(`startServer and its stop signals (${engineName})`, () => {
  it('started no background work, and listens no more, when SIGTERM came while it began to listen', async () => {
    const signals = new TestSignals();
    // Right after startServer takes SIGTERM, which it does just before it starts to listen: the
    // signal comes while that listen is pending.
    signals.on('newListener', (event) => {
      if (event === 'SIGTERM') queueMicrotask(() => signals.emit('SIGTERM'));
    });
    const indexers: Indexer[] = [];
    const server = await startServer(env.config, {
      signals,
      startIndexer: (deps: IndexerDeps) => {
        const indexer = startIndexer(deps);
        indexers.push(indexer);
        return indexer;
      },
    });
    try {
      await server.close();
      await expect.poll(() => signals.exits).toEqual([0]);
      // Before: the indexer (with the embedder, the sweeps and the vector search check) was
      // started once the listen ended, on the database the shutdown had closed...
      expect(indexers).toHaveLength(0);
      // ...and the port, closed while the listen was pending, was opened after all.
      expect(server.app.server.listening).toBe(false);
    } finally {
      await Promise.allSettled(indexers.map((indexer) => indexer.stop()));
    }
  });

  it('leaves no SIGTERM or SIGINT listener behind once closed, or once its listen failed', async () => {
    const counts = () => [process.listenerCount('SIGTERM'), process.listenerCount('SIGINT')];
    const before = counts();
    const another = await startServer(env.config);
    expect(counts()).toEqual(before.map((count) => count + 1));
    await another.close();
    expect(counts()).toEqual(before);

    const port = (server.app.server.address() as AddressInfo).port;
    await expect(startServer({ ...env.config, port })).rejects.toThrow(/EADDRINUSE/);
    expect(counts()).toEqual(before);
  });
});
