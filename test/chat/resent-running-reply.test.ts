/**
 * A client that resends the conversation while a reply still runs (useChat after its stream
 * broke, then the user's next message) sends the partial reply under the id the server
 * announced in `start`. The turn stores that copy; when the reply ends it takes the copy's
 * place (same position, the whole text, its usage). It used to hit the message's primary key:
 * the reply was lost, the stream ended with an error and its tokens were never charged.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatRows, userText } from './fixtures.js';
import { listeningChatApp } from './listening-app.js';
import { EventReader, textDeltas } from './sse-reader.js';

let app: Awaited<ReturnType<typeof listeningChatApp>>;
beforeAll(async () => {
  app = await listeningChatApp({ shutdownWaitMs: 50 });
});
afterAll(() => app.close());

/** A streamed reply to `first` (message `userId`) on a new chat, held after its first two words. */
async function replyHeldAfterTwoWords(text: string, userId: string) {
  app.upstream.enqueue({ kind: 'held', text, afterPieces: 2 });
  const first = await app.post({ agentId: 'agt_plain', stream: true, messages: [userText('first', userId)] });
  const events = new EventReader(first);
  await events.until(textDeltas(2));
  const start = events.chunks.find((c) => c.type === 'start') as { messageId: string };
  return { chatId: first.headers.get('x-chat-id')!, events, start };
}

describe('a resent partial assistant message while its reply still runs', () => {
  it('does not make the running reply unstorable (and unbilled)', async () => {
    const { chatId, events, start } = await replyHeldAfterTwoWords('one two three four five six', 'u1');

    // What useChat holds and resends: u1, the partial reply under the announced id, then u2.
    app.upstream.enqueue({ kind: 'text', text: 'second answer' });
    const second = await app.post({
      agentId: 'agt_plain',
      chatId,
      messages: [
        userText('first', 'u1'),
        { id: start.messageId, role: 'assistant', parts: [{ type: 'text', text: events.text() }] },
        userText('second', 'u2'),
      ],
    });
    expect(second.status).toBe(200);

    app.upstream.release();
    await events.all();
    await app.t.app.persistence.idle();

    const ledger = await app.t.db
      .selectFrom('usage_ledger')
      .selectAll()
      .where('workspace_id', '=', 'wsp_main')
      .execute();
    const chargedTokens = ledger.reduce((sum, row) => sum + Number(row.output_tokens), 0);
    const rows = await chatRows(app.t.db, chatId);
    const firstReply = rows.find((row) => row.id === start.messageId);

    // The first reply's end: not an error chunk, the full text stored in the copy's place, its
    // tokens charged (6 words of the first reply + 2 of the second).
    const storedText = (JSON.parse(firstReply!.parts) as Array<{ type: string; text?: string }>)
      .filter((part) => part.type === 'text')
      .map((part) => part.text)
      .join('');
    expect({ lastChunk: events.chunks.at(-1), storedText, chargedTokens }).toEqual({
      lastChunk: expect.objectContaining({ type: 'finish' }),
      storedText: 'one two three four five six',
      chargedTokens: 8,
    });
    expect(rows.map((row) => row.id)).toEqual(['u1', start.messageId, 'u2', expect.any(String)]);
    const chat = await app.t.db
      .selectFrom('chats')
      .select('message_count')
      .where('id', '=', chatId)
      .executeTakeFirstOrThrow();
    expect(Number(chat.message_count)).toBe(4);
  });

  it("keeps a user message sent under a running reply's id, and stores the reply under its own", async () => {
    const { chatId, events, start } = await replyHeldAfterTwoWords('one two three four', 'v1');

    app.upstream.enqueue({ kind: 'text', text: 'second answer' });
    const second = await app.post({
      agentId: 'agt_plain',
      chatId,
      messages: [userText('first', 'v1'), userText('my important question', start.messageId)],
    });
    expect(second.status).toBe(200);
    app.upstream.release();
    await events.all();
    await app.t.app.persistence.idle();

    expect(events.chunks.at(-1)).toMatchObject({ type: 'finish' });
    const rows = await chatRows(app.t.db, chatId);
    expect(rows.map((row) => row.role)).toEqual(['user', 'user', 'assistant', 'assistant']);
    expect(rows[1]).toMatchObject({ id: start.messageId, role: 'user' });
    expect(rows.map((row) => row.parts).join('\n')).toContain('one two three four');
  });
});
