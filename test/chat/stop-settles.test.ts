/**
 * `POST /v1/chat/{chatId}/stop` answers once the stopped reply is stored and the chat no longer
 * runs a reply (spec/chats.md, "Stop"): a client that stops and reads the chat at once sees the
 * stopped message, and one that sends its next turn at once is not refused as busy. It used to
 * answer as soon as the provider call was aborted, and the reply was stored a moment later.
 * Repeated, as the answer raced the store.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userText } from './fixtures.js';
import { listeningChatApp } from './listening-app.js';
import { EventReader, textDeltas } from './sse-reader.js';

let app: Awaited<ReturnType<typeof listeningChatApp>>;
beforeAll(async () => {
  app = await listeningChatApp({});
});
afterAll(() => app.close());

const ROUNDS = 20;
const WORDS = 'one two three four five six';

interface StoredMessage {
  id: string;
  role: string;
  parts: Array<{ type: string; text?: string }>;
  metadata: { finishReason?: string };
}

/** A streamed reply on the chat `id`, held by the upstream after two pieces. */
async function heldReply(id: string) {
  app.upstream.enqueue({ kind: 'held', text: WORDS, afterPieces: 2 });
  const response = await app.post({
    agentId: 'agt_plain',
    stream: true,
    id,
    messages: [userText('count', `${id}-u1`)],
  });
  expect(response.status).toBe(200);
  const events = new EventReader(response);
  await events.until(textDeltas(2));
  return { chatId: response.headers.get('x-chat-id')!, events };
}

async function stop(chatId: string) {
  const response = await fetch(`${app.baseUrl}/v1/chat/${chatId}/stop`, {
    method: 'POST',
    headers: { 'x-service-api-key': app.headers['x-service-api-key'] },
  });
  expect(response.status).toBe(200);
  return (await response.json()).data as { stopped: boolean; messageId: string };
}

async function messages(chatId: string): Promise<StoredMessage[]> {
  const response = await fetch(`${app.baseUrl}/v1/chats/${chatId}/messages`, { headers: app.headers });
  expect(response.status).toBe(200);
  return (await response.json()).data.messages;
}

describe('stop answers once the stopped reply is stored', () => {
  it('the messages read right after the stop end with the stopped reply, holding the text so far', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const { chatId, events } = await heldReply(`stop-read-${round}`);
      const stopped = await stop(chatId);
      expect(stopped.stopped).toBe(true);
      const reply = (await messages(chatId)).at(-1);
      expect(reply).toMatchObject({
        id: stopped.messageId,
        role: 'assistant',
        metadata: { finishReason: 'stopped' },
      });
      expect(reply!.parts.find((part) => part.type === 'text')?.text).toBe('one two ');
      await events.all();
      expect(events.text()).toBe('one two ');
    }
  });

  it('a regenerate sent right after the stop is answered, not refused as busy', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const id = `stop-regenerate-${round}`;
      const { chatId, events } = await heldReply(id);
      const stopped = await stop(chatId);
      expect(stopped.stopped).toBe(true);
      // Refused with 409 while a reply of the chat runs (docs/chat.md, "Regenerate").
      const regenerated = await app.post({
        agentId: 'agt_plain',
        chatId,
        trigger: 'regenerate-message',
        messageId: stopped.messageId,
        messages: [userText('count', `${id}-u1`)],
      });
      expect(regenerated.status).toBe(200);
      expect((await regenerated.json()).chatId).toBe(chatId);
      await events.all();
    }
  });
});
