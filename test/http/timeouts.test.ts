import { existsSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer } from '../../src/server.js';
import { applyFixture, createTestEnv, engineName, type TestEnv } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { RawClient } from '../helpers/raw-http.js';
import { multipartBody } from '../skills/zip-builder.js';

// Short figures so that the cuts happen within a test; the rules are those of the defaults.
const BODY_TIMEOUT_MS = 1000;
const MIN_BYTES_PER_SECOND = 20_000;
const HEADERS_TIMEOUT_MS = 500;

let env: TestEnv;
let server: Awaited<ReturnType<typeof startServer>>;
let port: number;
beforeAll(async () => {
  env = await createTestEnv({
    HOST: '127.0.0.1',
    PORT: '0',
    ATRIUM_BODY_TIMEOUT_MS: String(BODY_TIMEOUT_MS),
    ATRIUM_BODY_MIN_BYTES_PER_SECOND: String(MIN_BYTES_PER_SECOND),
    ATRIUM_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
    LOG_LEVEL: process.env.DEBUG_LOG ? 'debug' : 'silent',
  });
  await applyFixture(env, TENANCY_SETUP);
  server = await startServer(env.config);
  port = Number(new URL(server.address).port);
});
afterAll(async () => {
  await server?.close();
  await env.close();
});

async function uploadUrl(filename: string, sizeBytes: number): Promise<URL> {
  const res = await fetch(`${server.address}/v1/projects/prj_docs/files/upload`, {
    method: 'POST',
    headers: { 'x-service-api-key': KEYS.mainOwner, 'content-type': 'application/json' },
    body: JSON.stringify({ filename, contentType: 'application/octet-stream', sizeBytes }),
  });
  expect(res.status).toBe(200);
  return new URL(((await res.json()) as { data: { uploadUrl: string } }).data.uploadUrl);
}

const storedObject = (name: string) =>
  path.join(env.dataDir, 'objects', 'data', 'projects', 'wsp_main', 'prj_docs', name);

/** A body the client would need `size / 20` seconds to send at one byte per 50 ms. */
function trickleBody(client: RawClient, size: number) {
  return client.trickle(Buffer.alloc(size, 'a'), 1, 50);
}

