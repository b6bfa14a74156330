/**
 * An MCP tool result of any size was read whole, stored whole in the reply's tool part and sent
 * whole to the model (and again at each later step of the reply): a 48 MiB result grew the process by about
 * 600 MiB for one request. Each response is now read up to MAX_MCP_RESPONSE_BYTES (a larger one
 * fails the call as soon as it passes the limit) and each result kept up to
 * MAX_MCP_TOOL_OUTPUT_CHARS (cut, with a notice the model reads).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { MAX_MCP_RESPONSE_BYTES } from '../../src/models/tools/mcp-fetch.js';
import {
  cutToolResult,
  MAX_MCP_TOOL_OUTPUT_CHARS,
  withCutResults,
} from '../../src/models/tools/mcp-output.js';
import type { TestApp } from '../helpers/app.js';
import type { FakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatRows, giveAgentMcpServer, postChat, useChatApp, userText } from './fixtures.js';
import { startRawMcpServer } from './raw-mcp-server.js';

/** Four times what Atrium reads of one response (48 MiB made one request take about 600 MiB). */
const HUGE = 'x'.repeat(4 * MAX_MCP_RESPONSE_BYTES);
/** Past what a result may keep, within what a response may bring. */
const LONG = 'y'.repeat(MAX_MCP_TOOL_OUTPUT_CHARS + 5_000);

type RawMcpServer = Awaited<ReturnType<typeof startRawMcpServer>>;
const answerKinds = ['json', 'chunked-json', 'event-stream'] as const;

let upstream: FakeUpstream;
let t: TestApp;
const servers = new Map<(typeof answerKinds)[number], RawMcpServer>();
useChatApp(
  (app) => {
    ({ upstream, t } = app);
  },
  // Reading a listing of several MiB takes a loaded machine seconds.
  { mcpConnectTimeoutMs: 10_000 },
);
beforeAll(async () => {
  for (const answerAs of answerKinds) {
    servers.set(
      answerAs,
      await startRawMcpServer({
        answerAs,
        tools: [
          { name: 'dump', inputSchema: { type: 'object', properties: {} } },
          { name: 'long', inputSchema: { type: 'object', properties: {} } },
        ],
        callResult: (name) => ({ content: [{ type: 'text', text: name === 'dump' ? HUGE : LONG }] }),
      }),
    );
  }
});
afterAll(async () => {
  await Promise.all([...servers.values()].map((server) => server.close()));
});
beforeEach(() => {
  upstream.requests.length = 0;
});

/** One turn in which the model calls `srv_<tool>` once: the stored tool part and what the model got. */
async function callTool(server: RawMcpServer, tool: string) {
  await giveAgentMcpServer(t.db, 'agt_tools', server.url);
  upstream.enqueue(
    { kind: 'tool-calls', calls: [{ name: `srv_${tool}`, arguments: {} }] },
    { kind: 'text', text: 'done' },
  );
  const res = await postChat(t, { agentId: 'agt_tools', messages: [userText('go')] });
  expect(res.statusCode).toBe(200);
  const reply = (await chatRows(t.db, res.json().chatId)).find((row) => row.role === 'assistant')!;
  const toolPart = (JSON.parse(reply.parts) as Array<Record<string, unknown>>).find(
    (part) => part.type === `dynamic-tool`,
  );
  const toModel = upstream.requests[1]?.body.messages as Array<{ role: string; content: unknown }>;
  return {
    chatId: res.json().chatId as string,
    replyId: reply.id,
    storedChars: reply.parts.length,
    toolPart: toolPart as {
      state: string;
      output?: { content: Array<{ text: string }> };
      errorText?: string;
    },
    toolMessage: JSON.stringify(toModel.find((message) => message.role === 'tool')?.content),
  };
}

