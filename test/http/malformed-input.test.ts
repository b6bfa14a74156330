import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

/**
 * Every documented route, sent malformed parameters, queries and bodies by keys of both kinds:
 * a client's mistake is never a 500, and every answer is the error body (the response-schema
 * check of test/setup.ts holds each to its route's declared schema too).
 */
let t: Awaited<ReturnType<typeof createTestApp>>;
type Operation = { requestBody?: { content?: Record<string, { schema?: unknown }> } };
let doc: {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown> };
};
beforeAll(async () => {
  // Thousands of requests from three keys: the per-key limit is not what this test is about.
  t = await createTestApp({ setup: TENANCY_SETUP, env: { ATRIUM_RATE_LIMIT_PER_MINUTE: '1000000' } });
  doc = (await t.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
});
afterAll(() => t.close());

const IDS = [...new Set(TENANCY_SETUP.match(/\b(?:agt|prj|wsp|skl|cht|usr|fil|msg)_[a-z0-9_]+/g) ?? [])];

/** Values for a path parameter: a real id of its kind (when the fixture has one), then bad ones. */
function parameterValues(name: string): string[] {
  const prefix = { agent: 'agt', project: 'prj', workspace: 'wsp', skill: 'skl', chat: 'cht' }[
    name.replace(/Id$/, '')
  ];
  const real = IDS.filter((id) => prefix && id.startsWith(`${prefix}_`)).slice(0, 1);
  return [...real, 'x'.repeat(2000), '%E2%82', '..%2F..%2Fetc', '%00', '-1'];
}

function resolve(schema: unknown): Record<string, unknown> | undefined {
  const ref = (schema as { $ref?: string } | undefined)?.$ref;
  if (ref) return resolve(doc.components.schemas[ref.split('/').pop()!]);
  return schema as Record<string, unknown> | undefined;
}

const WRONG_VALUES: unknown[] = [null, -1, 1e308, '', 'x'.repeat(100_000), [], {}, [[[]]], true, '\u0000'];

/** Bodies that are not JSON, not an object, or an object with one property of a wrong type or missing. */
function malformedBodies(schema: unknown): string[] {
  const properties = Object.keys((resolve(schema)?.properties as object | undefined) ?? {});
  const bodies = ['{', '[]', 'null', '"x"', '{}', '{"__proto__":{"admin":true}}'];
  for (const property of properties) {
    for (const value of WRONG_VALUES) bodies.push(JSON.stringify({ [property]: value }));
  }
  return bodies;
}

/** The error body (decisions.md), or under /v1/openai the OpenAI-style one its clients read. */
function isErrorBody(route: string, body: unknown): boolean {
  const error = route.startsWith('/v1/openai/') ? (body as { error?: unknown }).error : body;
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return typeof code === 'string' && typeof message === 'string';
}

const QUERIES = ['?limit=abc', '?limit=-1', '?limit=100000', '?cursor=zzz', `?cursor=${'a'.repeat(3000)}`];
const CALLERS = [
  { 'x-service-api-key': KEYS.mainOwner },
  { 'x-service-api-key': KEYS.acmeOrg },
  { 'x-service-api-key': KEYS.acmeOrg, 'x-workspace-id': 'wsp_main' },
];

describe('malformed input on every documented route', () => {
  it('is answered with a 4xx error body, never a 500', { timeout: 120_000 }, async () => {
    const failures: string[] = [];
    let sent = 0;
    for (const [route, methods] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
        const names = [...route.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
        const urls = [0, 1, 2, 3, 4, 5].map((choice) =>
          route.replace(/\{([^}]+)\}/g, (_, name: string) => {
            const values = parameterValues(name);
            return values[choice % values.length]!;
          }),
        );
        const bodySchema = operation.requestBody?.content?.['application/json']?.schema;
        const bodies = bodySchema ? malformedBodies(bodySchema) : [undefined];
        const requests: Array<{ url: string; body?: string }> = [];
        // Malformed bodies on the route with real ids; malformed ids (and queries) with the first body.
        for (const body of bodies) requests.push({ url: urls[0]!, body });
        for (const url of new Set(urls.slice(names.length > 0 ? 1 : 6))) {
          requests.push({ url, body: bodies[0] });
        }
        if (method === 'get') for (const query of QUERIES) requests.push({ url: urls[0]! + query });
        for (const headers of CALLERS) {
          for (const { url, body } of requests) {
            sent++;
            const res = await t.app.inject({
              method: method.toUpperCase() as 'GET',
              url,
              headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
              payload: body,
            });
            if (res.statusCode >= 500 || (res.statusCode >= 400 && !isErrorBody(route, res.json()))) {
              failures.push(
                `${method.toUpperCase()} ${url.slice(0, 120)} ${String(body).slice(0, 80)} → ${res.statusCode} ${res.body.slice(0, 200)}`,
              );
            }
          }
        }
      }
    }
    expect(sent).toBeGreaterThan(3000);
    expect(failures).toEqual([]);
  });
});
