import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
let now = new Date('2026-11-22T10:00:00.000Z');
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP, clock: () => now });
});
afterAll(() => t.close());

const headers = { 'x-service-api-key': KEYS.mainOwner };
const create = (payload: unknown, extra: Record<string, string> = {}) =>
  t.app.inject({
    method: 'POST',
    url: '/v1/projects',
    headers: { ...headers, ...extra },
    payload: payload as object,
  });

describe(`POST /v1/projects (${engineName})`, () => {
  it('creates a project with defaults and answers 201 without instructions', async () => {
    const res = await create({ name: '  Launch plan  ', instructions: 'Be brief.', unknown: 'ignored' });
    expect(res.statusCode).toBe(201);
    const { project } = res.json().data;
    expect(project).toEqual({
      id: expect.stringMatching(/^prj_/),
      name: 'Launch plan',
      description: '',
      color: '#64748B',
      icon: 'folder',
      archived: false,
      createdAt: now.toISOString(),
      updatedAt: now.toISOString(),
    });
    const row = await t.env.database.db
      .selectFrom('projects')
      .selectAll()
      .where('id', '=', project.id)
      .executeTakeFirst();
    expect(row).toMatchObject({ workspace_id: 'wsp_main', instructions: 'Be brief.' });
  });

  it('keeps every given field', async () => {
    const res = await create({ name: 'Full', description: 'd', color: '#a1B2c3', icon: 'rocket' });
    expect(res.statusCode).toBe(201);
    expect(res.json().data.project).toMatchObject({
      name: 'Full',
      description: 'd',
      color: '#a1B2c3',
      icon: 'rocket',
    });
  });

  it.each([
    ['missing name', {}, 'body.name'],
    ['blank name', { name: '   ' }, 'body.name'],
    ['name of a zero-width space', { name: '\u200b' }, 'body.name'],
    ['name of a Hangul filler', { name: '\u3164' }, 'body.name'],
    ['name of blank fillers and spaces', { name: ' \u115f\uffa0\u2800 ' }, 'body.name'],
    ['name of variation selectors and tag characters', { name: '\ufe0f\u{e0041}\u034f' }, 'body.name'],
    ['name too long', { name: 'n'.repeat(201) }, 'body.name'],
    ['name of wrong type', { name: 12 }, 'body.name'],
    ['description too long', { name: 'x', description: 'd'.repeat(2001) }, 'body.description'],
    ['instructions too long', { name: 'x', instructions: 'i'.repeat(20_001) }, 'body.instructions'],
    ['icon too long', { name: 'x', icon: 'i'.repeat(65) }, 'body.icon'],
    ['bad color', { name: 'x', color: 'red' }, 'body.color'],
    ['short color', { name: 'x', color: '#fff' }, 'body.color'],
    ['color of wrong type', { name: 'x', color: 5 }, 'body.color'],
    ['description of wrong type', { name: 'x', description: ['d'] }, 'body.description'],
  ])('refuses %s with 400 bad_request', async (_label, payload, path) => {
    const res = await create(payload);
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(body.code).toBe('bad_request');
    expect(body.details.issues.map((i: { path: string }) => i.path)).toContain(path);
  });

  it('says a name that shows no character must contain a visible one, on create and on PATCH', async () => {
    const message = 'must contain a visible character';
    const created = await create({ name: '\u3164' });
    expect(created.json()).toEqual({
      code: 'bad_request',
      message: `body.name ${message}`,
      details: { issues: [{ path: 'body.name', message }] },
    });
    const project = (await create({ name: 'Visible' })).json().data.project;
    const patched = await t.app.inject({
      method: 'PATCH',
      url: `/v1/projects/${project.id}`,
      headers,
      payload: { name: '\u2060\ufeff' },
    });
    expect(patched.statusCode).toBe(400);
    expect(patched.json().details.issues).toEqual([{ path: 'body.name', message }]);
    // Visible names that hold such characters are names: an emoji sequence, a Persian ZWNJ.
    for (const name of ['👩\u200d💻 notes', 'می\u200cخواهم', 'a\u200bb']) {
      const res = await create({ name });
      expect(res.statusCode, JSON.stringify(name)).toBe(201);
      expect(res.json().data.project.name).toBe(name);
    }
  });

  // Chat and agent titles and key names are one line; a project name took a tab or an ESC, which
  // breaks every list and log line that shows it.
  it('refuses a name with a control character or line separator on create and on PATCH, keeping one stored before the rule when sent back', async () => {
    const message =
      'must show a character and be one line: no control characters (newlines, tabs) or line separators (U+2028, U+2029)';
    const patch = (id: string, payload: object) =>
      t.app.inject({ method: 'PATCH', url: `/v1/projects/${id}`, headers, payload });
    const project = (await create({ name: 'One line' })).json().data.project;
    for (const name of ['Tab\there', 'Line\nbreak', 'Esc\u001b[31m', 'Line\u2028separator', 'Del\u007f']) {
      for (const res of [await create({ name }), await patch(project.id, { name })]) {
        expect(res.statusCode, JSON.stringify(name)).toBe(400);
        expect(res.json(), JSON.stringify(name)).toEqual({
          code: 'bad_request',
          message: `body.name ${message}`,
          details: { issues: [{ path: 'body.name', message }] },
        });
      }
    }
    // Trimmed first, as before: a tab or newline at either end is white space the name loses.
    expect((await create({ name: '\tPadded\n' })).json().data.project.name).toBe('Padded');
    // A name stored before the rule is kept when a read-modify-write sends it back unchanged.
    await t.env.database.db
      .updateTable('projects')
      .set({ name: 'Legacy\tname' })
      .where('id', '=', project.id)
      .execute();
    const kept = await patch(project.id, { name: 'Legacy\tname', description: 'rewritten' });
    expect(kept.statusCode).toBe(200);
    expect(kept.json().data.project).toMatchObject({ name: 'Legacy\tname', description: 'rewritten' });
    expect((await patch(project.id, { name: 'Other\tname' })).statusCode).toBe(400);
  });

  it('accepts a name of exactly 200 characters and text fields at their maximum', async () => {
    const res = await create({
      name: 'n'.repeat(200),
      description: 'd'.repeat(2000),
      instructions: 'i'.repeat(20_000),
      icon: 'i'.repeat(64),
    });
    expect(res.statusCode).toBe(201);
  });

  // Characters are code points, as every JSON Schema bound of the API counts them: an emoji is one.
  it('counts a name in characters: 200 emoji are accepted on create and on PATCH, 201 are not', async () => {
    const rocket = '\u{1F680}';
    const created = await create({ name: rocket.repeat(200) });
    expect(created.statusCode).toBe(201);
    expect(created.json().data.project.name).toBe(rocket.repeat(200));
    const patch = (name: string) =>
      t.app.inject({
        method: 'PATCH',
        url: `/v1/projects/${created.json().data.project.id}`,
        headers,
        payload: { name },
      });
    expect((await patch(rocket.repeat(199))).statusCode).toBe(200);
    expect((await patch(rocket.repeat(201))).statusCode).toBe(400);
    expect((await create({ name: rocket.repeat(201) })).statusCode).toBe(400);
  });

  it('refuses a body that is not an object', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/projects',
      headers: { ...headers, 'content-type': 'application/json' },
      payload: '"just a string"',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('bad_request');
  });

  it('refuses an oversized x-workspace-id header with 400 bad_request', async () => {
    const res = await create(
      { name: 'x' },
      { 'x-service-api-key': KEYS.acmeOrg, 'x-workspace-id': 'w'.repeat(201) },
    );
    expect(res.statusCode).toBe(400);
    expect(res.json().details.issues[0].path).toBe('headers.x-workspace-id');
  });

  it('creates the project in the workspace an organization key names', async () => {
    const res = await create(
      { name: 'Org made' },
      { 'x-service-api-key': KEYS.acmeOrg, 'x-workspace-id': 'wsp_other' },
    );
    expect(res.statusCode).toBe(201);
    const row = await t.env.database.db
      .selectFrom('projects')
      .select('workspace_id')
      .where('id', '=', res.json().data.project.id)
      .executeTakeFirstOrThrow();
    expect(row.workspace_id).toBe('wsp_other');
  });
});

