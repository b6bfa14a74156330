import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isPlainJsonWithin, JsonTextLimits, jsonTextPastLimits } from '../../src/http/json-containers.js';
import { findUnstorableInput, MAX_INPUT_DEPTH } from '../../src/http/plugins/input-guard.js';
import { MAX_JSON_CONTAINERS, MAX_JSON_KEY_NAMES } from '../../src/limits.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
});
afterAll(() => t.close());

const headers = { 'x-service-api-key': KEYS.mainOwner, 'content-type': 'application/json' };

function post(url: string, payload: string | Record<string, unknown>) {
  return t.app.inject({
    method: 'POST',
    url,
    headers,
    payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
  });
}

async function rowCounts() {
  const count = async (table: 'projects' | 'chats' | 'messages' | 'usage_ledger') =>
    Number(
      (
        await t.env.database.db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
  return {
    projects: await count('projects'),
    chats: await count('chats'),
    messages: await count('messages'),
    ledger: await count('usage_ledger'),
  };
}

/** `[[[…"x"…]]]`, `depth` arrays deep, as raw JSON (building it as an object would overflow). */
const nestedJson = (depth: number) => `${'['.repeat(depth)}"x"${']'.repeat(depth)}`;

describe(`input no database can store (${engineName})`, () => {
  it.each([
    ['a NUL in a project name', '/v1/projects', { name: 'a\u0000b' }, 'body.name contains a NUL character'],
    [
      'a NUL in a project description',
      '/v1/projects',
      { name: 'ok', description: 'x\u0000' },
      'body.description',
    ],
    [
      'an unpaired surrogate',
      '/v1/projects',
      '{"name":"a\\ud800"}',
      'body.name contains an unpaired UTF-16 surrogate',
    ],
    [
      'a NUL in an object key',
      '/v1/projects',
      '{"name":"ok","a\\u0000":1}',
      'has a key that contains a NUL character',
    ],
    [
      'a NUL in a run message',
      '/v1/agents/agt_alpha/runs',
      { message: 'hi\u0000' },
      'body.message contains a NUL character',
    ],
    [
      'a NUL in a chat message',
      '/v1/chat',
      { agentId: 'agt_alpha', messages: [{ role: 'user', parts: [{ type: 'text', text: 'free\u0000' }] }] },
      'body.messages.0.parts.0.text contains a NUL character',
    ],
    [
      'a chat part nested 50,000 deep',
      '/v1/chat',
      `{"agentId":"agt_alpha","messages":[{"role":"user","parts":[{"type":"text","text":"hi","extra":${nestedJson(50_000)}}]}]}`,
      `is nested more than ${MAX_INPUT_DEPTH} levels deep`,
    ],
    [
      // Deeper still is more objects and arrays than a body may hold: refused before parsing.
      'a chat part nested 200,000 deep',
      '/v1/chat',
      `{"agentId":"agt_alpha","messages":[{"role":"user","parts":[{"type":"text","text":"hi","extra":${nestedJson(200_000)}}]}]}`,
      `holds more than ${MAX_JSON_CONTAINERS} objects and arrays`,
    ],
  ])('refuses %s with 400 and stores nothing', async (_what, url, payload, message) => {
    const before = await rowCounts();
    const res = await post(url, payload);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'bad_request', message: expect.stringContaining(message) });
    expect(await rowCounts()).toEqual(before);
  });

  it.each([
    ['/v1/workspace/wsp%00/agents'],
    ['/v1/projects/prj%00/files'],
    ['/v1/projects/prj_docs/files/f%00'],
  ])('answers 404 for a path id with a NUL: %s', async (url) => {
    const method = url.endsWith('/agents') || url.endsWith('/files') ? 'GET' : 'DELETE';
    const res = await t.app.inject({ method, url, headers: { 'x-service-api-key': KEYS.mainOwner } });
    expect(res.statusCode).toBe(404);
    expect(res.json().code).toBe('not_found');
  });

  it('still accepts ordinary Unicode: accents, CJK, emoji (a surrogate pair)', async () => {
    const res = await post('/v1/projects', { name: 'Café 東京 🚀' });
    expect(res.statusCode).toBe(201);
    expect(res.json().data.project.name).toBe('Café 東京 🚀');
  });

  // Over 64 KiB, the body's text vouches for it and the guard does not walk it: what the text
  // cannot vouch for must still be refused, and what only looks like an escape accepted.
  const padding = 'p'.repeat(70_000);
  it.each([
    [
      'a NUL escaped in a key, deep in a large body',
      `{"name":"ok","a":{"b":[{"c\\u0000":1}]},"pad":"${padding}"}`,
      'has a key that contains a NUL character',
    ],
    [
      'an unpaired surrogate escaped in a large body',
      `{"name":"ok","a":["\\udc00"],"pad":"${padding}"}`,
      'body.a.0 contains an unpaired UTF-16 surrogate',
    ],
    [
      'a large body nested one level too deep',
      `{"name":"ok","deep":${nestedJson(MAX_INPUT_DEPTH)},"pad":"${padding}"}`,
      `is nested more than ${MAX_INPUT_DEPTH} levels deep`,
    ],
  ])('refuses %s', async (_what, payload, message) => {
    const res = await post('/v1/projects', payload);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'bad_request', message: expect.stringContaining(message) });
  });

  it('accepts a large body as deep as allowed, or holding an escaped backslash before a u', async () => {
    const deepest = await post(
      '/v1/projects',
      `{"name":"deep","deep":${nestedJson(MAX_INPUT_DEPTH - 1)},"pad":"${padding}"}`,
    );
    expect(deepest.statusCode).toBe(201);
    const backslash = await post(
      '/v1/projects',
      `{"name":"C:\\\\users","description":"\\\\u0000 is text here","pad":"${padding}"}`,
    );
    expect(backslash.statusCode).toBe(201);
    expect(backslash.json().data.project.description).toBe('\\u0000 is text here');
  });

  it('reads on the bytes whether a parsed text can hold anything the guard refuses', () => {
    const plain = (text: string) => isPlainJsonWithin(Buffer.from(text), 3);
    expect(plain('{"a":[{"b":"c"}],"d":"[[[[{{{{"}')).toBe(true);
    expect(plain('[[[["x"]]]]')).toBe(false);
    expect(plain('[[["x"]],[["y"]]]')).toBe(true);
    expect(plain('{"a":"\\u0041"}')).toBe(false);
    expect(plain('{"a":"\\\\"}')).toBe(true);
    expect(plain('{"a\\"b":{"c":["\\"[[["]}}')).toBe(true);
  });

  it('walks bodies without recursion and reports the first problem path', () => {
    expect(findUnstorableInput({ a: [{ b: 'ok' }, { c: 'x\u0000' }] }, 'body')).toEqual({
      path: 'body.a.1.c',
      message: 'contains a NUL character',
    });
    expect(findUnstorableInput({ a: [1, null, true, 'ok'] }, 'body')).toBeNull();
    expect(findUnstorableInput(JSON.parse(nestedJson(MAX_INPUT_DEPTH - 1)), 'body')).toBeNull();
    expect(findUnstorableInput(JSON.parse(nestedJson(MAX_INPUT_DEPTH + 1)), 'body')?.message).toMatch(
      /nested/,
    );
  });
});

