import { parseJsonEventStream, type UIMessageChunk, uiMessageChunkSchema } from 'ai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { engineName, createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeAnthropic, startFakeAnthropic } from '../helpers/fake-anthropic.js';
import { chatRows, userText } from './fixtures.js';

const KEY = 'atr_ws_fixture_anthropic_owner_00000000000000';
const CLAUDE_KEY = 'sk-ant-fake-key-000000000000000000000000000000';

function setup(claude: FakeAnthropic) {
  return `
providers:
  - { id: claude, type: anthropic, baseURL: ${claude.baseURL}, apiKey: "${CLAUDE_KEY}" }
models:
  - { id: claude-test, provider: claude, model: claude-haiku-4-5, pricing: { inputPerMTok: 3, outputPerMTok: 15 } }
organizations:
  - id: org_anthropic
    name: A
    users: [{ id: usr_a, name: Ada, email: ada@a.test }]
    workspaces:
      - id: wsp_anthropic
        name: A
        models: [claude-test]
        defaultModel: claude-test
        members: [{ user: usr_a, role: owner }]
        apiKeys: [{ name: a, user: usr_a, key: "${KEY}" }]
        agents: [{ id: agt_claude, title: Claude, instructions: "Answer {{user.name}} briefly." }]
        projects:
          - { id: prj_claude, name: Notes, instructions: "Use metric units.", memory: "Ada prefers tea." }
`;
}

let claude: FakeAnthropic;
let t: TestApp;
let baseUrl: string;

beforeAll(async () => {
  claude = await startFakeAnthropic();
  t = await createTestApp({ setup: setup(claude) });
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await t.close();
  await claude.close();
});
beforeEach(() => {
  claude.requests.length = 0;
});

const headers = { 'content-type': 'application/json', 'x-service-api-key': KEY };

async function post(body: Record<string, unknown>) {
  return fetch(`${baseUrl}/v1/chat`, { method: 'POST', headers, body: JSON.stringify(body) });
}

async function streamedChunks(response: Response): Promise<UIMessageChunk[]> {
  const chunks: UIMessageChunk[] = [];
  const reader = parseJsonEventStream({ stream: response.body!, schema: uiMessageChunkSchema }).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return chunks;
    if (value.success) chunks.push(value.value as UIMessageChunk);
    else if (value.rawValue !== '[DONE]') throw value.error;
  }
}

/** The chat's rows once the stream's own write has been stored (it happens after the response ends). */
async function settledRows(chatId: string) {
  await t.app.persistence.idle();
  return chatRows(t.db, chatId);
}

