import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { filesApi, OWNER, PREFIX } from './helpers.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
/** Moves the app's clock on (an upload URL's expiry), back to 0 after. */
let clockOffsetMs = 0;
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP, clock: () => new Date(Date.now() + clockOffsetMs) });
});
afterAll(() => t.close());

const valid = { filename: 'notes.md', contentType: 'text/markdown', sizeBytes: 10 };
const MB = 1024 * 1024;

async function newProject(name: string): Promise<string> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/v1/projects',
    headers: { 'x-service-api-key': KEYS.mainOwner },
    payload: { name },
  });
  return res.json().data.project.id;
}

/** Registers files straight in the database (fast: no bytes are written). */
async function insertRecords(projectId: string, sizes: number[], pathOf = (i: number) => `f${i}.txt`) {
  const now = new Date().toISOString();
  const rows = sizes.map((size, i) => ({
    id: newId('fil'),
    workspace_id: 'wsp_main',
    project_id: projectId,
    name: pathOf(i).split('/').pop()!,
    path: pathOf(i),
    mime_type: 'text/plain',
    size_bytes: size,
    etag: `e${i}`,
    type: 'uploaded',
    created_at: now,
    updated_at: now,
    synced_at: now,
  }));
  for (let i = 0; i < rows.length; i += 100) {
    await t.env.database.db
      .insertInto('project_files')
      .values(rows.slice(i, i + 100))
      .execute();
  }
}

function expectBadRequest(
  res: { statusCode: number; json(): { code: string; details: { issues: { path: string }[] } } },
  path: string,
) {
  expect(res.statusCode, JSON.stringify(res.json())).toBe(400);
  const body = res.json();
  expect(body.code).toBe('bad_request');
  expect(body.details.issues.map((i: { path: string }) => i.path)).toContain(path);
}

