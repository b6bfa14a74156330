import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName, type TestApp } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { RawClient } from '../helpers/raw-http.js';

/*
 * A client that sends `Connection: close` has the connection closed once its answer is sent
 * (RFC 9112, 9.6), streamed answers included. The stream routes once sent the AI SDK's
 * `connection: keep-alive` whatever the client asked, and the socket stayed open until the
 * keep-alive timeout.
 */

let t: TestApp;
let port: number;
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
  port = Number(new URL(await t.app.listen({ port: 0, host: '127.0.0.1' })).port);
});
afterAll(() => t.close());

function post(path: string, body: unknown, connection: 'close' | 'keep-alive'): RawClient {
  const text = JSON.stringify(body);
  const client = new RawClient(port);
  client.send(
    `POST ${path} HTTP/1.1\r\nHost: x\r\nx-service-api-key: ${KEYS.mainOwner}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n` +
      `Connection: ${connection}\r\n\r\n${text}`,
  );
  return client;
}

const STREAMS = [
  {
    name: 'POST /v1/chat (UI message stream)',
    path: '/v1/chat',
    body: {
      agentId: 'agt_alpha',
      stream: true,
      messages: [{ role: 'user', parts: [{ type: 'text', text: 'Hi' }] }],
    },
    end: 'data: [DONE]',
  },
  {
    name: 'POST /v1/openai/chat/completions (stream: true)',
    path: '/v1/openai/chat/completions',
    body: { model: 'agt_alpha', stream: true, messages: [{ role: 'user', content: 'Hi' }] },
    end: 'data: [DONE]',
  },
];

describe(`Connection: close on streamed answers (${engineName})`, () => {
  for (const stream of STREAMS) {
    it(`${stream.name}: answers "connection: close" and closes the connection after the stream`, async () => {
      const response = await post(stream.path, stream.body, 'close').closed;
      expect(response.status).toBe(200);
      expect(response.headers['content-type']).toMatch(/^text\/event-stream/);
      expect(response.headers.connection).toBe('close');
      expect(response.body).toContain(stream.end);
    });

    it(`${stream.name}: keeps a keep-alive connection for the next request`, async () => {
      const client = post(stream.path, stream.body, 'keep-alive');
      await expect.poll(() => client.received().body, { timeout: 10_000 }).toContain(stream.end);
      expect(client.received().headers.connection).not.toBe('close');
      client.send(`GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      const response = await client.closed;
      expect(response.text).toMatch(/HTTP\/1\.1 200 OK[\s\S]*HTTP\/1\.1 200 OK/);
    });
  }
});
