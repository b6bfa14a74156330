import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

/**
 * Every integer query parameter of every documented GET route (`limit`, `offset`), sent a value
 * that is not an integer as written. The validator's coercion took `Number(value)`: a blank
 * `limit=%20` was 0 ("must be >= 1", as if 0 had been sent), a blank `offset` was 0 and
 * accepted, and `1e1` or `0x10` were 10 and 16.
 */
let t: Awaited<ReturnType<typeof createTestApp>>;
let doc: {
  paths: Record<
    string,
    Record<string, { parameters?: Array<{ in: string; name: string; schema?: { type?: string } }> }>
  >;
};
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP, env: { ATRIUM_RATE_LIMIT_PER_MINUTE: '1000000' } });
  doc = (await t.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
});
afterAll(() => t.close());

/** Real ids of the fixture, so the request gets past its path parameters to the query. */
const PATH_VALUES: Record<string, string> = {
  workspaceId: 'wsp_main',
  projectId: 'prj_docs',
  agentId: 'agt_alpha',
  chatId: 'cht_none',
  skillId: 'skl_none',
};

const NOT_INTEGERS = ['%20', '%20%20', '%09', '', '%201', '1%20', '1e1', '0x10', '%2B1', '1.0', 'abc'];

function integerQueries(): Array<[string, string]> {
  const found: Array<[string, string]> = [];
  for (const [route, methods] of Object.entries(doc.paths)) {
    for (const parameter of methods.get?.parameters ?? []) {
      if (parameter.in === 'query' && parameter.schema?.type === 'integer')
        found.push([route, parameter.name]);
    }
  }
  return found;
}

describe(`integer query parameters (${engineName})`, () => {
  it('are found on the list routes', () => {
    const names = integerQueries().map(([route, name]) => `${route}?${name}`);
    expect(names).toEqual(
      expect.arrayContaining([
        '/v1/workspace/{workspaceId}/agents?limit',
        '/v1/workspace/{workspaceId}/agents?offset',
        '/v1/workspace/{workspaceId}/skills?limit',
        '/v1/projects/{projectId}/files?limit',
      ]),
    );
  });

  it('answer a value that is not an integer as written with 400 naming the parameter', async () => {
    const failures: string[] = [];
    for (const [route, name] of integerQueries()) {
      const path = route.replace(/\{([^}]+)\}/g, (_, param: string) => PATH_VALUES[param] ?? 'x');
      for (const value of NOT_INTEGERS) {
        const url = `${path}?${name}=${value}`;
        const res = await t.app.inject({
          method: 'GET',
          url,
          headers: { 'x-service-api-key': KEYS.mainOwner },
        });
        const body = res.json();
        const issue = body.details?.issues?.[0];
        if (
          res.statusCode !== 400 ||
          body.code !== 'bad_request' ||
          issue?.path !== `query.${name}` ||
          issue?.message !== 'must be integer'
        ) {
          failures.push(`${url} → ${res.statusCode} ${res.body.slice(0, 160)}`);
        }
      }
    }
    expect(failures).toEqual([]);
  });

  it('still take a written integer, with leading zeros', async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: '/v1/workspace/wsp_main/agents?limit=02&offset=01',
      headers: { 'x-service-api-key': KEYS.mainOwner },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().data.pagination).toMatchObject({ limit: 2, offset: 1 });
  });
});
