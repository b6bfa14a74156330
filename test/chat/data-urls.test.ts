/**
 * File parts whose `data:` URL passes the schema's prefix check. One that does not parse, or an
 * image or PDF part whose URL names a type the model cannot take as a file (the AI SDK sends the
 * bytes under the URL's own type), is the client's mistake: a 400 with nothing stored, never a
 * 500, nor a 502 that breaks every later turn of the chat. What the model can take is sent:
 * under the URL's type in lower case, or the part's when the URL names none; a text part's URL
 * type does not matter (its text is given); an image labelled with another image type is sent,
 * as before; a part stored before the rule is a note.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { type TestApp } from '../helpers/app.js';
import { type FakeUpstream } from '../helpers/fake-upstream.js';
import { chatRows, countRows, postChat, useChatApp, userText } from './fixtures.js';

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

/** A turn with this file part is a 400 naming the part's url: no provider call, nothing stored. */
async function expectPartRefused(url: string, mediaType: string) {
  const before = await countRows(t.db);
  const res = await postChat(t, withFile(url, mediaType));
  expect({
    status: res.statusCode,
    code: res.json().code,
    path: res.json().details?.issues?.[0]?.path,
  }).toEqual({ status: 400, code: 'bad_request', path: 'body.messages.0.parts.1.url' });
  expect(upstream.requests).toHaveLength(0);
  expect(await countRows(t.db)).toEqual(before);
}

describe('a data: URL that does not parse as a URL', () => {
  it.each([
    ['data://[bad,AAAA', 'image/png'],
    ['data://a b,AAAA', 'text/plain'],
    ['data://x:99999999,AAAA', 'application/zip'],
  ])('%s (%s) is a 400 naming the part, not a 500', async (url, mediaType) => {
    await expectPartRefused(url, mediaType);
  });
});

describe('a data: URL and its part’s media type', () => {
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

  const notes = Buffer.from('# Launch notes\nThe launch is on Monday.').toString('base64');
  it.each([
    [`data:application/octet-stream;base64,${notes}`, 'text/markdown', 'The launch is on Monday.'],
    ['data:image/png;base64,iVBORw0KGgo=', 'image/*', 'data:image/png;base64,iVBORw0KGgo='],
    ['data:IMAGE/PNG;base64,iVBORw0KGgo=', 'image/png', 'data:image/png;base64,iVBORw0KGgo='],
    ['data:Application/PDF;base64,JVBERi0=', 'application/pdf', 'data:application/pdf;base64,JVBERi0='],
    ['data:image/png;base64,iVBORw0KGgo=', 'image/jpeg', 'data:image/png;base64,iVBORw0KGgo='],
  ])('%s as %s is given to the model', async (url, mediaType, sent) => {
    upstream.enqueue({ kind: 'text', text: 'ok' });
    upstream.enqueue({ kind: 'text', text: 'ok again' });
    const res = await postChat(t, withFile(url, mediaType));
    expect(res.statusCode, res.body).toBe(200);
    expect(JSON.stringify(upstream.lastRequest().body.messages)).toContain(sent);
    const next = await postChat(t, {
      agentId: 'agt_plain',
      chatId: res.json().chatId,
      messages: [userText('and now?')],
    });
    expect(next.statusCode, next.body).toBe(200);
  });

  it('a message stored before the rule (zip bytes as an image) is a note in later turns, not a 502', async () => {
    const sent = await nextTurnAfterStored({
      url: 'data:application/zip;base64,UEsDBA==',
      mediaType: 'image/png',
    });
    expect(sent).toContain('unavailable=\\"its data: URL holds no image/png\\"');
  });
});

/**
 * A chat whose first turn sent a pixel, its stored file part then rewritten to `storedPart` (as
 * a version before a rule could store it): what the next turn sends the provider.
 */
async function nextTurnAfterStored(storedPart: { url: string; mediaType: string }): Promise<string> {
  upstream.enqueue({ kind: 'text', text: 'a pixel' });
  const first = await postChat(t, withFile('data:image/png;base64,iVBORw0KGgo=', 'image/png'));
  expect(first.statusCode, first.body).toBe(200);
  const chatId = first.json().chatId as string;
  await t.app.persistence.idle();
  const user = (await chatRows(t.db, chatId)).find((row) => row.role === 'user')!;
  await t.db
    .updateTable('messages')
    .set({
      parts: JSON.stringify([
        { type: 'text', text: 'what is in this file?' },
        { type: 'file', ...storedPart },
      ]),
    })
    .where('id', '=', user.id)
    .execute();
  upstream.enqueue({ kind: 'text', text: 'still here' });
  const next = await postChat(t, { agentId: 'agt_plain', chatId, messages: [userText('and now?')] });
  expect(next.statusCode, next.body).toBe(200);
  return JSON.stringify(upstream.lastRequest().body.messages);
}