describe(`GET /v1/projects (${engineName})`, () => {
  it('lists active projects, most recently updated first, without archived ones', async () => {
    const fresh = await createTestApp({ setup: TENANCY_SETUP, clock: () => now });
    try {
      const make = async (name: string, at: string) => {
        now = new Date(at);
        const res = await fresh.app.inject({
          method: 'POST',
          url: '/v1/projects',
          headers,
          payload: { name },
        });
        return res.json().data.project.id as string;
      };
      const older = await make('Older', '2030-01-01T00:00:00.000Z');
      const newer = await make('Newer', '2030-01-02T00:00:00.000Z');
      const res = await fresh.app.inject({ method: 'GET', url: '/v1/projects', headers });
      expect(res.statusCode).toBe(200);
      const ids = res.json().data.projects.map((p: { id: string }) => p.id);
      expect(ids.slice(0, 2)).toEqual([newer, older]);
      expect(ids).toContain('prj_docs');
      expect(ids).not.toContain('prj_2019');
      expect(ids).not.toContain('prj_other');
      expect(res.json().data).not.toHaveProperty('pagination');
    } finally {
      await fresh.close();
    }
  });

  it("never lists another workspace's projects", async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: '/v1/projects',
      headers: { 'x-service-api-key': KEYS.globexWorkspace },
    });
    expect(res.json().data.projects.map((p: { id: string }) => p.id)).toEqual(['prj_globex']);
  });
});
