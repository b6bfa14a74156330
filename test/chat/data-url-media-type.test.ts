/**
 * File parts whose `data:` URL passes the schema's prefix check but that the model cannot be
 * given: the client's mistake, answered 400 with nothing stored, never a 500 or a 502 that
 * breaks every later turn of the chat.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { type TestApp } from '../helpers/app.js';
import { type FakeUpstream } from '../helpers/fake-upstream.js';
import { countRows, postChat, useChatApp, userText } from './fixtures.js';

let upstream: FakeUpstream;
let t: TestApp;

useChatApp((app) => ({ upstream, t } = app));
beforeEach(() => {
  upstream.requests.length = 0;
});

function withFile(url: string, mediaType: string) {
  return {
    agentId: 'agt_plain',
    messages: [
      {
        role: 'user',
        parts: [
          { type: 'text', text: 'what is in this file?' },
          { type: 'file', url, mediaType },
        ],
      },
    ],
  };
}

describe('a data: URL whose own media type the model cannot take', () => {
  it('is a 400 with nothing stored, not a 502 that breaks every later turn of the chat', async () => {
    const before = await countRows(t.db);
    const res = await postChat(t, withFile('data:application/zip;base64,UEsDBA==', 'image/png'));
    const chatId = res.json().details?.chatId as string | undefined;
    // What the client is left with when the refusal is a 502 after its turn was stored.
    const next = chatId
      ? await postChat(t, { agentId: 'agt_plain', chatId, messages: [userText('hello again')] })
      : undefined;
    expect({ status: res.statusCode, code: res.json().code, nextTurn: next?.statusCode }).toEqual({
      status: 400,
      code: 'bad_request',
      nextTurn: undefined,
    });
    expect(upstream.requests).toHaveLength(0);
    expect(await countRows(t.db)).toEqual(before);
  });

  it('sends a data: URL that names no type under the part’s media type', async () => {
    upstream.enqueue({ kind: 'text', text: 'a pixel' });
    const res = await postChat(t, withFile('data:;base64,iVBORw0KGgo=', 'image/png'));
    expect(res.statusCode, res.body).toBe(200);
    expect(JSON.stringify(upstream.lastRequest().body.messages)).toContain(
      'data:image/png;base64,iVBORw0KGgo=',
    );
  });
});
