/**
 * An S3 endpoint that accepts connections and never answers (a hung MinIO, a load balancer in
 * front of a dead one). Each request to it used to wait the idle timeout (120 s) three times,
 * the SDK retrying each timed-out attempt: an API request hung about six minutes before its
 * 503. A timed-out attempt is now the last: one idle timeout (ATRIUM_S3_IDLE_TIMEOUT_MS), then
 * 503 `service_unavailable`. A transfer that keeps moving bytes is never cut, however long.
 */
import { createServer as createHttpServer } from 'node:http';
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { systemClock } from '../../src/ids.js';
import { isDependencyUnavailable } from '../../src/network-errors.js';
import { S3ObjectStore } from '../../src/storage/s3-store.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { multipartBody, skillMd } from '../skills/zip-builder.js';

const SECRET = 'secret-access-key-never-shown';

let hung: Server;
const sockets: Socket[] = [];
let endpoint: string;

beforeAll(async () => {
  // Accepts connections and reads what comes, never answering.
  hung = createServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => {});
    socket.resume();
  });
  await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(hung.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => hung.close(resolve));
});

const hungStore = () =>
  new S3ObjectStore(
    {
      kind: 's3',
      endpoint,
      region: 'us-east-1',
      bucket: 'atrium-test',
      accessKeyId: 'test-key-id',
      secretAccessKey: SECRET,
      forcePathStyle: true,
      idleTimeoutMs: 200,
    },
    { clock: systemClock },
  );

/** What `attempt` threw, and how many connections the endpoint accepted meanwhile. */
async function failureOf(attempt: () => Promise<unknown>) {
  const before = sockets.length;
  const error = await attempt().then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  return { error, connections: sockets.length - before };
}

describe('an S3 endpoint that accepts connections and never answers', () => {
  // Made once the endpoint listens.
  let store: S3ObjectStore;
  beforeAll(() => {
    store = hungStore();
  });
  const operations: Array<[string, () => Promise<unknown>]> = [
    ['head', () => store.head('projects/w/p/a.txt')],
    ['get', () => store.get('projects/w/p/a.txt')],
    [
      'list',
      async () => {
        for await (const _ of store.list('projects/w/p/')) void _;
      },
    ],
    ['delete', () => store.delete('projects/w/p/a.txt')],
    ['deletePrefix', () => store.deletePrefix('projects/w/p/')],
    [
      'put',
      () =>
        store.put('projects/w/p/a.txt', Readable.from([Buffer.from('abc')]), { contentType: 'text/plain' }),
    ],
    [
      'put (multipart)',
      () =>
        store.put('projects/w/p/big.bin', Readable.from([Buffer.alloc(9 * 1024 * 1024)]), {
          contentType: 'application/octet-stream',
        }),
    ],
  ];
  for (const [name, operation] of operations) {
    it(`${name}: fails as storage unavailable after one attempt, not three`, async () => {
      const { error, connections } = await failureOf(operation);
      expect(isDependencyUnavailable(error), String(error)).toBe(true);
      expect(connections).toBe(1);
      expect(String((error as Error).stack)).not.toContain(SECRET);
    });
  }

  it('ATRIUM_S3_IDLE_TIMEOUT_MS sets the idle timeout (default 30 s)', () => {
    const s3 = { ATRIUM_STORAGE: 's3', S3_BUCKET: 'atrium', ATRIUM_DATA_DIR: '/tmp/unused' };
    expect(loadConfig({ ...s3, ATRIUM_SIGNING_SECRET: 'x'.repeat(32) }).storage).toMatchObject({
      idleTimeoutMs: 30_000,
    });
    expect(
      loadConfig({ ...s3, ATRIUM_SIGNING_SECRET: 'x'.repeat(32), ATRIUM_S3_IDLE_TIMEOUT_MS: '250' }).storage,
    ).toMatchObject({ idleTimeoutMs: 250 });
  });
});

describe(`API requests meeting an S3 endpoint that never answers (${engineName})`, () => {
  let t: Awaited<ReturnType<typeof createTestApp>>;
  beforeAll(async () => {
    t = await createTestApp({ setup: TENANCY_SETUP, store: hungStore });
  });
  afterAll(() => t?.close());

  const headers = { 'x-service-api-key': KEYS.mainOwner };
  const skill = () => {
    const { body, contentType } = multipartBody([
      { name: 'files', filename: 'hung.md', contentType: 'text/markdown', content: skillMd('hung', 'Hung') },
    ]);
    return { body, contentType };
  };
  /** What is sent, how, and the S3 requests it makes (each one attempt). */
  const requests: Array<
    [string, () => Promise<{ statusCode: number; body: string; headers: Record<string, unknown> }>, number]
  > = [
    [
      'a file sync',
      () => t.app.inject({ method: 'POST', url: '/v1/projects/prj_docs/files/sync', headers }),
      1,
    ],
    [
      'an upload URL',
      () =>
        t.app.inject({
          method: 'POST',
          url: '/v1/projects/prj_docs/files/upload',
          headers,
          payload: { filename: 'a.txt', contentType: 'text/plain', sizeBytes: 3 },
        }),
      1,
    ],
    [
      'a skill upload',
      () => {
        const { body, contentType } = skill();
        return t.app.inject({
          method: 'POST',
          url: '/v1/workspace/wsp_main/skills/bulk-upload',
          headers: { ...headers, 'content-type': contentType },
          payload: body,
        });
      },
      // The file's put, then the removal of the skill's folder (a listing) after it failed.
      2,
    ],
  ];
  for (const [what, send, s3Requests] of requests) {
    it(`${what}: 503 service_unavailable after one attempt per S3 request, naming neither endpoint nor credentials`, async () => {
      const before = sockets.length;
      const res = await send();
      expect(res.statusCode, res.body).toBe(503);
      expect(JSON.parse(res.body)).toEqual({
        code: 'service_unavailable',
        message: 'Storage or the database did not answer; try again shortly',
        details: { retryAfterSeconds: 5 },
      });
      expect(res.headers['retry-after']).toBe('5');
      expect(sockets.length - before).toBe(s3Requests);
      for (const secret of [SECRET, 'test-key-id', endpoint, String((hung.address() as AddressInfo).port)]) {
        expect(res.body).not.toContain(secret);
      }
    });
  }
});

describe('an S3 download slower than the idle timeout in all, but never idle that long', () => {
  it('is read whole: the idle timeout bounds silence, not the transfer', async () => {
    const chunks = 12;
    // Each chunk comes well within the idle timeout; all of them take several times as long.
    const slow = createHttpServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(chunks), etag: '"e"' });
      let sent = 0;
      const timer = setInterval(() => {
        res.write('x');
        if (++sent === chunks) {
          clearInterval(timer);
          res.end();
        }
      }, 50);
    });
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    const store = new S3ObjectStore(
      {
        kind: 's3',
        endpoint: `http://127.0.0.1:${(slow.address() as AddressInfo).port}`,
        region: 'us-east-1',
        bucket: 'atrium-test',
        accessKeyId: 'test-key-id',
        secretAccessKey: SECRET,
        forcePathStyle: true,
        idleTimeoutMs: 300,
      },
      { clock: systemClock },
    );
    try {
      const body = await store.readAll('projects/w/p/slow.txt', 1000);
      expect(body?.toString()).toBe('x'.repeat(chunks));
    } finally {
      slow.closeAllConnections();
      await new Promise((resolve) => slow.close(resolve));
    }
  });
});