describe(`chat messages the model cannot take (${engineName})`, () => {
  it.each([
    ['a message without parts', [{ role: 'user', parts: [] }], 'body.messages.0.parts'],
    [
      'a data: URL without its comma',
      [{ role: 'user', parts: [{ type: 'file', url: 'data:image/png', mediaType: 'image/png' }] }],
      'body.messages.0.parts.0.url',
    ],
  ])('refuses %s with 400 before anything is stored', async (_what, messages, path) => {
    const before = await rowCounts();
    const res = await post('/v1/chat', { agentId: 'agt_alpha', messages });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'bad_request', message: expect.stringContaining(path) });
    expect(await rowCounts()).toEqual(before);
  });
});

describe(`router failures get the error body (${engineName})`, () => {
  it('answers bad percent-encoding with 400 without repeating the URL', async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: '/storage/objects/projects/%E0%A4/x?signature=SECRET-SIGNATURE',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({
      code: 'bad_request',
      message: 'The URL is not valid: a path segment has bad percent-encoding',
      details: {},
    });
    expect(res.body).not.toContain('SECRET-SIGNATURE');
  });

  it('answers a path parameter over 1000 characters with 400', async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: `/v1/projects/${'p'.repeat(1001)}/files`,
      headers: { 'x-service-api-key': KEYS.mainOwner },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({
      code: 'bad_request',
      message: 'A path parameter is longer than 1000 characters',
      details: {},
    });
  });

  it.each([
    '/v1/workspace/wsp_main/agents?offset=99999999999999999999',
    '/v1/workspace/wsp_main/agents?offset=1e308',
    '/v1/workspace/wsp_main/skills?offset=9223372036854775808',
    '/v1/projects/prj_docs/files?limit=5&offset=1e20',
  ])('answers an offset past what a database takes with 400: %s', async (url) => {
    const res = await t.app.inject({ method: 'GET', url, headers: { 'x-service-api-key': KEYS.mainOwner } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({
      code: 'bad_request',
      message: expect.stringContaining('query.offset'),
    });
  });
});

