import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { RawClient, rawExchange } from '../helpers/raw-http.js';

// A short body timeout, and a minimum rate so low that an accepted body's deadline would never
// cut the steady trickles below: only the refused body's own bound can.
const BODY_TIMEOUT_MS = 1000;
const MIN_BYTES_PER_SECOND = 1000;
const MiB = 1024 * 1024;

let t: Awaited<ReturnType<typeof createTestApp>>;
let port: number;
beforeAll(async () => {
  t = await createTestApp({
    setup: TENANCY_SETUP,
    env: {
      ATRIUM_BODY_TIMEOUT_MS: String(BODY_TIMEOUT_MS),
      ATRIUM_BODY_MIN_BYTES_PER_SECOND: String(MIN_BYTES_PER_SECOND),
    },
  });
  port = Number(new URL(await t.app.listen({ port: 0, host: '127.0.0.1' })).port);
});
afterAll(() => t.close());

const errorBody = (code: string) => ({ code, message: expect.any(String), details: expect.any(Object) });

/** The head of a JSON POST whose body follows (or never does). */
const head = (path: string, length: number | 'chunked', headers = '') =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${headers}${
    length === 'chunked' ? 'Transfer-Encoding: chunked' : `Content-Length: ${length}`
  }\r\n\r\n`;

describe(`refused request bodies (${engineName})`, () => {
  it('answers an unknown route 404 not_found before its body, however large it is declared', async () => {
    for (const path of ['/nowhere', '/v1/nowhere']) {
      // Only the head is sent: an answer means the server did not wait for the 20 MiB.
      const response = await rawExchange(
        port,
        head(path, 20 * MiB, `x-service-api-key: ${KEYS.mainOwner}\r\n`),
      );
      expect(response.status, path).toBe(404);
      expect(JSON.parse(response.body), path).toEqual({
        code: 'not_found',
        message: `No route POST ${path}`,
        details: {},
      });
      expect(response.headers.connection, path).toBe('close');
    }
  });

  it('answers a known path with the wrong method 405 before its body', async () => {
    const response = await rawExchange(port, head('/healthz', 20 * MiB));
    expect(response.status).toBe(405);
    expect(JSON.parse(response.body)).toMatchObject({
      ...errorBody('method_not_allowed'),
      details: { allow: ['GET', 'HEAD'] },
    });
  });

  it('answers an unknown route 404 on a chunked body past the JSON limit, without reading it', async () => {
    // One chunk of 2 MiB announced and its first bytes sent: reading it would have been a 413.
    const response = await rawExchange(
      port,
      `${head('/nowhere', 'chunked')}${(2 * MiB).toString(16)}\r\n${'a'.repeat(64 * 1024)}`,
    );
    expect(response.status).toBe(404);
    expect(JSON.parse(response.body)).toMatchObject(errorBody('not_found'));
  });

  it('answers an unknown route under /v1/openai 404 in OpenAI’s shape before its body', async () => {
    const response = await rawExchange(
      port,
      head('/v1/openai/nowhere', 20 * MiB, `Authorization: Bearer ${KEYS.mainOwner}\r\n`),
    );
    expect(response.status).toBe(404);
    expect(JSON.parse(response.body)).toMatchObject({
      error: { code: 'not_found', message: expect.any(String) },
    });
  });

  it('still answers a body over a real route’s limit 413 payload_too_large, closing the connection', async () => {
    const response = await rawExchange(
      port,
      head('/v1/projects', 2 * MiB, `x-service-api-key: ${KEYS.mainOwner}\r\n`),
    );
    expect(response.status).toBe(413);
    expect(JSON.parse(response.body)).toEqual({
      code: 'payload_too_large',
      message: expect.any(String),
      details: { maxBytes: MiB },
    });
    expect(response.headers.connection).toBe('close');
  });

  it('closes the connection of a refused body the client keeps sending, after the body timeout and not at the minimum rate', async () => {
    // 4 KiB every 50 ms is 80 times the minimum rate: as an accepted body, the 2 MiB would be
    // read for as long as the client sends. Refused, the rest is read for the body timeout at most.
    const client = new RawClient(port, { allowHalfOpen: true });
    client.send(head('/v1/projects', 2 * MiB, `x-service-api-key: ${KEYS.mainOwner}\r\n`));
    const size = 400 * 1024;
    const sent = await client.trickle(Buffer.alloc(size, 'a'), 4096, 50);
    const response = await client.closed;
    // Sending it all would have taken 5 s; the server closed after 1 s.
    expect(sent).toBeLessThan(size);
    expect(response.status).toBe(413);
    expect(response.headers.connection).toBe('close');
    expect(JSON.parse(response.body)).toMatchObject(errorBody('payload_too_large'));
  });

  it('reads the rest of a refused body a client sends whole before reading, then closes', async () => {
    // A client that writes all of it before it reads still gets the answer, not a reset; the
    // connection then closes rather than waiting for another request.
    const client = new RawClient(port);
    client.send(Buffer.concat([Buffer.from(head('/nowhere', 4 * MiB)), Buffer.alloc(4 * MiB, 'a')]));
    const response = await client.closed;
    expect(response.status).toBe(404);
    expect(response.headers.connection).toBe('close');
    expect(JSON.parse(response.body)).toMatchObject(errorBody('not_found'));
  });
});
