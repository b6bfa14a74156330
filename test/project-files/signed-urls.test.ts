import { readdirSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';
import { createSignedUrl } from '../../src/storage/signed-url.js';
import { filesApi, injectable, PREFIX } from './helpers.js';

let now = new Date('2026-11-22T10:00:00.000Z');
let t: Awaited<ReturnType<typeof createTestApp>>;
let origin: string;
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP, clock: () => now });
  origin = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(() => t.close());
beforeEach(() => {
  now = new Date('2026-11-22T10:00:00.000Z');
});

async function requestUploadUrl(filename: string, sizeBytes: number, contentType = 'text/plain') {
  const res = await filesApi(t.app).requestUpload({ filename, contentType, sizeBytes });
  expect(res.statusCode).toBe(200);
  return res.json().data as { uploadUrl: string; storagePath: string };
}

/** Syncs the project, then a download URL of its file named `name`. */
async function syncedDownloadUrl(name: string): Promise<string> {
  await filesApi(t.app).sync();
  const file = (await filesApi(t.app).list())
    .json()
    .data.files.find((f: { name: string }) => f.name === name);
  return (await filesApi(t.app).download(file.id)).json().data.downloadUrl;
}

const put = (url: string, body: string | Buffer, contentType = 'text/plain') =>
  t.app.inject({
    method: 'PUT',
    url: injectable(url),
    headers: { 'content-type': contentType },
    payload: body,
  });

/** Where the fs store writes an upload before renaming it into place. */
const uploadTmpDir = () => path.join(t.env.config.dataDir, 'objects', 'tmp');

const flipFirst = (text: string) => `${text[0] === 'A' ? 'B' : 'A'}${text.slice(1)}`;

/** A chunked PUT with no Content-Length, so the server only learns the size while streaming. */
function chunkedPut(url: string, chunks: Buffer[], contentType: string) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const request = http.request(
      url,
      { method: 'PUT', headers: { 'content-type': contentType } },
      (response) => {
        let body = '';
        response.on('data', (chunk) => (body += chunk));
        response.on('end', () => resolve({ status: response.statusCode!, body }));
      },
    );
    // The server answers 413 and closes while we still write: a write error (EPIPE) is expected
    // then, and the answer is still read, as curl does.
    request.on('error', (error) => setTimeout(() => reject(error), 1000));
    let i = 0;
    const writeNext = () => {
      if (i === chunks.length) return request.end();
      request.write(chunks[i++], (error) => {
        if (!error) setImmediate(writeNext);
      });
    };
    writeNext();
  });
}