describe(`JSON bodies of too many objects and arrays (${engineName})`, () => {
  const chatWith = (unknownPart: string, text = 'hi') =>
    `{"agentId":"agt_alpha","messages":[{"role":"user","parts":[{"type":"text","text":${JSON.stringify(text)}},{"type":"data-x","data":${unknownPart}}]}]}`;

  it('refuses one over the limit with 400 before parsing it, storing nothing (/v1/chat and /v1/openai)', async () => {
    const before = await rowCounts();
    const many = `[${Array(MAX_JSON_CONTAINERS + 1)
      .fill('{}')
      .join(',')}]`;
    const res = await post('/v1/chat', chatWith(many));
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({
      code: 'bad_request',
      message: `The JSON body holds more than ${MAX_JSON_CONTAINERS} objects and arrays`,
      details: {
        issues: [{ path: 'body', message: `holds more than ${MAX_JSON_CONTAINERS} objects and arrays` }],
      },
    });
    expect(await rowCounts()).toEqual(before);
    const openai = await post(
      '/v1/openai/chat/completions',
      `{"model":"agt_alpha","messages":[{"role":"user","content":"hi"}],"metadata":${many}}`,
    );
    expect(openai.statusCode).toBe(400);
    expect(openai.json().error).toMatchObject({ type: 'invalid_request_error' });
  });

  it('counts no bracket inside a string: a long text of brackets is a chat like any other', async () => {
    const res = await post('/v1/chat', chatWith('{}', `{["\\\\${'{['.repeat(MAX_JSON_CONTAINERS)}`));
    expect(res.statusCode).toBe(200);
  });

  it('counts brackets outside strings only, escapes included', () => {
    const past = (text: string, containers: number) =>
      jsonTextPastLimits(Buffer.from(text), { containers, keyNames: 100 });
    expect(past(`"${'{'.repeat(50)}\\"[[["`, 2)).toBeNull();
    // Three: the outer array, the inner one and the object; the escaped backslash ends no string early.
    expect(past(`["\\\\",[{}],${' '.repeat(50)}]`, 2)).toBe('containers');
    expect(past(`["\\\\",[{}],${' '.repeat(50)}]`, 3)).toBeNull();
  });
});