describe(`the anthropic provider over HTTP (${engineName})`, () => {
  it('sends the key, system prompt, project context and temperature, and stores the reply with its usage and cost', async () => {
    claude.enqueue({ kind: 'text', text: 'Twenty degrees, with tea.', usage: { input: 1000, output: 200 } });
    const res = await post({
      agentId: 'agt_claude',
      projectId: 'prj_claude',
      temperature: 0.3,
      systemVariables: { user: { name: 'Ada' } },
      messages: [userText('How warm is it?')],
    });
    expect(res.status).toBe(200);
    const reply = (await res.json()) as { text: string; messageId: string; chatId: string };
    expect(reply.text).toBe('Twenty degrees, with tea.');

    const sent = claude.lastRequest();
    expect(sent.path).toBe('/v1/messages');
    expect(sent.headers['x-api-key']).toBe(CLAUDE_KEY);
    expect(sent.headers['anthropic-version']).toBeTruthy();
    expect(sent.body.model).toBe('claude-haiku-4-5');
    expect(sent.body.temperature).toBe(0.3);
    const system = JSON.stringify(sent.body.system);
    expect(system).toContain('Answer Ada briefly.');
    expect(system).toContain('Use metric units.');
    expect(system).toContain('Ada prefers tea.');
    expect(sent.body.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'How warm is it?' }] },
    ]);

    const [, assistant] = await chatRows(t.db, reply.chatId);
    expect(assistant?.id).toBe(reply.messageId);
    expect(assistant?.input_tokens).toBe(1000);
    expect(assistant?.output_tokens).toBe(200);
    // 1000 × $3/MTok + 200 × $15/MTok
    expect(assistant?.cost_usd).toBeCloseTo(0.006, 9);
  });

  it('streams the reply as UI message chunks and stores the same text with its usage', async () => {
    const text = 'Streamed from the fake Claude, word by word.';
    claude.enqueue({ kind: 'text', text, usage: { input: 40, output: 9 } });
    const res = await post({ agentId: 'agt_claude', stream: true, messages: [userText('Stream it')] });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    const chunks = await streamedChunks(res);
    expect(claude.lastRequest().body.stream).toBe(true);
    const deltas = chunks.filter((c) => c.type === 'text-delta');
    // Pieces that arrive together may share one text-delta event.
    expect(deltas.length).toBeGreaterThanOrEqual(1);
    expect(deltas.map((c) => c.delta).join('')).toBe(text);
    expect(chunks.at(-1)?.type).toBe('finish');

    const rows = await settledRows(res.headers.get('x-chat-id')!);
    expect(rows).toHaveLength(2);
    expect(rows[1]?.role).toBe('assistant');
    const parts = JSON.parse(rows[1]!.parts) as Array<{ type: string; text?: string }>;
    expect(parts.filter((part) => part.type === 'text').map((part) => part.text)).toEqual([text]);
    expect(rows[1]?.input_tokens).toBe(40);
    expect(rows[1]?.output_tokens).toBe(9);
  });

  it('runs an agent and records the run, completed and then failed', async () => {
    claude.enqueue(
      { kind: 'text', text: 'Run done.', usage: { input: 30, output: 3 } },
      { kind: 'fail', status: 500, message: 'down' },
    );
    const runOnce = () =>
      fetch(`${baseUrl}/v1/agents/agt_claude/runs`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ message: 'Go' }),
      });
    const done = await runOnce();
    expect(done.status).toBe(200);
    const { data } = (await done.json()) as { data: { id: string; status: string; agentResponse: string } };
    expect(data).toMatchObject({ status: 'completed', agentResponse: 'Run done.' });
    expect(claude.lastRequest().body.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Go' }] },
    ]);

    const failed = await runOnce();
    expect(failed.status).toBe(502);
    const error = (await failed.json()) as { code: string; details: { runId: string } };
    expect(error.code).toBe('upstream_error');
    const runs = await t.db
      .selectFrom('agent_runs')
      .select(['id', 'status'])
      .where('id', 'in', [data.id, error.details.runId])
      .execute();
    expect(Object.fromEntries(runs.map((r) => [r.id, r.status]))).toEqual({
      [data.id]: 'completed',
      [error.details.runId]: 'failed',
    });
  });

  it('answers 502 upstream_error for an HTTP failure and keeps only the user message', async () => {
    claude.enqueue({ kind: 'fail', status: 529, message: 'Overloaded' });
    const res = await post({ agentId: 'agt_claude', messages: [userText('fail please')] });
    expect(res.status).toBe(502);
    const body = await res.json();
    expect(claude.requests).toHaveLength(1);
    const chats = await t.db.selectFrom('messages').select(['chat_id', 'role', 'parts']).execute();
    const mine = chats.filter((row) => row.parts.includes('fail please'));
    expect(body).toEqual({
      code: 'upstream_error',
      message: 'The model provider answered HTTP 529',
      details: { providerStatus: 529, chatId: mine[0]!.chat_id },
    });
    expect(mine.map((row) => row.role)).toEqual(['user']);
    expect(chats.filter((row) => row.chat_id === mine[0]!.chat_id)).toHaveLength(1);
  });

  it.each([
    ['an error event', { kind: 'error-event', text: 'This reply is cut short here', afterPieces: 2 }],
    ['a dropped connection', { kind: 'disconnect', text: 'This reply is cut short here', afterPieces: 2 }],
  ] as const)(
    'turns %s mid-stream into an error chunk and stores the text so far as an errored reply',
    async (_what, reply) => {
      claude.enqueue(reply);
      const res = await post({ agentId: 'agt_claude', stream: true, messages: [userText('cut it')] });
      const chunks = await streamedChunks(res);
      const types = chunks.map((c) => c.type);
      expect(types[0]).toBe('start');
      expect(types).toContain('error');
      expect(chunks.find((c) => c.type === 'error')).toEqual({
        type: 'error',
        errorText: 'The model provider failed',
      });
      expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'error' });
      expect(chunks.map((c) => (c.type === 'text-delta' ? c.delta : '')).join('')).toBe('This reply ');
      const chatId = res.headers.get('x-chat-id')!;
      const rows = await settledRows(chatId);
      expect(rows.map((row) => [row.role, row.finish_reason])).toEqual([
        ['user', null],
        ['assistant', 'error'],
      ]);
      const parts = JSON.parse(rows[1]!.parts) as Array<{ type: string; text?: string }>;
      expect(parts.filter((p) => p.type === 'text').map((p) => p.text)).toEqual(['This reply ']);
    },
  );
});