describe('an MCP tool result larger than Atrium reads of one response', () => {
  for (const answerAs of answerKinds) {
    it(`fails the call past the limit, read no further, as a tool error the model sees (${answerAs})`, async () => {
      const server = servers.get(answerAs)!;
      const cutShortBefore = server.answersCutShort;
      const { toolPart, toolMessage, storedChars } = await callTool(server, 'dump');
      expect(toolPart.state).toBe('output-error');
      expect(toolPart.errorText).toContain(`larger than ${MAX_MCP_RESPONSE_BYTES} bytes`);
      expect(toolMessage).toContain(`larger than ${MAX_MCP_RESPONSE_BYTES} bytes`);
      expect(storedChars).toBeLessThan(10_000);
      // Atrium closed the connection rather than read the rest.
      await vi.waitFor(() => expect(server.answersCutShort).toBe(cutShortBefore + 1), { timeout: 5_000 });
    }, 30_000);
  }
});

describe('an MCP tool listing larger than Atrium reads of one server', () => {
  it('is read up to 8 MiB in all, though each page is within what one response may bring', async () => {
    // Four pages of 3 MiB each: all of them used to be read, kept and sent to the model.
    const raw = await startRawMcpServer({
      tools: Array.from({ length: 4 }, (_, i) => ({
        name: `big${i}`,
        description: 'x'.repeat(3 * 1024 * 1024),
        inputSchema: { type: 'object' },
      })),
      pageSize: 1,
    });
    try {
      await giveAgentMcpServer(t.db, 'agt_tools', raw.url);
      upstream.enqueue({ kind: 'text', text: 'fine' });
      const res = await postChat(t, { agentId: 'agt_tools', messages: [userText('hi')] });
      expect(res.statusCode).toBe(200);
      // Two pages fit in 8 MiB; the third passes it, and the listing ends there.
      expect(upstream.requests[0]!.body.tools!.map((tool) => tool.function.name)).toEqual([
        'srv_big0',
        'srv_big1',
      ]);
      expect(res.json().warnings).toEqual([
        {
          tool: 'srv',
          code: 'mcp_too_many_tools',
          message: `MCP server lists more than ${8 * 1024 * 1024} bytes of tools, more than Atrium reads; its first 2 usable tools are offered`,
        },
      ]);
    } finally {
      await raw.close();
    }
  }, 30_000);
});

describe('an MCP tool result longer than a tool result may keep', () => {
  it('is stored and sent to the model cut, ending with a notice that says so', async () => {
    const { toolPart, toolMessage } = await callTool(servers.get('json')!, 'long');
    expect(toolPart.state).toBe('output-available');
    const text = toolPart.output!.content[0]!.text;
    expect(text.startsWith('y'.repeat(MAX_MCP_TOOL_OUTPUT_CHARS))).toBe(true);
    expect(text.slice(MAX_MCP_TOOL_OUTPUT_CHARS)).toMatch(
      new RegExp(`^\\n\\n\\[Atrium cut this tool result: it came to ${LONG.length} characters`),
    );
    expect(toolMessage.length).toBeLessThan(MAX_MCP_TOOL_OUTPUT_CHARS + 1_000);
    expect(toolMessage).toContain('[Atrium cut this tool result');
  });
});

describe('a tool result of an earlier turn', () => {
  it('is not given to the model again, cut or not: stored whole by an older version or sent back by the client', async () => {
    const { chatId, replyId } = await callTool(servers.get('json')!, 'long');
    // The reply as a version before the limit stored it: the result whole.
    const uncut = [
      { type: 'step-start' },
      {
        type: 'dynamic-tool',
        toolName: 'srv_long',
        toolCallId: 'call_old',
        state: 'output-available',
        input: {},
        output: { content: [{ type: 'text', text: LONG }] },
      },
      { type: 'text', text: 'done', state: 'done' },
    ];
    await t.db
      .updateTable('messages')
      .set({ parts: JSON.stringify(uncut) })
      .where('chat_id', '=', chatId)
      .where('id', '=', replyId)
      .execute();
    upstream.requests.length = 0;
    upstream.enqueue({ kind: 'text', text: 'again' });
    const res = await postChat(t, {
      agentId: 'agt_tools',
      chatId,
      messages: [
        // A tool part the client holds and sends back (useChat sends the whole conversation).
        {
          id: 'msg_client_tool',
          role: 'assistant',
          parts: [
            {
              type: 'tool-lookup',
              toolCallId: 'call_client',
              state: 'output-available',
              input: {},
              output: LONG,
            },
          ],
        },
        userText('and now?'),
      ],
    });
    expect(res.statusCode).toBe(200);
    // The model gets the history's text, no tool result, so nothing of either output.
    const sent = JSON.stringify(upstream.requests[0]!.body.messages);
    expect(sent).not.toContain('yyyy');
    expect(sent.length).toBeLessThan(1_000);
    // Stored data is read back as it was stored.
    const page = await t.app.inject({
      method: 'GET',
      url: `/v1/chats/${chatId}/messages`,
      headers: { 'x-service-api-key': CHAT_KEYS.main },
    });
    const messages = page.json().data.messages as Array<{ id: string; parts: unknown[] }>;
    expect(messages.find((message) => message.id === replyId)!.parts).toEqual(uncut);
    expect(messages.find((message) => message.id === 'msg_client_tool')!.parts).toEqual([
      expect.objectContaining({ type: 'tool-lookup', output: LONG }),
    ]);
  });
});

