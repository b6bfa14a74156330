import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey, hashApiKey, keyPrefix } from '../../src/auth/api-keys.js';
import { insertApiKey } from '../../src/db/repositories/api-keys.js';
import { applyFixture, createTestApp, engineName } from '../helpers/app.js';
import { keyedCaller, MANAGEMENT_SETUP, MKEYS } from './fixtures.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
let now = new Date('2026-11-22T10:00:00.000Z');
beforeAll(async () => {
  t = await createTestApp({ setup: MANAGEMENT_SETUP, clock: () => now });
});
afterAll(() => t.close());

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';
const call = keyedCaller(() => t.app);
const createKey = (payload: unknown, key: string = MKEYS.owner, workspace = 'wsp_main') =>
  call('POST', `/v1/workspace/${workspace}/api-keys`, key, payload);
const chatWith = (key: string, agentId: string) =>
  call('POST', '/v1/chat', key, {
    agentId,
    messages: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
  });

describe(`POST /v1/workspace/{id}/api-keys (${engineName})`, () => {
  it('reads expiresAt: null as no expiry, the value keyInfo lists for such a key', async () => {
    const res = await createKey({ name: 'forever', expiresAt: null });
    expect(res.statusCode).toBe(201);
    expect(res.json().data.apiKey.expiresAt).toBeNull();
  });

  it('creates a working key shown once, with no-store, and lists it without the key', async () => {
    const res = await createKey({ name: 'ci', userId: 'usr_max', expiresAt: '2027-01-01T00:00:00Z' });
    expect(res.statusCode).toBe(201);
    expect(res.headers['cache-control']).toBe('no-store');
    const { apiKey, key } = res.json().data;
    expect(key).toMatch(/^atr_ws_[A-Za-z0-9_-]{43}$/);
    expect(apiKey).toEqual({
      id: expect.stringMatching(/^key_/),
      name: 'ci',
      userId: 'usr_max',
      prefix: key.slice(0, 12),
      createdAt: now.toISOString(),
      expiresAt: '2027-01-01T00:00:00.000Z',
      lastUsedAt: null,
      revokedAt: null,
      managedBy: 'api',
    });
    const me = await call('GET', '/v1/me', key);
    expect(me.json().data).toMatchObject({
      key: { id: apiKey.id, kind: 'workspace' },
      workspace: { role: 'member' },
    });
    const list = await call('GET', '/v1/workspace/wsp_main/api-keys', MKEYS.admin);
    expect(list.statusCode).toBe(200);
    const listed = list.json().data.apiKeys;
    expect(listed.find((k: { id: string }) => k.id === apiKey.id)).toMatchObject({
      name: 'ci',
      lastUsedAt: now.toISOString(),
    });
    expect(listed.find((k: { id: string }) => k.id === 'key_main_owner')).toMatchObject({
      managedBy: 'setup',
    });
    expect(JSON.stringify(list.json())).not.toContain(key);
  });

  it('defaults the user to the caller’s', async () => {
    const res = await createKey({ name: 'mine' }, MKEYS.admin);
    expect(res.json().data.apiKey.userId).toBe('usr_adam');
  });

  it('shows a member only its own keys', async () => {
    const list = await call('GET', '/v1/workspace/wsp_main/api-keys', MKEYS.member);
    expect(list.statusCode).toBe(200);
    const users = new Set(list.json().data.apiKeys.map((k: { userId: string }) => k.userId));
    expect([...users]).toEqual(['usr_max']);
  });

  it.each([
    ['missing name', {}, 'body.name'],
    ['name too long', { name: 'n'.repeat(101) }, 'body.name'],
    ['a user who is not a member', { name: 'x', userId: 'usr_nora' }, 'body.userId'],
    ['a user of another tenant', { name: 'x', userId: 'usr_gina' }, 'body.userId'],
    ['an expiry in the past', { name: 'x', expiresAt: '2026-01-01T00:00:00Z' }, 'body.expiresAt'],
    ['an expiry over a year away', { name: 'x', expiresAt: '2028-01-01T00:00:00Z' }, 'body.expiresAt'],
    ['an expiry that is not a date', { name: 'x', expiresAt: 'tomorrow' }, 'body.expiresAt'],
    // RFC 3339's leap second passes the date-time format; Date cannot read it (it was a 500).
    ['an expiry on a leap second', { name: 'x', expiresAt: '2027-06-30T23:59:60Z' }, 'body.expiresAt'],
  ])('answers 400 for %s', async (_name, payload, path) => {
    const res = await createKey(payload);
    expect(res.statusCode).toBe(400);
    expect(JSON.stringify(res.json().details)).toContain(path);
  });

  it('takes an expiry up to the same moment a calendar year away, not a day more (366 days from 2026-11-22 is 2027-11-23)', async () => {
    const justOver = await createKey({ name: 'year-over', expiresAt: '2027-11-22T10:00:00.001Z' });
    expect(justOver.statusCode).toBe(400);
    expect(justOver.json().details.issues[0].path).toBe('body.expiresAt');
    const dayOver = await createKey({ name: 'year-day-over', expiresAt: '2027-11-23T09:00:00Z' });
    expect(dayOver.statusCode).toBe(400);
    const exactly = await createKey({ name: 'year-exact', expiresAt: '2027-11-22T10:00:00Z' });
    expect(exactly.statusCode).toBe(201);
    expect(exactly.json().data.apiKey.expiresAt).toBe('2027-11-22T10:00:00.000Z');
  });

  it('reads a year from February 29 as ending on February 28 (the next year has no February 29)', async () => {
    const was = now;
    now = new Date('2028-02-29T12:00:00.000Z');
    try {
      expect((await createKey({ name: 'leap-over', expiresAt: '2029-03-01T00:00:00Z' })).statusCode).toBe(
        400,
      );
      expect((await createKey({ name: 'leap-ok', expiresAt: '2029-02-28T12:00:00Z' })).statusCode).toBe(201);
    } finally {
      now = was;
    }
  });

  it('takes a name whose marks and fillers sit beside a character that shows (e + U+0301, a U+FE0F emoji)', async () => {
    // The refused ones (only marks, only blank fillers, a line separator) are in test/http/errors.test.ts.
    for (const name of ['caf\u0065\u0301', '\u0301lead', '\u2764\ufe0f keys', '\u3164 hangul \u2800']) {
      const res = await createKey({ name });
      expect(res.statusCode, JSON.stringify(name)).toBe(201);
      expect(res.json().data.apiKey.name).toBe(name);
    }
  });

  it('says what is wrong with an expiry on a leap second', async () => {
    const res = await createKey({ name: 'x', expiresAt: '2027-06-30T23:59:60Z' });
    expect(res.json().message).toBe('body.expiresAt must be a date and time with seconds up to 59');
  });

  it('answers 409 for a live key of the same name', async () => {
    const res = await createKey({ name: 'main-member' });
    expect(res.statusCode).toBe(409);
    expect(res.json().code).toBe('conflict');
  });

  it('lets a new key take the name of an expired one (an expired key is an invalid key)', async () => {
    const expiring = (await createKey({ name: 'nightly', expiresAt: '2026-11-23T10:00:00.000Z' })).json()
      .data;
    const before = now;
    now = new Date('2026-11-23T10:00:00.000Z');
    try {
      expect((await call('GET', '/v1/me', expiring.key)).statusCode).toBe(401);
      // Before: 409 conflict, as if the expired key still held the name.
      const res = await createKey({ name: 'nightly' });
      expect(res.statusCode).toBe(201);
      expect((await call('GET', '/v1/me', res.json().data.key)).statusCode).toBe(200);
      expect((await createKey({ name: 'nightly' })).statusCode).toBe(409);
    } finally {
      now = before;
    }
  });

  it('creates at most one live key of a name when four requests race', async () => {
    const answers = await Promise.all([1, 2, 3, 4].map(() => createKey({ name: 'twin' })));
    expect(answers.map((res) => res.statusCode).sort()).toEqual([201, 409, 409, 409]);
    const rows = await t.env.database.db
      .selectFrom('api_keys')
      .select('id')
      .where('name', '=', 'twin')
      .execute();
    expect(rows).toHaveLength(1);
  });

  it.each([
    ['a member key', MKEYS.member, 'wsp_main', 401],
    ['an organization key of a member', MKEYS.acmeOrgMember, 'wsp_main', 401],
    ['a key of another workspace', MKEYS.otherWorkspace, 'wsp_main', 401],
    ['another tenant', MKEYS.globexOrg, 'wsp_main', 401],
    ['an unknown workspace', MKEYS.owner, 'wsp_nope', 404],
  ])('refuses %s', async (_name, key, workspace, status) => {
    expect((await createKey({ name: `refused-${status}` }, key, workspace)).statusCode).toBe(status);
  });

  it('does not let an admin create a key for an owner: the key would act as the owner', async () => {
    const refused = await createKey({ name: 'as-owner', userId: 'usr_olivia' }, MKEYS.admin);
    expect(refused.statusCode).toBe(401);
    expect(refused.json().code).toBe('unauthorized');
    expect((await createKey({ name: 'admin-for-max', userId: 'usr_max' }, MKEYS.admin)).statusCode).toBe(201);
    expect((await createKey({ name: 'owner-for-admin', userId: 'usr_adam' }, MKEYS.owner)).statusCode).toBe(
      201,
    );
  });

  it('lets an owner’s organization key create keys in its workspaces', async () => {
    expect((await createKey({ name: 'from-org' }, MKEYS.acmeOrg)).statusCode).toBe(201);
  });
});

