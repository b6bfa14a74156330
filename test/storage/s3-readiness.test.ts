import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/ids.js';
import { startServer } from '../../src/server.js';
import { S3ObjectStore } from '../../src/storage/s3-store.js';
import { createTestApp, createTestEnv } from '../helpers/app.js';
import { waitUntil } from '../helpers/wait-until.js';
import { startS3rver } from '../project-files/s3rver.js';

let s3: Awaited<ReturnType<typeof startS3rver>>;
beforeAll(async () => {
  s3 = await startS3rver();
});
afterAll(async () => {
  await s3.close();
});

const failureOf = (store: S3ObjectStore) =>
  store.check().then(
    () => undefined,
    (error: unknown) => error as Error,
  );

describe('S3 readiness (/readyz storage check)', () => {
  it('names a missing bucket, where the SDK said only "NotFound: UnknownError"', async () => {
    const store = new S3ObjectStore({ ...s3.config, bucket: 'no-such-bucket' }, { clock: systemClock });
    const failure = await failureOf(store);
    expect(failure?.message).toBe(
      `S3 bucket "no-such-bucket" does not exist at ${s3.config.endpoint} (S3_BUCKET, S3_ENDPOINT)`,
    );
  });

  it('says credentials were refused, without repeating the secret', async () => {
    const store = new S3ObjectStore(
      { ...s3.config, accessKeyId: 'WRONG', secretAccessKey: 'secret-never-logged' },
      { clock: systemClock },
    );
    const failure = await failureOf(store);
    expect(failure?.message).toMatch(
      /^S3 refused access to bucket "atrium-test" \(HTTP 403\): check S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY/,
    );
    expect(JSON.stringify({ message: failure?.message, stack: failure?.stack })).not.toContain(
      'secret-never-logged',
    );
  });

  it('logs the reason on /readyz, which answers 503 with storage unavailable', async () => {
    const lines: Array<{ msg?: string; err?: { message?: string } }> = [];
    const logStream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    });
    const t = await createTestApp({
      store: () => new S3ObjectStore({ ...s3.config, bucket: 'no-such-bucket' }, { clock: systemClock }),
      logStream,
      env: { LOG_LEVEL: 'warn' },
    });
    try {
      const res = await t.app.inject({ method: 'GET', url: '/readyz' });
      expect(res.statusCode).toBe(503);
      expect(res.json().checks).toMatchObject({ database: 'ok', storage: 'unavailable' });
      const logged = lines.find((line) => line.msg === 'storage not ready');
      expect(logged?.err?.message).toContain('S3 bucket "no-such-bucket" does not exist');
    } finally {
      await t.close();
    }
  });

  it('gives up on an endpoint that does not answer after its own bound, once, not after three socket timeouts', async () => {
    // Accepts connections and never answers: a hung S3 endpoint or a proxy in front of one.
    const sockets: Socket[] = [];
    const hung: Server = createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
    const endpoint = `http://127.0.0.1:${(hung.address() as AddressInfo).port}`;
    // The socket timeout alone would hold the probe for 20 minutes.
    const store = new S3ObjectStore(
      { ...s3.config, endpoint, idleTimeoutMs: 20 * 60_000 },
      { clock: systemClock, checkTimeoutMs: 200 },
    );
    try {
      const failure = await failureOf(store);
      expect(failure?.message).toBe(`S3 did not answer within 200 ms (bucket "atrium-test" at ${endpoint})`);
      expect(sockets).toHaveLength(1);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => hung.close(resolve));
    }
  });
});

describe('a missing bucket, met by requests other than the readiness check', () => {
  const missing = `S3 bucket "no-such-bucket" does not exist at `;

  it('is named, not "The specified bucket does not exist", and a read is not "no such object"', async () => {
    const store = new S3ObjectStore({ ...s3.config, bucket: 'no-such-bucket' }, { clock: systemClock });
    const listed = await (async () => {
      for await (const _ of store.listFolders('projects/')) void _;
    })().then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(listed?.message).toBe(`${missing}${s3.config.endpoint} (S3_BUCKET, S3_ENDPOINT)`);
    // Before: null, as for a key that is not there, and the download a 404 for a file listed.
    const read = await store.get('projects/w/p/a.txt').then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(read?.message).toBe(`${missing}${s3.config.endpoint} (S3_BUCKET, S3_ENDPOINT)`);
  });

  it('refused credentials, on any request, say which settings to check, not the secret', async () => {
    const store = new S3ObjectStore(
      { ...s3.config, accessKeyId: 'WRONG', secretAccessKey: 'secret-never-shown' },
      { clock: systemClock },
    );
    const failure = await store.delete('projects/w/p/a.txt').then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(failure?.message).toBe(
      `S3 refused access to bucket "atrium-test" (HTTP 403 InvalidAccessKeyId): check S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY, and the bucket's policy`,
    );
    expect(JSON.stringify({ message: failure?.message, stack: failure?.stack })).not.toContain(
      'secret-never-shown',
    );
  });

  it("is what the leftovers sweep at start logs, without the endpoint's credentials", async () => {
    const env = await createTestEnv({
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'warn',
      ATRIUM_STORAGE: 's3',
      S3_ENDPOINT: s3.config.endpoint!,
      S3_BUCKET: 'no-such-bucket',
      S3_FORCE_PATH_STYLE: 'true',
      S3_ACCESS_KEY_ID: s3.config.accessKeyId!,
      S3_SECRET_ACCESS_KEY: s3.config.secretAccessKey!,
    });
    const lines: Array<{ msg?: string; err?: { type?: string; message?: string } }> = [];
    const text: string[] = [];
    const logStream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split('\n').filter(Boolean)) {
          text.push(line);
          lines.push(JSON.parse(line));
        }
        done();
      },
    });
    const server = await startServer(env.config, { logStream });
    try {
      const sweep = 'could not sweep leftovers of interrupted uploads';
      await waitUntil(() => lines.some((line) => line.msg === sweep), 'the sweep to fail');
      const logged = lines.find((line) => line.msg === sweep);
      expect(logged?.err?.message).toBe(`${missing}${s3.config.endpoint} (S3_BUCKET, S3_ENDPOINT)`);
      expect(text.join('\n')).not.toContain(`"${s3.config.secretAccessKey}"`);
    } finally {
      await server.close();
      await env.close();
    }
  });
});
