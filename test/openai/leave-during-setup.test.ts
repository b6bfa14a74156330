import { expect, it, vi } from 'vitest';
import { conversationClientId } from '../../src/services/openai-chat.js';
import { CHAT_KEYS, chatRows } from '../chat/fixtures.js';
import type { TestApp } from '../helpers/app.js';
import type { FakeUpstream } from '../helpers/fake-upstream.js';
import { type OpenAIApp, useOpenAIApp } from './openai-app.js';

/**
 * docs/openai.md "A client that leaves", for a client that leaves before the reply has started:
 * while the agent's MCP servers are still being connected (here one that never answers, so the
 * set-up waits out its connect timeout).
 */
const CONNECT_TIMEOUT_MS = 3_000;
let upstream: FakeUpstream;
let t: TestApp;
let baseURL: string;
let mcp: OpenAIApp['mcp'];
useOpenAIApp(
  { mcpMode: 'stall', mcpConnectTimeoutMs: CONNECT_TIMEOUT_MS },
  (app) => ({ upstream, t, baseURL, mcp } = app),
);

it.each([
  ['streamed', true],
  ['JSON', false],
])(
  'a client that leaves while the %s reply is set up stops it: the provider is never called',
  async (_, stream) => {
    upstream.enqueue({ kind: 'text', text: 'one two three four five six' });
    const key = `left-during-setup-${String(stream)}`;
    const abort = new AbortController();
    const mcpRequestsBefore = mcp.stalledRequests;
    const request = fetch(`${baseURL}/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${CHAT_KEYS.main}`,
        'content-type': 'application/json',
        'x-atrium-conversation-key': key,
      },
      body: JSON.stringify({
        model: 'agt_tools',
        messages: [{ role: 'user', content: 'Count' }],
        stream,
      }),
      signal: abort.signal,
    }).catch(() => undefined);
    // Leave while the stalled MCP server is waited for: once it has the set-up's request (a
    // fixed wait could end before the request got there, or after the connect timeout).
    await vi.waitFor(() => expect(mcp.stalledRequests).toBeGreaterThan(mcpRequestsBefore), {
      timeout: 10_000,
      interval: 10,
    });
    abort.abort();
    await request;
    // The reply was admitted before its tools were set up: this waits for it to end, however
    // long the set-up takes.
    await t.app.persistence.idle();
    // Before, the close came before its listener (and a JSON request's was not listened for): the
    // whole reply was generated, charged and stored as finished, so the client's next turn never
    // matched the stored chat again.
    expect(upstream.requests).toHaveLength(0);
    const chat = await t.db
      .selectFrom('chats')
      .select('id')
      .where('client_id', '=', conversationClientId('usr_olivia', 'agt_tools', key))
      .executeTakeFirstOrThrow();
    expect((await chatRows(t.db, chat.id)).map((row) => row.role)).toEqual(['user']);
    upstream.requests.length = 0;
  },
);
