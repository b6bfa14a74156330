import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { buildZip, multipartBody, skillMd } from '../skills/zip-builder.js';
import { MANAGEMENT_SETUP, MKEYS } from './fixtures.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
beforeAll(async () => {
  t = await createTestApp({ setup: MANAGEMENT_SETUP });
});
afterAll(() => t.close());

const call = (method: 'GET' | 'DELETE', url: string, key: string) =>
  t.app.inject({ method, url, headers: { 'x-service-api-key': key } });

async function uploadSkill(name: string, key: string, visibility = 'private', frontMatter = '') {
  const zip = await buildZip([
    { name: `${name}/SKILL.md`, content: skillMd(name, `About ${name}`, frontMatter) },
    { name: `${name}/scripts/run.sh`, content: 'echo hi\n' },
  ]);
  const { body, contentType } = multipartBody([
    { name: 'visibility', content: visibility },
    { name: 'files', filename: `${name}.zip`, contentType: 'application/zip', content: zip },
  ]);
  const res = await t.app.inject({
    method: 'POST',
    url: '/v1/workspace/wsp_main/skills/bulk-upload',
    headers: { 'x-service-api-key': key, 'content-type': contentType },
    payload: body,
  });
  expect(res.statusCode).toBe(200);
  return res.json().data.created[0] as { id: string; storagePath: string };
}

