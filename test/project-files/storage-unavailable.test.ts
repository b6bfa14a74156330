/**
 * Storage that does not answer (S3 refusing connections, or answering 503 "slow down" and 500)
 * is a 503 `service_unavailable` with `Retry-After`: the client's request was fine and may be
 * sent again. It used to be a 500 `internal_error`. Nothing is reserved or stored meanwhile, and
 * the answer names no endpoint. Other unknown failures stay a 500 that says nothing.
 */
import { createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createTcpServer } from 'node:net';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/ids.js';
import { toApiError } from '../../src/http/plugins/error-handler.js';
import { isDependencyUnavailable } from '../../src/network-errors.js';
import { S3ObjectStore } from '../../src/storage/s3-store.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { multipartBody, skillMd } from '../skills/zip-builder.js';

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
    it(`S3 that ${what}: upload URL, sync and skill upload are 503 service_unavailable, nothing reserved`, async () => {
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
        // A skill upload too: it answered 500 internal_error, which no client retries.
        const skill = multipartBody([
          {
            name: 'files',
            filename: 'down.md',
            contentType: 'text/markdown',
            content: skillMd('down', 'Down'),
          },
        ]);
        const uploaded = await t.app.inject({
          method: 'POST',
          url: '/v1/workspace/wsp_main/skills/bulk-upload',
          headers: { ...headers, 'content-type': skill.contentType },
          payload: skill.body,
        });
        expectUnavailable(uploaded, s3.port);
        const skills = await t.app.inject({ method: 'GET', url: '/v1/workspace/wsp_main/skills', headers });
        expect(skills.json().data.skills ?? skills.json().data).toEqual([]);
      } finally {
        await t.close();
        await s3.close();
      }
    });
  }
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
