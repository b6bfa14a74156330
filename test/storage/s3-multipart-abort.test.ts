import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/ids.js';
import { isDependencyUnavailable } from '../../src/network-errors.js';
import { S3ObjectStore } from '../../src/storage/s3-store.js';
import { startS3rver } from '../project-files/s3rver.js';

/**
 * s3rver behind a proxy that refuses AbortMultipartUpload (DELETE …?uploadId=…) with 403, as a
 * bucket policy or an expired credential would: the upload stays open on the server.
 */
let s3: Awaited<ReturnType<typeof startS3rver>>;
let proxy: Server;
let proxyUrl: string;
const refusedAborts: string[] = [];
/** How long the proxy holds CreateMultipartUpload (POST …?uploads) before passing it on. */
let createDelayMs = 0;
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
    if (req.method === 'POST' && url.searchParams.has('uploads') && createDelayMs > 0) {
      req.pause();
      setTimeout(() => {
        req.resume();
        forward();
      }, createDelayMs);
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
    createDelayMs = 300;
    const abortsBefore = refusedAborts.length;
    const failure = new Error('the client went away');
    async function* source() {
      yield Buffer.alloc(8 * 1024 * 1024, 1);
      // While CreateMultipartUpload is held by the proxy: no upload id yet.
      await new Promise((resolve) => setTimeout(resolve, 50));
      throw failure;
    }
    try {
      await expect(
        store.put('scratch/early.bin', Readable.from(source()), { contentType: 'application/octet-stream' }),
      ).rejects.toBe(failure);
    } finally {
      createDelayMs = 0;
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
      { ...s3.config, endpoint: `http://127.0.0.1:${(stalled.address() as AddressInfo).port}` },
      { clock: systemClock, idleTimeoutMs: 300 },
    );
    try {
      const started = Date.now();
      const failure = await store.readAll('projects/w/p/stalled.txt', 1000).catch((error: unknown) => error);
      // Storage not answering: a 503 the client may retry, wherever a request meets it.
      expect(isDependencyUnavailable(failure)).toBe(true);
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      stalled.closeAllConnections();
      await new Promise((resolve) => stalled.close(resolve));
    }
  }, 15_000);
});
