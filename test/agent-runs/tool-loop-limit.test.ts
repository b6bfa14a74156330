import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, type RecordedRequest, startFakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, chatRows, chatSetup, userText } from '../chat/fixtures.js';
import { MAX_STEPS } from '../../src/services/reply-steps.js';

/**
 * A model that calls a tool at every step it may: the tool loop's last step offers it no tool
 * (`tool_choice: "none"`), so the reply ends with an answer built from the tool results, never
 * empty on a call nobody reads (decisions.md, "Agent runs"; docs/chat.md, "Tools").
 */

const ANSWER = 'Here is what the notes say.';
let upstream: FakeUpstream;
let t: TestApp;

/** The request lets the model call a tool: tools are offered and `tool_choice` is not `none`. */
function mayCallTools(request: RecordedRequest): boolean {
  return (request.body.tools?.length ?? 0) > 0 && request.body.tool_choice !== 'none';
}

beforeAll(async () => {
  upstream = await startFakeUpstream();
  // Calls `remember` (offered in project chats) whenever it may, else answers.
  upstream.respond = (request) =>
    mayCallTools(request)
      ? { kind: 'tool-calls', calls: [{ name: 'remember', arguments: { note: 'Noted once more.' } }] }
      : { kind: 'text', text: ANSWER };
  t = await createTestApp({ setup: chatSetup(upstream) });
});
afterAll(async () => {
  await t.close();
  await upstream.close();
});
beforeEach(() => {
  upstream.requests.length = 0;
});

function post(url: string, payload: Record<string, unknown>) {
  return t.app.inject({ method: 'POST', url, headers: { 'x-service-api-key': CHAT_KEYS.main }, payload });
}

/** Every request of the loop but the last let the model call tools; the last offered none usable. */
function expectToolsWithheldOnLastStep() {
  expect(upstream.requests).toHaveLength(MAX_STEPS);
  const last = upstream.requests.at(-1)!;
  expect(upstream.requests.slice(0, -1).every(mayCallTools)).toBe(true);
  expect(mayCallTools(last)).toBe(false);
  expect(last.body.tool_choice).toBe('none');
  // The model reads every tool result so far when it answers.
  expect(last.body.messages!.filter((message) => message.role === 'tool')).toHaveLength(MAX_STEPS - 1);
}

async function storedReply(chatId: string) {
  const assistant = (await chatRows(t.db, chatId)).filter((row) => row.role === 'assistant');
  expect(assistant).toHaveLength(1);
  const parts = JSON.parse(assistant[0]!.parts) as Array<{ type: string; text?: string }>;
  return {
    text: parts.map((part) => (part.type === 'text' ? part.text : '')).join(''),
    finishReason: assistant[0]!.finish_reason,
    toolCalls: parts.filter((part) => part.type === 'tool-remember').length,
  };
}

describe('a model that calls tools at every step it may', () => {
  it('POST /v1/agents/{id}/runs: the run completes with the answer of the last step, which lets the model call no tool', async () => {
    const res = await post('/v1/agents/agt_plain/runs', { message: 'Take notes', projectId: 'prj_docs' });
    expect(res.statusCode, res.body).toBe(200);
    const { data } = res.json();
    expect(data).toMatchObject({ status: 'completed', agentResponse: ANSWER });
    expectToolsWithheldOnLastStep();
    expect(await storedReply(data.chatId)).toEqual({
      text: ANSWER,
      finishReason: 'stop',
      toolCalls: MAX_STEPS - 1,
    });
    const row = await t.db
      .selectFrom('agent_runs')
      .select('response')
      .where('id', '=', data.id)
      .executeTakeFirstOrThrow();
    expect(row.response).toBe(ANSWER);
  });

  it('a model that calls a tool on the last step too, told to call none: the run completes on that call, not as a failure', async () => {
    // Queued replies come before `respond`: every step calls `remember`, the eighth as well.
    upstream.enqueue(
      ...Array.from({ length: MAX_STEPS }, () => ({
        kind: 'tool-calls' as const,
        calls: [{ name: 'remember', arguments: { note: 'Still noting.' } }],
      })),
    );
    const res = await post('/v1/agents/agt_plain/runs', { message: 'Take notes', projectId: 'prj_docs' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data).toMatchObject({ status: 'completed', agentResponse: '' });
    expect(upstream.requests).toHaveLength(MAX_STEPS);
    expect(upstream.requests.at(-1)!.body.tool_choice).toBe('none');
    expect(await storedReply(res.json().data.chatId)).toEqual({
      text: '',
      finishReason: 'tool-calls',
      toolCalls: MAX_STEPS,
    });
  });

  it('POST /v1/chat (JSON): the answer, stored with finishReason stop', async () => {
    const res = await post('/v1/chat', {
      agentId: 'agt_plain',
      projectId: 'prj_docs',
      messages: [userText('Take notes')],
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ text: ANSWER });
    expectToolsWithheldOnLastStep();
    expect(await storedReply(res.json().chatId)).toMatchObject({ text: ANSWER, finishReason: 'stop' });
  });

  it('POST /v1/chat (streamed): the answer streams after the tool steps, and finishes with stop', async () => {
    const res = await post('/v1/chat', {
      agentId: 'agt_plain',
      projectId: 'prj_docs',
      stream: true,
      messages: [userText('Take notes')],
    });
    expect(res.statusCode).toBe(200);
    const chunks = res.body
      .split('\n\n')
      .filter((line) => line.startsWith('data: {'))
      .map((line) => JSON.parse(line.slice(6)) as { type: string; delta?: string; finishReason?: string });
    const text = chunks.map((chunk) => (chunk.type === 'text-delta' ? chunk.delta : '')).join('');
    expect(text).toBe(ANSWER);
    expect(chunks.filter((chunk) => chunk.type === 'tool-output-available')).toHaveLength(MAX_STEPS - 1);
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'stop' });
    expectToolsWithheldOnLastStep();
    expect(await storedReply(res.headers['x-chat-id'] as string)).toMatchObject({
      text: ANSWER,
      finishReason: 'stop',
    });
  });
});

