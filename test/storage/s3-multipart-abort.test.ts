import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toApiError } from '../../src/http/plugins/error-handler.js';
import { systemClock } from '../../src/ids.js';
import { isDependencyUnavailable } from '../../src/network-errors.js';
import { ObjectsNotDeletedError, S3ObjectStore } from '../../src/storage/s3-store.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { startS3rver } from '../project-files/s3rver.js';

/**
 * s3rver behind a proxy that refuses AbortMultipartUpload (DELETE …?uploadId=…) with 403, as a
 * bucket policy or an expired credential would: the upload stays open on the server. It also
 * answers DeleteObjects itself while `refusedDeletes` names keys, as S3 does when some keys
 * fail: 200, the other keys deleted, each failed one listed with its error code.
 */
let s3: Awaited<ReturnType<typeof startS3rver>>;
/** Keys DeleteObjects leaves in place, with the error code it reports for each. */
const refusedDeletes = new Map<string, string>();
let proxy: Server;
let proxyUrl: string;
const refusedAborts: string[] = [];
/** While set, the proxy holds CreateMultipartUpload (POST …?uploads): it tells, then waits. */
let createHold: { arrived: () => void; released: Promise<void> } | undefined;
let partUploaded: () => void;
const firstPart = new Promise<void>((resolve) => {
  partUploaded = resolve;
});
beforeAll(async () => {
  s3 = await startS3rver();
  const target = new URL(s3.config.endpoint!);
  proxy = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://proxy');
    if (req.method === 'DELETE' && url.searchParams.has('uploadId')) {
      refusedAborts.push(url.searchParams.get('uploadId')!);
      req.resume();
      res.writeHead(403, { 'content-type': 'application/xml' });
      res.end('<?xml version="1.0"?><Error><Code>AccessDenied</Code><Message>Denied</Message></Error>');
      return;
    }
    if (req.method === 'POST' && url.searchParams.has('delete') && refusedDeletes.size > 0) {
      void answerDeleteObjects(req, res);
      return;
    }
    if (req.method === 'POST' && url.searchParams.has('uploads') && createHold) {
      req.pause();
      createHold.arrived();
      void createHold.released.then(() => {
        req.resume();
        forward();
      });
      return;
    }
    forward();
    function forward() {
      const forwarded = request(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
        (upstream) => {
          res.writeHead(upstream.statusCode ?? 502, upstream.headers);
          upstream.pipe(res);
          if (req.method === 'PUT' && url.searchParams.has('partNumber'))
            res.on('finish', () => partUploaded());
        },
      );
      req.pipe(forwarded);
    }
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => proxy.close(() => resolve()));
  await s3.close();
});

async function answerDeleteObjects(req: IncomingMessage, res: ServerResponse) {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const keys = [
    ...Buffer.concat(chunks)
      .toString()
      .matchAll(/<Key>([^<]*)<\/Key>/g),
  ].map((match) => match[1]!);
  const direct = new S3ObjectStore(s3.config, { clock: systemClock });
  const failed: string[] = [];
  for (const key of keys) {
    const code = refusedDeletes.get(key);
    if (code)
      failed.push(
        `<Error><Key>${key}</Key><Code>${code}</Code><Message>${code} for this key</Message></Error>`,
      );
    else await direct.delete(key);
  }
  res.writeHead(200, { 'content-type': 'application/xml' });
  res.end(`<?xml version="1.0" encoding="UTF-8"?><DeleteResult>${failed.join('')}</DeleteResult>`);
}

describe('S3 multipart upload that cannot be aborted', () => {
  it('fails the put with its own error and logs the upload id it left open', async () => {
    const warnings: Array<{ details: Record<string, unknown>; message: string }> = [];
    const store = new S3ObjectStore(
      { ...s3.config, endpoint: proxyUrl },
      { clock: systemClock, log: { warn: (details, message) => warnings.push({ details, message }) } },
    );
    // One part (8 MiB) is uploaded, so a multipart upload is open when the body fails.
    const failure = new Error('the source broke off');
    async function* source() {
      yield Buffer.alloc(8 * 1024 * 1024, 1);
      await firstPart;
      throw failure;
    }
    await expect(
      store.put('scratch/broken.bin', Readable.from(source()), { contentType: 'application/octet-stream' }),
    ).rejects.toBe(failure);
    expect(refusedAborts).toHaveLength(1);
    expect(warnings).toEqual([
      {
        details: expect.objectContaining({
          uploadId: refusedAborts[0],
          bucket: s3.config.bucket,
          storagePath: 'scratch/broken.bin',
          err: expect.objectContaining({ name: 'AccessDenied' }),
        }),
        message: 'could not abort an incomplete multipart upload: abort it by its upload id',
      },
    ]);
  });
});

