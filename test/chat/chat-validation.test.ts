import { MAX_TEMPLATE_VARIABLES } from '../../src/limits.js';
import { describe, expect, it } from 'vitest';
import { type TestApp } from '../helpers/app.js';
import { type FakeUpstream } from '../helpers/fake-upstream.js';
import { CHAT_KEYS, countRows, useChatApp, userText } from './fixtures.js';

let upstream: FakeUpstream;
let t: TestApp;

useChatApp((app) => ({ upstream, t } = app));

const valid = { agentId: 'agt_plain', messages: [userText('hi')] };

function chat(payload: unknown) {
  return t.app.inject({
    method: 'POST',
    url: '/v1/chat',
    headers: { 'x-service-api-key': CHAT_KEYS.main, 'content-type': 'application/json' },
    payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
  });
}

const leftover = { role: 'assistant', parts: [] };
const cases: Array<[string, unknown, string]> = [
  // A leftover before the bad message (dropped, not refused: chats.md) shifts no index.
  [
    'a text part without text after a leftover assistant message',
    {
      agentId: 'agt_plain',
      messages: [userText('a'), leftover, { role: 'user', parts: [{ type: 'text' }] }],
    },
    'body.messages.2.parts.0.text',
  ],
  [
    'a duplicate id after a leftover assistant message',
    { agentId: 'agt_plain', messages: [userText('a', 'm1'), leftover, userText('b', 'm1')] },
    'body.messages.2.id',
  ],
  ['messages missing', { agentId: 'agt_plain' }, 'body.messages'],
  ['messages not an array', { agentId: 'agt_plain', messages: 'hi' }, 'body.messages'],
  ['messages empty', { agentId: 'agt_plain', messages: [] }, 'body.messages'],
  [
    'no user message',
    { agentId: 'agt_plain', messages: [{ role: 'assistant', parts: [{ type: 'text', text: 'hi' }] }] },
    'body.messages',
  ],
  [
    'message role missing',
    { agentId: 'agt_plain', messages: [{ parts: [{ type: 'text', text: 'hi' }] }] },
    'body.messages.0.role',
  ],
  [
    'message role unknown',
    { agentId: 'agt_plain', messages: [{ role: 'tool', parts: [] }] },
    'body.messages.0.role',
  ],
  ['message parts missing', { agentId: 'agt_plain', messages: [{ role: 'user' }] }, 'body.messages.0.parts'],
  [
    'message id not a string',
    { agentId: 'agt_plain', messages: [{ id: 7, role: 'user', parts: [] }] },
    'body.messages.0.id',
  ],
  [
    'duplicate message ids',
    { agentId: 'agt_plain', messages: [userText('a', 'x'), userText('b', 'x')] },
    'body.messages.1.id',
  ],
  [
    'part without type',
    { agentId: 'agt_plain', messages: [{ role: 'user', parts: [{ text: 'hi' }] }] },
    'body.messages.0.parts.0.type',
  ],
  [
    'text part without text',
    { agentId: 'agt_plain', messages: [{ role: 'user', parts: [{ type: 'text' }] }] },
    'body.messages.0.parts.0.text',
  ],
  [
    'text part with a number',
    { agentId: 'agt_plain', messages: [{ role: 'user', parts: [{ type: 'text', text: 5 }] }] },
    'body.messages.0.parts.0.text',
  ],
  [
    'file part without url',
    { agentId: 'agt_plain', messages: [{ role: 'user', parts: [{ type: 'file', mediaType: 'image/png' }] }] },
    'body.messages.0.parts.0.url',
  ],
  [
    'file part with a file: url',
    {
      agentId: 'agt_plain',
      messages: [
        { role: 'user', parts: [{ type: 'file', url: 'file:///etc/passwd', mediaType: 'text/plain' }] },
      ],
    },
    'body.messages.0.parts.0.url',
  ],
  [
    'file part without mediaType',
    {
      agentId: 'agt_plain',
      messages: [{ role: 'user', parts: [{ type: 'file', url: 'https://example.test/a.png' }] }],
    },
    'body.messages.0.parts.0.mediaType',
  ],
  [
    'file part with a bad mediaType',
    {
      agentId: 'agt_plain',
      messages: [
        { role: 'user', parts: [{ type: 'file', url: 'https://example.test/a.png', mediaType: 'png' }] },
      ],
    },
    'body.messages.0.parts.0.mediaType',
  ],
  [
    'file part with a numeric filename',
    {
      agentId: 'agt_plain',
      messages: [
        {
          role: 'user',
          parts: [{ type: 'file', url: 'https://example.test/a.png', mediaType: 'image/png', filename: 1 }],
        },
      ],
    },
    'body.messages.0.parts.0.filename',
  ],
  ['agentId missing', { messages: [userText('hi')] }, 'body.agentId'],
  ['agentId empty', { agentId: '', messages: [userText('hi')] }, 'body.agentId'],
  ['agentId a number', { agentId: 12, messages: [userText('hi')] }, 'body.agentId'],
  ['chatId a number', { ...valid, chatId: 1 }, 'body.chatId'],
  ['chatId empty', { ...valid, chatId: '' }, 'body.chatId'],
  ['projectId a number', { ...valid, projectId: 1 }, 'body.projectId'],
  ['stream a string', { ...valid, stream: 'true' }, 'body.stream'],
  ['temperature a string', { ...valid, temperature: '0.5' }, 'body.temperature'],
  ['temperature below 0', { ...valid, temperature: -0.1 }, 'body.temperature'],
  ['temperature above 2', { ...valid, temperature: 2.01 }, 'body.temperature'],
  ['model empty', { ...valid, model: '' }, 'body.model'],
  ['model a number', { ...valid, model: 4 }, 'body.model'],
  ['variables not an object', { ...valid, variables: 'x' }, 'body.variables'],
  ['variables with an object value', { ...valid, variables: { a: { b: 1 } } }, 'body.variables.a'],
  ['variables with a null value', { ...valid, variables: { a: null } }, 'body.variables.a'],
  [
    // A 12 MB `variables` of a million names held the process for 12 s.
    'more variables than MAX_TEMPLATE_VARIABLES',
    {
      ...valid,
      variables: Object.fromEntries(
        Array.from({ length: MAX_TEMPLATE_VARIABLES + 1 }, (_, i) => [`v${i}`, i]),
      ),
    },
    'body.variables',
  ],
  [
    'systemVariables.user not an object',
    { ...valid, systemVariables: { user: 'me' } },
    'body.systemVariables.user',
  ],
  [
    'systemVariables.user.name a number',
    { ...valid, systemVariables: { user: { name: 1 } } },
    'body.systemVariables.user.name',
  ],
  [
    // The chat list's `user` filter takes at most 200 characters: a longer end user was stored,
    // and its chats could not be listed by it (400).
    'systemVariables.user.id longer than 200 characters',
    { ...valid, systemVariables: { user: { id: 'u'.repeat(201) } } },
    'body.systemVariables.user.id',
  ],
  [
    // The chat list's `user` filter takes at least 1 character: an empty end user was stored as
    // "", and its chats could not be listed by it (400).
    'systemVariables.user.id empty',
    { ...valid, systemVariables: { user: { id: '' } } },
    'body.systemVariables.user.id',
  ],
  [
    'systemVariables with an unknown field',
    { ...valid, systemVariables: { team: 'x' } },
    'body.systemVariables',
  ],
];

