/**
 * Every operation of the OpenAPI document takes the body types its `requestBody` lists (one
 * without a body takes a JSON body, which it ignores), and answers any other type 415 naming
 * exactly those types.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
interface Operation {
  requestBody?: { content: Record<string, unknown> };
}
let paths: Record<string, Record<string, Operation>>;
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
  paths = (await t.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json().paths;
});
afterAll(() => t.close());

const BODY_METHODS = ['post', 'put', 'patch', 'delete'];
/** A path with its parameters filled in with ids that exist nowhere. */
const concrete = (path: string) => path.replace(/\{[^}]+\}/g, 'x_unknown');
const sample = (type: string) => (type === 'multipart/form-data' ? '--b--\r\n' : '{}');

describe(`request body types of every operation (${engineName})`, () => {
  it('takes every type its requestBody lists, and answers another type 415 naming them', async () => {
    const checked: string[] = [];
    for (const [path, operations] of Object.entries(paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        if (!BODY_METHODS.includes(method)) continue;
        const url = concrete(path);
        const listed = Object.keys(operation.requestBody?.content ?? {});
        const name = `${method.toUpperCase()} ${path}`;
        // A route without a body reads a JSON one only to ignore it (docs/api.md, "Bodies").
        for (const type of listed.length > 0 ? listed : ['application/json']) {
          const contentType = type === 'multipart/form-data' ? `${type}; boundary=b` : type;
          const res = await t.app.inject({
            method: method.toUpperCase() as 'POST',
            url,
            headers: { 'x-service-api-key': KEYS.mainOwner, 'content-type': contentType },
            payload: sample(type),
          });
          expect.soft(res.statusCode, `${name} as ${type}: ${res.body}`).not.toBe(415);
        }
        // The signed storage routes take any type (the signature binds the one they accept).
        if (path.startsWith('/storage')) continue;
        for (const type of ['text/csv', 'application/merge-patch+json'].filter((x) => !listed.includes(x))) {
          const other = await t.app.inject({
            method: method.toUpperCase() as 'POST',
            url,
            headers: { 'x-service-api-key': KEYS.mainOwner, 'content-type': type },
            payload: '{}',
          });
          expect.soft(other.statusCode, `${name} as ${type}: ${other.body}`).toBe(415);
          // The OpenAI-compatible routes answer in OpenAI's error shape, which has no details.
          if (other.statusCode === 415 && !path.startsWith('/v1/openai')) {
            expect
              .soft(other.json().details.accepted, `${name} accepted`)
              .toEqual(listed.length > 0 ? listed : ['application/json']);
          }
        }
        checked.push(name);
      }
    }
    expect(checked.length).toBeGreaterThan(15);
  });
});

describe(`content codings on every operation with a body (${engineName})`, () => {
  it('answers a body with a Content-Encoding other than identity 415 naming it', async () => {
    const checked: string[] = [];
    for (const [path, operations] of Object.entries(paths)) {
      // The signed storage PUT checks its signature first (test/project-files/signed-urls.test.ts).
      if (path.startsWith('/storage')) continue;
      for (const [method, operation] of Object.entries(operations)) {
        if (!BODY_METHODS.includes(method)) continue;
        const name = `${method.toUpperCase()} ${path}`;
        for (const type of Object.keys(operation.requestBody?.content ?? { 'application/json': {} })) {
          const contentType = type === 'multipart/form-data' ? `${type}; boundary=b` : type;
          const res = await t.app.inject({
            method: method.toUpperCase() as 'POST',
            url: concrete(path),
            headers: {
              'x-service-api-key': KEYS.mainOwner,
              'content-type': contentType,
              'content-encoding': 'gzip',
            },
            payload: sample(type),
          });
          expect.soft(res.statusCode, `${name} as ${type}: ${res.body}`).toBe(415);
          expect.soft(res.body, `${name} as ${type}`).toContain('Content-Encoding gzip is not supported');
        }
        checked.push(name);
      }
    }
    expect(checked.length).toBeGreaterThan(15);
    const createWith = (encoding: string) =>
      t.app.inject({
        method: 'POST',
        url: '/v1/projects',
        headers: {
          'x-service-api-key': KEYS.mainOwner,
          'content-type': 'application/json',
          'content-encoding': encoding,
        },
        payload: '{"name":"plain"}',
      });
    expect((await createWith('identity')).statusCode).toBe(201);
    const listed = await createWith('identity, br');
    expect(listed.statusCode).toBe(415);
    expect(listed.json()).toEqual({
      code: 'unsupported_media_type',
      message: 'Content-Encoding br is not supported; send the body unencoded (identity)',
      details: { contentEncoding: 'identity, br' },
    });
  });
});