describe(`DELETE /v1/api-keys/{id} (${engineName})`, () => {
  it('revokes at once; again answers the same; the key then fails with 401', async () => {
    const { apiKey, key } = (await createKey({ name: 'short-lived', userId: 'usr_max' })).json().data;
    expect((await call('GET', '/v1/me', key)).statusCode).toBe(200);
    const res = await call('DELETE', `/v1/api-keys/${apiKey.id}`, MKEYS.admin);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: { revoked: true } });
    const refused = await call('GET', '/v1/me', key);
    expect(refused.statusCode).toBe(401);
    expect(refused.json().code).toBe('not_authenticated');
    expect((await call('DELETE', `/v1/api-keys/${apiKey.id}`, MKEYS.admin)).json()).toEqual({
      data: { revoked: true },
    });
    const listed = (await call('GET', '/v1/workspace/wsp_main/api-keys', MKEYS.owner)).json().data.apiKeys;
    expect(listed.find((k: { id: string }) => k.id === apiKey.id).revokedAt).toBe(now.toISOString());
  });

  it('lets a member revoke its own key but not another user’s', async () => {
    const own = (await createKey({ name: 'max-own', userId: 'usr_max' })).json().data;
    const other = (await createKey({ name: 'olivia-other' })).json().data;
    const denied = await call('DELETE', `/v1/api-keys/${other.apiKey.id}`, MKEYS.member);
    expect(denied.statusCode).toBe(401);
    expect(denied.json().code).toBe('unauthorized');
    expect((await call('DELETE', `/v1/api-keys/${own.apiKey.id}`, MKEYS.member)).statusCode).toBe(200);
    expect((await call('GET', '/v1/me', other.key)).statusCode).toBe(200);
  });

  it('does not let an admin revoke an owner’s key, which would lock the owner out', async () => {
    const owners = (await createKey({ name: 'owner-spare' })).json().data;
    const denied = await call('DELETE', `/v1/api-keys/${owners.apiKey.id}`, MKEYS.admin);
    // Before: 200, and the owner's keys stopped working.
    expect(denied.statusCode).toBe(401);
    expect(denied.json().code).toBe('unauthorized');
    expect((await call('DELETE', '/v1/api-keys/key_main_owner', MKEYS.admin)).statusCode).toBe(401);
    expect((await call('GET', '/v1/me', owners.key)).statusCode).toBe(200);
    expect((await call('GET', '/v1/me', MKEYS.owner)).statusCode).toBe(200);
    // An admin's key to the admin's rank: its own, a member's, and a session token (which acts
    // as a member whatever its user's role) even when made for the owner.
    const session = await call('POST', '/v1/workspace/wsp_main/session-tokens', MKEYS.admin, {
      userId: 'usr_olivia',
    });
    const sessionRow = await t.env.database.db
      .selectFrom('api_keys')
      .select('id')
      .where('key_hash', '=', hashApiKey(session.json().data.token))
      .executeTakeFirstOrThrow();
    expect((await call('DELETE', `/v1/api-keys/${sessionRow.id}`, MKEYS.admin)).statusCode).toBe(200);
    const members = (await createKey({ name: 'member-by-admin', userId: 'usr_max' }, MKEYS.admin)).json()
      .data;
    expect((await call('DELETE', `/v1/api-keys/${members.apiKey.id}`, MKEYS.admin)).statusCode).toBe(200);
    // The owner revokes any key of the workspace.
    expect((await call('DELETE', `/v1/api-keys/${owners.apiKey.id}`, MKEYS.owner)).statusCode).toBe(200);
  });

  it('lets an organization key revoke another user’s organization key only where its user ranks as high', async () => {
    const db = t.env.database.db;
    const idOf = async (name: string) =>
      (await db.selectFrom('api_keys').select('id').where('name', '=', name).executeTakeFirstOrThrow()).id;
    // The member's organization key cannot lock the owner out.
    const denied = await call('DELETE', `/v1/api-keys/${await idOf('acme-org')}`, MKEYS.acmeOrgMember);
    expect(denied.statusCode).toBe(401);
    expect(denied.json().code).toBe('unauthorized');
    expect((await call('GET', '/v1/me', MKEYS.acmeOrg)).statusCode).toBe(200);
    // The owner's organization key revokes the member's.
    const plaintext = generateApiKey('organization');
    await insertApiKey(db, {
      id: 'key_max_spare_org',
      name: 'max-spare-org',
      kind: 'organization',
      organizationId: 'org_acme',
      workspaceId: null,
      userId: 'usr_max',
      keyHash: hashApiKey(plaintext),
      keyPrefix: keyPrefix(plaintext),
      expiresAt: null,
      createdAt: now.toISOString(),
      managedBy: 'api',
    });
    expect((await call('GET', '/v1/me', plaintext)).statusCode).toBe(200);
    expect((await call('DELETE', '/v1/api-keys/key_max_spare_org', MKEYS.acmeOrg)).statusCode).toBe(200);
    expect((await call('GET', '/v1/me', plaintext)).statusCode).toBe(401);
  });

  it('allows revoking a setup-managed key', async () => {
    const extra = (await createKey({ name: 'spare-owner' })).json().data.key;
    expect((await call('DELETE', '/v1/api-keys/key_main_admin', extra)).statusCode).toBe(200);
    expect((await call('GET', '/v1/me', MKEYS.admin)).statusCode).toBe(401);
    // Replacing the revoked key: a new plaintext in the file is a new key, and it works (once it
    // was printed as updated while still revoked).
    const rotated = 'atr_ws_mgmt_main_admin_ROTATED_000000000000000';
    const report = await applyFixture(t.env, MANAGEMENT_SETUP.replace(MKEYS.admin, rotated));
    expect(report.keys['main-admin']).toBe(rotated);
    expect((await call('GET', '/v1/me', rotated)).statusCode).toBe(200);
    expect((await call('GET', '/v1/me', MKEYS.admin)).statusCode).toBe(401);
  });

  it('answers 404 for another tenant’s key and an unknown id', async () => {
    const { apiKey } = (await createKey({ name: 'hidden' })).json().data;
    expect((await call('DELETE', `/v1/api-keys/${apiKey.id}`, MKEYS.globexWorkspace)).statusCode).toBe(404);
    expect((await call('DELETE', `/v1/api-keys/${apiKey.id}`, MKEYS.otherWorkspace)).statusCode).toBe(404);
    expect((await call('DELETE', '/v1/api-keys/key_nope', MKEYS.owner)).statusCode).toBe(404);
  });
});

