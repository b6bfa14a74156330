/**
 * REVIEW: a client that resends the conversation while a reply is still being generated — e.g.
 * `useChat` after its stream broke (the reply goes on server-side, by design) and the user sends
 * the next message — includes the partial assistant message under the id the server announced
 * in `start` (`messageId`). The history merge stores that partial message as a new assistant
 * row with that id, so when the real reply ends, storeReply's INSERT hits the (chat_id, id)
 * primary key, withConflictRetry retries it 5 times and gives up: the full reply is lost (the
 * chat keeps the client's truncated copy), the stream ends with "The reply could not be stored",
 * and — the same transaction holding the ledger row — its tokens are never charged, so the
 * monthly limits and spend caps can be dodged on purpose.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatRows, userText } from '../chat/fixtures.js';
import { listeningChatApp } from '../chat/listening-app.js';
import { EventReader, textDeltas } from '../chat/sse-reader.js';

let app: Awaited<ReturnType<typeof listeningChatApp>>;
beforeAll(async () => {
  app = await listeningChatApp({ shutdownWaitMs: 50 });
});
afterAll(() => app.close());

describe('a resent partial assistant message while its reply still runs', () => {
  it('does not make the running reply unstorable (and unbilled)', async () => {
    app.upstream.enqueue({ kind: 'held', text: 'one two three four five six', afterPieces: 2 });
    const first = await app.post({ agentId: 'agt_plain', stream: true, messages: [userText('first', 'u1')] });
    const chatId = first.headers.get('x-chat-id')!;
    const events = new EventReader(first);
    await events.until(textDeltas(2));
    const start = events.chunks.find((c) => c.type === 'start') as { messageId: string };

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

    // The first reply's end: not an error chunk, the full text stored, its tokens charged
    // (6 words of the first reply + 2 of the second).
    const storedText = (JSON.parse(firstReply!.parts) as Array<{ type: string; text?: string }>)
      .filter((part) => part.type === 'text')
      .map((part) => part.text)
      .join('');
    expect({ lastChunk: events.chunks.at(-1), storedText, chargedTokens }).toEqual({
      lastChunk: expect.objectContaining({ type: 'finish' }),
      storedText: 'one two three four five six',
      chargedTokens: 8,
    });
  });
});
