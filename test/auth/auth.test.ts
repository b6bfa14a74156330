import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../../src/db/repositories/api-keys.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

let t: Awaited<ReturnType<typeof createTestApp>>;

beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
  await revokeApiKey(t.env.database.db, t.applied!.ids.apiKeys['main-revoked'], new Date().toISOString());
});
afterAll(() => t.close());

const agentsOf = (workspaceId: string, headers: Record<string, string>) =>
  t.app.inject({ method: 'GET', url: `/v1/workspace/${workspaceId}/agents`, headers });

describe(`authentication (${engineName})`, () => {
  it('refuses a request without a key with 401 not_authenticated', async () => {
    const res = await agentsOf('wsp_main', {});
    expect(res.statusCode).toBe(401);
    // Before: "A valid API key is required", naming no header to put it in.
    expect(res.json()).toEqual({
      code: 'not_authenticated',
      message: 'A valid API key is required in the x-service-api-key header (or as Authorization: Bearer)',
      details: {},
    });
  });

  it('says the Bearer scheme is missing when a key comes alone in Authorization, without echoing it', async () => {
    for (const authorization of [KEYS.mainOwner, `Basic ${KEYS.mainOwner}`, `Token ${KEYS.mainOwner}`]) {
      const res = await agentsOf('wsp_main', { authorization });
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({
        code: 'not_authenticated',
        message:
          'The Authorization header must be "Bearer " followed by the API key (the Bearer scheme is missing); or send the key alone in the x-service-api-key header',
        details: {},
      });
      expect(res.body).not.toContain(KEYS.mainOwner);
    }
    // An empty bearer token is still "no key".
    const empty = await agentsOf('wsp_main', { authorization: 'Bearer ' });
    expect(empty.json().message).toBe(
      'A valid API key is required in the x-service-api-key header (or as Authorization: Bearer)',
    );
  });

  it('names the renamed header (ATRIUM_API_KEY_HEADER) when the key is missing', async () => {
    const renamed = await createTestApp({
      setup: TENANCY_SETUP,
      env: { ATRIUM_API_KEY_HEADER: 'x-atrium-key' },
    });
    try {
      const res = await renamed.app.inject({ method: 'GET', url: '/v1/workspace/wsp_main/agents' });
      expect([res.statusCode, res.json().message]).toEqual([
        401,
        'A valid API key is required in the x-atrium-key header (or as Authorization: Bearer)',
      ]);
    } finally {
      await renamed.close();
    }
  });

  it('refuses an unknown key, a malformed key and an empty bearer token with 401 not_authenticated', async () => {
    const attempts: Record<string, string>[] = [
      { 'x-service-api-key': 'atr_ws_this_key_does_not_exist_000000000000' },
      { 'x-service-api-key': 'x' },
      { authorization: 'Bearer ' },
      { authorization: 'Basic abc' },
    ];
    for (const headers of attempts) {
      const res = await agentsOf('wsp_main', headers);
      expect(res.statusCode, JSON.stringify(headers)).toBe(401);
      expect(res.json().code).toBe('not_authenticated');
    }
  });

  it('treats an expired key as invalid', async () => {
    const res = await agentsOf('wsp_main', { 'x-service-api-key': KEYS.mainExpired });
    expect(res.statusCode).toBe(401);
    expect(res.json().code).toBe('not_authenticated');
  });

  it('treats a revoked key as invalid', async () => {
    const res = await agentsOf('wsp_main', { 'x-service-api-key': KEYS.mainRevoked });
    expect(res.statusCode).toBe(401);
    expect(res.json().code).toBe('not_authenticated');
  });

  it('accepts the key in the x-service-api-key header and as a bearer token', async () => {
    expect((await agentsOf('wsp_main', { 'x-service-api-key': KEYS.mainOwner })).statusCode).toBe(200);
    expect((await agentsOf('wsp_main', { authorization: `Bearer ${KEYS.mainOwner}` })).statusCode).toBe(200);
  });

  it('takes the bearer scheme in any case, as auth schemes are (RFC 9110 §11.1)', async () => {
    for (const scheme of ['bearer', 'BEARER', 'bEaReR']) {
      const res = await agentsOf('wsp_main', { authorization: `${scheme}  ${KEYS.mainOwner}` });
      expect(res.statusCode, scheme).toBe(200);
    }
    // The scheme, not a prefix of it: a key glued to it is no bearer token.
    expect((await agentsOf('wsp_main', { authorization: `bearer${KEYS.mainOwner}` })).statusCode).toBe(401);
  });

  it("answers another workspace's key with 401 unauthorized, and an unknown workspace with 404", async () => {
    const other = await agentsOf('wsp_main', { 'x-service-api-key': KEYS.otherWorkspace });
    expect(other.statusCode).toBe(401);
    expect(other.json().code).toBe('unauthorized');
    const missing = await agentsOf('wsp_nowhere', { 'x-service-api-key': KEYS.mainOwner });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().code).toBe('not_found');
  });

  it('lets an organization key act in the workspaces of its organization only', async () => {
    expect((await agentsOf('wsp_main', { 'x-service-api-key': KEYS.acmeOrg })).statusCode).toBe(200);
    expect((await agentsOf('wsp_other', { 'x-service-api-key': KEYS.acmeOrg })).statusCode).toBe(200);
    const outside = await agentsOf('wsp_globex', { 'x-service-api-key': KEYS.acmeOrg });
    expect(outside.statusCode).toBe(401);
    expect(outside.json().code).toBe('unauthorized');
  });

  it('makes an organization key name its workspace in x-workspace-id for /projects', async () => {
    const list = (headers: Record<string, string>) =>
      t.app.inject({ method: 'GET', url: '/v1/projects', headers });
    const noHeader = await list({ 'x-service-api-key': KEYS.acmeOrg });
    expect(noHeader.statusCode).toBe(401);
    expect(noHeader.json().code).toBe('unauthorized');

    const inside = await list({ 'x-service-api-key': KEYS.acmeOrg, 'x-workspace-id': 'wsp_other' });
    expect(inside.statusCode).toBe(200);
    expect(inside.json().data.projects.map((p: { id: string }) => p.id)).toEqual(['prj_other']);

    for (const workspaceId of ['wsp_globex', 'wsp_nowhere']) {
      const outside = await list({ 'x-service-api-key': KEYS.acmeOrg, 'x-workspace-id': workspaceId });
      expect(outside.statusCode).toBe(401);
      expect(outside.json().code).toBe('unauthorized');
    }
  });

  it('refuses a workspace key that names another workspace in x-workspace-id', async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: '/v1/projects',
      headers: { 'x-service-api-key': KEYS.mainOwner, 'x-workspace-id': 'wsp_other' },
    });
    expect(res.statusCode).toBe(401);
    expect(res.json().code).toBe('unauthorized');
  });

  it('stores keys only as hashes and records when a key was last used', async () => {
    const rows = await t.env.database.db.selectFrom('api_keys').selectAll().execute();
    for (const row of rows) {
      expect(Object.values(KEYS)).not.toContain(row.key_hash);
      expect(row.key_hash).toMatch(/^[0-9a-f]{64}$/);
    }
    const used = rows.find((r) => r.name === 'main-owner');
    expect(used?.last_used_at).not.toBeNull();
  });

  it('rate-limits per key with 429 rate_limited and Retry-After', async () => {
    const limited = await createTestApp({
      setup: TENANCY_SETUP.replace('name: Main\n', 'name: Main\n        limits: { rateLimitPerMinute: 2 }\n'),
    });
    try {
      const headers = { 'x-service-api-key': KEYS.mainOwner };
      const call = () => limited.app.inject({ method: 'GET', url: '/v1/projects', headers });
      expect((await call()).statusCode).toBe(200);
      expect((await call()).statusCode).toBe(200);
      const third = await call();
      expect(third.statusCode).toBe(429);
      expect(third.json().code).toBe('rate_limited');
      expect(Number(third.headers['retry-after'])).toBeGreaterThan(0);
    } finally {
      await limited.close();
    }
  });
});