describe('POST /v1/chat body validation', () => {
  it.each(cases)('400 bad_request when %s', async (_name, body, path) => {
    const before = await countRows(t.db);
    const requests = upstream.requests.length;
    const res = await chat(body);
    expect(res.statusCode).toBe(400);
    const error = res.json();
    expect(error.code).toBe('bad_request');
    expect(error.details.issues.map((issue: { path: string }) => issue.path)).toContain(path);
    expect(await countRows(t.db)).toEqual(before);
    expect(upstream.requests.length).toBe(requests);
  });

  it(`takes ${MAX_TEMPLATE_VARIABLES} variables, the most a request may have`, async () => {
    const variables = Object.fromEntries(
      Array.from({ length: MAX_TEMPLATE_VARIABLES }, (_, i) => [`v${i}`, i]),
    );
    expect((await chat({ ...valid, variables })).statusCode).toBe(200);
  });

  it('400 for malformed JSON, never 500', async () => {
    const res = await chat('{"agentId": ');
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('bad_request');
  });

  it('accepts edge values: temperature 0 and 2, variables of every allowed type, unknown top-level fields (AI SDK clients send id, trigger)', async () => {
    for (const temperature of [0, 2]) {
      const res = await chat({
        ...valid,
        temperature,
        variables: { s: 'x', n: 1.5, b: false },
        id: 'client-chat',
        trigger: 'submit-message',
      });
      expect(res.statusCode).toBe(200);
      expect(upstream.lastRequest().body.temperature).toBe(temperature);
    }
  });

  it('400 naming the user message when no message holds a part the model reads (once a 502 from the AI SDK), storing nothing', async () => {
    const before = await countRows(t.db);
    const requests = upstream.requests.length;
    for (const stream of [false, true]) {
      const res = await chat({
        agentId: 'agt_plain',
        stream,
        messages: [{ role: 'user', parts: [{ type: 'data-note', data: { x: 1 } }] }],
      });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({
        code: 'bad_request',
        details: { issues: [{ path: 'body.messages.0.parts' }] },
      });
      expect(res.json().message).toContain('must contain a text or file part');
    }
    expect(await countRows(t.db)).toEqual(before);
    expect(upstream.requests.length).toBe(requests);
  });

  it('stores unknown part types without sending them to the model', async () => {
    const res = await chat({
      agentId: 'agt_plain',
      messages: [
        {
          role: 'user',
          parts: [
            { type: 'text', text: 'a' },
            { type: 'reasoning', text: 'hidden' },
          ],
        },
      ],
    });
    expect(res.statusCode).toBe(200);
    expect(upstream.lastRequest().body.messages).toEqual([{ role: 'user', content: 'a' }]);
  });
});
