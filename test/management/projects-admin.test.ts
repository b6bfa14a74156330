import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LEFTOVER_GRACE_MS } from '../../src/leftovers.js';
import { sweepOrphanProjectObjects } from '../../src/services/project-admin.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { injectable } from '../project-files/helpers.js';
import { keyedCaller, MANAGEMENT_SETUP, MKEYS } from './fixtures.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
let now = new Date('2026-11-22T10:00:00.000Z');
beforeAll(async () => {
  t = await createTestApp({ setup: MANAGEMENT_SETUP, clock: () => now });
});
afterAll(() => t.close());

const call = keyedCaller(() => t.app);
const createProject = async (name: string, key: string = MKEYS.member) => {
  const res = await call('POST', '/v1/projects', key, { name, instructions: 'Cite sources.' });
  expect(res.statusCode).toBe(201);
  return res.json().data.project as { id: string };
};

describe(`GET /v1/projects/{id} (${engineName})`, () => {
  it('returns the project with instructions, memory and managedBy', async () => {
    const project = await createProject('Readable');
    const res = await call('GET', `/v1/projects/${project.id}`, MKEYS.member);
    expect(res.statusCode).toBe(200);
    expect(res.json().data.project).toEqual({
      id: project.id,
      name: 'Readable',
      description: '',
      color: '#64748B',
      icon: 'folder',
      archived: false,
      instructions: 'Cite sources.',
      memory: '',
      managedBy: 'api',
      createdAt: now.toISOString(),
      updatedAt: now.toISOString(),
    });
    const file = await call('GET', '/v1/projects/prj_file', MKEYS.owner);
    expect(file.json().data.project).toMatchObject({ instructions: 'From the file.', managedBy: 'setup' });
  });

  it('needs x-workspace-id with an organization key, and hides other tenants’ projects', async () => {
    const project = await createProject('Tenancy');
    const noHeader = await call('GET', `/v1/projects/${project.id}`, MKEYS.acmeOrg);
    expect(noHeader.statusCode).toBe(401);
    expect(noHeader.json().code).toBe('unauthorized');
    const withHeader = await call('GET', `/v1/projects/${project.id}`, MKEYS.acmeOrg, undefined, {
      'x-workspace-id': 'wsp_main',
    });
    expect(withHeader.statusCode).toBe(200);
    const wrongWorkspace = await call('GET', `/v1/projects/${project.id}`, MKEYS.acmeOrg, undefined, {
      'x-workspace-id': 'wsp_other',
    });
    expect(wrongWorkspace.statusCode).toBe(404);
    const foreignOrg = await call('GET', `/v1/projects/${project.id}`, MKEYS.globexOrg, undefined, {
      'x-workspace-id': 'wsp_main',
    });
    expect(foreignOrg.statusCode).toBe(401);
    for (const key of [MKEYS.otherWorkspace, MKEYS.globexWorkspace]) {
      const res = await call('GET', `/v1/projects/${project.id}`, key);
      expect(res.statusCode).toBe(404);
      expect(res.json().code).toBe('not_found');
    }
    expect((await call('GET', '/v1/projects/prj_nope', MKEYS.owner)).statusCode).toBe(404);
  });
});