describe(`signed storage URLs of the fs backend (${engineName})`, () => {
  it('stores a PUT with the declared type and size, without an API key', async () => {
    const { uploadUrl, storagePath } = await requestUploadUrl('ok.txt', 5);
    const res = await put(uploadUrl, 'hello');
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ storagePath, sizeBytes: 5 });
    expect((await t.store.head(storagePath))?.size).toBe(5);
  });

  it('answers a PUT with a Content-Encoding 415 and stores nothing (the bytes are not the file)', async () => {
    const { uploadUrl, storagePath } = await requestUploadUrl('gz.txt', 5);
    const putWith = (encoding: string) =>
      t.app.inject({
        method: 'PUT',
        url: injectable(uploadUrl),
        headers: { 'content-type': 'text/plain', 'content-encoding': encoding },
        payload: 'hello',
      });
    const res = await putWith('gzip');
    expect(res.statusCode).toBe(415);
    expect(res.json()).toEqual({
      code: 'unsupported_media_type',
      message: 'Content-Encoding gzip is not supported; send the body unencoded (identity)',
      details: { contentEncoding: 'gzip' },
    });
    expect(await t.store.head(storagePath)).toBeNull();
    // `identity` is no encoding at all.
    expect((await putWith('identity')).statusCode).toBe(200);
  });

  it('accepts the declared content type spelled with other case and spacing', async () => {
    const { uploadUrl } = await requestUploadUrl('ct.txt', 2, 'text/plain; charset=utf-8');
    expect((await put(uploadUrl, 'hi', 'Text/Plain;charset=utf-8')).statusCode).toBe(200);
    // What a browser's fetch sends for a string body: the charset name in upper case.
    const second = await requestUploadUrl('ct2.txt', 2, 'text/plain; charset=utf-8');
    expect((await put(second.uploadUrl, 'hi', 'text/plain;charset=UTF-8')).statusCode).toBe(200);
  });

  it('refuses a PUT with another content type (400), storing nothing', async () => {
    const { uploadUrl, storagePath } = await requestUploadUrl('wrong-type.txt', 5);
    const res = await put(uploadUrl, 'hello', 'application/json');
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({
      code: 'bad_request',
      details: { expected: 'text/plain', received: 'application/json' },
    });
    const none = await t.app.inject({ method: 'PUT', url: injectable(uploadUrl), payload: 'hello' });
    expect(none.statusCode).toBe(400);
    expect(await t.store.head(storagePath)).toBeNull();
  });

  it('refuses an empty, malformed or missing Content-Type with the same 400, after the signature', async () => {
    const { uploadUrl, storagePath } = await requestUploadUrl('odd-type.txt', 5);
    // Before: Fastify answered '' and ';' with its own 415, which the route does not declare,
    // before the handler (or the signature check) ran.
    for (const sent of ['', ';', 'a/b; charset=', 'text/plain/x']) {
      const res = await put(uploadUrl, 'hello', sent);
      expect(res.statusCode, JSON.stringify(sent)).toBe(400);
      expect(res.json()).toEqual({
        code: 'bad_request',
        message: 'Content-Type must be "text/plain", as declared for this upload URL',
        details: { expected: 'text/plain', received: sent },
      });
    }
    const none = await t.app.inject({ method: 'PUT', url: injectable(uploadUrl), payload: 'hello' });
    expect(none.json()).toMatchObject({
      code: 'bad_request',
      details: { expected: 'text/plain', received: null },
    });
    expect(await t.store.head(storagePath)).toBeNull();
    const tampered = new URL(uploadUrl);
    tampered.searchParams.set('signature', flipFirst(tampered.searchParams.get('signature')!));
    expect((await put(tampered.toString(), 'hello', '')).json().code).toBe('invalid_signature');
    // The header is only set aside: the declared type still stores the file.
    expect((await put(uploadUrl, 'hello')).statusCode).toBe(200);
  });

  it('refuses a body longer than declared with 413, storing nothing', async () => {
    const { uploadUrl, storagePath } = await requestUploadUrl('too-long.txt', 5);
    const res = await put(uploadUrl, 'hello, world');
    expect(res.statusCode).toBe(413);
    expect(res.json().code).toBe('payload_too_large');
    expect(await t.store.head(storagePath)).toBeNull();
  });

  it('aborts a streamed body that grows past the declared size with 413 over a real connection, storing nothing', async () => {
    const { uploadUrl, storagePath } = await requestUploadUrl(
      'streamed.bin',
      100_000,
      'application/octet-stream',
    );
    const chunks = Array.from({ length: 20 }, () => Buffer.alloc(16 * 1024, 1)); // 320 KiB
    const res = await chunkedPut(
      uploadUrl.replace(/^http:\/\/[^/]+/, origin),
      chunks,
      'application/octet-stream',
    );
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body).code).toBe('payload_too_large');
    expect(await t.store.head(storagePath)).toBeNull();
  });

  it('shows sync nothing of an upload still in flight, and the whole object once it completes', async () => {
    const { uploadUrl } = await requestUploadUrl('in-flight.bin', 200_000, 'application/octet-stream');
    const url = new URL(uploadUrl.replace(/^http:\/\/[^/]+/, origin));
    const request = http.request(url, {
      method: 'PUT',
      headers: { 'content-type': 'application/octet-stream', 'content-length': '200000' },
    });
    const answered = new Promise<number>((resolve, reject) => {
      request.on('response', (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode!));
      });
      request.on('error', reject);
    });
    request.write(Buffer.alloc(100_000, 2));
    // The server is mid-upload once its temp file exists: sync runs while the PUT is in flight.
    await vi.waitFor(() => expect(readdirSync(uploadTmpDir())).not.toEqual([]), {
      timeout: 10_000,
      interval: 20,
    });
    const names = async () =>
      (await filesApi(t.app).list()).json().data.files.map((f: { name: string }) => f.name);
    await filesApi(t.app).sync();
    expect(await names()).not.toContain('in-flight.bin');
    request.end(Buffer.alloc(100_000, 3));
    expect(await answered).toBe(200);
    await filesApi(t.app).sync();
    const file = (await filesApi(t.app).list())
      .json()
      .data.files.find((f: { name: string }) => f.name === 'in-flight.bin');
    expect(file.sizeBytes).toBe(200_000);
  });

  it('stores nothing and leaves no temp file when the connection is cut mid-upload', async () => {
    const { uploadUrl, storagePath } = await requestUploadUrl(
      'cut.bin',
      1_000_000,
      'application/octet-stream',
    );
    const url = new URL(uploadUrl.replace(/^http:\/\/[^/]+/, origin));
    await new Promise<void>((resolve, reject) => {
      const request = http.request(url, {
        method: 'PUT',
        headers: { 'content-type': 'application/octet-stream', 'content-length': '1000000' },
      });
      request.on('error', () => resolve());
      request.write(Buffer.alloc(300_000, 1));
      // Cut once the server is writing the upload (its temp file exists), not after a guessed time.
      void vi
        .waitFor(() => expect(readdirSync(uploadTmpDir())).not.toEqual([]), { timeout: 10_000, interval: 20 })
        .then(() => {
          request.destroy();
          resolve();
        }, reject);
    });
    // The server removes its temp file when it sees the cut: wait for that, then check the rest.
    await vi.waitFor(() => expect(readdirSync(uploadTmpDir())).toEqual([]), {
      timeout: 10_000,
      interval: 20,
    });
    expect(await t.store.head(storagePath)).toBeNull();
    await filesApi(t.app).sync();
    const names = (await filesApi(t.app).list()).json().data.files.map((f: { name: string }) => f.name);
    expect(names).not.toContain('cut.bin');
  });

  it('refuses a PUT whose path clashes with an existing object used as a folder with 400', async () => {
    const first = await requestUploadUrl('clash', 1);
    expect((await put(first.uploadUrl, 'x')).statusCode).toBe(200);
    // Not yet synced, so the upload-URL check cannot see it; the PUT itself refuses.
    const res = await filesApi(t.app).requestUpload({
      filename: 'inner.txt',
      contentType: 'text/plain',
      sizeBytes: 1,
      folder: 'clash',
    });
    expect(res.statusCode).toBe(200);
    const clash = await put(res.json().data.uploadUrl, 'y');
    expect(clash.statusCode).toBe(400);
    expect(clash.json().code).toBe('bad_request');
  });

  it('refuses a body shorter than declared with 400, storing nothing', async () => {
    const { uploadUrl, storagePath } = await requestUploadUrl('short.txt', 50);
    expect((await put(uploadUrl, 'hello')).statusCode).toBe(400);
    const streamed = await chunkedPut(
      uploadUrl.replace(/^http:\/\/[^/]+/, origin),
      [Buffer.from('hello')],
      'text/plain',
    );
    expect(streamed.status).toBe(400);
    expect(await t.store.head(storagePath)).toBeNull();
  });

  it('refuses a tampered signature, size, type or expiry with 403 invalid_signature', async () => {
    const { uploadUrl, storagePath } = await requestUploadUrl('tampered.txt', 5);
    const url = new URL(uploadUrl);
    const variants: Array<[string, string]> = [
      ['signature', flipFirst(url.searchParams.get('signature')!)],
      ['size', '6'],
      ['contentType', 'text/html'],
      ['expires', String(Number(url.searchParams.get('expires')) + 3600)],
    ];
    for (const [param, value] of variants) {
      const tampered = new URL(uploadUrl);
      tampered.searchParams.set(param, value);
      const res = await put(
        tampered.toString(),
        param === 'size' ? 'hello!' : 'hello',
        param === 'contentType' ? 'text/html' : 'text/plain',
      );
      expect(res.statusCode, param).toBe(403);
      expect(res.json().code, param).toBe('invalid_signature');
    }
    const unsigned = new URL(uploadUrl);
    unsigned.searchParams.delete('signature');
    expect((await put(unsigned.toString(), 'hello')).json().code).toBe('invalid_signature');
    // A signed field given a second time: added to, so tampered too (not a malformed query).
    for (const param of ['signature', 'size', 'contentType', 'expires']) {
      const repeated = new URL(uploadUrl);
      repeated.searchParams.append(param, 'x');
      const res = await put(repeated.toString(), 'hello');
      expect(res.statusCode, param).toBe(403);
      expect(res.json().code, param).toBe('invalid_signature');
    }
    expect(await t.store.head(storagePath)).toBeNull();
  });

  it('refuses a signed URL with a query parameter it was not signed with, as S3 does (403 invalid_signature)', async () => {
    const { uploadUrl, storagePath } = await requestUploadUrl('added.txt', 5);
    // Before, an added parameter was ignored and the upload stored: docs/files.md says an
    // edited query is refused, and an S3 presigned URL signs its whole query.
    for (const [name, value] of [
      ['foo', '1'],
      ['x', ''],
      ['', 'y'],
      ['contenttype', 'text/html'],
    ]) {
      const added = new URL(uploadUrl);
      added.searchParams.append(name!, value!);
      const res = await put(added.toString(), 'hello');
      expect(res.statusCode, name).toBe(403);
      expect(res.json().code, name).toBe('invalid_signature');
    }
    expect(await t.store.head(storagePath)).toBeNull();

    expect((await put(uploadUrl, 'hello')).statusCode).toBe(200);
    const downloadUrl = await syncedDownloadUrl('added.txt');
    const added = new URL(downloadUrl);
    added.searchParams.append('cache', 'bust');
    const res = await t.app.inject({ method: 'GET', url: injectable(added.toString()) });
    expect(res.statusCode).toBe(403);
    expect(res.json().code).toBe('invalid_signature');
    expect((await t.app.inject({ method: 'GET', url: injectable(downloadUrl) })).statusCode).toBe(200);
  });

  it('refuses an upload URL used for another path with 403 invalid_signature', async () => {
    const { uploadUrl } = await requestUploadUrl('mine.txt', 5);
    const url = new URL(uploadUrl);
    for (const path of [
      `/storage/objects/${PREFIX}other.txt`,
      '/storage/objects/projects/wsp_other/prj_other/mine.txt',
      `/storage/objects/${PREFIX}docs/mine.txt`,
      // A path no store could hold is still a tampered URL first (403, not 400).
      `/storage/objects/${PREFIX}a//mine.txt`,
    ]) {
      const res = await t.app.inject({
        method: 'PUT',
        url: `${path}${url.search}`,
        headers: { 'content-type': 'text/plain' },
        payload: 'hello',
      });
      expect(res.statusCode, path).toBe(403);
      expect(res.json().code).toBe('invalid_signature');
    }
    expect(await t.store.head('projects/wsp_other/prj_other/mine.txt')).toBeNull();
  });

  it('refuses a path no store can hold with 400, even under a valid signature (never a 500)', async () => {
    // Only the signing secret makes such a URL: Atrium signs none. Once: 500 from the store.
    const expiresAt = Math.floor(now.getTime() / 1000) + 60;
    for (const key of [
      `${PREFIX}a//b.txt`,
      '/abs.txt',
      `${PREFIX}${'é'.repeat(200)}.txt`,
      `${PREFIX}${'x/'.repeat(3000)}f`,
    ]) {
      for (const method of ['PUT', 'GET'] as const) {
        const url = createSignedUrl('http://h', t.env.config.signingSecret, {
          method,
          key,
          contentType: 'text/plain',
          ...(method === 'PUT' ? { sizeBytes: 5 } : { etag: 'x', filename: 'f.txt' }),
          expiresAt,
        });
        const res = await t.app.inject({
          method,
          url: injectable(url),
          headers: { 'content-type': 'text/plain' },
          ...(method === 'PUT' ? { payload: 'hello' } : {}),
        });
        expect(res.statusCode, `${method} ${key.slice(0, 40)}`).toBe(400);
        expect(res.json().code).toBe('bad_request');
      }
    }
  });

  it('refuses an upload URL after its 15 minutes with 403 url_expired, and accepts it just before', async () => {
    const { uploadUrl, storagePath } = await requestUploadUrl('late.txt', 5);
    now = new Date(now.getTime() + 15 * 60 * 1000);
    const late = await put(uploadUrl, 'hello');
    expect(late.statusCode).toBe(403);
    expect(late.json().code).toBe('url_expired');
    expect(await t.store.head(storagePath)).toBeNull();
    now = new Date(now.getTime() - 1000);
    expect((await put(uploadUrl, 'hello')).statusCode).toBe(200);
  });

  it('answers an upload URL sent for a download, or the reverse, with 405 and the method it is for while valid, 403 url_expired after', async () => {
    const { uploadUrl, storagePath } = await requestUploadUrl('methods.txt', 5);
    // Before: 403 invalid_signature, as if the URL had been tampered with.
    for (const method of ['GET', 'HEAD'] as const) {
      const res = await t.app.inject({ method, url: injectable(uploadUrl) });
      expect(res.statusCode, method).toBe(405);
      expect(res.headers.allow, method).toBe('PUT');
      if (method === 'GET') {
        expect(res.json()).toEqual({
          code: 'method_not_allowed',
          message: 'This signed URL is for an upload: send the file with PUT',
          details: { allow: ['PUT'] },
        });
      }
    }
    expect(await t.store.head(storagePath)).toBeNull();
    expect((await put(uploadUrl, 'hello')).statusCode).toBe(200);
    const downloadUrl = await syncedDownloadUrl('methods.txt');
    const wrong = await put(downloadUrl, 'HELLO');
    expect(wrong.statusCode).toBe(405);
    expect(wrong.headers.allow).toBe('GET, HEAD');
    expect(wrong.json()).toEqual({
      code: 'method_not_allowed',
      message: 'This signed URL is for a download: fetch it with GET',
      details: { allow: ['GET', 'HEAD'] },
    });
    expect((await t.app.inject({ method: 'GET', url: injectable(downloadUrl) })).body).toBe('hello');

    // Past its expiry, the right method would not help either: 403 url_expired, the same answer
    // as with the right method (before: 405, then 403 on the retry).
    now = new Date(now.getTime() + 5 * 60 * 60 * 1000);
    const expiredCases = [
      [
        uploadUrl,
        await t.app.inject({ method: 'GET', url: injectable(uploadUrl) }),
        await put(uploadUrl, 'hello'),
      ],
      [
        downloadUrl,
        await put(downloadUrl, 'HELLO'),
        await t.app.inject({ method: 'GET', url: injectable(downloadUrl) }),
      ],
    ] as const;
    for (const [url, wrongMethod, rightMethod] of expiredCases) {
      expect(wrongMethod.statusCode, url).toBe(403);
      expect(wrongMethod.headers.allow, url).toBeUndefined();
      expect(rightMethod.statusCode, url).toBe(403);
      expect(wrongMethod.json(), url).toEqual(rightMethod.json());
      expect(wrongMethod.json().code, url).toBe('url_expired');
    }
    const expiredHead = await t.app.inject({ method: 'HEAD', url: injectable(uploadUrl) });
    expect(expiredHead.statusCode).toBe(403);
    expect(expiredHead.headers.allow).toBeUndefined();
    now = new Date('2026-11-22T10:00:00.000Z');

    // A URL tampered with is tampered with, whatever the method: no signature matches either.
    for (const [method, url] of [
      ['GET', uploadUrl],
      ['PUT', downloadUrl],
    ] as const) {
      const tampered = new URL(url);
      tampered.searchParams.set('signature', flipFirst(tampered.searchParams.get('signature')!));
      const res =
        method === 'PUT'
          ? await put(tampered.toString(), 'HELLO')
          : await t.app.inject({ method, url: injectable(tampered.toString()) });
      expect(res.statusCode, method).toBe(403);
      expect(res.json().code, method).toBe('invalid_signature');
    }
  });

  it('serves downloads with type, length, disposition and ranges, until the URL expires after 4 hours', async () => {
    const { uploadUrl } = await requestUploadUrl('range.txt', 10);
    expect((await put(uploadUrl, '0123456789')).statusCode).toBe(200);
    const downloadUrl = await syncedDownloadUrl('range.txt');
    const get = (range?: string) =>
      t.app.inject({ method: 'GET', url: injectable(downloadUrl), headers: range ? { range } : {} });

    const whole = await get();
    expect(whole.statusCode).toBe(200);
    expect(whole.headers['content-type']).toBe('text/plain');
    expect(whole.headers['content-length']).toBe('10');
    expect(whole.headers['accept-ranges']).toBe('bytes');
    expect(whole.headers['content-security-policy']).toContain('sandbox');
    expect(whole.headers['content-disposition']).toBe(
      `attachment; filename="range.txt"; filename*=UTF-8''range.txt`,
    );
    expect(whole.body).toBe('0123456789');

    const cases: Array<[string, number, string, string | undefined]> = [
      ['bytes=0-3', 206, '0123', 'bytes 0-3/10'],
      ['bytes=7-', 206, '789', 'bytes 7-9/10'],
      ['bytes=-2', 206, '89', 'bytes 8-9/10'],
      ['bytes=5-100', 206, '56789', 'bytes 5-9/10'],
      ['bytes=20-30', 200, '0123456789', undefined],
      ['bytes=0-1,4-5', 200, '0123456789', undefined],
      ['lines=1-2', 200, '0123456789', undefined],
    ];
    for (const [range, status, body, contentRange] of cases) {
      const res = await get(range);
      expect(res.statusCode, range).toBe(status);
      expect(res.body, range).toBe(body);
      expect(res.headers['content-length'], range).toBe(String(body.length));
      expect(res.headers['content-range'], range).toBe(contentRange);
    }

    const head = await t.app.inject({ method: 'HEAD', url: injectable(downloadUrl) });
    expect(head.statusCode).toBe(200);
    expect(head.headers['content-length']).toBe('10');
    expect(head.body).toBe('');
    const headRange = await t.app.inject({
      method: 'HEAD',
      url: injectable(downloadUrl),
      headers: { range: 'bytes=0-3' },
    });
    expect(headRange.statusCode).toBe(206);
    expect(headRange.headers['content-length']).toBe('4');

    // If-Range (RFC 9110 13.1.5): the range only for the version the client names; another
    // version's validator (a resumed download of a replaced file) or a date gets the whole object.
    const ifRange = (validator: string) =>
      t.app.inject({
        method: 'GET',
        url: injectable(downloadUrl),
        headers: { range: 'bytes=6-', 'if-range': validator },
      });
    const same = await ifRange(whole.headers.etag as string);
    expect([same.statusCode, same.body]).toEqual([206, '6789']);
    for (const validator of ['"another-version"', 'Sun, 22 Nov 2026 10:00:00 GMT']) {
      const other = await ifRange(validator);
      expect([other.statusCode, other.body], validator).toEqual([200, '0123456789']);
    }

    now = new Date(now.getTime() + 4 * 60 * 60 * 1000 - 1000);
    expect((await get()).statusCode).toBe(200);
    now = new Date(now.getTime() + 1000);
    const expired = await get();
    expect(expired.statusCode).toBe(403);
    expect(expired.json().code).toBe('url_expired');
  });

  it('evaluates If-None-Match, If-Modified-Since, If-Match and If-Unmodified-Since on downloads (RFC 9110 13.2.2)', async () => {
    const { uploadUrl } = await requestUploadUrl('cached.txt', 5);
    expect((await put(uploadUrl, 'bytes')).statusCode).toBe(200);
    const downloadUrl = await syncedDownloadUrl('cached.txt');
    const get = (headers: Record<string, string | undefined>, method: 'GET' | 'HEAD' = 'GET') =>
      t.app.inject({ method, url: injectable(downloadUrl), headers });
    const whole = await get({});
    const etag = whole.headers.etag as string;
    const lastModified = whole.headers['last-modified'] as string;
    const before = new Date(Date.parse(lastModified) - 60_000).toUTCString();
    const after = new Date(Date.parse(lastModified) + 60_000).toUTCString();

    // A cache revalidating its copy: 304, no body, the validators again.
    for (const headers of [
      { 'if-none-match': etag },
      { 'if-none-match': `"other", W/${etag}` },
      { 'if-none-match': '*' },
      { 'if-modified-since': lastModified },
      { 'if-modified-since': after },
    ]) {
      for (const method of ['GET', 'HEAD'] as const) {
        const res = await get(headers, method);
        expect(res.statusCode, `${method} ${JSON.stringify(headers)}`).toBe(304);
        expect(res.body).toBe('');
        expect(res.headers.etag).toBe(etag);
        expect(res.headers['cache-control']).toBe('private, max-age=0');
      }
    }
    // A stale copy, an unparsable date, or If-None-Match (which outranks a date) naming another
    // version: the whole object.
    for (const headers of [
      { 'if-none-match': '"other"' },
      { 'if-modified-since': before },
      { 'if-modified-since': 'yesterday' },
      { 'if-none-match': '"other"', 'if-modified-since': after },
    ]) {
      const res = await get(headers);
      expect([res.statusCode, res.body], JSON.stringify(headers)).toEqual([200, 'bytes']);
    }

    // Preconditions a client sets to act only on the version it knows.
    for (const headers of [{ 'if-match': etag }, { 'if-match': '*' }, { 'if-unmodified-since': after }]) {
      const res = await get({ ...headers, range: 'bytes=1-2' });
      expect([res.statusCode, res.body], JSON.stringify(headers)).toEqual([206, 'yt']);
    }
    for (const headers of [
      { 'if-match': '"other"' },
      // If-Match compares strongly: a weak tag never matches.
      { 'if-match': `W/${etag}` },
      { 'if-unmodified-since': before },
    ]) {
      const res = await get(headers);
      expect(res.statusCode, JSON.stringify(headers)).toBe(412);
      expect(res.json()).toMatchObject({
        code: 'precondition_failed',
        details: { etag: etag.replaceAll('"', '') },
      });
    }
  });

  it('evaluates If-None-Match and If-Match on a PUT: create only, or replace only the version the client knows (RFC 9110 13.2)', async () => {
    const { uploadUrl } = await requestUploadUrl('guarded.txt', 5);
    const conditionalPut = (body: string, headers: Record<string, string>) =>
      t.app.inject({
        method: 'PUT',
        url: injectable(uploadUrl),
        headers: { 'content-type': 'text/plain', ...headers },
        payload: body,
      });
    const stored = async () => (await get(await syncedDownloadUrl('guarded.txt'))).body;
    const get = (url: string) => t.app.inject({ method: 'GET', url: injectable(url) });
    const refused = (res: Awaited<ReturnType<typeof conditionalPut>>, etag: string | null) => {
      expect(res.statusCode, res.body).toBe(412);
      expect(res.json()).toMatchObject({ code: 'precondition_failed', details: { etag } });
    };

    // Nothing at the path: If-Match (even `*`) fails, If-None-Match: * creates.
    refused(await conditionalPut('first', { 'if-match': '*' }), null);
    refused(await conditionalPut('first', { 'if-match': '"some-version"' }), null);
    const created = await conditionalPut('first', { 'if-none-match': '*' });
    expect(created.statusCode, created.body).toBe(200);
    const etag = created.headers.etag as string;
    const bare = etag.replaceAll('"', '');

    // Now it exists: create-only fails, and so does If-None-Match naming its version.
    refused(await conditionalPut('again', { 'if-none-match': '*' }), bare);
    refused(await conditionalPut('again', { 'if-none-match': `W/${etag}` }), bare);
    refused(await conditionalPut('again', { 'if-match': '"another-version"' }), bare);
    refused(await conditionalPut('again', { 'if-match': `W/${etag}` }), bare);
    const lastModified = new Date(
      Date.parse((await get(await syncedDownloadUrl('guarded.txt'))).headers['last-modified'] as string),
    );
    refused(
      await conditionalPut('again', {
        'if-unmodified-since': new Date(lastModified.getTime() - 60_000).toUTCString(),
      }),
      bare,
    );
    expect(await stored()).toBe('first');

    // The version the client knows: replaced, and the old tag no longer holds.
    const replaced = await conditionalPut('third', { 'if-match': `"other", ${etag}` });
    expect(replaced.statusCode, replaced.body).toBe(200);
    expect(await stored()).toBe('third');
    refused(
      await conditionalPut('stale', { 'if-match': etag }),
      (replaced.headers.etag as string).replaceAll('"', ''),
    );
    expect(await stored()).toBe('third');
    expect(readdirSync(uploadTmpDir()).filter((name) => name.endsWith('.data'))).toEqual([]);
  });

  it('lets one of several conditional PUTs racing for one path or one version store its bytes', async () => {
    const { uploadUrl } = await requestUploadUrl('raced.txt', 5);
    const race = (headers: Record<string, string>) =>
      new Promise<{ status: number; etag?: string }>((resolve, reject) => {
        const request = http.request(uploadUrl.replace(/^http:\/\/[^/]+/, origin), {
          method: 'PUT',
          headers: { 'content-type': 'text/plain', 'content-length': '5', ...headers },
        });
        request.on('response', (response) => {
          response.resume();
          resolve({ status: response.statusCode!, etag: response.headers.etag });
        });
        request.on('error', reject);
        request.end('abcde');
      });
    const statuses = (outcomes: Array<{ status: number }>) => outcomes.map((o) => o.status).sort();
    const creates = await Promise.all([1, 2, 3].map(() => race({ 'if-none-match': '*' })));
    expect(statuses(creates)).toEqual([200, 412, 412]);
    // Two replacements of the version both know: the second finds the first's, not its own.
    const etag = creates.find((o) => o.status === 200)!.etag!;
    expect(statuses(await Promise.all([race({ 'if-match': etag }), race({ 'if-match': etag })]))).toEqual([
      200, 412,
    ]);
  });

  it('refuses a create-only PUT where a folder of objects is with the same 400 as without the condition', async () => {
    const inner = await filesApi(t.app).requestUpload({
      filename: 'inner.txt',
      contentType: 'text/plain',
      sizeBytes: 1,
      folder: 'folder',
    });
    expect((await put(inner.json().data.uploadUrl, 'y')).statusCode).toBe(200);
    const { uploadUrl } = await requestUploadUrl('folder', 1);
    const res = await t.app.inject({
      method: 'PUT',
      url: injectable(uploadUrl),
      headers: { 'content-type': 'text/plain', 'if-none-match': '*' },
      payload: 'x',
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().code).toBe('bad_request');
  });

  it('refuses a download URL with a tampered filename or type', async () => {
    const { uploadUrl } = await requestUploadUrl('dl.txt', 2);
    await put(uploadUrl, 'hi');
    const downloadUrl = await syncedDownloadUrl('dl.txt');
    for (const [param, value] of [
      ['filename', 'evil.html'],
      ['contentType', 'text/html'],
    ]) {
      const tampered = new URL(downloadUrl);
      tampered.searchParams.set(param!, value!);
      const res = await t.app.inject({ method: 'GET', url: injectable(tampered.toString()) });
      expect(res.statusCode).toBe(403);
      expect(res.json().code).toBe('invalid_signature');
    }
  });

  it('binds a download URL to the file version: after delete and re-upload at the same path it answers 404', async () => {
    const fileNamed = async (name: string) =>
      (await filesApi(t.app).list()).json().data.files.find((f: { name: string }) => f.name === name);
    const first = await requestUploadUrl('versioned.txt', 5);
    expect((await put(first.uploadUrl, 'first')).statusCode).toBe(200);
    await filesApi(t.app).sync();
    const original = await fileNamed('versioned.txt');
    const { downloadUrl: oldUrl } = (await filesApi(t.app).download(original.id)).json().data;
    expect(new URL(oldUrl).searchParams.get('version')).toBeTruthy();
    expect((await t.app.inject({ method: 'GET', url: injectable(oldUrl) })).body).toBe('first');

    expect((await filesApi(t.app).remove(original.id)).statusCode).toBe(200);
    const second = await requestUploadUrl('versioned.txt', 5);
    expect((await put(second.uploadUrl, 'again')).statusCode).toBe(200);
    await filesApi(t.app).sync();

    for (const method of ['GET', 'HEAD'] as const) {
      const stale = await t.app.inject({ method, url: injectable(oldUrl) });
      expect(stale.statusCode, method).toBe(404);
      if (method === 'GET') {
        expect(stale.json()).toMatchObject({ code: 'not_found', details: { reason: 'version_changed' } });
        expect(stale.body).not.toContain('again');
      }
    }
    const current = await fileNamed('versioned.txt');
    const { downloadUrl: newUrl } = (await filesApi(t.app).download(current.id)).json().data;
    expect((await t.app.inject({ method: 'GET', url: injectable(newUrl) })).body).toBe('again');
  });

  it('stops serving a download URL once the file is replaced in place, and refuses a tampered version', async () => {
    const { uploadUrl } = await requestUploadUrl('replaced.txt', 3);
    expect((await put(uploadUrl, 'one')).statusCode).toBe(200);
    const downloadUrl = await syncedDownloadUrl('replaced.txt');

    const tampered = new URL(downloadUrl);
    tampered.searchParams.set('version', 'another');
    expect((await t.app.inject({ method: 'GET', url: injectable(tampered.toString()) })).json().code).toBe(
      'invalid_signature',
    );

    // Upload URLs stay reusable within their 15 minutes, as S3's are: the same URL replaces the file.
    expect((await put(uploadUrl, 'two')).statusCode).toBe(200);
    const stale = await t.app.inject({ method: 'GET', url: injectable(downloadUrl) });
    expect(stale.statusCode).toBe(404);
    expect(stale.body).not.toContain('two');
  });
});