describe(`request timeouts (${engineName})`, () => {
  // An unknown route answers 404 before reading a body (test/http/refused-body.test.ts).
  it('cuts a slow JSON body with 408 request_timeout in the error body', async () => {
    const client = new RawClient(port);
    const size = 10_000;
    client.send(
      `POST /v1/projects HTTP/1.1\r\nHost: x\r\nx-service-api-key: ${KEYS.mainOwner}\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`,
    );
    const sent = await trickleBody(client, size);
    const response = await client.closed;
    expect(sent).toBeLessThan(size);
    expect(response.status).toBe(408);
    expect(response.headers.connection).toBe('close');
    expect(JSON.parse(response.body)).toMatchObject({
      code: 'request_timeout',
      message: expect.any(String),
      details: { bodyTimeoutMs: BODY_TIMEOUT_MS, minBytesPerSecond: MIN_BYTES_PER_SECOND },
    });
  });

  it('cuts a slow signed upload PUT with 408 and stores nothing', async () => {
    const size = 10_000;
    const url = await uploadUrl('slow.bin', size);
    const client = new RawClient(port);
    client.send(
      `PUT ${url.pathname}${url.search} HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: ${size}\r\n\r\n`,
    );
    const sent = await trickleBody(client, size);
    const response = await client.closed;
    expect(sent).toBeLessThan(size);
    expect(response.status).toBe(408);
    expect(JSON.parse(response.body).code).toBe('request_timeout');
    expect(existsSync(storedObject('slow.bin'))).toBe(false);
  });

  it('cuts a slow skills multipart upload with 408', async () => {
    const { body, contentType } = multipartBody([
      { name: 'files', filename: 'a.md', contentType: 'text/markdown', content: 'x'.repeat(10_000) },
    ]);
    const client = new RawClient(port);
    client.send(
      `POST /v1/workspace/wsp_main/skills/bulk-upload HTTP/1.1\r\nHost: x\r\nx-service-api-key: ${KEYS.mainOwner}\r\nContent-Type: ${contentType}\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    const sent = await client.trickle(body, 1, 50);
    const response = await client.closed;
    expect(sent).toBeLessThan(body.length);
    expect(response.status).toBe(408);
    expect(JSON.parse(response.body).code).toBe('request_timeout');
  });

  // OpenAI clients read the document to know what a route answers: the 408 is one of its errors.
  it('cuts a slow chat completion body with 408 in OpenAI’s shape, as the document declares', async () => {
    const client = new RawClient(port);
    const size = 10_000;
    client.send(
      `POST /v1/openai/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEYS.mainOwner}\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`,
    );
    const sent = await trickleBody(client, size);
    const response = await client.closed;
    expect(sent).toBeLessThan(size);
    expect(response.status).toBe(408);
    expect(JSON.parse(response.body)).toMatchObject({ error: { code: 'request_timeout' } });
    const doc = (await (await fetch(`${server.address}/v1/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { responses: Record<string, { content?: unknown }> }>>;
    };
    expect(doc.paths['/v1/openai/chat/completions']!.post!.responses['408']?.content).toEqual({
      'application/json': { schema: { $ref: '#/components/schemas/OpenAIError' } },
    });
  });

  it('closes a connection whose headers trickle in, answering 408 in the error body', async () => {
    const client = new RawClient(port);
    const head = `GET /healthz HTTP/1.1\r\nHost: x\r\nx-padding: ${'p'.repeat(400)}\r\n\r\n`;
    const sent = await client.trickle(head, 1, 50);
    const response = await client.closed;
    // Sending every header would have taken 20 s; the server closed long before.
    expect(sent).toBeLessThan(head.length);
    expect(response.status).toBe(408);
    expect(JSON.parse(response.body)).toMatchObject({
      code: 'request_timeout',
      details: { headersTimeoutMs: HEADERS_TIMEOUT_MS },
    });
  });

  it('closes a connection that sends nothing at all', async () => {
    const client = new RawClient(port);
    const response = await client.closed;
    expect(response.status).toBe(408);
  });

  it('lets an honest slow upload finish: steady above the minimum rate, longer than the base timeout', async () => {
    const chunk = 4096;
    const chunks = 25;
    const size = chunk * chunks;
    const url = await uploadUrl('steady.bin', size);
    const client = new RawClient(port);
    client.send(
      `PUT ${url.pathname}${url.search} HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: ${size}\r\nConnection: close\r\n\r\n`,
    );
    // 25 chunks 100 ms apart: at least 2.4 s, more than twice the body timeout, at ~40 kB/s.
    const sent = await client.trickle(Buffer.alloc(size, 'b'), chunk, 100);
    const response = await client.closed;
    expect(sent).toBe(size);
    expect(response.status).toBe(200);
    expect(JSON.parse(response.body).data.sizeBytes).toBe(size);
    expect(existsSync(storedObject('steady.bin'))).toBe(true);
  });

  it('keeps an idle keep-alive connection open and reuses it for the next request', async () => {
    // fetch would open a new connection if the server had closed the idle one: ask the socket.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const get = () =>
      new Promise<{ status: number; reused: boolean }>((resolve, reject) => {
        const request = http.get(`${server.address}/healthz`, { agent }, (response) => {
          response.resume();
          response.on('end', () => resolve({ status: response.statusCode!, reused: request.reusedSocket }));
        });
        request.on('error', reject);
      });
    try {
      expect(await get()).toEqual({ status: 200, reused: false });
      await sleep(50); // idle, far below the keep-alive timeout
      expect(await get()).toEqual({ status: 200, reused: true });
    } finally {
      agent.destroy();
    }
  });
});