describe(`GET /v1/skills/{id} (${engineName})`, () => {
  it('returns the skill with its stored files', async () => {
    const skill = await uploadSkill('reader', MKEYS.owner, 'workspace');
    const res = await call('GET', `/v1/skills/${skill.id}`, MKEYS.member);
    expect(res.statusCode).toBe(200);
    expect(res.json().data.skill).toEqual({
      id: skill.id,
      name: 'reader',
      description: 'About reader',
      visibility: 'workspace',
      ownerUserId: 'usr_olivia',
      storagePath: `skills/wsp_main/${skill.id}/`,
      metadata: {},
      files: [
        { path: 'SKILL.md', sizeBytes: Buffer.byteLength(skillMd('reader', 'About reader')) },
        { path: 'scripts/run.sh', sizeBytes: 8 },
      ],
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
  });

  it('answers the fields of the skill’s list item (owner, front matter metadata), plus its files', async () => {
    const skill = await uploadSkill(
      'listed',
      MKEYS.member,
      'private',
      'license: MIT\nallowed-tools: [Read]\n',
    );
    const list = await call('GET', '/v1/workspace/wsp_main/skills?limit=100', MKEYS.member);
    const item = list.json().data.skills.find((listed: { id: string }) => listed.id === skill.id);
    expect(item).toMatchObject({
      ownerUserId: 'usr_max',
      metadata: { license: 'MIT', 'allowed-tools': ['Read'] },
    });
    const res = await call('GET', `/v1/skills/${skill.id}`, MKEYS.member);
    expect(res.statusCode).toBe(200);
    const { files, ...rest } = res.json().data.skill;
    expect(rest).toEqual(item);
    expect(files.map((file: { path: string }) => file.path)).toEqual(['SKILL.md', 'scripts/run.sh']);
  });

  it('shows a private skill to its uploader and to owners and admins, not to other members', async () => {
    const skill = await uploadSkill('secret', MKEYS.member);
    expect((await call('GET', `/v1/skills/${skill.id}`, MKEYS.member)).statusCode).toBe(200);
    expect((await call('GET', `/v1/skills/${skill.id}`, MKEYS.admin)).statusCode).toBe(200);
    const adamsOwn = await uploadSkill('adams', MKEYS.admin);
    expect((await call('GET', `/v1/skills/${adamsOwn.id}`, MKEYS.member)).statusCode).toBe(404);
  });

  it('answers 404 across tenants and for unknown ids; 401 for a session token', async () => {
    const skill = await uploadSkill('tenant', MKEYS.owner, 'workspace');
    expect((await call('GET', `/v1/skills/${skill.id}`, MKEYS.globexWorkspace)).statusCode).toBe(404);
    expect((await call('GET', `/v1/skills/${skill.id}`, MKEYS.otherWorkspace)).statusCode).toBe(404);
    expect((await call('GET', '/v1/skills/skl_nope', MKEYS.owner)).statusCode).toBe(404);
    expect((await call('GET', `/v1/skills/${skill.id}`, MKEYS.acmeOrg)).statusCode).toBe(200);
    const token = await t.app.inject({
      method: 'POST',
      url: '/v1/workspace/wsp_main/session-tokens',
      headers: { 'x-service-api-key': MKEYS.owner },
      payload: { userId: 'usr_max' },
    });
    expect((await call('GET', `/v1/skills/${skill.id}`, token.json().data.token)).statusCode).toBe(401);
  });
});

describe(`DELETE /v1/skills/{id} (${engineName})`, () => {
  it('removes the skill and its stored files; again → 404', async () => {
    const skill = await uploadSkill('doomed', MKEYS.member, 'private');
    const res = await call('DELETE', `/v1/skills/${skill.id}`, MKEYS.owner);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: { deleted: true } });
    const left = [];
    for await (const object of t.store.list(skill.storagePath)) left.push(object.key);
    expect(left).toEqual([]);
    expect(
      await t.env.database.db.selectFrom('skills').selectAll().where('id', '=', skill.id).execute(),
    ).toEqual([]);
    expect((await call('DELETE', `/v1/skills/${skill.id}`, MKEYS.owner)).statusCode).toBe(404);
  });

  it('removes a replaced skill’s files: its whole folder, the version its last replace wrote inside it too', async () => {
    const skill = await uploadSkill('renewed', MKEYS.owner, 'workspace');
    const replaced = await uploadMode(
      [
        { name: 'renewed/SKILL.md', content: skillMd('renewed', 'Version two') },
        { name: 'renewed/two.txt', content: '2' },
      ],
      MKEYS.owner,
      'replace',
    );
    const { storagePath } = replaced.json().data.updated[0];
    expect(storagePath).toBe(skill.storagePath);
    const stored: string[] = [];
    for await (const object of t.store.list(storagePath)) stored.push(object.key);
    expect(stored.every((key) => key.startsWith(`${storagePath}.atrium-version-`))).toBe(true);
    expect((await call('DELETE', `/v1/skills/${skill.id}`, MKEYS.owner)).statusCode).toBe(200);
    const left: string[] = [];
    for await (const object of t.store.list('skills/wsp_main/')) {
      if (object.key.startsWith(`skills/wsp_main/${skill.id}`)) left.push(object.key);
    }
    expect(left).toEqual([]);
  });

  it('answers 200 for a skill deleted though storage kept its files (left to the sweep, not retried into a 404)', async () => {
    const skill = await uploadSkill('stuck', MKEYS.member, 'private');
    const failing = vi
      .spyOn(t.store, 'deletePrefix')
      .mockRejectedValueOnce(new Error('S3 did not delete 1 object(s) under the skill'));
    try {
      // Before: 503 "try again" (or 500), though the row was gone; the retry then got 404.
      const res = await call('DELETE', `/v1/skills/${skill.id}`, MKEYS.owner);
      expect(res.statusCode, res.body).toBe(200);
    } finally {
      failing.mockRestore();
    }
    expect((await call('GET', `/v1/skills/${skill.id}`, MKEYS.owner)).statusCode).toBe(404);
  });

  it('refuses a member key, even for the member’s own upload (management.md: write routes need an owner or admin)', async () => {
    const own = await uploadSkill('members-own', MKEYS.member, 'private');
    const denied = await call('DELETE', `/v1/skills/${own.id}`, MKEYS.member);
    expect(denied.statusCode).toBe(401);
    expect(denied.json().code).toBe('unauthorized');
    expect((await call('GET', `/v1/skills/${own.id}`, MKEYS.member)).statusCode).toBe(200);
  });

  it('lets owners and admins delete any skill; a member none', async () => {
    const shared = await uploadSkill('shared-one', MKEYS.owner, 'workspace');
    const denied = await call('DELETE', `/v1/skills/${shared.id}`, MKEYS.member);
    expect(denied.statusCode).toBe(401);
    expect(denied.json().code).toBe('unauthorized');
    expect((await call('DELETE', `/v1/skills/${shared.id}`, MKEYS.globexWorkspace)).statusCode).toBe(404);
    expect((await call('DELETE', `/v1/skills/${shared.id}`, MKEYS.admin)).statusCode).toBe(200);
  });
});

async function uploadMode(files: Array<{ name: string; content: string }>, key: string, mode?: string) {
  const zip = await buildZip(files);
  const { body, contentType } = multipartBody([
    ...(mode === undefined ? [] : [{ name: 'mode', content: mode }]),
    { name: 'files', filename: 'skills.zip', contentType: 'application/zip', content: zip },
  ]);
  return t.app.inject({
    method: 'POST',
    url: '/v1/workspace/wsp_main/skills/bulk-upload',
    headers: { 'x-service-api-key': key, 'content-type': contentType },
    payload: body,
  });
}