describe('S3 multipart upload whose body fails while the upload is being created', () => {
  it('aborts the upload once it exists, so the part sent meanwhile does not stay', async () => {
    const warnings: string[] = [];
    const store = new S3ObjectStore(
      { ...s3.config, endpoint: proxyUrl },
      { clock: systemClock, log: { warn: (_details, message) => warnings.push(message) } },
    );
    let arrived!: () => void;
    const createArrived = new Promise<void>((resolve) => (arrived = resolve));
    let release!: () => void;
    createHold = { arrived, released: new Promise<void>((resolve) => (release = resolve)) };
    const abortsBefore = refusedAborts.length;
    const failure = new Error('the client went away');
    async function* source() {
      yield Buffer.alloc(8 * 1024 * 1024, 1);
      // While CreateMultipartUpload is held by the proxy: no upload id yet. (A fixed wait could
      // end before the request got there on a loaded machine.) The proxy passes it on once the
      // failure has gone its way: a timer runs after the promise callbacks that carry it.
      await createArrived;
      setTimeout(release, 50);
      throw failure;
    }
    try {
      await expect(
        store.put('scratch/early.bin', Readable.from(source()), { contentType: 'application/octet-stream' }),
      ).rejects.toBe(failure);
    } finally {
      createHold = undefined;
      release();
    }
    // The abort was sent for the upload created after the failure (this proxy refuses it, so it
    // is also logged with its id).
    expect(refusedAborts.length).toBe(abortsBefore + 1);
    expect(warnings).toEqual(['could not abort an incomplete multipart upload: abort it by its upload id']);
  });
});

describe('an S3 endpoint that stops answering mid-body', () => {
  it('fails the read after the idle timeout instead of holding it (and its socket) for ever', async () => {
    // Headers and a tenth of the body, then nothing: a stalled connection, not a closed one.
    const stalled = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '100', etag: '"e"' });
      res.write('x'.repeat(10));
    });
    await new Promise<void>((resolve) => stalled.listen(0, '127.0.0.1', resolve));
    const store = new S3ObjectStore(
      {
        ...s3.config,
        endpoint: `http://127.0.0.1:${(stalled.address() as AddressInfo).port}`,
        idleTimeoutMs: 300,
      },
      { clock: systemClock },
    );
    try {
      const started = Date.now();
      const failure = await store.readAll('projects/w/p/stalled.txt', 1000).catch((error: unknown) => error);
      // Storage not answering: a 503 the client may retry, wherever a request meets it.
      expect(isDependencyUnavailable(failure)).toBe(true);
      // Well short of the test's own timeout (a read held for ever), with room for the client's
      // retries on a loaded machine.
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      stalled.closeAllConnections();
      await new Promise((resolve) => stalled.close(resolve));
    }
  }, 15_000);
});

describe(`S3 DeleteObjects that leaves some keys in the bucket (${engineName})`, () => {
  const store = () => new S3ObjectStore({ ...s3.config, endpoint: proxyUrl }, { clock: systemClock });
  const putText = (key: string) =>
    store().put(key, Readable.from([Buffer.from('x')]), { contentType: 'text/plain' });
  const keysUnder = async (prefix: string) => {
    const keys: string[] = [];
    for await (const object of store().list(prefix)) keys.push(object.key);
    return keys.sort();
  };

  it('fails deletePrefix naming the keys left, once the others are deleted', async () => {
    for (const name of ['a', 'b', 'c']) await putText(`partial/${name}.txt`);
    refusedDeletes.set('partial/b.txt', 'InternalError');
    try {
      // Before: resolved, and the caller took the objects for gone.
      const failure = await store()
        .deletePrefix('partial/')
        .catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(ObjectsNotDeletedError);
      expect((failure as Error).message).toBe(
        `S3 did not delete 1 object(s) under partial/ in bucket ${s3.config.bucket}: partial/b.txt (InternalError: InternalError for this key)`,
      );
      expect(await keysUnder('partial/')).toEqual(['partial/b.txt']);
      // S3's own failure is a 503 to retry; a refusal (a policy, a legal hold) a 500.
      expect(toApiError(failure).status).toBe(503);
      refusedDeletes.set('partial/b.txt', 'AccessDenied');
      expect(
        toApiError(
          await store()
            .deletePrefix('partial/')
            .catch((error: unknown) => error),
        ).status,
      ).toBe(500);
    } finally {
      refusedDeletes.clear();
    }
    await store().deletePrefix('partial/');
    expect(await keysUnder('partial/')).toEqual([]);
  });

  it('answers a project delete storage left objects of with 503 and keeps the project, to delete again', async () => {
    const t = await createTestApp({ setup: TENANCY_SETUP, store });
    const headers = { 'x-service-api-key': KEYS.mainOwner };
    try {
      const created = await t.app.inject({
        method: 'POST',
        url: '/v1/projects',
        headers,
        payload: { name: 'Doomed' },
      });
      const id = created.json().data.project.id as string;
      const prefix = `projects/wsp_main/${id}/`;
      await putText(`${prefix}a.txt`);
      await putText(`${prefix}b.txt`);
      refusedDeletes.set(`${prefix}b.txt`, 'InternalError');
      try {
        // Before: 200, the project's rows gone and b.txt in the bucket under no project.
        const refused = await t.app.inject({ method: 'DELETE', url: `/v1/projects/${id}`, headers });
        expect(refused.statusCode).toBe(503);
        expect(refused.json()).toEqual({
          code: 'service_unavailable',
          message: 'Storage or the database did not answer; try again shortly',
          details: { retryAfterSeconds: 5 },
        });
        expect((await t.app.inject({ method: 'GET', url: `/v1/projects/${id}`, headers })).statusCode).toBe(
          200,
        );
        expect(await keysUnder(prefix)).toEqual([`${prefix}b.txt`]);
      } finally {
        refusedDeletes.clear();
      }
      expect((await t.app.inject({ method: 'DELETE', url: `/v1/projects/${id}`, headers })).statusCode).toBe(
        200,
      );
      expect((await t.app.inject({ method: 'GET', url: `/v1/projects/${id}`, headers })).statusCode).toBe(
        404,
      );
      expect(await keysUnder(prefix)).toEqual([]);
    } finally {
      await t.close();
    }
  });
});
