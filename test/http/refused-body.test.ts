import http from 'node:http';
import type { Socket } from 'node:net';
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
/** The URL of every request the app began to handle. */
const handled: string[] = [];
/** Each connection's closing on the server's side, by the client's port. */
const serverSideClosed = new Map<number, Promise<void>>();
beforeAll(async () => {
  t = await createTestApp({
    setup: TENANCY_SETUP,
    beforeRoutes: (app) => {
      app.server.on('connection', (socket: Socket) => {
        serverSideClosed.set(socket.remotePort!, new Promise((resolve) => socket.once('close', resolve)));
      });
      app.addHook('onRequest', (request, _reply, done) => {
        handled.push(request.url);
        done();
      });
    },
    env: {
      ATRIUM_BODY_TIMEOUT_MS: String(BODY_TIMEOUT_MS),
      ATRIUM_BODY_MIN_BYTES_PER_SECOND: String(MIN_BYTES_PER_SECOND),
      ATRIUM_CORS_ORIGINS: 'https://app.example',
    },
  });
  port = Number(new URL(await t.app.listen({ port: 0, host: '127.0.0.1' })).port);
});
afterAll(() => t.close());

/** Resolves once the client has received the head of an answer. */
function answered(client: RawClient): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (client.received().status === undefined) return;
      client.socket.off('data', check);
      resolve();
    };
    client.socket.on('data', check);
    check();
  });
}

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

  it('keeps the connection of a request without a body open, whatever it is answered: a 404, a 405, a CORS preflight', async () => {
    // Answered before Node had marked such a request complete, each said `Connection: close`
    // and the next request needed a new connection (a browser's preflight before every call).
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const send = (method: string, path: string, headers: Record<string, string> = {}) =>
      new Promise<{ status: number; connection: string | undefined; reused: boolean }>((resolve, reject) => {
        const request = http.request(
          `http://127.0.0.1:${port}${path}`,
          { method, agent, headers },
          (response) => {
            response.resume();
            response.on('end', () =>
              resolve({
                status: response.statusCode!,
                connection: response.headers.connection,
                reused: request.reusedSocket,
              }),
            );
          },
        );
        request.on('error', reject);
        request.end();
      });
    try {
      const preflight = { origin: 'https://app.example', 'access-control-request-method': 'POST' };
      const answers = [
        await send('GET', '/healthz'),
        await send('GET', '/nowhere'),
        await send('DELETE', '/healthz'),
        await send('OPTIONS', '/v1/projects', preflight),
        await send('OPTIONS', '/nowhere', preflight),
        await send('HEAD', '/v1/nowhere'),
        await send('GET', '/healthz'),
      ];
      expect(answers.map(({ status }) => status)).toEqual([200, 404, 405, 204, 204, 404, 200]);
      for (const [i, answer] of answers.entries()) {
        expect(answer.connection, String(i)).not.toBe('close');
        expect(answer.reused, String(i)).toBe(i > 0);
      }
    } finally {
      agent.destroy();
    }
  });

  it('takes no further request on a connection it answered with Connection: close', async () => {
    // The rest of the refused body was read through the HTTP parser, which went on to the request
    // after it: that one ran (a project was created) and its answer was lost.
    const name = 'Sent after a refused body';
    const body = JSON.stringify({ name });
    // A client that writes on after the answer, as one that writes its whole body before reading.
    const client = new RawClient(port, { allowHalfOpen: true });
    client.send(head('/v1/projects', 2 * MiB, `x-service-api-key: ${KEYS.mainOwner}\r\n`));
    await answered(client);
    expect(client.received().headers.connection).toBe('close');
    client.send(
      Buffer.concat([
        Buffer.alloc(2 * MiB, 'a'),
        Buffer.from(
          `${head('/v1/projects?after=refused', body.length, `x-service-api-key: ${KEYS.mainOwner}\r\n`)}${body}`,
        ),
      ]),
    );
    client.socket.end();
    await serverSideClosed.get(client.socket.localPort!);
    const response = client.received();
    expect(response.status).toBe(413);
    expect(response.text.match(/^HTTP\/1\.1 /gm)).toHaveLength(1);
    expect(handled).not.toContain('/v1/projects?after=refused');
  });

  it('closes a connection lingering on a refused body when the server closes, without waiting for the body', async () => {
    // A body timeout far longer than the test's: a close that waited for it would not end in time.
    const own = await createTestApp({
      setup: TENANCY_SETUP,
      env: { ATRIUM_BODY_TIMEOUT_MS: String(10 * 60_000) },
    });
    const ownPort = Number(new URL(await own.app.listen({ port: 0, host: '127.0.0.1' })).port);
    const client = new RawClient(ownPort, { allowHalfOpen: true });
    try {
      client.send(head('/v1/projects', 2 * MiB, `x-service-api-key: ${KEYS.mainOwner}\r\n`));
      client.send('a'.repeat(1000));
      await answered(client);
      // Resolves once every connection has closed.
      await own.close();
      const response = client.received();
      expect(response.status).toBe(413);
      expect(JSON.parse(response.body)).toMatchObject(errorBody('payload_too_large'));
    } finally {
      client.close();
    }
  });
});