describe(`POST /v1/projects/{projectId}/files/upload (${engineName})`, () => {
  it('returns a signed upload URL and the storage path for a valid request', async () => {
    const res = await filesApi(t.app).requestUpload({ ...valid, folder: 'docs' });
    expect(res.statusCode).toBe(200);
    const { uploadUrl, storagePath } = res.json().data;
    expect(storagePath).toBe(`${PREFIX}docs/notes.md`);
    const url = new URL(uploadUrl);
    expect(url.pathname).toBe(`/storage/objects/${PREFIX}docs/notes.md`);
    expect(url.searchParams.get('contentType')).toBe('text/markdown');
    expect(url.searchParams.get('size')).toBe('10');
    expect(Number(url.searchParams.get('expires')) * 1000 - Date.now()).toBeGreaterThan(14 * 60 * 1000);
    expect(Number(url.searchParams.get('expires')) * 1000 - Date.now()).toBeLessThanOrEqual(15 * 60 * 1000);
  });

  it('signs URLs for http://HOST:PORT whatever Host header the request carried', async () => {
    const res = await filesApi(t.app, 'prj_docs', { ...OWNER, host: 'evil.example:8080' }).requestUpload(
      valid,
    );
    expect(res.statusCode).toBe(200);
    expect(new URL(res.json().data.uploadUrl).origin).toBe(
      `http://${t.env.config.host}:${t.env.config.port}`,
    );
  });

  it.each([
    ['a "/"', 'a/b.txt'],
    ['a backslash', 'a\\b.txt'],
    ['a NUL byte', 'a\0b.txt'],
    ['a newline', 'notes\nY'],
    ['a tab', 'a\tb.txt'],
    ['a C1 control character (U+0085, next line)', 'notes\u0085Y'],
    ['a C1 control character (U+009B)', 'a\u009bb.txt'],
    ['a right-to-left override (U+202E)', 'invoice\u202efdp.exe'],
    ['a left-to-right isolate (U+2066)', 'a\u2066b.txt'],
    ['a right-to-left mark (U+200F)', 'a\u200fb.txt'],
    ['an Arabic letter mark (U+061C)', 'a\u061cb.txt'],
    ['a line separator (U+2028)', 'notes\u2028Y'],
    ['a paragraph separator (U+2029)', 'notes\u2029Y'],
    ['an unpaired surrogate', 'a\ud800.txt'],
    ['"."', '.'],
    ['".."', '..'],
    ['256 characters', 'x'.repeat(256)],
    ['nothing', ''],
  ])('refuses a filename with %s', async (_what, filename) => {
    expectBadRequest(await filesApi(t.app).requestUpload({ ...valid, filename }), 'body.filename');
  });

  it('accepts a filename of 255 characters, dots inside, spaces and unicode', async () => {
    for (const filename of ['x'.repeat(251) + '.txt', '..hidden..', '.env', 'Résumé final (2).pdf']) {
      expect((await filesApi(t.app).requestUpload({ ...valid, filename })).statusCode, filename).toBe(200);
    }
  });

  it.each([
    ['negative', -1],
    ['50 MB + 1', 50 * MB + 1],
    ['fractional', 1.5],
    ['a string', '10'],
  ])('refuses a %s sizeBytes', async (_what, sizeBytes) => {
    expectBadRequest(await filesApi(t.app).requestUpload({ ...valid, sizeBytes }), 'body.sizeBytes');
  });

  it('accepts sizes 0 and exactly 50 MB', async () => {
    expect((await filesApi(t.app).requestUpload({ ...valid, sizeBytes: 0 })).statusCode).toBe(200);
    expect((await filesApi(t.app).requestUpload({ ...valid, sizeBytes: 50 * MB })).statusCode).toBe(200);
  });

  it.each([['text'], ['text/'], ['/plain'], ['text plain'], ['text/plain;'], ['']])(
    'refuses the MIME type %j',
    async (contentType) => {
      expectBadRequest(await filesApi(t.app).requestUpload({ ...valid, contentType }), 'body.contentType');
    },
  );

  it('accepts MIME types with parameters and vendor subtypes', async () => {
    for (const contentType of [
      'text/plain; charset=utf-8',
      'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
      'image/svg+xml',
    ]) {
      expect((await filesApi(t.app).requestUpload({ ...valid, contentType })).statusCode, contentType).toBe(
        200,
      );
    }
  });

  it.each([
    ['a ".." segment (folder traversal)', 'docs/../../etc'],
    ['only ".."', '..'],
    ['a "." segment', './docs'],
    ['an empty segment', 'docs//specs'],
    ['a backslash', 'docs\\specs'],
    ['a NUL byte', 'docs\0'],
    ['a C1 control character', 'docs/a\u0085b'],
    ['a left-to-right embedding (U+202A)', 'docs/a\u202ab'],
    ['a pop directional isolate (U+2069)', 'a\u2069b/docs'],
    ['a left-to-right mark (U+200E)', 'docs/a\u200eb'],
    ['a line separator (U+2028)', 'docs\u2028specs'],
    ['depth 11', Array.from({ length: 11 }, (_, i) => `d${i}`).join('/')],
    ['a 256-character segment', `docs/${'y'.repeat(256)}`],
  ])('refuses a folder with %s', async (_what, folder) => {
    expectBadRequest(await filesApi(t.app).requestUpload({ ...valid, folder }), 'body.folder');
  });

  it.each([
    ['a zero-width space', '\u200b'],
    ['a word joiner and a BOM', '\u2060\ufeff'],
    ['the Hangul filler U+3164', '\u3164'],
    ['the Hangul fillers U+115F and U+FFA0', '\u115f\uffa0'],
    ['the Mongolian vowel separator', '\u180e'],
    ['variation selectors', '\ufe00\ufe0f'],
    ['tag characters', '\u{e0061}\u{e007f}'],
    ['a combining grapheme joiner', '\u034f'],
    ['the blank braille cell', '\u2800'],
    ['spaces', '   '],
    ['spaces and invisible characters', ' \u200b\u3164 '],
  ])('refuses a filename or folder of %s alone: it shows no character', async (_what, name) => {
    const message = 'must contain a visible character';
    const filename = await filesApi(t.app).requestUpload({ ...valid, filename: name });
    expectBadRequest(filename, 'body.filename');
    expect(filename.json().details.issues).toEqual([{ path: 'body.filename', message }]);
    for (const folder of [name, `docs/${name}/specs`]) {
      const res = await filesApi(t.app).requestUpload({ ...valid, folder });
      expectBadRequest(res, 'body.folder');
      // The segment is quoted escaped: raw, it would be an empty pair of quotes.
      const escaped = [...name].map((c) => `\\u{${c.codePointAt(0)!.toString(16).toUpperCase()}}`).join('');
      expect(res.json().details.issues).toEqual([
        { path: 'body.folder', message: `segment "${escaped}" ${message}` },
      ]);
    }
  });

  it('accepts visible names that hold invisible characters: emoji sequences, a ZWNJ in Persian, a ZWSP inside', async () => {
    for (const filename of ['👨\u200d👩\u200d👧.png', 'a\u200bb.txt', 'می\u200cخواهم.md', '❤\ufe0f.txt']) {
      const res = await filesApi(t.app).requestUpload({ ...valid, filename, folder: filename });
      expect(res.statusCode, JSON.stringify(filename)).toBe(200);
    }
  });

  it('names a refused character by its code point and never echoes it raw', async () => {
    const filename = await filesApi(t.app).requestUpload({ ...valid, filename: 'invoice\u202efdp.exe' });
    expectBadRequest(filename, 'body.filename');
    expect(filename.json().details.issues[0].message).toContain('U+202E');
    expect(filename.body).not.toContain('\u202e');
    const folder = await filesApi(t.app).requestUpload({ ...valid, folder: 'docs/a\u2067b\u2028c' });
    expectBadRequest(folder, 'body.folder');
    const { message } = folder.json().details.issues[0];
    expect(message).toContain('U+2067');
    expect(message).toContain('"a\\u{2067}b\\u{2028}c"');
    expect(folder.json().message).toContain('U+2067');
    expect(folder.body).not.toMatch(/[\u2067\u2028]/);
  });

  it('refuses a folder and filename whose storage path would pass 1,024 bytes (the S3 key limit)', async () => {
    const folder = Array.from({ length: 5 }, () => 'f'.repeat(200)).join('/');
    expectBadRequest(await filesApi(t.app).requestUpload({ ...valid, folder }), 'body.folder');
  });

  it('puts filename and folder in Unicode NFC: a decomposed name is the same path as the composed one', async () => {
    const decomposed = await filesApi(t.app).requestUpload({
      ...valid,
      filename: 'Re\u0301sume\u0301.md',
      folder: 'cafe\u0301',
    });
    expect(decomposed.statusCode).toBe(200);
    expect(decomposed.json().data.storagePath).toBe(`${PREFIX}caf\u00e9/R\u00e9sum\u00e9.md`);
    expect(new URL(decomposed.json().data.uploadUrl).pathname).toBe(
      `/storage/objects/${PREFIX}caf%C3%A9/R%C3%A9sum%C3%A9.md`,
    );
    // A registered composed name clashes with the decomposed spelling of the same folder.
    const projectId = await newProject('Normalized clash');
    await insertRecords(projectId, [1], () => 'r\u00e9sum\u00e9');
    expectBadRequest(
      await filesApi(t.app, projectId).requestUpload({ ...valid, folder: 're\u0301sume\u0301' }),
      'body.filename',
    );
  });

  it('trims leading and trailing slashes of the folder and allows depth 10', async () => {
    const trimmed = await filesApi(t.app).requestUpload({ ...valid, folder: '/docs/specs/' });
    expect(trimmed.json().data.storagePath).toBe(`${PREFIX}docs/specs/notes.md`);
    const deep = Array.from({ length: 10 }, (_, i) => `d${i}`).join('/');
    const res = await filesApi(t.app).requestUpload({ ...valid, folder: deep });
    expect(res.json().data.storagePath).toBe(`${PREFIX}${deep}/notes.md`);
    const root = await filesApi(t.app).requestUpload({ ...valid, folder: '/' });
    expect(root.json().data.storagePath).toBe(`${PREFIX}notes.md`);
  });

  it('refuses a body without the required fields, and malformed JSON, with 400', async () => {
    for (const field of ['filename', 'contentType', 'sizeBytes'] as const) {
      const body: Record<string, unknown> = { ...valid };
      delete body[field];
      expectBadRequest(await filesApi(t.app).requestUpload(body), `body.${field}`);
    }
    const malformed = await t.app.inject({
      method: 'POST',
      url: '/v1/projects/prj_docs/files/upload',
      headers: { 'x-service-api-key': KEYS.mainOwner, 'content-type': 'application/json' },
      payload: '{"filename":',
    });
    expect(malformed.statusCode).toBe(400);
  });

  it('refuses a path that clashes with a registered file used as a folder, and vice versa', async () => {
    const projectId = await newProject('Clash');
    await insertRecords(projectId, [1, 1, 1], (i) => ['report', 'docs/a.md', '\u{1F600}/b.md'][i]!);
    expectBadRequest(
      await filesApi(t.app, projectId).requestUpload({ ...valid, folder: 'report' }),
      'body.filename',
    );
    // Names outside the BMP too: JavaScript counts their UTF-16 units, SQL their characters.
    for (const filename of ['docs', '\u{1F600}']) {
      expectBadRequest(
        await filesApi(t.app, projectId).requestUpload({ ...valid, filename }),
        'body.filename',
      );
    }
  });

  it('quotes a clashing file registered before the rule with its refused characters escaped', async () => {
    const projectId = await newProject('Old clash');
    await insertRecords(projectId, [1], () => 'old/txt\u202eexe.md');
    const res = await filesApi(t.app, projectId).requestUpload({ ...valid, filename: 'old' });
    expectBadRequest(res, 'body.filename');
    expect(res.json().message).toContain('"old/txt\\u{202E}exe.md"');
    expect(res.body).not.toContain('\u202e');
  });

  it('answers 409 quota_exceeded for file 501, but lets an existing path be replaced', async () => {
    const projectId = await newProject('Full of files');
    await insertRecords(
      projectId,
      Array.from({ length: 500 }, () => 1),
    );
    const res = await filesApi(t.app, projectId).requestUpload({ ...valid, filename: 'one-more.txt' });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({
      code: 'quota_exceeded',
      details: { limit: 'files', maxFiles: 500, files: 500 },
    });
    const replace = await filesApi(t.app, projectId).requestUpload({ ...valid, filename: 'f7.txt' });
    expect(replace.statusCode).toBe(200);
  });

  it('answers 409 quota_exceeded past 500 MB, and accepts exactly 500 MB', async () => {
    const projectId = await newProject('Full of bytes');
    await insertRecords(
      projectId,
      Array.from({ length: 10 }, () => 50 * MB - 1),
    );
    const free = 500 * MB - 10 * (50 * MB - 1); // 10 bytes left
    const over = await filesApi(t.app, projectId).requestUpload({ ...valid, sizeBytes: free + 1 });
    expect(over.statusCode).toBe(409);
    expect(over.json()).toMatchObject({
      code: 'quota_exceeded',
      details: { limit: 'bytes', maxBytes: 500 * MB },
    });
    expect((await filesApi(t.app, projectId).requestUpload({ ...valid, sizeBytes: free })).statusCode).toBe(
      200,
    );
    // That URL holds the last 10 bytes until it expires: one byte more is refused.
    const after = await filesApi(t.app, projectId).requestUpload({
      ...valid,
      filename: 'b.txt',
      sizeBytes: 1,
    });
    expect(after.statusCode).toBe(409);
    // Replacing a file counts its new size instead of its old one.
    const same = await filesApi(t.app, projectId).requestUpload({
      ...valid,
      filename: 'f0.txt',
      sizeBytes: 50 * MB - 1,
    });
    expect(same.statusCode).toBe(200);
    const grow = await filesApi(t.app, projectId).requestUpload({
      ...valid,
      filename: 'f1.txt',
      sizeBytes: 50 * MB,
    });
    expect(grow.statusCode).toBe(409);
  });

  it('counts upload URLs not expired yet against the quota, each path once', async () => {
    // Twenty 50 MB URLs asked for at once on an empty project were all granted (1,000 MB).
    const projectId = await newProject('Asked for at once');
    const ask = (i: number) =>
      filesApi(t.app, projectId).requestUpload({ ...valid, filename: `big-${i}.bin`, sizeBytes: 50 * MB });
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => ask(i)));
    const granted = answers.flatMap((res, i) => (res.statusCode === 200 ? [i] : []));
    expect(granted).toHaveLength(10);
    expect(answers.filter((res) => res.statusCode === 409)).toHaveLength(10);
    // A path asked for again takes no more room.
    expect((await ask(granted[0]!)).statusCode).toBe(200);
    expect((await ask(99)).statusCode).toBe(409);
    // Nor does asking for it again smaller free any: the 50 MB URL still works until it expires.
    const smaller = await filesApi(t.app, projectId).requestUpload({
      ...valid,
      filename: `big-${granted[1]!}.bin`,
      sizeBytes: 0,
    });
    expect(smaller.statusCode).toBe(200);
    expect((await ask(98)).statusCode).toBe(409);
    // The room stays taken while a PUT begun just before its URL expired may still be writing:
    // the URL's 15 minutes, the body deadline of 50 MB at the slowest rate (20 s and 1 s per
    // 8 KiB, docs/files.md "Slow links"), and a minute more. Then, nothing uploaded, it is free.
    const reservedMs = (15 * 60 + 20 + (50 * MB) / 8192 + 60) * 1000;
    try {
      // A minute either side: the clock runs on from the real time, and the asks above may have
      // taken seconds on a busy machine.
      clockOffsetMs = reservedMs - 60_000;
      expect((await ask(100)).statusCode).toBe(409);
      clockOffsetMs = reservedMs + 60_000;
      const later = await Promise.all(Array.from({ length: 10 }, (_, i) => ask(100 + i)));
      expect(later.map((res) => res.statusCode)).toEqual(Array(10).fill(200));
    } finally {
      clockOffsetMs = 0;
    }
  });

  it('holds the larger size of a path asked for again only until the earlier URL’s reservation ends', async () => {
    const projectId = await newProject('Asked for again');
    await insertRecords(
      projectId,
      Array.from({ length: 9 }, () => 50 * MB),
    ); // 450 MB of 500
    const ask = (filename: string, sizeBytes: number) =>
      filesApi(t.app, projectId).requestUpload({ ...valid, filename, sizeBytes });
    // A reservation lasts the URL's 15 minutes, its size's body deadline at the slowest rate
    // (20 s and 1 s per 8 KiB) and a minute more, counted from its own request.
    const reservedMs = (sizeBytes: number) => (15 * 60 + 20 + Math.ceil(sizeBytes / 8192) + 60) * 1000;
    try {
      expect((await ask('x.bin', 50 * MB)).statusCode).toBe(200);
      // Asked for again, smaller, while the 50 MB URL still works: the path keeps 50 MB.
      clockOffsetMs = 10 * 60_000;
      expect((await ask('x.bin', 1)).statusCode).toBe(200);
      clockOffsetMs = reservedMs(50 * MB) - 60_000;
      expect((await ask('y.bin', 1)).statusCode).toBe(409);
      // Once the 50 MB reservation has ended (the 1-byte one has too), the room is free.
      clockOffsetMs = reservedMs(50 * MB) + 60_000;
      expect((await ask('y.bin', 50 * MB)).statusCode).toBe(200);
    } finally {
      clockOffsetMs = 0;
    }
  });

  it('holds the later, smaller size of a path until its own reservation ends', async () => {
    const projectId = await newProject('Asked for again later');
    await insertRecords(
      projectId,
      Array.from({ length: 9 }, () => 50 * MB),
    );
    const ask = (filename: string, sizeBytes: number) =>
      filesApi(t.app, projectId).requestUpload({ ...valid, filename, sizeBytes });
    const reservedMs = (sizeBytes: number) => (15 * 60 + 20 + Math.ceil(sizeBytes / 8192) + 60) * 1000;
    const secondAt = 100 * 60_000; // the 50 MB URL's reservation still runs
    try {
      expect((await ask('x.bin', 50 * MB)).statusCode).toBe(200);
      clockOffsetMs = secondAt;
      expect((await ask('x.bin', 40 * MB)).statusCode).toBe(200);
      // After the 50 MB reservation, the path holds the 40 MB of the later URL: 10 MB are free.
      clockOffsetMs = reservedMs(50 * MB) + 60_000;
      expect((await ask('y.bin', 10 * MB + 1)).statusCode).toBe(409);
      expect((await ask('y.bin', 10 * MB)).statusCode).toBe(200);
      // Until the 40 MB reservation ends (the 10 MB one of y.bin has by then): then all 50 MB are free.
      clockOffsetMs = secondAt + reservedMs(40 * MB) - 60_000;
      expect((await ask('z.bin', 10 * MB + 1)).statusCode).toBe(409);
      clockOffsetMs = secondAt + reservedMs(40 * MB) + 60_000;
      expect((await ask('z.bin', 50 * MB)).statusCode).toBe(200);
    } finally {
      clockOffsetMs = 0;
    }
  });

  it('counts objects uploaded and never synced against the quota', async () => {
    // A client that never syncs could otherwise write without end, a URL at a time.
    const projectId = await newProject('Written, never synced');
    await insertRecords(
      projectId,
      Array.from({ length: 495 }, () => 1),
    );
    for (let i = 0; i < 5; i++) {
      await t.store.put(
        `projects/wsp_main/${projectId}/unsynced-${i}.txt`,
        Readable.from([Buffer.from('x')]),
        {
          contentType: 'text/plain',
        },
      );
    }
    const res = await filesApi(t.app, projectId).requestUpload({ ...valid, filename: 'one-more.txt' });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({ code: 'quota_exceeded', details: { limit: 'files', files: 500 } });
    // A path already in storage is a replacement: still granted.
    const replace = await filesApi(t.app, projectId).requestUpload({ ...valid, filename: 'unsynced-0.txt' });
    expect(replace.statusCode).toBe(200);
  });

  it('answers 404 for an unknown project, and for projects of another workspace or organization', async () => {
    for (const projectId of ['prj_nope', 'prj_other', 'prj_globex']) {
      const res = await filesApi(t.app, projectId).requestUpload(valid);
      expect(res.statusCode, projectId).toBe(404);
      expect(res.json().code).toBe('not_found');
    }
  });

  it('lets an organization key act in a workspace named by x-workspace-id, and refuses it without one', async () => {
    const withHeader = filesApi(t.app, 'prj_docs', {
      'x-service-api-key': KEYS.acmeOrg,
      'x-workspace-id': 'wsp_main',
    });
    expect((await withHeader.requestUpload(valid)).statusCode).toBe(200);
    const without = filesApi(t.app, 'prj_docs', { 'x-service-api-key': KEYS.acmeOrg });
    expect((await without.requestUpload(valid)).statusCode).toBe(401);
    const otherOrg = filesApi(t.app, 'prj_docs', {
      'x-service-api-key': KEYS.globexOrg,
      'x-workspace-id': 'wsp_main',
    });
    expect((await otherOrg.requestUpload(valid)).statusCode).toBe(401);
    expect((await filesApi(t.app, 'prj_docs', {}).requestUpload(valid)).statusCode).toBe(401);
  });
});