describe(`session tokens (${engineName})`, () => {
  const createToken = (payload: unknown, key: string = MKEYS.owner) =>
    call('POST', '/v1/workspace/wsp_main/session-tokens', key, payload);

  it('acts as a member for its user on chat, runs, the agent list and /me', async () => {
    const res = await createToken({ userId: 'usr_adam' });
    expect(res.statusCode).toBe(201);
    expect(res.headers['cache-control']).toBe('no-store');
    const { token, expiresAt } = res.json().data;
    expect(token).toMatch(/^atr_st_/);
    expect(expiresAt).toBe(new Date(now.getTime() + 3600_000).toISOString());
    const me = await t.app.inject({
      method: 'GET',
      url: '/v1/me',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(me.json().data).toMatchObject({
      key: { kind: 'session', expiresAt },
      user: { id: 'usr_adam' },
      workspace: { id: 'wsp_main', role: 'member' },
    });
    expect((await call('GET', '/v1/workspace/wsp_main/agents', token)).statusCode).toBe(200);
    expect((await chatWith(token, 'agt_listed')).statusCode).toBe(200);
    const run = await call('POST', '/v1/agents/agt_listed/runs', token, { message: 'hello' });
    expect(run.statusCode).toBe(200);
    // A member's rights: the private agent is not there.
    expect((await chatWith(token, 'agt_other')).statusCode).toBe(404);
  });

  it.each([
    ['GET', '/v1/projects'],
    ['POST', '/v1/projects'],
    ['GET', '/v1/projects/prj_file'],
    ['GET', '/v1/agents/agt_listed'],
    ['PATCH', '/v1/agents/agt_listed'],
    ['POST', '/v1/workspace/wsp_main/agents'],
    ['GET', '/v1/workspace/wsp_main/api-keys'],
    ['POST', '/v1/workspace/wsp_main/api-keys'],
    ['POST', '/v1/workspace/wsp_main/session-tokens'],
    ['DELETE', '/v1/api-keys/key_main_owner'],
    ['GET', '/v1/workspace/wsp_main/skills'],
    ['POST', '/v1/workspace/wsp_main/skills/bulk-upload'],
  ])('refuses %s %s with 401 unauthorized', async (method, url) => {
    const { token } = (await createToken({ userId: 'usr_max' })).json().data;
    const res = await call(
      method as Method,
      url,
      token,
      method === 'GET' || method === 'DELETE' ? undefined : {},
    );
    expect(res.statusCode).toBe(401);
    expect(res.json().code).toBe('unauthorized');
  });

  it('with agentIds, lists and reaches only those agents', async () => {
    const { token } = (await createToken({ userId: 'usr_max', agentIds: ['agt_listed'] })).json().data;
    const list = await call('GET', '/v1/workspace/wsp_main/agents', token);
    expect(list.json().data.agents.map((a: { id: string }) => a.id)).toEqual(['agt_listed']);
    expect(list.json().data.pagination.total).toBe(1);
    expect((await chatWith(token, 'agt_listed')).statusCode).toBe(200);
    const other = await chatWith(token, 'agt_file');
    expect(other.statusCode).toBe(404);
    expect(other.json().code).toBe('not_found');
    expect((await call('POST', '/v1/agents/agt_file/runs', token, { message: 'hi' })).statusCode).toBe(404);
  });

  it('is revoked by the id GET /v1/me shows it (session tokens are not listed), and stops at once', async () => {
    const { token } = (await createToken({ userId: 'usr_max' })).json().data;
    const me = await call('GET', '/v1/me', token);
    const { id, kind } = me.json().data.key;
    expect(kind).toBe('session');
    // The token itself reaches only the chat routes, so the app's server revokes it.
    expect((await call('DELETE', `/v1/api-keys/${id}`, token)).statusCode).toBe(401);
    expect((await call('DELETE', `/v1/api-keys/${id}`, MKEYS.owner)).json()).toEqual({
      data: { revoked: true },
    });
    const after = await call('GET', '/v1/me', token);
    expect(after.statusCode).toBe(401);
    expect(after.json().code).toBe('not_authenticated');
  });

  it('ends with the key that made it: revoking that key (a leaked app server key) refuses its tokens on their next request', async () => {
    const made = await createKey({ name: 'app server' });
    expect(made.statusCode).toBe(201);
    const { key, apiKey } = made.json().data;
    const { token } = (await createToken({ userId: 'usr_max' }, key)).json().data;
    const other = (await createToken({ userId: 'usr_max' })).json().data.token;
    expect((await call('GET', '/v1/me', token)).statusCode).toBe(200);
    expect((await call('DELETE', `/v1/api-keys/${apiKey.id}`, MKEYS.owner)).statusCode).toBe(200);
    const after = await call('GET', '/v1/me', token);
    expect(after.statusCode).toBe(401);
    expect(after.json().code).toBe('not_authenticated');
    expect((await chatWith(token, 'agt_listed')).statusCode).toBe(401);
    // A token another key made goes on.
    expect((await call('GET', '/v1/me', other)).statusCode).toBe(200);
  });

  it('lasts no longer than the key that made it', async () => {
    const keyExpiry = new Date(now.getTime() + 600_000).toISOString();
    const { key } = (await createKey({ name: 'short-lived app server', expiresAt: keyExpiry })).json().data;
    const res = await createToken({ userId: 'usr_max', expiresInSeconds: 3600 }, key);
    expect(res.statusCode).toBe(201);
    const { token, expiresAt } = res.json().data;
    expect(expiresAt).toBe(keyExpiry);
    expect((await call('GET', '/v1/me', token)).json().data.key.expiresAt).toBe(keyExpiry);
    const before = now;
    now = new Date(Date.parse(keyExpiry));
    try {
      expect((await call('GET', '/v1/me', token)).statusCode).toBe(401);
    } finally {
      now = before;
    }
  });

  it('stops working once expired', async () => {
    const { token } = (await createToken({ userId: 'usr_max', expiresInSeconds: 60 })).json().data;
    expect((await call('GET', '/v1/me', token)).statusCode).toBe(200);
    const before = now;
    now = new Date(before.getTime() + 60_000);
    try {
      const res = await call('GET', '/v1/me', token);
      expect(res.statusCode).toBe(401);
      expect(res.json().code).toBe('not_authenticated');
    } finally {
      now = before;
    }
  });

  it.each([
    ['missing userId', {}, 'body.userId'],
    ['a user who is not a member', { userId: 'usr_nora' }, 'body.userId'],
    ['an agent of another workspace', { userId: 'usr_max', agentIds: ['agt_other'] }, 'body.agentIds.0'],
    // The token acts as a member, to whom a private agent is 404: it could never reach it.
    [
      'a private agent (the token acts as a member)',
      { userId: 'usr_olivia', agentIds: ['agt_listed', 'agt_private'] },
      'body.agentIds.1',
    ],
    ['an empty agent list', { userId: 'usr_max', agentIds: [] }, 'body.agentIds'],
    ['a lifetime under a minute', { userId: 'usr_max', expiresInSeconds: 59 }, 'body.expiresInSeconds'],
    ['a lifetime over a day', { userId: 'usr_max', expiresInSeconds: 86_401 }, 'body.expiresInSeconds'],
    [
      'a lifetime that is not an integer',
      { userId: 'usr_max', expiresInSeconds: '60' },
      'body.expiresInSeconds',
    ],
  ])('answers 400 for %s', async (_name, payload, path) => {
    const res = await createToken(payload);
    expect(res.statusCode).toBe(400);
    expect(JSON.stringify(res.json().details)).toContain(path);
  });

  it('needs an owner or admin of the workspace', async () => {
    expect((await createToken({ userId: 'usr_max' }, MKEYS.member)).statusCode).toBe(401);
    expect((await createToken({ userId: 'usr_max' }, MKEYS.globexWorkspace)).statusCode).toBe(401);
    expect((await createToken({ userId: 'usr_max' }, MKEYS.acmeOrg)).statusCode).toBe(201);
  });
});