describe(`PATCH /v1/projects/{id} (${engineName})`, () => {
  it('lets any key of the workspace update any field and archive; the archived list shows it', async () => {
    const project = await createProject('Patchable', MKEYS.owner);
    now = new Date('2026-11-22T11:00:00.000Z');
    const res = await call('PATCH', `/v1/projects/${project.id}`, MKEYS.member, {
      name: '  Renamed  ',
      description: 'd',
      instructions: 'i',
      memory: '- note',
      color: '#112233',
      icon: 'star',
      archived: true,
      unknown: 'ignored',
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().data.project).toMatchObject({
      name: 'Renamed',
      description: 'd',
      instructions: 'i',
      memory: '- note',
      color: '#112233',
      icon: 'star',
      archived: true,
      updatedAt: now.toISOString(),
    });
    const active = await call('GET', '/v1/projects', MKEYS.member);
    expect(active.json().data.projects.map((p: { id: string }) => p.id)).not.toContain(project.id);
    const archived = await call('GET', '/v1/projects?archived=true', MKEYS.member);
    expect(archived.statusCode).toBe(200);
    expect(archived.json().data.projects.map((p: { id: string }) => p.id)).toContain(project.id);
    expect(archived.json().data.projects.every((p: { archived: boolean }) => p.archived)).toBe(true);
    const restored = await call('PATCH', `/v1/projects/${project.id}`, MKEYS.member, { archived: false });
    expect(restored.json().data.project.archived).toBe(false);
    const explicit = await call('GET', '/v1/projects?archived=false', MKEYS.member);
    expect(explicit.json().data.projects.map((p: { id: string }) => p.id)).toContain(project.id);
  });

  // The limit the `remember` tool stops at: a memory it filled can be sent back as it is.
  it('takes a memory of exactly 100,000 characters', async () => {
    const project = await createProject('Full memory');
    const res = await call('PATCH', `/v1/projects/${project.id}`, MKEYS.member, {
      memory: 'm'.repeat(100_000),
    });
    expect(res.statusCode).toBe(200);
  });

  it('takes null as a merge patch does: the field goes back to its default', async () => {
    const project = await createProject('Reset me');
    const set = { description: 'd', instructions: 'i', memory: 'm', color: '#FF0000', icon: 'star' };
    expect((await call('PATCH', `/v1/projects/${project.id}`, MKEYS.member, set)).statusCode).toBe(200);
    const nulls = Object.fromEntries(Object.keys(set).map((field) => [field, null]));
    const res = await call('PATCH', `/v1/projects/${project.id}`, MKEYS.member, nulls);
    expect(res.statusCode).toBe(200);
    expect(res.json().data.project).toMatchObject({
      name: 'Reset me',
      description: '',
      instructions: '',
      memory: '',
      color: '#64748B',
      icon: 'folder',
    });
  });

  it.each([
    ['null name', { name: null }, 'body.name'],
    ['null archived', { archived: null }, 'body.archived'],
    ['blank name', { name: '  ' }, 'body.name'],
    ['name of a zero-width space', { name: '\u200b' }, 'body.name'],
    ['name of a Hangul filler', { name: '\u3164' }, 'body.name'],
    ['name of blank fillers and spaces', { name: ' \u115f\uffa0\u2800 ' }, 'body.name'],
    ['name of variation selectors and tag characters', { name: '\ufe0f\u{e0041}\u034f' }, 'body.name'],
    ['name too long', { name: 'n'.repeat(201) }, 'body.name'],
    ['description too long', { description: 'd'.repeat(2001) }, 'body.description'],
    ['instructions too long', { instructions: 'i'.repeat(20_001) }, 'body.instructions'],
    ['memory too long', { memory: 'm'.repeat(100_001) }, 'body.memory'],
    ['bad color', { color: 'red' }, 'body.color'],
    ['icon too long', { icon: 'i'.repeat(65) }, 'body.icon'],
    ['archived not a boolean', { archived: 'yes' }, 'body.archived'],
  ])('answers 400 for %s', async (_name, payload, path) => {
    const project = await createProject(`Bounds ${path}`);
    const res = await call('PATCH', `/v1/projects/${project.id}`, MKEYS.member, payload);
    expect(res.statusCode).toBe(400);
    expect(JSON.stringify(res.json().details)).toContain(path);
  });

  it('says only what is wrong with a value sent for a resettable field, without its null branch', async () => {
    const project = await createProject('Clean issues');
    for (const [body, path, message] of [
      [{ color: 'red' }, 'body.color', 'must be a color written #RRGGBB'],
      [{ memory: 'm'.repeat(100_001) }, 'body.memory', 'must NOT have more than 100000 characters'],
      [{ icon: ['star'] }, 'body.icon', 'must be string or null'],
    ] as const) {
      const res = await call('PATCH', `/v1/projects/${project.id}`, MKEYS.member, body);
      expect(res.statusCode, path).toBe(400);
      expect(res.json(), path).toEqual({
        code: 'bad_request',
        message: `${path} ${message}`,
        details: { issues: [{ path, message }] },
      });
    }
  });

  it('answers 400 for archived=maybe in the list query', async () => {
    expect((await call('GET', '/v1/projects?archived=maybe', MKEYS.member)).statusCode).toBe(400);
  });

  it('answers 409 managed_by_setup for a project of the setup file', async () => {
    const res = await call('PATCH', '/v1/projects/prj_file', MKEYS.owner, { name: 'Changed' });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({ code: 'managed_by_setup', details: { managedBy: 'setup' } });
    expect((await call('DELETE', '/v1/projects/prj_file', MKEYS.owner)).statusCode).toBe(409);
    // Who may comes first: a member may delete no project, the setup file's included.
    expect((await call('DELETE', '/v1/projects/prj_file', MKEYS.member)).statusCode).toBe(401);
  });

  it('answers 404 across tenants', async () => {
    const project = await createProject('Foreign');
    expect(
      (await call('PATCH', `/v1/projects/${project.id}`, MKEYS.globexWorkspace, { name: 'x' })).statusCode,
    ).toBe(404);
  });
});

describe(`DELETE /v1/projects/{id} (${engineName})`, () => {
  it('deletes the project (an owner or admin only), its objects and records; its chats stay with projectId null', async () => {
    const project = await createProject('Doomed');
    const prefix = `projects/wsp_main/${project.id}/`;
    await t.store.put(`${prefix}notes.md`, Readable.from([Buffer.from('# Notes')]), {
      contentType: 'text/markdown',
    });
    await t.store.put(`${prefix}docs/spec.txt`, Readable.from([Buffer.from('spec')]), {
      contentType: 'text/plain',
    });
    const sync = await call('POST', `/v1/projects/${project.id}/files/sync`, MKEYS.member);
    expect(sync.statusCode).toBe(200);
    const chat = await call('POST', '/v1/chat', MKEYS.member, {
      agentId: 'agt_listed',
      projectId: project.id,
      messages: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
    });
    expect(chat.statusCode).toBe(200);
    const chatId = chat.json().chatId ?? chat.headers['x-chat-id'];

    const byMember = await call('DELETE', `/v1/projects/${project.id}`, MKEYS.member);
    expect(byMember.statusCode).toBe(401);
    expect(byMember.json().code).toBe('unauthorized');
    const res = await call('DELETE', `/v1/projects/${project.id}`, MKEYS.admin);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: { deleted: true } });

    const objects = [];
    for await (const info of t.store.list(prefix)) objects.push(info.key);
    expect(objects).toEqual([]);
    const db = t.env.database.db;
    expect(
      await db.selectFrom('project_files').selectAll().where('project_id', '=', project.id).execute(),
    ).toEqual([]);
    expect(await db.selectFrom('projects').selectAll().where('id', '=', project.id).execute()).toEqual([]);
    const chatRow = await db
      .selectFrom('chats')
      .selectAll()
      .where('id', '=', String(chatId))
      .executeTakeFirst();
    expect(chatRow).toMatchObject({ project_id: null });
    expect((await call('GET', `/v1/projects/${project.id}`, MKEYS.member)).statusCode).toBe(404);
    expect((await call('DELETE', `/v1/projects/${project.id}`, MKEYS.admin)).statusCode).toBe(404);
  });

  it('an upload through a URL handed out before the delete lands under no project: a sweep removes it after an hour', async () => {
    const doomed = await createProject('Uploaded to too late');
    const kept = await createProject('Uploaded to in time');
    const uploadTo = async (projectId: string) => {
      const res = await call('POST', `/v1/projects/${projectId}/files/upload`, MKEYS.member, {
        filename: 'late.txt',
        contentType: 'text/plain',
        sizeBytes: 5,
      });
      expect(res.statusCode).toBe(200);
      return res.json().data as { uploadUrl: string; storagePath: string };
    };
    const late = await uploadTo(doomed.id);
    const live = await uploadTo(kept.id);
    expect((await call('DELETE', `/v1/projects/${doomed.id}`, MKEYS.owner)).statusCode).toBe(200);
    // The URL stays valid for its lifetime (with S3 the upload never passes through Atrium).
    for (const { uploadUrl } of [late, live]) {
      const put = await t.app.inject({
        method: 'PUT',
        url: injectable(uploadUrl),
        headers: { 'content-type': 'text/plain' },
        payload: 'hello',
      });
      expect(put.statusCode).toBe(200);
    }
    const db = t.env.database.db;
    const warnings: string[] = [];
    const log = { warn: (_details: unknown, message: string) => void warnings.push(message) };
    // Within the hour an upload may still be under way: nothing is removed.
    await sweepOrphanProjectObjects(db, t.store, new Date(), LEFTOVER_GRACE_MS, log);
    expect(await t.store.head(late.storagePath)).not.toBeNull();
    const later = new Date(Date.now() + 2 * LEFTOVER_GRACE_MS);
    expect(
      await sweepOrphanProjectObjects(db, t.store, later, LEFTOVER_GRACE_MS, log),
    ).toBeGreaterThanOrEqual(1);
    expect(warnings).toEqual([]);
    expect(await t.store.head(late.storagePath)).toBeNull();
    expect(await t.store.head(live.storagePath)).not.toBeNull();
  });

  it("the sweep logs a deleted project's folder storage fails to empty, does not count it, and sweeps the others", async () => {
    const [stuck, freed] = ['projects/wsp_main/prj_sweep_stuck/', 'projects/wsp_main/prj_sweep_freed/'];
    for (const prefix of [stuck, freed]) {
      await t.store.put(`${prefix}a.txt`, Readable.from([Buffer.from('x')]), { contentType: 'text/plain' });
    }
    // As S3 fails when it reports a key it could not delete (s3-store.ts, ObjectsNotDeletedError).
    const refusal = new Error('storage kept an object');
    const deletePrefix = t.store.deletePrefix.bind(t.store);
    const spy = vi
      .spyOn(t.store, 'deletePrefix')
      .mockImplementation((prefix) => (prefix === stuck ? Promise.reject(refusal) : deletePrefix(prefix)));
    const warnings: Array<{ details: unknown; message: string }> = [];
    const log = { warn: (details: unknown, message: string) => void warnings.push({ details, message }) };
    try {
      const later = new Date(Date.now() + 2 * LEFTOVER_GRACE_MS);
      // Before: the sweep stopped at the first such folder (and S3's refusals went unseen).
      expect(await sweepOrphanProjectObjects(t.env.database.db, t.store, later, LEFTOVER_GRACE_MS, log)).toBe(
        1,
      );
    } finally {
      spy.mockRestore();
    }
    expect(warnings).toEqual([
      {
        details: { err: refusal, storagePrefix: stuck },
        message: 'could not remove the objects of a deleted project; the next sweep tries again',
      },
    ]);
    expect(await t.store.head(`${stuck}a.txt`)).not.toBeNull();
    expect(await t.store.head(`${freed}a.txt`)).toBeNull();
    await t.store.deletePrefix(stuck);
  });

  it('refuses another tenant and an organization key without x-workspace-id', async () => {
    const project = await createProject('Kept');
    expect((await call('DELETE', `/v1/projects/${project.id}`, MKEYS.globexWorkspace)).statusCode).toBe(404);
    expect((await call('DELETE', `/v1/projects/${project.id}`, MKEYS.acmeOrg)).statusCode).toBe(401);
    expect((await call('GET', `/v1/projects/${project.id}`, MKEYS.member)).statusCode).toBe(200);
  });
});