describe('cutToolResult', () => {
  it('keeps a result within the limit as it is', () => {
    const result = { content: [{ type: 'text', text: 'short' }], structuredContent: { a: 1 } };
    expect(cutToolResult(result, 100)).toBe(result);
  });

  it('keeps the items that fit, cuts the first text that does not, and counts what it left out', () => {
    const result = {
      content: [
        { type: 'text', text: 'a'.repeat(60) },
        { type: 'text', text: 'b'.repeat(60) },
        { type: 'image', data: 'c'.repeat(60), mimeType: 'image/png' },
      ],
      structuredContent: { big: 'd'.repeat(60) },
      isError: true,
    };
    const cut = cutToolResult(result, 100) as {
      content: Array<{ type: string; text: string }>;
      isError: boolean;
    };
    expect(cut.isError).toBe(true);
    expect(cut).not.toHaveProperty('structuredContent');
    expect(cut.content).toHaveLength(2);
    expect(cut.content[0]!.text).toBe('a'.repeat(60));
    expect(cut.content[1]!.text).toMatch(
      /^b{40}\n\n\[Atrium cut this tool result: .*1 more content item left out/,
    );
  });

  it('leaves out an image that does not fit, with the notice as a text item', () => {
    const cut = cutToolResult(
      { content: [{ type: 'image', data: 'c'.repeat(200), mimeType: 'image/png' }] },
      100,
    ) as { content: Array<{ type: string; text: string }> };
    expect(cut.content).toEqual([
      { type: 'text', text: expect.stringMatching(/^\[Atrium cut this tool result/) },
    ]);
  });

  it('does not end a cut text with half of a surrogate pair', () => {
    const cut = cutToolResult({ content: [{ type: 'text', text: `${'a'.repeat(99)}😀😀` }] }, 100) as {
      content: Array<{ text: string }>;
    };
    expect(cut.content[0]!.text.startsWith(`${'a'.repeat(99)}\n\n[`)).toBe(true);
  });

  it('counts and drops what lies beside the text (an item’s annotations, the result’s _meta)', () => {
    const cut = cutToolResult(
      {
        content: [{ type: 'text', text: 'ok', annotations: { note: 'b'.repeat(500) } }],
        _meta: { blob: 'c'.repeat(500) },
        isError: false,
      },
      100,
    );
    expect(cut).toEqual({ content: [{ type: 'text', text: 'ok' }], isError: false });
  });

  it('offers a tool named __proto__ like any other', () => {
    const tools = Object.create(null) as Record<string, unknown>;
    tools.__proto__ = { inputSchema: {}, execute: async () => ({ content: [] }) };
    tools.plain = { inputSchema: {}, execute: async () => ({ content: [] }) };
    expect(Object.keys(withCutResults(tools as never))).toEqual(['__proto__', 'plain']);
  });

  it('cuts a tool error message as well', async () => {
    const tools = withCutResults(
      {
        failing: {
          inputSchema: {} as never,
          execute: async () => {
            throw new Error('e'.repeat(500));
          },
        },
      },
      100,
    );
    await expect(tools.failing!.execute!({}, { toolCallId: 'c', messages: [] })).rejects.toThrow(
      /^e{100}\n\n\[Atrium cut this tool result/,
    );
  });
});
