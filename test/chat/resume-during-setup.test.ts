import { DefaultChatTransport, readUIMessageStream, type UIMessage } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FileDownloader } from '../../src/services/file-downloads.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatSetup, userText } from './fixtures.js';
import { EventReader } from './sse-reader.js';

let upstream: FakeUpstream;
let t: TestApp;
let baseUrl: string;
/** Holds the next file download (a turn being set up) until `open()`. */
let gate: { opened: Promise<void>; open(): void; reached: Promise<void>; reach(): void };

function newGate() {
  let open!: () => void;
  let reach!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const reached = new Promise<void>((resolve) => (reach = resolve));
  return { opened, open, reached, reach };
}

const heldDownloader: FileDownloader = async () => {
  gate.reach();
  await gate.opened;
  return { data: new Uint8Array(64), mediaType: 'image/png' };
};

beforeAll(async () => {
  upstream = await startFakeUpstream();
  t = await createTestApp({ setup: chatSetup(upstream), fileDownloader: heldDownloader });
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  gate?.open();
  await t.close();
  await upstream.close();
});

const headers = { 'content-type': 'application/json', 'x-service-api-key': CHAT_KEYS.main };

describe('resuming a reply still being set up (its files fetched, its tools connected)', () => {
  it('waits for the reply to start and replays it, rather than answering 204 while the chat is active', async () => {
    const post = (body: Record<string, unknown>) =>
      fetch(`${baseUrl}/v1/chat`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ agentId: 'agt_plain', stream: true, id: 'setup-resume', ...body }),
      });
    await new EventReader(await post({ messages: [userText('first', 'u1')] })).all();

    gate = newGate();
    upstream.enqueue({ kind: 'held', text: 'A picture of nothing.', afterPieces: 1 });
    const image = { type: 'file', url: 'https://files.example.test/a.png', mediaType: 'image/png' };
    const running = post({
      messages: [{ id: 'u2', role: 'user', parts: [{ type: 'text', text: 'see' }, image] }],
    });
    await gate.reached;
    const chat = await (await fetch(`${baseUrl}/v1/chats/setup-resume`, { headers })).json();
    expect(chat.data.chat.active).toBe(true);

    // What useChat({ resume: true }) does on a page load at this moment.
    const transport = new DefaultChatTransport<UIMessage>({ api: `${baseUrl}/v1/chat`, headers });
    const resumed = transport.reconnectToStream({ chatId: 'setup-resume' });
    // It is not answered while the reply is being set up (it was: 204, and the page never showed
    // the reply)…
    const early = await Promise.race([
      resumed,
      new Promise((resolve) => setTimeout(() => resolve('waiting'), 500)),
    ]);
    expect(early).toBe('waiting');
    // …but once the reply starts, from its start.
    gate.open();
    const stream = await resumed;
    expect(stream).not.toBeNull();
    upstream.release();
    let last: UIMessage | undefined;
    for await (const message of readUIMessageStream({ stream: stream!, terminateOnError: true }))
      last = message;
    expect(last?.parts.find((part) => part.type === 'text')).toMatchObject({ text: 'A picture of nothing.' });
    await new EventReader(await running).all();
  });

  it('answers 204 once a reply refused during its set-up is gone', async () => {
    gate = newGate();
    const refused = fetch(`${baseUrl}/v1/chat`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        agentId: 'agt_plain',
        stream: true,
        id: 'setup-resume',
        messages: [
          {
            id: 'u3',
            role: 'user',
            parts: [{ type: 'file', url: 'https://files.example.test/b.png', mediaType: 'image/png' }],
          },
        ],
      }),
    });
    await gate.reached;
    const resumed = fetch(`${baseUrl}/v1/chat/setup-resume/stream`, { headers });
    const early = await Promise.race([
      resumed,
      new Promise((resolve) => setTimeout(() => resolve('waiting'), 500)),
    ]);
    expect(early).toBe('waiting');
    // The chat is deleted meanwhile: the turn being set up is refused (404), nothing runs.
    await t.app.inject({ method: 'DELETE', url: '/v1/chats/setup-resume', headers });
    gate.open();
    expect((await refused).status).toBe(404);
    expect((await resumed).status).toBe(204);
  });
});
