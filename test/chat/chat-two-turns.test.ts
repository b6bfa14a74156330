/**
 * A second turn sent on a chat while its first reply still runs: both replies are running
 * replies of their own. Before, the second replaced the first in the process's registry, so the
 * first no longer counted against ATRIUM_MAX_CONCURRENT_REPLIES, a stop reached only the second,
 * and shutdown neither interrupted nor waited for the first.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatRows, userText } from './fixtures.js';
import { listeningChatApp } from './listening-app.js';
import { EventReader, textDeltas } from './sse-reader.js';

let app: Awaited<ReturnType<typeof listeningChatApp>>;
beforeAll(async () => {
  app = await listeningChatApp({ env: { ATRIUM_MAX_CONCURRENT_REPLIES: '2' }, shutdownWaitMs: 50 });
});
afterAll(() => app.close());

describe('two replies running on one chat', () => {
  it('both count against the limit, a stop ends both, and both are stored', async () => {
    app.upstream.enqueue({ kind: 'held', text: 'one two three four', afterPieces: 2 });
    const first = await app.post({ agentId: 'agt_plain', stream: true, messages: [userText('first')] });
    const chatId = first.headers.get('x-chat-id')!;
    const firstEvents = new EventReader(first);
    await firstEvents.until(textDeltas(2));

    app.upstream.enqueue({ kind: 'held', text: 'uno dos tres cuatro', afterPieces: 2 });
    const second = await app.post({
      agentId: 'agt_plain',
      stream: true,
      chatId,
      messages: [userText('second')],
    });
    expect(second.status).toBe(200);
    const secondEvents = new EventReader(second);
    await secondEvents.until(textDeltas(2));

    // Two replies run on this process: a third, on another chat, is over the limit of 2.
    const third = await app.post({ agentId: 'agt_plain', messages: [userText('third')] });
    expect(third.status).toBe(503);

    const stop = await fetch(`${app.baseUrl}/v1/chat/${chatId}/stop`, {
      method: 'POST',
      headers: app.headers,
    });
    expect((await stop.json()).data.stopped).toBe(true);
    await Promise.all([firstEvents.all(), secondEvents.all()]);
    for (const events of [firstEvents, secondEvents]) {
      expect(events.chunks.at(-1)).toMatchObject({
        type: 'finish',
        messageMetadata: { finishReason: 'stopped' },
      });
    }
    await app.t.app.persistence.idle();
    const replies = (await chatRows(app.t.db, chatId)).filter((row) => row.role === 'assistant');
    expect(replies.map((row) => row.finish_reason)).toEqual(['stopped', 'stopped']);
  });
});
