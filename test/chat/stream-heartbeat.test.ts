import { DefaultChatTransport, readUIMessageStream, type UIMessage } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { waitUntil } from '../helpers/wait-until.js';
import { userText } from './fixtures.js';
import { listeningChatApp } from './listening-app.js';

/**
 * A streamed answer that goes silent (a slow first token, a tool call and the next step) gets an
 * event-stream comment every so often (ATRIUM_STREAM_HEARTBEAT_MS), so that a proxy or load
 * balancer does not close the connection as idle; the clients people use skip it.
 */
const HEARTBEAT_TEXT = ': keep-alive\n\n';
let app: Awaited<ReturnType<typeof listeningChatApp>>;
beforeAll(async () => {
  app = await listeningChatApp({ env: { ATRIUM_STREAM_HEARTBEAT_MS: '40' } });
});
afterAll(() => app.close());
beforeEach(() => {
  app.upstream.requests.length = 0;
});

/** A fetch that keeps a copy of every response body's text, as it is read, in `text`. */
function recordingFetch() {
  const recorded = {
    text: '',
    fetch: (async (input, init) => {
      const response = await fetch(input, init);
      if (!response.body) return response;
      const copy = new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          recorded.text += new TextDecoder().decode(chunk);
          controller.enqueue(chunk);
        },
      });
      return new Response(response.body.pipeThrough(copy), {
        status: response.status,
        headers: response.headers,
      });
    }) as typeof fetch,
  };
  return recorded;
}

/** Lets the held reply go on once `recorded` shows a heartbeat after its first piece. */
async function releaseAfterHeartbeat(recorded: { text: string }, firstPiece: string) {
  await waitUntil(
    () => recorded.text.indexOf(HEARTBEAT_TEXT, recorded.text.indexOf(firstPiece)) > 0,
    'a heartbeat after the first piece',
  );
  app.upstream.release();
}

it('writes heartbeats into a silent /v1/chat stream, and useChat’s transport reads the whole reply', async () => {
  app.upstream.enqueue({ kind: 'held', text: 'alpha beta gamma', afterPieces: 1 });
  const recorded = recordingFetch();
  const transport = new DefaultChatTransport<UIMessage>({
    api: `${app.baseUrl}/v1/chat`,
    headers: app.headers,
    body: { agentId: 'agt_plain', stream: true },
    fetch: recorded.fetch,
  });
  const stream = await transport.sendMessages({
    chatId: 'heartbeat-chat',
    messages: [userText('go', 'u-1') as UIMessage],
    trigger: 'submit-message',
    messageId: undefined,
    abortSignal: undefined,
  });
  const released = releaseAfterHeartbeat(recorded, 'alpha');
  let last: UIMessage | undefined;
  for await (const message of readUIMessageStream({ stream, terminateOnError: true })) last = message;
  await released;
  expect(last!.parts.filter((p) => p.type === 'text').map((p) => p.text)).toEqual(['alpha beta gamma']);
  // Comments only, between events: never inside one.
  expect(recorded.text).toMatch(/\n\n: keep-alive\n\n/);
  expect(recorded.text.endsWith('data: [DONE]\n\n')).toBe(true);
});

it('writes heartbeats into a resumed reply’s replay while the reply is silent', async () => {
  app.upstream.enqueue({ kind: 'held', text: 'one two three', afterPieces: 1 });
  const original = await app.post({ agentId: 'agt_plain', stream: true, messages: [userText('go')] });
  expect(original.status).toBe(200);
  const chatId = original.headers.get('x-chat-id');
  expect(chatId).toMatch(/^cht_/);
  const recorded = recordingFetch();
  const resumed = await recorded.fetch(`${app.baseUrl}/v1/chat/${chatId}/stream`, { headers: app.headers });
  expect(resumed.status).toBe(200);
  const released = releaseAfterHeartbeat(recorded, 'one');
  const [replay, live] = await Promise.all([resumed.text(), original.text()]);
  await released;
  expect(replay).toContain(HEARTBEAT_TEXT);
  expect(replay.endsWith('data: [DONE]\n\n')).toBe(true);
  // The replay is the reply's events; the heartbeats are each connection's own.
  const withoutHeartbeats = (text: string) => text.replaceAll(HEARTBEAT_TEXT, '');
  expect(withoutHeartbeats(replay)).toBe(withoutHeartbeats(live));
});

it('writes heartbeats into a silent /v1/openai stream, and the openai SDK reads the whole reply', async () => {
  app.upstream.enqueue({ kind: 'held', text: 'red green blue', afterPieces: 1 });
  const recorded = recordingFetch();
  const client = new OpenAI({
    apiKey: app.headers['x-service-api-key'],
    baseURL: `${app.baseUrl}/v1/openai`,
    maxRetries: 0,
    fetch: recorded.fetch,
  });
  const stream = await client.chat.completions.create({
    model: 'agt_plain',
    stream: true,
    messages: [{ role: 'user', content: 'go' }],
  });
  const released = releaseAfterHeartbeat(recorded, 'red');
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
  await released;
  expect(text).toBe('red green blue');
  expect(recorded.text).toMatch(/\n\n: keep-alive\n\n/);
});
