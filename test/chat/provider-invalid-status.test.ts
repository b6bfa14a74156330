/**
 * A model provider (or a proxy in front of it) answering with a status the Fetch API cannot
 * carry. Node's HTTP parser takes any three-digit status, but `new Response` throws on one
 * outside 200–599, and on a body with a null-body status (204, 205, 304): thrown in the provider
 * fetch's event handler, which nothing catches, it ended the whole `atrium serve` process.
 */
import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/errors.js';
import { createNodeFetch } from '../../src/models/node-fetch.js';
import { callFailure } from '../helpers/provider-call.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import type { FakeUpstream } from '../helpers/fake-upstream.js';
import { type ServeCluster, startServeCluster } from '../helpers/serve-processes.js';
import { CHAT_KEYS, chatSetup, userText } from './fixtures.js';

/** The raw HTTP answer the provider sends next, whatever it was asked. */
let answer = '';
let provider: Server;
let baseURL: string;

beforeAll(async () => {
  provider = createServer((socket) => {
    socket.on('error', () => {});
    let head = '';
    socket.on('data', (chunk: Buffer) => {
      head += chunk.toString('latin1');
      if (head.includes('\r\n\r\n')) socket.end(Buffer.from(answer, 'latin1'));
    });
  });
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
  baseURL = `http://127.0.0.1:${(provider.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => provider.close(() => resolve()));
});

const STATUS_600 = 'HTTP/1.1 600 Nonsense\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}';
const EVENT_STREAM_600 =
  'HTTP/1.1 600 Nonsense\r\nContent-Type: text/event-stream\r\nContent-Length: 0\r\n\r\n';
const EVENT_STREAM_204 = 'HTTP/1.1 204 No Content\r\nContent-Type: text/event-stream\r\n\r\n';
const CONTROL_IN_REASON =
  'HTTP/1.1 200 O\x01K\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}';

describe('the provider fetch with an answer the Fetch API cannot carry', () => {
  it.each([
    ['a status past 599', STATUS_600],
    ['a status past 599 on an event stream', EVENT_STREAM_600],
  ])('fails the call with 502 upstream_error naming the status (%s)', async (_name, raw) => {
    answer = raw;
    const failure = await callFailure(createNodeFetch(1024 * 1024), `${baseURL}/chat/completions`);
    expect(failure).toBeInstanceOf(ApiError);
    expect(failure).toMatchObject({
      code: 'upstream_error',
      message: 'The model provider answered HTTP 600',
      details: { providerStatus: 600 },
    });
  });

  it('answers a null-body status on an event stream with no body, as the built-in fetch does', async () => {
    answer = EVENT_STREAM_204;
    const response = await createNodeFetch(1024 * 1024)(`${baseURL}/chat/completions`, {
      method: 'POST',
      body: '{}',
    });
    expect(response.status).toBe(204);
    expect(response.body).toBeNull();
  });

  it('fails the call with 502 upstream_error on a reason phrase no Response may have', async () => {
    answer = CONTROL_IN_REASON;
    const failure = await callFailure(createNodeFetch(1024 * 1024), `${baseURL}/chat/completions`);
    expect(failure).toBeInstanceOf(ApiError);
    expect(failure).toMatchObject({ code: 'upstream_error' });
  });
});

describe('POST /v1/chat when the provider answers HTTP 600', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ setup: chatSetup({ baseURL } as FakeUpstream) });
  });
  afterAll(async () => {
    await t?.close();
  });

  it.each([false, true])('is a provider failure, not a crash (stream: %s)', async (stream) => {
    answer = stream ? EVENT_STREAM_600 : STATUS_600;
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/chat',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
      payload: { agentId: 'agt_plain', stream, messages: [userText('hi')] },
    });
    if (!stream) {
      expect(res.statusCode).toBe(502);
      expect(res.json()).toMatchObject({
        code: 'upstream_error',
        message: 'The model provider answered HTTP 600',
        details: { providerStatus: 600 },
      });
      return;
    }
    // A streamed reply has begun (200): the failure is its error chunk.
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('"type":"error","errorText":"The model provider answered HTTP 600"');
  });
});

describe('atrium serve when a provider answers HTTP 600', () => {
  let cluster: ServeCluster;
  beforeAll(async () => {
    cluster = await startServeCluster({ processes: 1, setup: chatSetup({ baseURL } as FakeUpstream) });
  }, 120_000);
  afterAll(async () => {
    await cluster?.close();
  });

  it('stays up and answers 502 upstream_error', async () => {
    const [server] = cluster.servers;
    answer = STATUS_600;
    const res = await fetch(`${server!.url}/v1/chat`, {
      method: 'POST',
      headers: { 'x-service-api-key': CHAT_KEYS.main, 'content-type': 'application/json' },
      body: JSON.stringify({ agentId: 'agt_plain', messages: [userText('hi')] }),
    });
    expect(res.status).toBe(502);
    expect(await res.json()).toMatchObject({ code: 'upstream_error', details: { providerStatus: 600 } });
    expect((await fetch(`${server!.url}/healthz`)).status).toBe(200);
    expect(server!.child.exitCode).toBeNull();
  });
});