describe(`JSON bodies of too many different key names (${engineName})`, () => {
  /** `{"k0":0,"k1":0,…}`: `count` keys, each named apart. */
  const keysNamed = (count: number, prefix = 'k') =>
    `{${Array.from({ length: count }, (_, i) => `"${prefix}${i}":0`).join(',')}}`;
  const chatWithMetadata = (providerMetadata: string) =>
    `{"agentId":"agt_alpha","messages":[{"role":"user","parts":[{"type":"text","text":"hi","providerMetadata":${providerMetadata}}]}]}`;
  const message = `holds more than ${MAX_JSON_KEY_NAMES} different key names`;

  it('refuses one over the limit with 400 before parsing it, storing nothing (/v1/chat and /v1/openai)', async () => {
    const before = await rowCounts();
    // Before: a `providerMetadata` of a million keys held the process for seconds, then every
    // later turn of its chat again. The body's own 7 names (agentId, messages, …) count too.
    const res = await post('/v1/chat', chatWithMetadata(keysNamed(MAX_JSON_KEY_NAMES - 6)));
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({
      code: 'bad_request',
      message: `The JSON body ${message}`,
      details: { issues: [{ path: 'body', message }] },
    });
    expect(await rowCounts()).toEqual(before);
    const openai = await post(
      '/v1/openai/chat/completions',
      `{"model":"agt_alpha","messages":[{"role":"user","content":"hi"}],"metadata":${keysNamed(MAX_JSON_KEY_NAMES + 1)}}`,
    );
    expect(openai.statusCode).toBe(400);
    expect(openai.json().error).toMatchObject({
      type: 'invalid_request_error',
      message: `The JSON body ${message}`,
    });
    expect(await rowCounts()).toEqual(before);
  });

  it('takes as many names as the limit, and any number of keys of fewer names', async () => {
    // The body's own names: agentId, messages, role, parts, type, text, providerMetadata.
    const atLimit = await post('/v1/chat', chatWithMetadata(keysNamed(MAX_JSON_KEY_NAMES - 7)));
    expect(atLimit.statusCode).toBe(200);
    // Records of a tool output: 200,000 keys of 20 names, in 10,000 objects.
    const records = `[${Array(10_000).fill(keysNamed(20, 'column')).join(',')}]`;
    const res = await post(
      '/v1/chat',
      `{"agentId":"agt_alpha","messages":[{"role":"user","parts":[{"type":"text","text":"hi"},{"type":"data-rows","data":${records}}]}]}`,
    );
    expect(res.statusCode).toBe(200);
  });

  it('counts the names of keys, once each, on the bytes: not a colon inside a string', () => {
    const past = (text: string, keyNames: number) =>
      jsonTextPastLimits(Buffer.from(`${text}${' '.repeat(100)}`), { containers: 100, keyNames });
    // Two names (a, b) in three objects; the colons and quotes inside strings are text.
    const text = '[{"a":"x:y","b":"\\\\"},{"a":":\\":"},{"b":{"a":1}}]';
    expect(past(text, 2)).toBeNull();
    expect(past(text, 1)).toBe('keyNames');
    // A name is its bytes: an escape spelling `a` another way is another name.
    expect(past('{"a":1,"\\u0061":2}', 1)).toBe('keyNames');
    expect(past('{"a:b":1}', 1)).toBeNull();
    // More names than the slots remembering recent ones: every name still counted once.
    const names = (count: number) => keysNamed(count, 'name');
    expect(past(`[${names(10_000)},${names(10_000)}]`, 10_000)).toBeNull();
    expect(past(`[${names(10_000)},${names(10_001)}]`, 10_000)).toBe('keyNames');
  });

  it('counts texts read one after another together, a name once over all of them', () => {
    const limits = new JsonTextLimits({ containers: 10, keyNames: 3 });
    expect(limits.add(Buffer.from('{"a":1,"b":2}'))).toBeNull();
    // Same names again: still two.
    expect(limits.add(Buffer.from('[{"a":1},{"b":2}]'))).toBeNull();
    expect(limits.add(Buffer.from('{"c":{"a":1}}'))).toBeNull();
    expect(limits.add(Buffer.from('{"d":1}'))).toBe('keyNames');
    // A text long enough to hold more keys than names are left has its names read at once,
    // with those of the texts before it.
    const long = new JsonTextLimits({ containers: 10, keyNames: 3 });
    expect(long.add(Buffer.from('{"a":1,"b":2}'))).toBeNull();
    expect(long.add(Buffer.from(`{"a":1,"c":2}${' '.repeat(100)}`))).toBeNull();
    expect(long.add(Buffer.from(`{"b":1,"d":2}${' '.repeat(100)}`))).toBe('keyNames');
    const containers = new JsonTextLimits({ containers: 3, keyNames: 10 });
    expect(containers.add(Buffer.from('[[],{}]'))).toBeNull();
    expect(containers.add(Buffer.from('[]'))).toBe('containers');
  });
});
