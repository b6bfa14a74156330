/**
 * A file part whose URL cannot be downloaded for a model that cannot read URLs itself (here an
 * address the AI SDK's download refuses; a 404 or an unreachable host alike) was a 502 "the
 * model provider failed" with the provider never asked, and the user's turn stayed stored, so
 * every later turn of the chat failed the same way. It is a 400 now, with nothing stored.
 */
import { describe, expect, it } from 'vitest';
import { type TestApp } from '../helpers/app.js';
import { type FakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatRows, postChat, useChatApp, userText } from './fixtures.js';

let upstream: FakeUpstream;
let t: TestApp;
useChatApp((app) => ({ upstream, t } = app));

const post = (payload: Record<string, unknown>) => postChat(t, payload);

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
    expect(first.statusCode).toBe(400);
    expect(first.json()).toMatchObject({
      code: 'bad_request',
      message: expect.stringContaining('http://10.255.255.1/picture.png'),
    });
    expect(upstream.requests).toHaveLength(0);
    expect(await t.db.selectFrom('chats').select('id').where('client_id', '=', clientId).execute()).toEqual(
      [],
    );

    // The next turn, text only, on the same chat id (useChat's): a new chat that works.
    upstream.enqueue({ kind: 'text', text: 'hello back' });
    const second = await post({ agentId: 'agt_plain', id: clientId, messages: [userText('hello?', 'u2')] });
    expect(second.statusCode).toBe(200);
    const chat = await t.db
      .selectFrom('chats')
      .select('id')
      .where('client_id', '=', clientId)
      .executeTakeFirstOrThrow();
    expect((await chatRows(t.db, chat.id)).map((row) => row.role)).toEqual(['user', 'assistant']);
  });

  it('is a 400 on /v1/openai too, with the provider never asked', async () => {
    const before = upstream.requests.length;
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/openai/chat/completions',
      headers: { 'x-service-api-key': CHAT_KEYS.main },
      payload: {
        model: 'agt_plain',
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'what is on this picture?' },
              { type: 'image_url', image_url: { url: 'https://10.255.255.1/picture.png' } },
            ],
          },
        ],
      },
    });
    expect(res.statusCode).toBe(400);
    expect(JSON.stringify(res.json())).toContain('could not be downloaded');
    expect(upstream.requests.length).toBe(before);
  });

  it('a file URL that is no address (`https://` alone) reaches the model as a note, never as data', async () => {
    upstream.enqueue({ kind: 'text', text: 'I cannot see it' });
    const before = upstream.requests.length;
    const res = await post({
      agentId: 'agt_plain',
      messages: [
        {
          id: 'u1',
          role: 'user',
          parts: [
            { type: 'text', text: 'what is on this picture?' },
            // Passes the schema's prefix check; the AI SDK took it for base64 image data.
            { type: 'file', url: 'https://', mediaType: 'image/png', filename: 'cat.png' },
          ],
        },
      ],
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(upstream.requests.length).toBe(before + 1);
    const sent = JSON.stringify(upstream.requests[before]!.body.messages);
    expect(sent).not.toContain('image_url');
    expect(sent).toContain(
      '<attachment name=\\"cat.png\\" type=\\"image/png\\" unavailable=\\"not a valid URL\\" />',
    );
  });
});
