/**
 * Storage that does not answer (S3 refusing connections, or answering 503 "slow down" and 500)
 * is a 503 `service_unavailable` with `Retry-After`: the client's request was fine and may be
 * sent again. It used to be a 500 `internal_error`. Nothing is reserved or stored meanwhile, and
 * the answer names no endpoint. Other unknown failures stay a 500 that says nothing. Storage
 * slow to answer a sync or a delete holds up no other request: neither waits on it inside a
 * database transaction (on SQLite, every request's one connection).
 */
import { createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createTcpServer } from 'node:net';
import pg from 'pg';
import { describe, expect, it, onTestFinished } from 'vitest';
import { systemClock } from '../../src/ids.js';
import { toApiError } from '../../src/http/plugins/error-handler.js';
import { isDependencyUnavailable } from '../../src/network-errors.js';
import { S3ObjectStore } from '../../src/storage/s3-store.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

/** An S3 endpoint answering every request with `status` and an S3 error body, counting requests. */
async function failingS3(status: number, code: string) {
  let requests = 0;
  const server: Server = createServer((request, response) => {
    requests++;
    request.resume();
    response.writeHead(status, { 'content-type': 'application/xml' });
    response.end(`<?xml version="1.0"?><Error><Code>${code}</Code><Message>${code}</Message></Error>`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return { port, requests: () => requests, close: () => new Promise((resolve) => server.close(resolve)) };
}

/** A request a held S3 endpoint has stopped: `reached` once it arrived, `release` lets it through. */
interface HeldRequest {
  reached: Promise<void>;
  release: () => void;
}

/**
 * An S3 endpoint holding one object, `a.txt` of prj_docs (listed without a content type, as S3
 * lists), whose next request of a method can be held until the test releases it.
 */
async function heldS3() {
  const key = 'projects/wsp_main/prj_docs/a.txt';
  let stored = true;
  const holds = new Map<string, { arrived: () => void; opened: Promise<void> }>();
  const server: Server = createServer((request, response) => {
    request.resume();
    const hold = holds.get(request.method!);
    holds.delete(request.method!);
    hold?.arrived();
    void (hold?.opened ?? Promise.resolve()).then(() => {
      const url = new URL(request.url!, 'http://s3');
      if (request.method === 'GET' && url.searchParams.get('list-type') === '2') {
        const prefix = url.searchParams.get('prefix') ?? '';
        const contents =
          stored && key.startsWith(prefix)
            ? `<Contents><Key>${key}</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified><ETag>"abc"</ETag><Size>3</Size></Contents>`
            : '';
        response.writeHead(200, { 'content-type': 'application/xml' });
        response.end(
          `<?xml version="1.0"?><ListBucketResult><Name>atrium-test</Name><Prefix>${prefix}</Prefix><IsTruncated>false</IsTruncated>${contents}</ListBucketResult>`,
        );
      } else if (request.method === 'HEAD' && stored && url.pathname.endsWith(`/${key}`)) {
        response.writeHead(200, {
          'content-length': '3',
          'content-type': 'text/plain',
          etag: '"abc"',
          'last-modified': 'Thu, 01 Jan 2026 00:00:00 GMT',
        });
        response.end();
      } else if (request.method === 'DELETE') {
        stored = false;
        response.writeHead(204);
        response.end();
      } else {
        response.writeHead(404);
        response.end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const released: Array<() => void> = [];
  return {
    port: (server.address() as AddressInfo).port,
    /** Holds the next request of `method`. */
    hold(method: 'HEAD' | 'DELETE'): HeldRequest {
      let arrived!: () => void;
      let release!: () => void;
      const reached = new Promise<void>((resolve) => (arrived = resolve));
      const opened = new Promise<void>((resolve) => (release = resolve));
      holds.set(method, { arrived, opened });
      released.push(release);
      return { reached, release };
    },
    close: () => {
      for (const release of released) release();
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A port nothing listens on: connections to it are refused. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function appOnS3(port: number) {
  return createTestApp({
    setup: TENANCY_SETUP,
    store: () =>
      new S3ObjectStore(
        {
          kind: 's3',
          endpoint: `http://127.0.0.1:${port}`,
          region: 'us-east-1',
          bucket: 'atrium-test',
          accessKeyId: 'test',
          secretAccessKey: 'test',
          forcePathStyle: true,
        },
        { clock: systemClock },
      ),
  });
}

const headers = { 'x-service-api-key': KEYS.mainOwner };
const uploadRequest = { filename: 'a.txt', contentType: 'text/plain', sizeBytes: 3 };

function expectUnavailable(
  res: { statusCode: number; headers: Record<string, unknown>; body: string },
  port: number,
) {
  expect(res.statusCode, res.body).toBe(503);
  expect(JSON.parse(res.body)).toEqual({
    code: 'service_unavailable',
    message: 'Storage or the database did not answer; try again shortly',
    details: { retryAfterSeconds: 5 },
  });
  expect(res.headers['retry-after']).toBe('5');
  expect(res.body).not.toContain(String(port));
}

describe(`storage that does not answer (${engineName})`, () => {
  const cases = [
    ['refuses connections', async () => ({ port: await closedPort(), close: async () => {} })],
    ['answers 503 SlowDown', () => failingS3(503, 'SlowDown')],
    ['answers 500 InternalError', () => failingS3(500, 'InternalError')],
  ] as const;
  for (const [what, start] of cases) {
    it(`S3 that ${what}: upload URL and sync are 503 service_unavailable, nothing reserved`, async () => {
      const s3 = await start();
      const t = await appOnS3(s3.port);
      try {
        const upload = await t.app.inject({
          method: 'POST',
          url: '/v1/projects/prj_docs/files/upload',
          headers,
          payload: uploadRequest,
        });
        expectUnavailable(upload, s3.port);
        const reserved = await t.db.selectFrom('upload_reservations').select('path').execute();
        expect(reserved).toEqual([]);
        const sync = await t.app.inject({ method: 'POST', url: '/v1/projects/prj_docs/files/sync', headers });
        expectUnavailable(sync, s3.port);
        // The project and its listing are untouched, and the database side still answers.
        const list = await t.app.inject({ method: 'GET', url: '/v1/projects/prj_docs/files', headers });
        expect(list.statusCode).toBe(200);
        expect(list.json().data.files).toEqual([]);
      } finally {
        await t.close();
        await s3.close();
      }
    });
  }
});

describe(`storage slow to answer holds up no other request (${engineName})`, () => {
  /** The app on a held S3 endpoint, both closed when the test ends, even one that timed out. */
  async function heldApp() {
    const s3 = await heldS3();
    const t = await appOnS3(s3.port);
    onTestFinished(async () => {
      await s3.close();
      await t.close();
    });
    return { s3, t };
  }

  /**
   * Requests that must answer while storage holds a sync or a delete: another organization's
   * (on SQLite, every query shares one connection), and an upload URL of the same project (it
   * takes the project's lock, which a sync or delete must not hold while it waits on storage).
   */
  async function expectOthersAnswer(t: Awaited<ReturnType<typeof appOnS3>>) {
    const otherTenant = await t.app.inject({
      method: 'GET',
      url: '/v1/projects',
      headers: { 'x-service-api-key': KEYS.globexWorkspace },
    });
    expect(otherTenant.statusCode, otherTenant.body).toBe(200);
    const upload = await t.app.inject({
      method: 'POST',
      url: '/v1/projects/prj_docs/files/upload',
      headers,
      payload: { ...uploadRequest, filename: 'b.txt' },
    });
    expect(upload.statusCode, upload.body).toBe(200);
  }

  it('a sync waiting on a HEAD', async () => {
    const { s3, t } = await heldApp();
    const head = s3.hold('HEAD');
    const sync = t.app.inject({ method: 'POST', url: '/v1/projects/prj_docs/files/sync', headers });
    await head.reached;
    await expectOthersAnswer(t);
    head.release();
    const synced = await sync;
    expect(synced.json(), synced.body).toEqual({ data: { added: 1, removed: 0, updated: 0 } });
  });

  it('a file delete waiting on the DELETE of its object', async () => {
    const { s3, t } = await heldApp();
    const sync = await t.app.inject({ method: 'POST', url: '/v1/projects/prj_docs/files/sync', headers });
    expect(sync.statusCode, sync.body).toBe(200);
    const list = await t.app.inject({ method: 'GET', url: '/v1/projects/prj_docs/files', headers });
    const [file] = list.json().data.files;
    const held = s3.hold('DELETE');
    const deleting = t.app.inject({
      method: 'DELETE',
      url: `/v1/projects/prj_docs/files/${file.id}`,
      headers,
    });
    await held.reached;
    await expectOthersAnswer(t);
    held.release();
    expect((await deleting).json()).toEqual({ data: { deleted: true } });
    const after = await t.app.inject({ method: 'GET', url: '/v1/projects/prj_docs/files', headers });
    expect(after.json().data.files).toEqual([]);
  });
});

describe('which failures are a dependency being unavailable', () => {
  const withCode = (code: string) => Object.assign(new Error('x'), { code });
  it('network failures, S3 server faults, PostgreSQL connection states and SQLite busy are', () => {
    for (const error of [
      withCode('ECONNREFUSED'),
      withCode('EAI_AGAIN'),
      new TypeError('fetch failed', { cause: withCode('UND_ERR_SOCKET') }),
      Object.assign(new Error('SlowDown'), { $fault: 'server', $metadata: { httpStatusCode: 503 } }),
      withCode('08006'),
      withCode('57P01'),
      withCode('53300'),
      withCode('SQLITE_BUSY'),
    ]) {
      expect(isDependencyUnavailable(error), String((error as { code?: string }).code)).toBe(true);
    }
  });

  it('local faults, client-side S3 errors, constraint violations and plain errors are not', () => {
    for (const error of [
      new Error('disk full'),
      withCode('ENOENT'),
      withCode('EACCES'),
      withCode('23505'),
      // A protocol violation (too many bind parameters) is a statement Atrium got wrong.
      withCode('08P01'),
      withCode('SQLITE_CONSTRAINT_UNIQUE'),
      Object.assign(new Error('AccessDenied'), { $fault: 'client', $metadata: { httpStatusCode: 403 } }),
      undefined,
    ]) {
      expect(isDependencyUnavailable(error)).toBe(false);
    }
  });
});

describe('PostgreSQL connections lost, as node-postgres reports them (no code, only a message)', () => {
  /** A TCP server standing in for PostgreSQL: it closes each connection, or never answers. */
  async function fakeDatabase(behaviour: 'close' | 'silent') {
    const server = createTcpServer((socket) => {
      if (behaviour === 'close') socket.once('data', () => socket.end());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { port: (server.address() as AddressInfo).port, close: () => server.close() };
  }

  for (const behaviour of ['close', 'silent'] as const) {
    it(`a server that ${behaviour === 'close' ? 'drops the connection' : 'never answers'} is a 503`, async () => {
      const database = await fakeDatabase(behaviour);
      const pool = new pg.Pool({
        connectionString: `postgres://atrium@127.0.0.1:${database.port}/atrium`,
        connectionTimeoutMillis: 300,
      });
      try {
        const failure = await pool.query('select 1').then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(failure).toBeInstanceOf(Error);
        expect(toApiError(failure).status, String((failure as Error).message)).toBe(503);
      } finally {
        await pool.end();
        database.close();
      }
    });
  }
});
