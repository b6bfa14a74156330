import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatSetup, userText } from './fixtures.js';
import { EventReader } from './sse-reader.js';

// An app of its own: its short idle timeout would cut the held replies of other tests short.
let upstream: FakeUpstream;
let t: TestApp;
let baseUrl: string;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  t = await createTestApp({ setup: chatSetup(upstream), env: { ATRIUM_UPSTREAM_TIMEOUT_MS: '400' } });
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await t.close();
  await upstream.close();
});

const headers = { 'content-type': 'application/json', 'x-service-api-key': CHAT_KEYS.main };
const post = (body: Record<string, unknown>) =>
  fetch(`${baseUrl}/v1/chat`, { method: 'POST', headers, body: JSON.stringify({ stream: true, ...body }) });

describe('an upstream that goes silent mid-stream', () => {
  it('ends an upstream idle timeout with an error chunk carrying the 504 message, not abort', async () => {
    upstream.enqueue({ kind: 'stall' });
    const response = await post({ agentId: 'agt_plain', messages: [userText('hello?')] });
    const events = new EventReader(response);
    await events.all();
    const types = events.chunks.map((c) => c.type);
    expect(types).not.toContain('abort');
    expect(events.chunks.at(-1)).toEqual({
      type: 'error',
      errorText: 'The model provider did not answer within 400 ms',
    });
  });
});
