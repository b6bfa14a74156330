import { APICallError, JSONParseError, RetryError, TypeValidationError } from 'ai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { serializeErrorForLog } from '../../src/logging/error-log.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { type FakeUpstream, startFakeUpstream } from '../helpers/fake-upstream.js';
import { UPSTREAM_KEY, userText } from './fixtures.js';

/** Text that must never reach a log line: every part of a conversation, and the provider's body. */
const SECRETS = {
  agentInstructions: 'SECRET-AGENT-INSTRUCTIONS-7731',
  subAgentInstructions: 'SECRET-SUB-AGENT-INSTRUCTIONS-2286',
  projectInstructions: 'SECRET-PROJECT-INSTRUCTIONS-4410',
  memory: 'SECRET-PROJECT-MEMORY-9902',
  userMessage: 'SECRET-USER-MESSAGE-5521',
  runMessage: 'SECRET-RUN-MESSAGE-6640',
  subAgentQuestion: 'SECRET-SUB-AGENT-QUESTION-1187',
};
const KEY = 'atr_ws_fixture_logs_main_owner_0000000000000000';

function setup(upstream: FakeUpstream) {
  return `
providers:
  - { id: fake, type: openai-compatible, baseURL: ${upstream.baseURL}, apiKey: "${UPSTREAM_KEY}" }
models:
  - { id: fake-small, provider: fake, model: small-1, pricing: { inputPerMTok: 1, outputPerMTok: 2 } }
organizations:
  - id: org_logs
    name: Logs
    users:
      - { id: usr_logs, name: Lou, email: lou@logs.test }
    workspaces:
      - id: wsp_logs
        name: Logs
        models: [fake-small]
        defaultModel: fake-small
        members:
          - { user: usr_logs, role: owner }
        apiKeys:
          - { name: owner, user: usr_logs, key: "${KEY}" }
        agents:
          - { id: agt_secret, title: Secret, instructions: "${SECRETS.agentInstructions}" }
          - { id: agt_sub, title: Sub, instructions: "${SECRETS.subAgentInstructions}" }
          - { id: agt_boss, title: Boss, instructions: "${SECRETS.agentInstructions}", orchestration: { agents: [agt_sub] } }
        projects:
          - { id: prj_secret, name: Secret, instructions: "${SECRETS.projectInstructions}", memory: "${SECRETS.memory}" }
`;
}

/** The provider's error body has fields beyond its message; none of them may be logged. */
const PROVIDER_BODY_MARKER = 'server_error';

let upstream: FakeUpstream;
let t: TestApp;
let baseUrl: string;
const lines: string[] = [];

beforeAll(async () => {
  upstream = await startFakeUpstream();
  t = await createTestApp({
    setup: setup(upstream),
    env: { LOG_LEVEL: 'info' },
    logStream: { write: (line: string) => void lines.push(line) },
  });
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await t.close();
  await upstream.close();
});
beforeEach(() => {
  lines.length = 0;
  upstream.requests.length = 0;
});

