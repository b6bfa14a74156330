import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { multipartBody, skillMd } from './zip-builder.js';

/**
 * Who sees which skill, route by route: the list, the read by id and the delete agree for every
 * kind of key (docs/skills.md, "Who sees a skill").
 */
const KEYS = {
  owner: 'atr_ws_skillvis_owner_00000000000000000000000',
  admin: 'atr_ws_skillvis_admin_00000000000000000000000',
  max: 'atr_ws_skillvis_member_max_000000000000000000',
  mia: 'atr_ws_skillvis_member_mia_000000000000000000',
  other: 'atr_ws_skillvis_other_ws_0000000000000000000',
  ownerOrg: 'atr_org_skillvis_owner_0000000000000000000000',
  maxOrg: 'atr_org_skillvis_max_000000000000000000000000',
} as const;

const SETUP = `
organizations:
  - id: org_vis
    name: Vis
    users:
      - { id: usr_owner, name: Olivia, email: olivia@vis.test }
      - { id: usr_admin, name: Ada, email: ada@vis.test }
      - { id: usr_max, name: Max, email: max@vis.test }
      - { id: usr_mia, name: Mia, email: mia@vis.test }
    apiKeys:
      - { name: owner-org, user: usr_owner, key: "${KEYS.ownerOrg}" }
      - { name: max-org, user: usr_max, key: "${KEYS.maxOrg}" }
    workspaces:
      - id: wsp_vis
        name: Vis
        members:
          - { user: usr_owner, role: owner }
          - { user: usr_admin, role: admin }
          - { user: usr_max, role: member }
          - { user: usr_mia, role: member }
        apiKeys:
          - { name: owner, user: usr_owner, key: "${KEYS.owner}" }
          - { name: admin, user: usr_admin, key: "${KEYS.admin}" }
          - { name: max, user: usr_max, key: "${KEYS.max}" }
          - { name: mia, user: usr_mia, key: "${KEYS.mia}" }
      - id: wsp_vis_other
        name: Other
        members:
          - { user: usr_owner, role: owner }
        apiKeys:
          - { name: other, user: usr_owner, key: "${KEYS.other}" }
`;

let t: Awaited<ReturnType<typeof createTestApp>>;
const ids: Record<string, string> = {};

async function upload(name: string, key: string, visibility: string) {
  const { body, contentType } = multipartBody([
    { name: 'visibility', content: visibility },
    { name: 'files', filename: `${name}.md`, contentType: 'text/markdown', content: skillMd(name, name) },
  ]);
  const res = await t.app.inject({
    method: 'POST',
    url: '/v1/workspace/wsp_vis/skills/bulk-upload',
    headers: { 'x-service-api-key': key, 'content-type': contentType },
    payload: body,
  });
  expect(res.statusCode, res.body).toBe(200);
  ids[name] = res.json().data.created[0].id;
}

beforeAll(async () => {
  t = await createTestApp({ setup: SETUP });
  await upload('max-private', KEYS.max, 'private');
  await upload('ada-private', KEYS.admin, 'private');
  await upload('owner-private', KEYS.owner, 'private');
  await upload('shared', KEYS.owner, 'workspace');
  await upload('org-shared', KEYS.admin, 'organization');
});
afterAll(() => t?.close());

const call = (method: 'GET' | 'DELETE', url: string, key: string) =>
  t.app.inject({ method, url, headers: { 'x-service-api-key': key } });

const ALL = ['ada-private', 'max-private', 'org-shared', 'owner-private', 'shared'];

/** What each key should see: owners and admins every skill, members shared ones and their own. */
const CASES: Array<[string, string, string[]]> = [
  ['an owner key', KEYS.owner, ALL],
  ['an admin key', KEYS.admin, ALL],
  ['an organization key of an owner', KEYS.ownerOrg, ALL],
  ['the private skill’s author (a member)', KEYS.max, ['max-private', 'org-shared', 'shared']],
  ['an organization key of that member', KEYS.maxOrg, ['max-private', 'org-shared', 'shared']],
  ['another member', KEYS.mia, ['org-shared', 'shared']],
];

describe(`who sees a skill (${engineName})`, () => {
  it.each(CASES)('%s: the list shows exactly the skills it may read by id', async (_who, key, expected) => {
    const list = await call('GET', '/v1/workspace/wsp_vis/skills?limit=100', key);
    expect(list.statusCode).toBe(200);
    const listed = list.json().data.skills.map((skill: { name: string }) => skill.name);
    expect(listed).toEqual(expected);
    expect(list.json().data.pagination.total).toBe(expected.length);
    const readable: string[] = [];
    for (const name of ALL) {
      const res = await call('GET', `/v1/skills/${ids[name]}`, key);
      expect([200, 404]).toContain(res.statusCode);
      if (res.statusCode === 200) readable.push(name);
    }
    expect(readable).toEqual(listed);
  });

  it('a key of another workspace lists nothing here (401) and reads no skill of it (404)', async () => {
    const list = await call('GET', '/v1/workspace/wsp_vis/skills', KEYS.other);
    expect([list.statusCode, list.json().code]).toEqual([401, 'unauthorized']);
    for (const name of ALL) {
      expect((await call('GET', `/v1/skills/${ids[name]}`, KEYS.other)).statusCode).toBe(404);
      expect((await call('DELETE', `/v1/skills/${ids[name]}`, KEYS.other)).statusCode).toBe(404);
    }
  });

  it('a session token reaches no skill route (401), whatever its user’s role', async () => {
    const token = await t.app.inject({
      method: 'POST',
      url: '/v1/workspace/wsp_vis/session-tokens',
      headers: { 'x-service-api-key': KEYS.owner },
      payload: { userId: 'usr_owner' },
    });
    const tokenKey = token.json().data.token as string;
    expect((await call('GET', '/v1/workspace/wsp_vis/skills', tokenKey)).statusCode).toBe(401);
    expect((await call('GET', `/v1/skills/${ids.shared}`, tokenKey)).statusCode).toBe(401);
    expect((await call('DELETE', `/v1/skills/${ids.shared}`, tokenKey)).statusCode).toBe(401);
  });

  it('a member’s delete: 401 for a skill it sees (its own included), 404 for one it does not', async () => {
    expect((await call('DELETE', `/v1/skills/${ids['max-private']}`, KEYS.max)).statusCode).toBe(401);
    expect((await call('DELETE', `/v1/skills/${ids.shared}`, KEYS.mia)).statusCode).toBe(401);
    expect((await call('DELETE', `/v1/skills/${ids['max-private']}`, KEYS.mia)).statusCode).toBe(404);
    expect((await call('DELETE', `/v1/skills/${ids['ada-private']}`, KEYS.max)).statusCode).toBe(404);
  });

  it('an owner or admin lists, reads and deletes another user’s private skill', async () => {
    await upload('mia-private', KEYS.mia, 'private');
    const listedFor = async (key: string) =>
      (await call('GET', '/v1/workspace/wsp_vis/skills?limit=100', key))
        .json()
        .data.skills.map((skill: { name: string }) => skill.name);
    expect(await listedFor(KEYS.admin)).toContain('mia-private');
    expect(await listedFor(KEYS.max)).not.toContain('mia-private');
    expect((await call('DELETE', `/v1/skills/${ids['mia-private']}`, KEYS.admin)).statusCode).toBe(200);
    expect(await listedFor(KEYS.owner)).not.toContain('mia-private');
    expect(await listedFor(KEYS.mia)).not.toContain('mia-private');
  });
});
