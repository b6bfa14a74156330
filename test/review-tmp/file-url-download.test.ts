/**
 * REVIEW: a file part whose URL the server cannot download (private address refused by the AI
 * SDK's download guard, a 404, an unreachable host) fails the reply as 502 `upstream_error`
 * ("The model provider failed") although the provider was never called — and since the user's
 * turn is stored before the model call, the bad URL stays in the chat's history: every later
 * turn on that chat re-downloads it and fails with 502 too. The chat is unusable for good.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatRows, chatSetup, userText } from '../chat/fixtures.js';

let upstream: FakeUpstream;
let t: TestApp;
beforeAll(async () => {
  upstream = await startFakeUpstream();
  t = await createTestApp({ setup: chatSetup(upstream) });
});
afterAll(async () => {
  await t.close();
  await upstream.close();
});

const post = (payload: Record<string, unknown>) =>
  t.app.inject({
    method: 'POST',
    url: '/v1/chat',
    headers: { 'x-service-api-key': CHAT_KEYS.main },
    payload,
  });

describe('a file URL that cannot be downloaded (openai-compatible provider)', () => {
  it('is a client error, and does not break every later turn of the chat', async () => {
    const clientId = 'review-bad-file-url';
    const first = await post({
      agentId: 'agt_plain',
      id: clientId,
      messages: [
        {
          id: 'u1',
          role: 'user',
          parts: [
            { type: 'text', text: 'what is on this picture?' },
            // Passes validation (http: URL, image media type); the AI SDK refuses to download it.
            { type: 'file', url: 'http://10.255.255.1/picture.png', mediaType: 'image/png' },
          ],
        },
      ],
    });
    // The provider was never asked: this is not the provider failing.
    expect(upstream.requests).toHaveLength(0);
    const firstStatus = first.statusCode;

    // The next turn, text only, on the same chat (useChat's id).
    const second = await post({ agentId: 'agt_plain', id: clientId, messages: [userText('hello?', 'u2')] });
    const chat = await t.db
      .selectFrom('chats')
      .select('id')
      .where('client_id', '=', clientId)
      .executeTakeFirst();
    const rows = chat ? await chatRows(t.db, chat.id) : [];
    expect({
      status: second.statusCode,
      body: second.json(),
      storedRoles: rows.map((r) => r.role),
    }).toMatchObject({
      status: 200,
    });
    // A URL the client gave that cannot be fetched is the client's mistake (400), not a 502.
    expect(firstStatus).toBe(400);
  });
});
