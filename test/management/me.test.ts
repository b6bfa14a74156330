import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { MANAGEMENT_SETUP, MKEYS } from './fixtures.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
beforeAll(async () => {
  t = await createTestApp({ setup: MANAGEMENT_SETUP });
});
afterAll(() => t.close());

const me = (key: string, extra: Record<string, string> = {}) =>
  t.app.inject({ method: 'GET', url: '/v1/me', headers: { 'x-service-api-key': key, ...extra } });

describe(`GET /v1/me (${engineName})`, () => {
  it('describes a workspace key with its user, organization, workspace and role', async () => {
    const res = await me(MKEYS.admin);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      data: {
        key: { id: 'key_main_admin', name: 'main-admin', kind: 'workspace', expiresAt: null },
        user: { id: 'usr_adam', name: 'Adam', email: 'adam@acme.test' },
        organization: { id: 'org_acme', name: 'Acme' },
        workspace: { id: 'wsp_main', name: 'Main', role: 'admin' },
      },
    });
  });

  it('gives an organization key a null workspace, and takes Authorization: Bearer', async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: '/v1/me',
      headers: { authorization: `Bearer ${MKEYS.acmeOrg}` },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({
      key: { kind: 'organization', name: 'acme-org' },
      user: { id: 'usr_olivia' },
      workspace: null,
    });
  });

  it('shows a member key as a member, and another tenant its own organization', async () => {
    expect((await me(MKEYS.member)).json().data.workspace.role).toBe('member');
    expect((await me(MKEYS.globexWorkspace)).json().data.organization).toEqual({
      id: 'org_globex',
      name: 'Globex',
    });
  });

  it('answers 401 not_authenticated without a key or with an unknown one', async () => {
    for (const res of [await me(''), await me('atr_ws_unknown_key_000000000000000000000000')]) {
      expect(res.statusCode).toBe(401);
      expect(res.json().code).toBe('not_authenticated');
    }
  });

  it('answers 405 to another method', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/me',
      headers: { 'x-service-api-key': MKEYS.owner },
    });
    expect(res.statusCode).toBe(405);
  });
});
