import { EventEmitter } from 'node:events';
import { existsSync, readdirSync, statSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Indexer, type IndexerDeps, startIndexer } from '../../src/knowledge/indexer.js';
import { startServer, type StopSignals } from '../../src/server.js';
import { applyFixture, createTestEnv, engineName, type TestEnv } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { waitUntil } from '../helpers/wait-until.js';

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

describe(`startServer's warnings at start (${engineName})`, () => {
  it('names the S3 settings ATRIUM_STORAGE=s3 is missing for, never their values', async () => {
    const own = await createTestEnv({
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'warn',
      S3_BUCKET: 'atrium',
      S3_SECRET_ACCESS_KEY: 'never-logged',
    });
    const lines: string[] = [];
    const logStream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(...chunk.toString().split('\n').filter(Boolean));
        done();
      },
    });
    const started = await startServer(own.config, { logStream });
    try {
      await waitUntil(() => lines.some((line) => line.includes('ATRIUM_STORAGE')), 'the warning');
      const warning = lines
        .map((line) => JSON.parse(line) as { level: number; msg: string })
        .find((line) => line.msg.includes('ATRIUM_STORAGE'));
      expect(warning?.level).toBe(40);
      expect(warning?.msg).toMatch(/^S3_BUCKET, S3_SECRET_ACCESS_KEY are set but ATRIUM_STORAGE is not:/);
      expect(lines.join('\n')).not.toContain('never-logged');
    } finally {
      await started.close();
      await own.close();
    }
  });
});

const objectsDir = (...parts: string[]) => path.join(env.config.dataDir, 'objects', ...parts);

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

  it('exits soon after answering a request that was in flight at SIGTERM, on a kept-alive connection', async () => {
    const signals = new TestSignals();
    const stopping = await startServer(env.config, { signals });
    const size = 64 * 1024;
    const asked = await fetch(`${stopping.address}/v1/projects/prj_docs/files/upload`, {
      method: 'POST',
      headers: { 'x-service-api-key': KEYS.mainOwner, 'content-type': 'application/json' },
      body: JSON.stringify({
        filename: 'in-flight.bin',
        contentType: 'application/octet-stream',
        sizeBytes: size,
      }),
    });
    const { uploadUrl, storagePath } = (await asked.json()).data as {
      uploadUrl: string;
      storagePath: string;
    };
    // A client that keeps its connections open as long as the server lets it (a load balancer).
    const agent = new http.Agent({ keepAlive: true, timeout: 120_000 });
    try {
      const request = http.request(uploadUrl, {
        agent,
        method: 'PUT',
        headers: { 'content-type': 'application/octet-stream', 'content-length': size },
      });
      const status = new Promise<number>((resolve, reject) => {
        request.on('response', (response) => {
          response.resume();
          resolve(response.statusCode!);
        });
        request.on('error', reject);
      });
      request.write(Buffer.alloc(size / 2, 1));
      await waitUntil(
        () => existsSync(objectsDir('tmp')) && readdirSync(objectsDir('tmp')).length > 0,
        'the upload to begin',
      );
      signals.emit('SIGTERM');
      // No reply to drain: the server stops listening at once, the upload still under way.
      await waitUntil(() => !stopping.app.server.listening, 'the server to stop listening');
      request.end(Buffer.alloc(size / 2, 2));
      expect(await status).toBe(200);
      const answered = Date.now();
      // Before: the connection, idle once answered, stayed open for the keep-alive timeout
      // (ATRIUM_KEEP_ALIVE_TIMEOUT_MS, 72 s), and the shutdown waited for it.
      await expect.poll(() => signals.exits, { timeout: 10_000 }).toEqual([0]);
      expect(Date.now() - answered).toBeLessThan(10_000);
      expect(statSync(objectsDir('data', storagePath)).size).toBe(size);
    } finally {
      agent.destroy();
    }
  }, 30_000);
});