function post(url: string, payload: Record<string, unknown>) {
  return fetch(`${baseUrl}${url}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-service-api-key': KEY },
    body: JSON.stringify(payload),
  });
}

function expectNoConversationInLogs() {
  expect(lines.length).toBeGreaterThan(0);
  const all = lines.join('');
  for (const secret of Object.values(SECRETS)) expect(all).not.toContain(secret);
  expect(all).not.toContain(PROVIDER_BODY_MARKER);
  expect(all).not.toContain('requestBodyValues');
  expect(all).not.toContain('responseBody');
  expect(all).not.toContain(UPSTREAM_KEY);
}

/** The log line of the failure: status, provider endpoint, model and request ids are there. */
function failureLine(message: string) {
  const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  const entry = entries.find((e) => e.msg === message);
  expect(entry, `a "${message}" line in ${lines.join('')}`).toBeDefined();
  return entry as { reqId: string; level: number; code: string; err: Record<string, unknown> };
}

describe('provider failures are logged without the conversation', () => {
  it('a JSON chat in a project: the 502 is logged with status, endpoint, model and request ids only', async () => {
    upstream.enqueue({ kind: 'fail', status: 500, message: 'model exploded' });
    const res = await post('/v1/chat', {
      agentId: 'agt_secret',
      projectId: 'prj_secret',
      messages: [userText(SECRETS.userMessage)],
    });
    expect(res.status).toBe(502);
    // The prompt did reach the provider, so its absence from the log is meaningful.
    expect(JSON.stringify(upstream.lastRequest().body)).toContain(SECRETS.memory);
    expectNoConversationInLogs();
    const entry = failureLine('request failed');
    expect(entry.reqId).toBe(res.headers.get('x-request-id'));
    expect(entry.code).toBe('upstream_error');
    expect(entry.err).toMatchObject({
      type: 'AI_APICallError',
      message: 'model exploded',
      statusCode: 500,
      url: `${upstream.baseURL}/chat/completions`,
      model: 'small-1',
    });
    expect(entry.err.providerRequestId).toMatch(/^upstream-chatcmpl-\d+$/);
  });

  it('a streamed chat: the failure ends in an error chunk and one log line without content', async () => {
    upstream.enqueue({ kind: 'fail', status: 503, message: 'overloaded' });
    const res = await post('/v1/chat', {
      agentId: 'agt_secret',
      projectId: 'prj_secret',
      stream: true,
      messages: [userText(SECRETS.userMessage)],
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('"type":"error"');
    // The failure is logged when the reply ends, before it is stored and released.
    await t.app.persistence.idle();
    expectNoConversationInLogs();
    expect(failureLine('streamed reply failed').err).toMatchObject({
      type: 'AI_APICallError',
      statusCode: 503,
    });
  });

  it.each([
    [
      'a connection that breaks mid-stream',
      { kind: 'disconnect', text: `one two ${SECRETS.userMessage} three`, afterPieces: 2 } as const,
      /^The provider stream broke: \S/,
    ],
    [
      "the provider's error event mid-stream",
      {
        kind: 'inserted',
        text: `one two ${SECRETS.userMessage} three`,
        afterPieces: 2,
        event: `data: ${JSON.stringify({ error: { message: 'Overloaded, try later', type: PROVIDER_BODY_MARKER } })}\n\n`,
      } as const,
      /^Overloaded, try later$/,
    ],
  ])('a streamed chat broken by %s: the log line says what broke it', async (_name, script, said) => {
    upstream.enqueue(script);
    const res = await post('/v1/chat', {
      agentId: 'agt_secret',
      stream: true,
      messages: [userText(SECRETS.userMessage)],
    });
    expect(await res.text()).toContain('"type":"error"');
    await t.app.persistence.idle();
    expectNoConversationInLogs();
    const entry = failureLine('streamed reply failed');
    expect(entry.reqId).toBe(res.headers.get('x-request-id'));
    expect(entry.code).toBe('upstream_error');
    // It was "(a thrown value that is not an Error)": nothing told a reset from the provider's error.
    expect(entry.err).toMatchObject({ type: 'ProviderStreamError', message: expect.stringMatching(said) });
  });

  it('an agent run: the 502 with its run id is logged without the message or instructions', async () => {
    upstream.enqueue({ kind: 'fail', status: 400, message: 'bad request' });
    const res = await post('/v1/agents/agt_secret/runs', {
      message: SECRETS.runMessage,
      projectId: 'prj_secret',
    });
    expect(res.status).toBe(502);
    expectNoConversationInLogs();
    expect(failureLine('request failed').err).toMatchObject({ type: 'AI_APICallError', statusCode: 400 });
  });

  it('a failing sub-agent, then a failing lead: nothing of either prompt is logged', async () => {
    upstream.enqueue(
      { kind: 'tool-calls', calls: [{ name: 'agt_sub', arguments: { message: SECRETS.subAgentQuestion } }] },
      { kind: 'fail', status: 500, message: 'sub-agent provider down' },
      { kind: 'fail', status: 500, message: 'lead provider down' },
    );
    const res = await post('/v1/chat', {
      agentId: 'agt_boss',
      messages: [userText(SECRETS.userMessage)],
    });
    expect(res.status).toBe(502);
    expect(upstream.requests).toHaveLength(3);
    expectNoConversationInLogs();
    expect(failureLine('request failed').err).toMatchObject({ message: 'lead provider down' });
  });
});

describe('serializeErrorForLog', () => {
  const apiCallError = () =>
    new APICallError({
      message: 'Too many requests',
      url: 'https://api.example.test/v1/chat/completions?key=secret-query',
      requestBodyValues: { model: 'gpt-x', messages: [{ role: 'user', content: SECRETS.userMessage }] },
      statusCode: 429,
      responseHeaders: { 'request-id': 'req_abc' },
      responseBody: `{"error":"${SECRETS.memory}"}`,
    });

  it('keeps status, endpoint without query, model and provider request id of an APICallError', () => {
    const logged = serializeErrorForLog(apiCallError());
    expect(logged).toMatchObject({
      type: 'AI_APICallError',
      message: 'Too many requests',
      statusCode: 429,
      url: 'https://api.example.test/v1/chat/completions',
      model: 'gpt-x',
      providerRequestId: 'req_abc',
      isRetryable: true,
    });
    const text = JSON.stringify(logged);
    expect(text).not.toContain(SECRETS.userMessage);
    expect(text).not.toContain(SECRETS.memory);
    expect(text).not.toContain('secret-query');
  });

  it('writes a RetryError with its last error, and its message without the quoted one', () => {
    const retry = new RetryError({
      message: `Failed after 3 attempts. Last error: ${SECRETS.userMessage}`,
      reason: 'maxRetriesExceeded',
      errors: [apiCallError(), apiCallError()],
    });
    const logged = serializeErrorForLog(retry);
    expect(logged.message).toBe('Retry gave up (maxRetriesExceeded)');
    expect(logged.lastError).toMatchObject({ type: 'AI_APICallError', statusCode: 429 });
    expect(JSON.stringify(logged)).not.toContain(SECRETS.userMessage);
  });

  it('writes only the type of errors whose message quotes the prompt or the answer', () => {
    const errors = [
      new TypeValidationError({ value: { text: SECRETS.memory }, cause: new Error('schema') }),
      new JSONParseError({ text: `{"${SECRETS.projectInstructions}"`, cause: new Error('json') }),
    ];
    for (const error of errors) {
      const logged = serializeErrorForLog(error);
      expect(logged.type).toBe(error.name);
      expect(logged.stack).toMatch(/\n\s+at /);
      const text = JSON.stringify(logged);
      expect(text).not.toContain(SECRETS.memory);
      expect(text).not.toContain(SECRETS.projectInstructions);
    }
  });

  it('keeps message, code and stack of ordinary errors, and their causes', () => {
    const cause = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    const logged = serializeErrorForLog(new Error('database down', { cause }));
    expect(logged).toMatchObject({
      type: 'Error',
      message: 'database down',
      cause: { type: 'Error', message: 'connect ECONNREFUSED', code: 'ECONNREFUSED' },
    });
    expect(logged.stack).toMatch(/^Error: database down\n\s+at /);
  });
});
