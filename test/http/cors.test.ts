import { readdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { filesApi, injectable } from '../project-files/helpers.js';
import { createTestApp } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

const ALLOWED = 'http://app.example.test';
const REFUSED = 'http://evil.example.test';

let t: Awaited<ReturnType<typeof createTestApp>>;
beforeAll(async () => {
  t = await createTestApp({
    setup: TENANCY_SETUP,
    env: { ATRIUM_CORS_ORIGINS: `${ALLOWED}, http://other.test` },
  });
});
afterAll(() => t.close());

function preflight(url: string, origin: string, method: string, headers: string) {
  return t.app.inject({
    method: 'OPTIONS',
    url,
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': headers },
  });
}

describe('CORS by ATRIUM_CORS_ORIGINS', () => {
  it('answers the preflight of a /v1 route for an allowed origin, with the key header allowed', async () => {
    const res = await preflight('/v1/chats', ALLOWED, 'GET', 'x-service-api-key');
    expect(res.statusCode).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(ALLOWED);
    expect(String(res.headers['access-control-allow-headers'])).toContain('x-service-api-key');
    const post = await preflight('/v1/chat', ALLOWED, 'POST', 'content-type,x-service-api-key');
    expect(post.headers['access-control-allow-methods']).toContain('POST');
  });

  it('gives a refused origin no CORS headers', async () => {
    const res = await preflight('/v1/chats', REFUSED, 'GET', 'x-service-api-key');
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    const get = await t.app.inject({
      method: 'GET',
      url: '/v1/chats',
      headers: { origin: REFUSED, 'x-service-api-key': KEYS.mainOwner },
    });
    expect(get.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('exposes the chat id, request id and limit headers on real responses', async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: '/v1/chats',
      headers: { origin: ALLOWED, 'x-service-api-key': KEYS.mainOwner },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe(ALLOWED);
    const exposed = String(res.headers['access-control-expose-headers']);
    for (const name of ['x-chat-id', 'x-request-id', 'retry-after']) expect(exposed).toContain(name);
  });

  it('answers the preflight of a signed upload PUT (with content-type) for allowed origins only', async () => {
    const upload = await filesApi(t.app).requestUpload({
      filename: 'c.txt',
      contentType: 'text/plain',
      sizeBytes: 2,
    });
    const url = injectable(upload.json().data.uploadUrl);
    const ok = await preflight(url, ALLOWED, 'PUT', 'content-type');
    expect(ok.statusCode).toBe(204);
    expect(ok.headers['access-control-allow-origin']).toBe(ALLOWED);
    expect(String(ok.headers['access-control-allow-headers'])).toContain('content-type');
    const refused = await preflight(url, REFUSED, 'PUT', 'content-type');
    expect(refused.headers['access-control-allow-origin']).toBeUndefined();
    const put = await t.app.inject({
      method: 'PUT',
      url,
      headers: { origin: ALLOWED, 'content-type': 'text/plain' },
      payload: 'hi',
    });
    expect(put.statusCode).toBe(200);
    expect(put.headers['access-control-allow-origin']).toBe(ALLOWED);
  });

  it('lets a browser app condition and read a signed download: Range and the If-* headers allowed, ETag, Content-Range, Content-Disposition exposed', async () => {
    const files = filesApi(t.app);
    const upload = await files.requestUpload({ filename: 'd.txt', contentType: 'text/plain', sizeBytes: 5 });
    await t.app.inject({
      method: 'PUT',
      url: injectable(upload.json().data.uploadUrl),
      headers: { 'content-type': 'text/plain' },
      payload: 'hello',
    });
    await files.sync();
    const file = (await files.list()).json().data.files.find((f: { name: string }) => f.name === 'd.txt');
    const url = injectable((await files.download(file.id)).json().data.downloadUrl);
    // A suffix range (`bytes=-2`) is not a CORS-safelisted Range, and no If-* header is: each
    // makes the browser ask first. Before, the preflight allowed none of them.
    const conditional = 'range if-range if-match if-none-match if-modified-since if-unmodified-since'.split(
      ' ',
    );
    const ok = await preflight(url, ALLOWED, 'GET', conditional.join(','));
    expect(ok.headers['access-control-allow-origin']).toBe(ALLOWED);
    const allowed = String(ok.headers['access-control-allow-headers'])
      .split(',')
      .map((name) => name.trim());
    expect(conditional.filter((name) => !allowed.includes(name))).toEqual([]);
    const part = await t.app.inject({ method: 'GET', url, headers: { origin: ALLOWED, range: 'bytes=-2' } });
    expect(part.statusCode).toBe(206);
    expect(part.headers['content-range']).toBe('bytes 3-4/5');
    // Not CORS-safelisted response headers: unreadable by the page unless exposed.
    const exposed = String(part.headers['access-control-expose-headers'])
      .split(',')
      .map((name) => name.trim());
    const read = ['etag', 'content-range', 'content-disposition', 'accept-ranges'];
    expect(read.filter((name) => !exposed.includes(name))).toEqual([]);
  });

  it('keeps 404 and 405 error bodies for plain requests', async () => {
    expect(
      (
        await t.app.inject({
          method: 'GET',
          url: '/v1/nope',
          headers: { 'x-service-api-key': KEYS.mainOwner },
        })
      ).statusCode,
    ).toBe(404);
    const wrong = await t.app.inject({
      method: 'PUT',
      url: '/v1/chats',
      headers: { 'x-service-api-key': KEYS.mainOwner },
    });
    expect(wrong.statusCode).toBe(405);
    expect(wrong.json().code).toBe('method_not_allowed');
  });

  it('allows every header the installed openai SDK can send, its helpers’ (`x-stainless-helper-method`) too', async () => {
    // Read from the SDK's own source, so that an upgrade adding a header fails here, not in a
    // browser app's preflight.
    const sdk = path.dirname(createRequire(import.meta.url).resolve('openai'));
    const sent = new Set<string>();
    for (const file of await readdir(sdk, { recursive: true })) {
      if (!file.endsWith('.js')) continue;
      const source = await readFile(path.join(sdk, file), 'utf8');
      for (const [, name] of source.matchAll(/['"]((?:x-stainless|openai)-[a-z-]+)['"]\s*:/gi)) {
        sent.add(name!.toLowerCase());
      }
    }
    expect(sent).toContain('x-stainless-helper-method');
    const res = await preflight(
      '/v1/openai/chat/completions',
      ALLOWED,
      'POST',
      ['authorization', 'content-type', ...sent].join(','),
    );
    const allowed = String(res.headers['access-control-allow-headers'])
      .split(',')
      .map((name) => name.trim().toLowerCase());
    // Before, `chat.completions.stream()`, `runTools()` and `parse()` failed their preflight.
    expect([...sent].filter((name) => !allowed.includes(name))).toEqual([]);
  });
});

describe('origins in ATRIUM_CORS_ORIGINS', () => {
  it('match what a browser sends in Origin whatever their case, default port or trailing slash', async () => {
    // A browser sends the serialized origin: lower-case scheme and host, no default port, no
    // path. Before, an origin written otherwise was compared as written and never matched.
    const app = await createTestApp({
      setup: TENANCY_SETUP,
      env: {
        ATRIUM_CORS_ORIGINS: 'https://App.Example.test:443/,http://LOCALHOST:5173,capacitor://LocalHost',
      },
    });
    try {
      for (const origin of ['https://app.example.test', 'http://localhost:5173', 'capacitor://localhost']) {
        const res = await app.app.inject({
          method: 'OPTIONS',
          url: '/v1/chats',
          headers: { origin, 'access-control-request-method': 'GET' },
        });
        expect(res.headers['access-control-allow-origin'], origin).toBe(origin);
      }
    } finally {
      await app.close();
    }
  });
});

describe('without ATRIUM_CORS_ORIGINS', () => {
  it('allows no cross-origin access', async () => {
    const plain = await createTestApp({ setup: TENANCY_SETUP });
    try {
      const res = await plain.app.inject({
        method: 'OPTIONS',
        url: '/v1/chats',
        headers: { origin: ALLOWED, 'access-control-request-method': 'GET' },
      });
      expect(res.headers['access-control-allow-origin']).toBeUndefined();
    } finally {
      await plain.close();
    }
  });
});
