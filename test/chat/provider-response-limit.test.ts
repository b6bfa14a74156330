import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/errors.js';
import { createNodeFetch } from '../../src/models/node-fetch.js';
import type { FakeUpstream } from '../helpers/fake-upstream.js';
import { callFailure } from '../helpers/provider-call.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { CHAT_KEYS, chatSetup, userText } from './fixtures.js';

const LIMIT = 64 * 1024;
const HUGE = 8 * 1024 * 1024;

/**
 * A provider that answers every chat completion with a JSON body of HUGE bytes, declared
 * (`content-length`) or not (chunked), and counts what it managed to send.
 */
let provider: Server;
let baseURL: string;
let declareLength = false;
let sent = 0;
let t: TestApp;

beforeAll(async () => {
  provider = createServer((req, res) => {
    req.resume();
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    res.writeHead(200, {
      'content-type': 'application/json',
      ...(declareLength ? { 'content-length': String(HUGE) } : {}),
    });
    sent = 0;
    const write = () => {
      while (sent < HUGE) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', write);
      }
      res.end();
    };
    res.on('error', () => {});
    write();
  });
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
  baseURL = `http://127.0.0.1:${(provider.address() as AddressInfo).port}/v1`;
  t = await createTestApp({
    setup: chatSetup({ baseURL } as FakeUpstream),
    env: { ATRIUM_MAX_PROVIDER_RESPONSE_BYTES: String(LIMIT) },
  });
});
afterAll(async () => {
  await t?.close();
  provider.closeAllConnections();
  await new Promise<void>((resolve) => provider.close(() => resolve()));
});

describe('non-streamed provider responses are read up to ATRIUM_MAX_PROVIDER_RESPONSE_BYTES', () => {
  it.each([false, true])(
    'stops reading a huge body and fails with 502 upstream_error (content-length declared: %s)',
    async (declared) => {
      declareLength = declared;
      const fetchWithLimit = createNodeFetch(LIMIT);
      const failure = await callFailure(fetchWithLimit, `${baseURL}/chat/completions`);
      expect(failure).toBeInstanceOf(ApiError);
      expect(failure).toMatchObject({ code: 'upstream_error', details: { maxBytes: LIMIT } });
      // The rest was not read: the connection was closed long before the provider was done.
      expect(sent).toBeLessThan(HUGE);
    },
  );

  it('answers POST /v1/chat with 502 and a message that names the limit', async () => {
    declareLength = false;
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/chat',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
      payload: { agentId: 'agt_plain', messages: [userText('hi')] },
    });
    expect(res.statusCode).toBe(502);
    expect(res.json()).toMatchObject({
      code: 'upstream_error',
      message: `The model provider's response is larger than ${LIMIT} bytes (ATRIUM_MAX_PROVIDER_RESPONSE_BYTES)`,
    });
  });

  it('is 16 MiB unless set, and refuses a setting under 1 KiB', async () => {
    const { loadConfig } = await import('../../src/config.js');
    expect(loadConfig({ ATRIUM_DATA_DIR: t.env.dataDir }).maxProviderResponseBytes).toBe(16 * 1024 * 1024);
    expect(() =>
      loadConfig({ ATRIUM_DATA_DIR: t.env.dataDir, ATRIUM_MAX_PROVIDER_RESPONSE_BYTES: '100' }),
    ).toThrow(/ATRIUM_MAX_PROVIDER_RESPONSE_BYTES must be an integer ≥ 1024/);
  });
});
