import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatRows, chatSetup, userText } from './fixtures.js';
import { EventReader, textDeltas } from './sse-reader.js';

let upstream: FakeUpstream;
let t: TestApp;
let baseUrl: string;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  t = await createTestApp({
    setup: chatSetup(upstream),
    env: { ATRIUM_MAX_CONCURRENT_REPLIES: '1' },
    shutdownWaitMs: 50,
  });
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await t.close();
  await upstream.close();
});

const headers = { 'content-type': 'application/json', 'x-service-api-key': CHAT_KEYS.main };
const post = (body: Record<string, unknown>) =>
  fetch(`${baseUrl}/v1/chat`, { method: 'POST', headers, body: JSON.stringify(body) });

describe('ATRIUM_MAX_CONCURRENT_REPLIES and shutdown', () => {
  it('answers 503 with Retry-After beyond the limit, storing nothing; then stores an interrupted reply at shutdown', async () => {
    upstream.enqueue({ kind: 'held', text: 'one two three four', afterPieces: 2 });
    const first = await post({ agentId: 'agt_plain', stream: true, messages: [userText('first')] });
    const chatId = first.headers.get('x-chat-id')!;
    const events = new EventReader(first);
    await events.until(textDeltas(2));

    const chatsBefore = await t.db.selectFrom('chats').select('id').execute();
    const busy = await post({ agentId: 'agt_plain', messages: [userText('second')] });
    expect(busy.status).toBe(503);
    expect(busy.headers.get('retry-after')).toBe('5');
    expect(await busy.json()).toEqual({
      code: 'service_unavailable',
      message: 'Too many replies are being generated right now; try again shortly',
      details: { retryAfterSeconds: 5 },
    });
    expect(await t.db.selectFrom('chats').select('id').execute()).toEqual(chatsBefore);

    // Shutdown lets the reply run for its bound (50 ms here), then stores it as interrupted.
    await t.app.close();
    await events.all();
    expect(events.chunks.at(-1)).toEqual({
      type: 'error',
      errorText: 'The server shut down while this reply was being generated',
    });
    const reply = (await chatRows(t.db, chatId)).find((row) => row.role === 'assistant');
    expect(reply?.finish_reason).toBe('interrupted');
    expect(JSON.parse(reply!.parts)[1]).toMatchObject({ type: 'text', text: 'one two ' });
  });
});