/**
 * A reply without tools: `tool_choice: "none"` never reaches the provider (its package drops a
 * tool choice when no tools are declared), so the last step says it in the system prompt.
 */
describe('a model without tools that makes up a tool call at every step', () => {
  const NOTE = 'No tools are available: answer now from what you have.';

  /** The system prompt the request sent (its first message), or undefined. */
  function systemOf(request: RecordedRequest): string | undefined {
    const first = request.body.messages?.[0];
    return first?.role === 'system' ? String(first.content) : undefined;
  }

  /** Requests of the reply of an agent without tools (a sub-agent's too). */
  const toolless = () => upstream.requests.filter((request) => request.body.tools === undefined);

  let respond: FakeUpstream['respond'];
  beforeEach(() => {
    respond = upstream.respond;
    // Makes up a call (no tools were offered) unless the system prompt says to answer; a lead
    // (tools offered) asks its sub-agent agt_plain once, then answers.
    upstream.respond = (request) => {
      if (request.body.tools !== undefined) {
        return request.body.messages!.some((message) => message.role === 'tool')
          ? { kind: 'text', text: 'The lead’s answer.' }
          : { kind: 'tool-calls', calls: [{ name: 'agt_plain', arguments: { message: 'Look it up' } }] };
      }
      return systemOf(request)?.endsWith(NOTE)
        ? { kind: 'text', text: ANSWER }
        : { kind: 'tool-calls', calls: [{ name: 'lookup', arguments: { term: 'notes' } }] };
    };
  });
  afterEach(() => {
    upstream.respond = respond;
  });

  /** The loop's 8 requests: only the last one's system prompt ends with the note; no tool choice reaches the provider. */
  function expectNoteOnLastStep(requests: RecordedRequest[]) {
    expect(requests).toHaveLength(MAX_STEPS);
    const last = requests.at(-1)!;
    expect(last.body.tools).toBeUndefined();
    expect(last.body.tool_choice).toBeUndefined();
    expect(systemOf(last)).toMatch(new RegExp(`(^|\\n\\n)${NOTE}$`));
    // The system prompt of the earlier steps, with the note after it.
    expect(systemOf(last)).toBe(
      systemOf(requests[0]!) === undefined ? NOTE : `${systemOf(requests[0]!)}\n\n${NOTE}`,
    );
    expect(requests.slice(0, -1).every((request) => !systemOf(request)?.includes(NOTE))).toBe(true);
    // The model reads each made-up call's error when it answers.
    expect(last.body.messages!.filter((message) => message.role === 'tool')).toHaveLength(MAX_STEPS - 1);
  }

  it('POST /v1/chat streamed (the plain path) and JSON: the last step asks for an answer in the system prompt', async () => {
    const streamed = await post('/v1/chat', {
      agentId: 'agt_plain',
      stream: true,
      messages: [userText('Hi')],
    });
    expect(streamed.statusCode).toBe(200);
    expectNoteOnLastStep(upstream.requests);
    expect(await storedReply(streamed.headers['x-chat-id'] as string)).toMatchObject({
      text: ANSWER,
      finishReason: 'stop',
    });

    upstream.requests.length = 0;
    const json = await post('/v1/chat', { agentId: 'agt_plain', messages: [userText('Hi')] });
    expect(json.statusCode, json.body).toBe(200);
    expect(json.json()).toMatchObject({ text: ANSWER });
    expectNoteOnLastStep(upstream.requests);
  });

  it('POST /v1/agents/{id}/runs and a sub-agent’s call: the answer of the last step', async () => {
    const run = await post('/v1/agents/agt_plain/runs', { message: 'Hi' });
    expect(run.statusCode, run.body).toBe(200);
    expect(run.json().data).toMatchObject({ status: 'completed', agentResponse: ANSWER });
    expectNoteOnLastStep(upstream.requests);

    upstream.requests.length = 0;
    const lead = await post('/v1/agents/agt_lead/runs', { message: 'Ask plain' });
    expect(lead.statusCode, lead.body).toBe(200);
    expectNoteOnLastStep(toolless());
    const sub = await t.db
      .selectFrom('agent_runs')
      .select(['status', 'response'])
      .where('chat_id', '=', lead.json().data.chatId)
      .where('agent_id', '=', 'agt_plain')
      .execute();
    expect(sub).toEqual([{ status: 'completed', response: ANSWER }]);
  });
});