describe(`bulk upload mode=replace (${engineName})`, () => {
  it('replaces a same-name skill in place, keeping its id, and drops files the new version lacks', async () => {
    const first = await uploadMode(
      [
        { name: 'tool/SKILL.md', content: skillMd('tool', 'Version one') },
        { name: 'tool/old.txt', content: 'old' },
      ],
      MKEYS.member,
    );
    const { id } = first.json().data.created[0];
    const createMode = await uploadMode(
      [{ name: 'tool/SKILL.md', content: skillMd('tool', 'Ignored') }],
      MKEYS.member,
    );
    expect(createMode.json().data).toMatchObject({ created: [], skipped: [{ name: 'tool' }] });
    expect(createMode.json().data.updated).toBeUndefined();

    const res = await uploadMode(
      [
        { name: 'tool/SKILL.md', content: skillMd('tool', 'Version two') },
        { name: 'tool/new.txt', content: 'new' },
        { name: 'fresh/SKILL.md', content: skillMd('fresh', 'Brand new') },
      ],
      MKEYS.member,
      'replace',
    );
    expect(res.statusCode).toBe(200);
    const data = res.json().data;
    // storagePath is the skill's folder still (decisions.md); the new version is in a version
    // folder of its own inside it, which the row switched to.
    expect(data.updated).toEqual([{ id, name: 'tool', storagePath: `skills/wsp_main/${id}/` }]);
    expect(data.created.map((c: { name: string }) => c.name)).toEqual(['fresh']);
    expect(data.summary).toEqual({ total: 2, created: 1, updated: 1, skipped: 0, failed: 0 });
    // The order the README's example shows: the replace-only fields after a create answer's.
    expect(Object.keys(data)).toEqual(['created', 'skipped', 'errors', 'summary', 'updated']);
    expect(Object.keys(data.summary)).toEqual(['total', 'created', 'skipped', 'failed', 'updated']);
    const detail = (await call('GET', `/v1/skills/${id}`, MKEYS.member)).json().data.skill;
    expect(detail.description).toBe('Version two');
    expect(detail.files.map((f: { path: string }) => f.path)).toEqual(['SKILL.md', 'new.txt']);
    expect(detail.storagePath).toBe(`skills/wsp_main/${id}/`);
    const listed = (await call('GET', '/v1/workspace/wsp_main/skills', MKEYS.member)).json().data.skills;
    expect(listed.find((skill: { id: string }) => skill.id === id).storagePath).toBe(
      `skills/wsp_main/${id}/`,
    );
    // The first version's files are gone; the new version's are in its version folder.
    const [row] = await t.env.database.db.selectFrom('skills').selectAll().where('id', '=', id).execute();
    expect(row!.storage_path).toMatch(new RegExp(`^skills/wsp_main/${id}/\\.atrium-version-[\\w-]{12}/$`));
    const left: string[] = [];
    for await (const object of t.store.list('skills/wsp_main/')) {
      if (object.key.startsWith(`skills/wsp_main/${id}`)) left.push(object.key);
    }
    expect(left.sort()).toEqual([`${row!.storage_path}SKILL.md`, `${row!.storage_path}new.txt`]);
  });

  it('skips another user’s same-name skill for a member, and replaces it for an admin', async () => {
    const theirs = await uploadMode(
      [{ name: 'owned/SKILL.md', content: skillMd('owned', 'By Olivia') }],
      MKEYS.owner,
    );
    const id = theirs.json().data.created[0].id;
    const member = await uploadMode(
      [{ name: 'owned/SKILL.md', content: skillMd('owned', 'By Max') }],
      MKEYS.member,
      'replace',
    );
    expect(member.json().data).toMatchObject({ updated: [], skipped: [{ name: 'owned' }] });
    const admin = await uploadMode(
      [{ name: 'owned/SKILL.md', content: skillMd('owned', 'By Adam') }],
      MKEYS.admin,
      'replace',
    );
    expect(admin.json().data.updated).toEqual([expect.objectContaining({ id })]);
  });

  it('answers 400 for an unknown mode', async () => {
    const res = await uploadMode([{ name: 'x/SKILL.md', content: skillMd('x', 'x') }], MKEYS.owner, 'merge');
    expect(res.statusCode).toBe(400);
    expect(JSON.stringify(res.json().details)).toContain('body.mode');
  });
});
