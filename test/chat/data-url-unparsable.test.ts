/**
 * File parts whose `data:` URL passes the schema's prefix check but that the model cannot be
 * given: the client's mistake, answered 400 with nothing stored, never a 500 or a 502 that
 * breaks every later turn of the chat.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { type TestApp } from '../helpers/app.js';
import { type FakeUpstream } from '../helpers/fake-upstream.js';
import { countRows, postChat, useChatApp } from './fixtures.js';

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

describe('a data: URL that does not parse as a URL', () => {
  it.each([
    ['data://[bad,AAAA', 'image/png'],
    ['data://a b,AAAA', 'text/plain'],
    ['data://x:99999999,AAAA', 'application/zip'],
  ])('%s (%s) is a 400 naming the part, not a 500', async (url, mediaType) => {
    const before = await countRows(t.db);
    const res = await postChat(t, withFile(url, mediaType));
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('bad_request');
    expect(res.json().details.issues[0].path).toBe('body.messages.0.parts.1.url');
    expect(upstream.requests).toHaveLength(0);
    expect(await countRows(t.db)).toEqual(before);
  });
});