async function sentFor(url: string, mediaType: string): Promise<string> {
  upstream.enqueue({ kind: 'text', text: 'ok' });
  const res = await postChat(t, withFile(url, mediaType));
  expect(res.statusCode, res.body).toBe(200);
  return JSON.stringify(upstream.lastRequest().body.messages);
}

describe('an image/* part, or a data: URL naming image/*', () => {
  it('is sent to the model, under the part’s type, not replaced by a note', async () => {
    const sent = await sentFor('data:;base64,iVBORw0KGgo=', 'image/*');
    expect(sent).not.toContain('unavailable=');
    // The providers send image/* as image/jpeg (what e03bafa sent).
    expect(sent).toContain('"image_url":{"url":"data:image/jpeg;base64,iVBORw0KGgo="}');
  });

  it('a data:image/* URL that validation accepts is sent too, not silently dropped', async () => {
    const sent = await sentFor('data:image/*;base64,iVBORw0KGgo=', 'image/png');
    expect(sent).not.toContain('unavailable=');
    expect(sent).toContain(';base64,iVBORw0KGgo=');
  });
});

describe('an image or PDF part whose mediaType is not in lower case, or has parameters', () => {
  it.each([
    [
      'data:image/png;base64,iVBORw0KGgo=',
      'IMAGE/PNG',
      '"image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}',
    ],
    ['data:;base64,iVBORw0KGgo=', 'Image/Png', '"image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}'],
    [
      'data:application/pdf;base64,JVBERi0=',
      'application/pdf; x=y',
      '"file_data":"data:application/pdf;base64,JVBERi0="',
    ],
  ])(
    '%s as %s is given to the model as a file (validation already treats it as one)',
    async (url, mediaType, expected) => {
      const sent = await sentFor(url, mediaType);
      expect(sent).not.toContain('url=\\"data:…\\"');
      expect(sent).toContain(expected);
    },
  );
});

describe('a data: URL whose payload is not plain base64', () => {
  const svg = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0,0,1,1"/>';
  const svgBase64 = Buffer.from(svg).toString('base64');
  it.each([
    [`data:image/svg+xml;utf8,${svg}`, 'image/svg+xml', `data:image/svg+xml;base64,${svgBase64}`],
    [
      `data:image/svg+xml,${encodeURIComponent(svg)}`,
      'image/svg+xml',
      `data:image/svg+xml;base64,${svgBase64}`,
    ],
    ['data:,hello', 'image/png', 'data:image/png;base64,aGVsbG8='],
    ['data:image/png;base64, iVBORw0K Ggo=', 'image/png', 'data:image/png;base64,iVBORw0KGgo='],
  ])('%s (%s) reaches the provider as its bytes in base64', async (url, mediaType, expected) => {
    const sent = await sentFor(url, mediaType);
    expect(sent).toContain(`"image_url":{"url":"${expected}"}`);
  });
});

describe('an image or PDF part whose base64 data is not base64', () => {
  // The fetch standard fails these data: URLs (forgiving-base64 decode). They were read as far as
  // Node's decoder got: `!!!` became an empty image, `YQ==YQ==` its first 4 characters, `a` went
  // as it was, and the provider's refusal was a 502 on this turn and every later one.
  it.each([
    ['data:image/png;base64,!!!', 'image/png'],
    ['data:image/png;base64,YQ==YQ==', 'image/png'],
    ['data:image/png;base64,a', 'image/png'],
    ['data:application/pdf;base64,JVBERi0*', 'application/pdf'],
    ['data:;base64,%%%', 'image/png'],
  ])('%s (%s) is a 400 naming the part, with nothing stored', async (url, mediaType) => {
    await expectPartRefused(url, mediaType);
  });

  it.each([
    ['data:image/png;base64,iVBORw0KGgo=', 'data:image/png;base64,iVBORw0KGgo='],
    ['data:image/png;base64,YWI', 'data:image/png;base64,YWI'],
    ['data:image/png;base64,iVBORw0KGgo', 'data:image/png;base64,iVBORw0KGgo'],
    ['data:image/png;base64,YQ%3D%3D', 'data:image/png;base64,YQ=='],
    ['data:image/png;base64,', 'data:image/png;base64,'],
  ])('%s (base64 the fetch standard reads) is still sent', async (url, expected) => {
    const sent = await sentFor(url, 'image/png');
    expect(sent).toContain(`"image_url":{"url":"${expected}"}`);
  });

  it('a part stored before the rule is a note in later turns, not an empty image the provider refuses', async () => {
    const sent = await nextTurnAfterStored({ url: 'data:image/png;base64,!!!', mediaType: 'image/png' });
    expect(sent).not.toContain('data:image/png;base64,"');
    expect(sent).toContain('unavailable=\\"its data: URL holds no image/png\\"');
  });
});
