import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.js';
import type { Db } from '../../src/db/database.js';
import {
  holdSkillsForReplace,
  listWorkspaceSkills,
  releaseSkillsForReplace,
} from '../../src/db/repositories/skills.js';
import { SKILL_FRONT_MATTER_MAX, SKILL_METADATA_MAX } from '../../src/services/skill-markdown.js';
import { bulkUploadSkills, sweepOrphanSkillObjects } from '../../src/services/skills.js';
import { createObjectStore } from '../../src/storage/index.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { bulkUploadRequest, SKILL_KEYS, SKILLS_OWNER, SKILLS_SETUP } from './fixtures.js';
import {
  buildZip,
  type MultipartPart,
  multipartBody,
  patchEntry,
  replaceBytes,
  skillMd,
} from './zip-builder.js';

const WS = 'wsp_skills';
const URL = `/v1/workspace/${WS}/skills/bulk-upload`;

type TestApp = Awaited<ReturnType<typeof createTestApp>>;
let t: TestApp;

beforeAll(async () => {
  t = await createTestApp({ setup: SKILLS_SETUP });
});
afterAll(async () => {
  await t?.close();
});

const zipPart = (filename: string, content: Buffer): MultipartPart => ({
  name: 'files',
  filename,
  contentType: 'application/zip',
  content,
});
const mdPart = (filename: string, content: string): MultipartPart => ({
  name: 'files',
  filename,
  contentType: 'text/markdown',
  content,
});

async function upload(parts: MultipartPart[], options: { key?: string; url?: string; app?: TestApp } = {}) {
  const { body, contentType } = multipartBody(parts);
  const target = options.app ?? t;
  const response = await target.app.inject({
    method: 'POST',
    url: options.url ?? URL,
    headers: { 'x-service-api-key': options.key ?? SKILL_KEYS.owner, 'content-type': contentType },
    payload: body,
  });
  return { status: response.statusCode, body: response.json() };
}

async function storedKeys(store: ObjectStore = t.store, workspaceId = WS): Promise<string[]> {
  const keys: string[] = [];
  for await (const info of store.list(`skills/${workspaceId}/`)) keys.push(info.key);
  return keys.sort();
}

async function readObject(key: string, store: ObjectStore = t.store): Promise<string> {
  const object = await store.get(key);
  if (!object) throw new Error(`no object ${key}`);
  const chunks: Buffer[] = [];
  for await (const chunk of object.body) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Rows and objects now, to prove a refused request changed nothing. */
async function snapshot(app: TestApp = t) {
  const rows = await listWorkspaceSkills(app.env.database.db, WS);
  return { rows: rows.map((r) => r.id).sort(), objects: await storedKeys(app.store) };
}

/** Every stored object belongs to a skill row, and every row has its SKILL.md. */
async function expectNoOrphans(app: TestApp = t) {
  const rows = await listWorkspaceSkills(app.env.database.db, WS);
  const keys = await storedKeys(app.store);
  for (const key of keys) expect(rows.some((row) => key.startsWith(row.storage_path))).toBe(true);
  for (const row of rows) expect(keys).toContain(`${row.storage_path}SKILL.md`);
}

async function names(): Promise<string[]> {
  return (await listWorkspaceSkills(t.env.database.db, WS)).map((r) => r.name);
}

describe(`bulk skill upload (${engineName})`, () => {
  it('creates every skill of a zip, with nested directories, and stores their files under storagePath', async () => {
    const zip = await buildZip([
      { name: 'README.md', content: 'outside every skill: ignored' },
      {
        name: 'bundle/pdf-tools/SKILL.md',
        content: skillMd('pdf-tools', 'Extract text from PDFs', 'license: MIT\n'),
      },
      { name: 'bundle/pdf-tools/scripts/deep/extract.py', content: 'print("pdf")' },
      { name: 'bundle/pdf-tools/reference/forms.md', content: '# Forms' },
      { name: 'bundle/docx/SKILL.md', content: skillMd('docx', 'Word documents') },
      { name: 'bundle/xlsx/SKILL.md', content: skillMd(undefined, 'Spreadsheets') },
    ]);
    const { status, body } = await upload([zipPart('office.zip', zip)]);
    expect(status).toBe(200);
    expect(body.data.summary).toEqual({ total: 3, created: 3, skipped: 0, failed: 0 });
    expect(body.data.errors).toEqual([]);
    const created = body.data.created as Array<{ id: string; name: string; storagePath: string }>;
    expect(created.map((c) => c.name).sort()).toEqual(['docx', 'pdf-tools', 'xlsx']);
    const pdf = created.find((c) => c.name === 'pdf-tools')!;
    expect(pdf.id).toMatch(/^skl_/);
    expect(pdf.storagePath).toBe(`skills/${WS}/${pdf.id}/`);
    expect(await readObject(`${pdf.storagePath}scripts/deep/extract.py`)).toBe('print("pdf")');
    expect(await readObject(`${pdf.storagePath}SKILL.md`)).toContain('name: pdf-tools');
    expect((await storedKeys()).filter((k) => k.startsWith(pdf.storagePath))).toEqual(
      ['SKILL.md', 'reference/forms.md', 'scripts/deep/extract.py'].map((f) => `${pdf.storagePath}${f}`),
    );
    const row = (await listWorkspaceSkills(t.env.database.db, WS)).find((r) => r.name === 'pdf-tools')!;
    expect(row).toMatchObject({
      visibility: 'private',
      owner_user_id: 'usr_owner',
      description: 'Extract text from PDFs',
    });
    expect(JSON.parse(row.metadata)).toEqual({ license: 'MIT' });
    await expectNoOrphans();
  });

  it('reports a skill directory without SKILL.md as an errors item and answers 207', async () => {
    const zip = await buildZip([
      { name: 'good-one/SKILL.md', content: skillMd('good-one', 'Fine') },
      { name: 'notes/readme.md', content: 'no SKILL.md here' },
    ]);
    const { status, body } = await upload([zipPart('mixed.zip', zip)]);
    expect(status).toBe(207);
    expect(body.data.summary).toEqual({ total: 2, created: 1, skipped: 0, failed: 1 });
    expect(body.data.errors).toEqual([
      { file: 'mixed.zip', name: 'notes', code: 'missing_skill_md', message: expect.any(String) },
    ]);
    expect(await names()).not.toContain('notes');
    await expectNoOrphans();
  });

  it('refuses a skill with bad front matter and keeps the others', async () => {
    const zip = await buildZip([
      { name: 'broken/SKILL.md', content: '---\nname: [broken\ndescription: x\n---\nbody' },
      { name: 'unclosed/SKILL.md', content: '---\nname: unclosed\n' },
      // A YAML escape for NUL: PostgreSQL cannot store it, so neither engine takes it.
      { name: 'nul/SKILL.md', content: '---\nname: nul\ndescription: "bad \\0 here"\n---\nbody' },
      // An alias inside its own anchor: the parsed value is a cycle (was a 500 for the request).
      { name: 'cycle/SKILL.md', content: '---\nname: cycle\nmeta: &x\n  self: *x\n---\nbody' },
      { name: 'fine-too/SKILL.md', content: skillMd('fine-too', 'Fine') },
    ]);
    const { status, body } = await upload([zipPart('fm.zip', zip)]);
    expect(status).toBe(207);
    expect(body.data.summary).toEqual({ total: 5, created: 1, skipped: 0, failed: 4 });
    expect(body.data.errors.map((e: { name: string; code: string }) => [e.name, e.code])).toEqual([
      ['broken', 'invalid_front_matter'],
      ['cycle', 'invalid_front_matter'],
      ['nul', 'invalid_front_matter'],
      ['unclosed', 'invalid_front_matter'],
    ]);
    expect(await names()).not.toContain('broken');
    await expectNoOrphans();
  });

  it('refuses a skill name or file name holding a bidirectional control or line separator, naming it by code point', async () => {
    const zip = await buildZip([
      { name: 'plain-bidi/SKILL.md', content: skillMd('plain-bidi', 'Fine') },
      // YAML escapes: the front matter's name holds U+202E (right-to-left override).
      { name: 'named/SKILL.md', content: skillMd('"txt\\u202Eexe"', 'Front matter name') },
      { name: 'dir\u2066name/SKILL.md', content: skillMd(undefined, 'Directory name') },
      { name: 'files/SKILL.md', content: skillMd('files', 'A file name') },
      { name: 'files/invoice\u200ffdp.exe', content: 'x' },
    ]);
    const { status, body } = await upload([
      zipPart('bidi.zip', zip),
      mdPart('separated.md', skillMd('"two\\u2028lines"', 'A line separator')),
    ]);
    expect(status).toBe(207);
    expect(body.data.summary).toEqual({ total: 5, created: 1, skipped: 0, failed: 4 });
    expect(body.data.errors).toHaveLength(4);
    expect(body.data.errors).toEqual(
      expect.arrayContaining([
        // Its SKILL.md refused, the directory is no skill: the entry belongs to none.
        {
          file: 'bidi.zip',
          name: null,
          code: 'unsafe_path',
          message: expect.stringMatching(/U\+2066.*: dir\\u\{2066\}name\/SKILL\.md$/),
        },
        {
          file: 'bidi.zip',
          name: 'files',
          code: 'unsafe_path',
          message: expect.stringMatching(/U\+200F.*: files\/invoice\\u\{200F\}fdp\.exe$/),
        },
        { file: 'bidi.zip', name: 'named', code: 'invalid_name', message: expect.stringContaining('U+202E') },
        {
          file: 'separated.md',
          name: 'separated',
          code: 'invalid_name',
          message: expect.stringContaining('U+2028'),
        },
      ]),
    );
    for (const error of body.data.errors) expect(error.message).not.toMatch(/[\u2066\u200f\u202e\u2028]/);
    expect(await names()).toContain('plain-bidi');
    expect(await names()).not.toContain('files');
    await expectNoOrphans();
  });

  it('refuses a skill name, directory or file name that shows no character, as an errors item (207)', async () => {
    const zip = await buildZip([
      { name: 'plain-invisible/SKILL.md', content: skillMd('plain-invisible', 'Fine') },
      // YAML escapes: the front matter's name is the Hangul filler U+3164 alone.
      { name: 'named/SKILL.md', content: skillMd('"\\u3164"', 'Front matter name') },
      { name: '\u200b/SKILL.md', content: skillMd(undefined, 'Directory name') },
      { name: 'files/SKILL.md', content: skillMd('files', 'A folder name') },
      { name: 'files/\u2800\ufe0f/run.py', content: 'x' },
      // Visible names that hold invisible characters stay names.
      { name: 'joined/SKILL.md', content: skillMd('"a\\u200bb 👩\\u200d💻"', 'Joined') },
    ]);
    const { status, body } = await upload([
      zipPart('invisible.zip', zip),
      mdPart('\u2060.md', '# No front matter: named after its file'),
    ]);
    expect(status).toBe(207);
    expect(body.data.summary).toEqual({ total: 6, created: 2, skipped: 0, failed: 4 });
    expect(body.data.errors).toHaveLength(4);
    expect(body.data.errors).toEqual(
      expect.arrayContaining([
        {
          file: 'invisible.zip',
          name: null,
          code: 'unsafe_path',
          message: 'entry name has a segment with no visible character: \\u{200B}/SKILL.md',
        },
        {
          file: 'invisible.zip',
          name: 'files',
          code: 'unsafe_path',
          message: 'entry name has a segment with no visible character: files/\\u{2800}\\u{FE0F}/run.py',
        },
        {
          file: 'invisible.zip',
          name: 'named',
          code: 'invalid_name',
          message: 'the skill name has no visible character',
        },
        {
          file: '\u2060.md',
          name: '\u2060',
          code: 'invalid_name',
          message: 'the skill name has no visible character',
        },
      ]),
    );
    expect(await names()).toEqual(expect.arrayContaining(['plain-invisible', 'a\u200bb 👩\u200d💻']));
    expect(await names()).not.toContain('files');
    await expectNoOrphans();
  });

  it('answers a SKILL.md with a front matter of 30,000 keys with an errors item naming the limit', async () => {
    // ~300 KB of keys, within the 1 MiB SKILL.md limit: it held the event loop for 5–14 s.
    const keys = Array.from({ length: 30_000 }, (_, i) => `k${i}: v`).join('\n');
    const zip = await buildZip([
      { name: 'many/SKILL.md', content: `---\nname: many\n${keys}\n---\n` },
      { name: 'few/SKILL.md', content: skillMd('few', 'Fine') },
    ]);
    const { status, body } = await upload([zipPart('many-keys.zip', zip)]);
    expect(status).toBe(207);
    expect(body.data.summary).toEqual({ total: 2, created: 1, skipped: 0, failed: 1 });
    expect(body.data.errors).toEqual([
      {
        file: 'many-keys.zip',
        name: 'many',
        code: 'invalid_front_matter',
        message: expect.stringContaining(`longer than ${SKILL_FRONT_MATTER_MAX} characters`),
      },
    ]);
    await expectNoOrphans();
  });

  it('answers front matter whose aliases blow up its metadata with an errors item, storing none of it', async () => {
    // 7.4 KB of front matter stored ~700 KB of metadata; 100 such skills (20 KB sent) made 70 MB.
    const aliases = `big: &s "${'x'.repeat(7000)}"\nm: [${Array(99).fill('*s').join(',')}]\n`;
    const zip = await buildZip([
      { name: 'alias-bomb/SKILL.md', content: skillMd('alias-bomb', 'd', aliases) },
      { name: 'alias-fine/SKILL.md', content: skillMd('alias-fine', 'd', 'a: &a [1, 2]\nb: *a\n') },
    ]);
    const { status, body } = await upload([zipPart('aliases.zip', zip)]);
    expect(status).toBe(207);
    expect(body.data.errors).toEqual([
      {
        file: 'aliases.zip',
        name: 'alias-bomb',
        code: 'invalid_front_matter',
        message: expect.stringContaining(`longer than ${SKILL_METADATA_MAX} characters as JSON`),
      },
    ]);
    const rows = await listWorkspaceSkills(t.env.database.db, WS);
    expect(rows.find((row) => row.name === 'alias-fine')?.metadata).toBe('{"a":[1,2],"b":[1,2]}');
    expect(rows.map((row) => row.name)).not.toContain('alias-bomb');
    await expectNoOrphans();
  });

  it('skips a name that appears twice in one request, keeping the first', async () => {
    const zip = await buildZip([{ name: 'twice/SKILL.md', content: skillMd('twice', 'From the zip') }]);
    const { status, body } = await upload([
      mdPart('first.md', skillMd('twice', 'From markdown')),
      zipPart('again.zip', zip),
    ]);
    expect(status).toBe(200);
    expect(body.data.summary).toEqual({ total: 2, created: 1, skipped: 1, failed: 0 });
    expect(body.data.skipped).toEqual([
      { name: 'twice', file: 'again.zip', reason: expect.stringContaining('earlier in this upload') },
    ]);
    const row = (await listWorkspaceSkills(t.env.database.db, WS)).find((r) => r.name === 'twice')!;
    expect(row.description).toBe('From markdown');
    await expectNoOrphans();
  });

  it('skips a name the workspace already has, and stores nothing for it', async () => {
    const first = await upload([mdPart('existing.md', skillMd('existing', 'v1'))]);
    expect(first.status).toBe(200);
    const before = await snapshot();
    const { status, body } = await upload([mdPart('existing.md', skillMd('existing', 'v2'))]);
    expect(status).toBe(200);
    expect(body.data.summary).toEqual({ total: 1, created: 0, skipped: 1, failed: 0 });
    expect(body.data.skipped[0]).toMatchObject({
      name: 'existing',
      reason: expect.stringContaining('already exists'),
    });
    expect(await snapshot()).toEqual(before);
  });

  it('takes zip and markdown parts together; a markdown file is named by its front matter or file name', async () => {
    const zip = await buildZip([{ name: 'SKILL.md', content: skillMd(undefined, 'Root skill') }]);
    const { status, body } = await upload([
      zipPart('root-skill.zip', zip),
      mdPart('plain-notes.md', '# No front matter\n\nJust instructions.\n'),
      mdPart('named.md', skillMd('named-by-front-matter', 'Named')),
      { name: 'visibility', content: 'private' },
    ]);
    expect(status).toBe(200);
    expect(body.data.summary).toEqual({ total: 3, created: 3, skipped: 0, failed: 0 });
    expect(body.data.created.map((c: { name: string }) => c.name)).toEqual([
      'root-skill',
      'plain-notes',
      'named-by-front-matter',
    ]);
    const plain = body.data.created[1];
    expect(await readObject(`${plain.storagePath}SKILL.md`)).toContain('Just instructions.');
    await expectNoOrphans();
  });

  it('accepts 200 skills in one request', async () => {
    const zip = await buildZip(
      Array.from({ length: 200 }, (_, i) => ({
        name: `many-${i}/SKILL.md`,
        content: skillMd(`many-${i}`, `n${i}`),
      })),
    );
    const { status, body } = await upload([zipPart('two-hundred.zip', zip)]);
    expect(status).toBe(200);
    expect(body.data.summary).toEqual({ total: 200, created: 200, skipped: 0, failed: 0 });
    await expectNoOrphans();
  });

  it('refuses 201 skills with 400 and stores nothing', async () => {
    const before = await snapshot();
    const zip = await buildZip(
      Array.from({ length: 200 }, (_, i) => ({
        name: `over-${i}/SKILL.md`,
        content: skillMd(`over-${i}`, 'x'),
      })),
    );
    const { status, body } = await upload([
      zipPart('over.zip', zip),
      mdPart('one-more.md', skillMd('one-more', 'x')),
    ]);
    expect(status).toBe(400);
    expect(body.code).toBe('bad_request');
    expect(body.message).toContain('201 skills');
    expect(await snapshot()).toEqual(before);
  });

  it('refuses a skill of more than 1,000 files as an errors item and keeps the others', async () => {
    // One 1 MB zip of 10,000 empty files wrote 10,000 objects, each with its fsync (44 s).
    const zip = await buildZip([
      { name: 'crowded/SKILL.md', content: skillMd('crowded', 'x') },
      ...Array.from({ length: 1_000 }, (_, i) => ({ name: `crowded/f${i}`, content: '', compress: false })),
      { name: 'roomy/SKILL.md', content: skillMd('roomy', 'x') },
    ]);
    const { status, body } = await upload([zipPart('crowded.zip', zip)]);
    expect(status).toBe(207);
    expect(body.data.created.map((skill: { name: string }) => skill.name)).toEqual(['roomy']);
    expect(body.data.errors).toEqual([
      {
        file: 'crowded.zip',
        name: 'crowded',
        code: 'too_many_files',
        message: 'the skill holds 1001 files; at most 1000 are accepted',
      },
    ]);
    await expectNoOrphans();
  });

  it('refuses archives listing more than 10,000 entries together with 400 and stores nothing', async () => {
    // 33 archives of 10,000 entries (32.6 MB) grew the heap by 340 MB while they were read.
    const before = await snapshot();
    const half = await buildZip([
      { name: 'half/SKILL.md', content: skillMd('half', 'x') },
      ...Array.from({ length: 5_000 }, (_, i) => ({ name: `half/f${i}`, content: '', compress: false })),
    ]);
    const { status, body } = await upload([
      mdPart('would-be-created.md', skillMd('would-be-created', 'x')),
      zipPart('half-1.zip', half),
      zipPart('half-2.zip', half),
    ]);
    expect(status).toBe(400);
    expect(body.code).toBe('bad_request');
    expect(body.message).toContain('at most 10000 entries');
    expect(await snapshot()).toEqual(before);
  });

  it('refuses a 33 MB upload with 413 and stores nothing', async () => {
    const before = await snapshot();
    const big = await upload([
      mdPart('small.md', skillMd('would-be-created', 'x')),
      zipPart('huge.zip', randomBytes(33 * 1024 * 1024)),
    ]);
    expect(big.status).toBe(413);
    expect(big.body.code).toBe('payload_too_large');
    expect(await snapshot()).toEqual(before);
  });

  it('counts the parts together: two 17 MB parts are over the 32 MB limit', async () => {
    const before = await snapshot();
    const { status, body } = await upload([
      zipPart('half-1.zip', randomBytes(17 * 1024 * 1024)),
      zipPart('half-2.zip', randomBytes(17 * 1024 * 1024)),
    ]);
    expect(status).toBe(413);
    expect(body.code).toBe('payload_too_large');
    expect(await snapshot()).toEqual(before);
  });

  it('refuses a zip-slip entry as an errors item, writes nothing outside storage, and keeps the other skills', async () => {
    const honest = await buildZip([
      { name: 'slip-ok/SKILL.md', content: skillMd('slip-ok', 'Fine') },
      { name: 'slip-evil/SKILL.md', content: skillMd('slip-evil', 'Evil') },
      { name: 'slip-evil/XX/XX/XX/XX/pwned.txt', content: 'boom' },
      { name: 'slash-evil/SKILL.md', content: skillMd('slash-evil', 'Evil too') },
      { name: 'slash-evil/YY.\\pwned-too.txt', content: 'boom' },
    ]);
    const zip = replaceBytes(
      replaceBytes(honest, 'XX/XX/XX/XX', '../../../..'),
      'YY.',
      '..\\'.padEnd(3, '.'),
    );
    const { status, body } = await upload([zipPart('slip.zip', zip)]);
    expect(status).toBe(207);
    expect(body.data.summary).toEqual({ total: 3, created: 1, skipped: 0, failed: 2 });
    expect(body.data.errors.map((e: { name: string; code: string }) => [e.name, e.code]).sort()).toEqual([
      ['slash-evil', 'unsafe_path'],
      ['slip-evil', 'unsafe_path'],
    ]);
    expect(await names()).not.toContain('slip-evil');
    // Four levels up from a skill's folder is the data dir; one more is the test's own directory
    // that holds it (never the system's temp dir, which other programs share).
    const aroundDataDir = readdirSync(t.env.root, { recursive: true }) as string[];
    expect(aroundDataDir.filter((f) => f.includes('pwned'))).toEqual([]);
    await expectNoOrphans();
  });

  it('refuses a skill with a file in a folder named like a version folder (.atrium-version-…), keeping the others', async () => {
    const zip = await buildZip([
      { name: 'plain/SKILL.md', content: skillMd('plain', 'Fine') },
      // A skill's first-level names beginning so are where replaces store its versions.
      { name: 'sneaky/SKILL.md', content: skillMd('sneaky', 'Reserved folder') },
      { name: 'sneaky/.atrium-version-x/SKILL.md.txt', content: 'hidden' },
      { name: 'loose/SKILL.md', content: skillMd('loose', 'Reserved file name') },
      { name: 'loose/.atrium-version-notes', content: 'a file, not a folder' },
      // Deeper in the skill, the name is an ordinary one.
      { name: 'deep/SKILL.md', content: skillMd('deep', 'Fine too') },
      { name: 'deep/docs/.atrium-version-1/a.txt', content: 'kept' },
    ]);
    const { status, body } = await upload([zipPart('reserved.zip', zip)]);
    expect(status).toBe(207);
    expect(body.data.summary).toEqual({ total: 4, created: 2, skipped: 0, failed: 2 });
    expect(
      body.data.errors.sort((a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : 1)),
    ).toEqual([
      {
        file: 'reserved.zip',
        name: 'loose',
        code: 'reserved_path',
        message:
          'loose/.atrium-version-notes: a first folder (or file) name beginning with ".atrium-version-" is reserved for Atrium\'s storage of skill versions',
      },
      {
        file: 'reserved.zip',
        name: 'sneaky',
        code: 'reserved_path',
        message:
          'sneaky/.atrium-version-x: a first folder (or file) name beginning with ".atrium-version-" is reserved for Atrium\'s storage of skill versions',
      },
    ]);
    expect((await names()).filter((name) => ['deep', 'loose', 'plain', 'sneaky'].includes(name))).toEqual([
      'deep',
      'plain',
    ]);
    await expectNoOrphans();
  });

  it('refuses a symbolic link entry as an errors item', async () => {
    const zip = await buildZip([
      { name: 'linked/SKILL.md', content: skillMd('linked', 'Has a link') },
      { name: 'linked/passwd', content: '/etc/passwd', mode: 0o120777 },
    ]);
    const before = await snapshot();
    const { status, body } = await upload([zipPart('link.zip', zip)]);
    expect(status).toBe(207);
    expect(body.data.summary).toEqual({ total: 1, created: 0, skipped: 0, failed: 1 });
    expect(body.data.errors[0]).toMatchObject({ file: 'link.zip', name: 'linked', code: 'symlink' });
    expect(await snapshot()).toEqual(before);
  });

  it('refuses an encrypted entry as an errors item', async () => {
    const zip = await buildZip([
      { name: 'locked/SKILL.md', content: skillMd('locked', 'Encrypted') },
      { name: 'locked/secret.txt', content: 'not really encrypted, but flagged' },
    ]);
    const before = await snapshot();
    const { status, body } = await upload([
      zipPart('locked.zip', patchEntry(zip, 'locked/secret.txt', { setFlags: 1 })),
    ]);
    expect(status).toBe(207);
    expect(body.data.errors[0]).toMatchObject({ name: 'locked', code: 'encrypted_entry' });
    expect(await snapshot()).toEqual(before);
  });

  it('refuses zip bombs: a huge declared size, a size that lies, and a real 80 MB inflation', async () => {
    const declared = patchEntry(
      await buildZip([
        { name: 'declared-bomb/SKILL.md', content: skillMd('declared-bomb', 'x') },
        { name: 'declared-bomb/zeros.bin', content: Buffer.alloc(1024) },
      ]),
      'declared-bomb/zeros.bin',
      { uncompressedSize: 0xfffffff0 },
    );
    const lying = patchEntry(
      await buildZip([
        { name: 'lying-bomb/SKILL.md', content: skillMd('lying-bomb', 'x') },
        { name: 'lying-bomb/zeros.bin', content: Buffer.alloc(20 * 1024 * 1024) },
      ]),
      'lying-bomb/zeros.bin',
      { uncompressedSize: 10 },
    );
    const real = await buildZip([
      { name: 'real-bomb/SKILL.md', content: skillMd('real-bomb', 'x') },
      { name: 'real-bomb/zeros.bin', content: Buffer.alloc(80 * 1024 * 1024) },
    ]);
    expect(declared.length + lying.length + real.length).toBeLessThan(1024 * 1024);
    const before = await snapshot();
    const { status, body } = await upload([
      zipPart('declared.zip', declared),
      zipPart('lying.zip', lying),
      zipPart('real.zip', real),
    ]);
    expect(status).toBe(207);
    expect(body.data.summary).toEqual({ total: 3, created: 0, skipped: 0, failed: 3 });
    expect(body.data.errors.map((e: { name: string; code: string }) => [e.name, e.code])).toEqual([
      ['declared-bomb', 'skill_too_large'],
      ['lying-bomb', 'size_mismatch'],
      ['real-bomb', 'skill_too_large'],
    ]);
    expect(await snapshot()).toEqual(before);
  });

  it('reports a file named .zip that is not a zip as one errors item', async () => {
    const before = await snapshot();
    const { status, body } = await upload([zipPart('fake.zip', Buffer.from('I am plain text pretending'))]);
    expect(status).toBe(207);
    expect(body.data).toEqual({
      created: [],
      skipped: [],
      errors: [{ file: 'fake.zip', name: null, code: 'invalid_archive', message: expect.any(String) }],
      summary: { total: 1, created: 0, skipped: 0, failed: 1 },
    });
    expect(await snapshot()).toEqual(before);
  });

  it('reports parts that are neither .zip nor .md', async () => {
    const { status, body } = await upload([
      { name: 'files', filename: 'photo.png', contentType: 'image/png', content: randomBytes(64) },
      mdPart('with-photo.md', skillMd('with-photo', 'x')),
    ]);
    expect(status).toBe(207);
    expect(body.data.errors[0]).toMatchObject({ file: 'photo.png', name: null, code: 'unsupported_file' });
    expect(body.data.summary).toEqual({ total: 2, created: 1, skipped: 0, failed: 1 });
  });

  it.each([
    ['no parts at all', []],
    ['only the visibility field', [{ name: 'visibility', content: 'private' }]],
    ['an empty file', [mdPart('empty.md', '')]],
    [
      'a file under another field name',
      [{ name: 'attachment', filename: 'a.md', content: skillMd('a', 'x') }],
    ],
  ] as Array<[string, MultipartPart[]]>)('refuses an upload with %s as 400', async (_label, parts) => {
    const before = await snapshot();
    const { status, body } = await upload(parts);
    expect(status).toBe(400);
    expect(body.code).toBe('bad_request');
    expect(await snapshot()).toEqual(before);
  });
});

describe(`bulk skill upload: temporary files (${engineName})`, () => {
  it('leaves no spooled part behind, whatever the outcome', async () => {
    await upload([mdPart('tmp-check.md', skillMd('tmp-check', 'x'))]);
    await upload([zipPart('tmp-fake.zip', Buffer.from('not a zip'))]);
    await upload([mdPart('tmp-refused.md', skillMd('tmp-refused', 'x'))], { key: SKILL_KEYS.org });
    expect(readdirSync(path.join(t.env.dataDir, 'tmp', 'skill-uploads'))).toEqual([]);
  });
});

describe(`bulk skill upload: who may upload (${engineName})`, () => {
  const one = (name: string, visibility?: string): MultipartPart[] => [
    ...(visibility ? [{ name: 'visibility', content: visibility }] : []),
    mdPart(`${name}.md`, skillMd(name, 'x')),
  ];

  it('refuses an organization key with 401 unauthorized and stores nothing', async () => {
    const before = await snapshot();
    const { status, body } = await upload(one('by-org-key'), { key: SKILL_KEYS.org });
    expect(status).toBe(401);
    expect(body.code).toBe('unauthorized');
    expect(await snapshot()).toEqual(before);
  });

  it.each(['workspace', 'organization'])(
    'refuses visibility %s for a plain member with 401',
    async (visibility) => {
      const before = await snapshot();
      const { status, body } = await upload(one(`member-${visibility}`, visibility), {
        key: SKILL_KEYS.member,
      });
      expect(status).toBe(401);
      expect(body.code).toBe('unauthorized');
      expect(await snapshot()).toEqual(before);
    },
  );

  it('refuses the visibility field after the files too', async () => {
    const before = await snapshot();
    const parts = [
      mdPart('late.md', skillMd('late-visibility', 'x')),
      { name: 'visibility', content: 'workspace' },
    ];
    const { status } = await upload(parts, { key: SKILL_KEYS.member });
    expect(status).toBe(401);
    expect(await snapshot()).toEqual(before);
  });

  it('lets a member upload private skills and an admin share them', async () => {
    const member = await upload(one('member-private'), { key: SKILL_KEYS.member });
    expect(member.status).toBe(200);
    const admin = await upload(one('admin-shared', 'organization'), { key: SKILL_KEYS.admin });
    expect(admin.status).toBe(200);
    const rows = await listWorkspaceSkills(t.env.database.db, WS);
    expect(rows.find((r) => r.name === 'member-private')).toMatchObject({
      visibility: 'private',
      owner_user_id: 'usr_member',
    });
    expect(rows.find((r) => r.name === 'admin-shared')).toMatchObject({
      visibility: 'organization',
      owner_user_id: 'usr_admin',
    });
  });

  it('refuses an unknown visibility with 400', async () => {
    const { status, body } = await upload(one('bad-visibility', 'public'));
    expect(status).toBe(400);
    expect(body.details.issues[0].path).toBe('body.visibility');
  });

  it('answers 401 for a key of another workspace, 404 for an unknown workspace, 401 without a key', async () => {
    expect((await upload(one('x'), { key: SKILL_KEYS.other })).body.code).toBe('unauthorized');
    const unknown = await upload(one('x'), { url: '/v1/workspace/wsp_nowhere/skills/bulk-upload' });
    expect([unknown.status, unknown.body.code]).toEqual([404, 'not_found']);
    const anonymous = await upload(one('x'), { key: '' });
    expect([anonymous.status, anonymous.body.code]).toEqual([401, 'not_authenticated']);
  });
});

describe(`bulk skill upload over a real connection (${engineName})`, () => {
  it('answers a 33 MB upload with 413 while it streams in, and the client reads the answer', async () => {
    const server = await createTestApp({ setup: SKILLS_SETUP });
    try {
      const base = await server.app.listen({ port: 0, host: '127.0.0.1' });
      const { body, contentType } = multipartBody([zipPart('huge.zip', randomBytes(33 * 1024 * 1024))]);
      const { request, answer: answered } = bulkUploadRequest(`${base}${URL}`, contentType);
      // Chunked, without a content length: the limit must hold while the bytes arrive.
      let offset = 0;
      const pump = () => {
        while (offset < body.length) {
          const chunk = body.subarray(offset, offset + 256 * 1024);
          offset += chunk.length;
          if (!request.write(chunk)) return request.once('drain', pump);
        }
        request.end();
      };
      pump();
      const answer = await answered;
      expect(answer.status).toBe(413);
      expect(JSON.parse(answer.text).code).toBe('payload_too_large');
      expect(await snapshot(server)).toEqual({ rows: [], objects: [] });
    } finally {
      await server.close();
    }
  });
});

describe(`bulk skill upload: malformed requests (${engineName})`, () => {
  it('refuses more parts than an upload may have with 400', async () => {
    const parts = Array.from({ length: 260 }, (_, i) => mdPart(`p${i}.md`, skillMd(`parts-${i}`, 'x')));
    const before = await snapshot();
    const { status, body } = await upload(parts);
    expect(status).toBe(400);
    expect(body.message).toContain('at most 250 parts');
    expect(await snapshot()).toEqual(before);
  });

  it('refuses more text fields than an upload may have with the same 400', async () => {
    const fields = Array.from({ length: 25 }, (_, i) => ({ name: `f${i}`, content: 'x' }));
    const before = await snapshot();
    const { status, body } = await upload([...fields, mdPart('after.md', skillMd('after-fields', 'x'))]);
    expect(status).toBe(400);
    expect(body.message).toContain('at most 250 parts and 20 fields');
    expect(await snapshot()).toEqual(before);
  });

  it('answers 415 for a JSON body', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: URL,
      headers: { 'x-service-api-key': SKILL_KEYS.owner },
      payload: { files: [] },
    });
    expect(response.statusCode).toBe(415);
    expect(response.json().code).toBe('unsupported_media_type');
  });

  it('answers 400 for a multipart body cut short or without its boundary', async () => {
    const { body, contentType } = multipartBody([mdPart('cut.md', skillMd('cut', 'x'))]);
    const cut = await t.app.inject({
      method: 'POST',
      url: URL,
      headers: { 'x-service-api-key': SKILL_KEYS.owner, 'content-type': contentType },
      payload: body.subarray(0, body.length - 40),
    });
    expect(cut.statusCode).toBe(400);
    expect(cut.json().code).toBe('bad_request');
    const noBoundary = await t.app.inject({
      method: 'POST',
      url: URL,
      headers: { 'x-service-api-key': SKILL_KEYS.owner, 'content-type': 'multipart/form-data' },
      payload: body,
    });
    expect(noBoundary.statusCode).toBe(400);
    expect(await names()).not.toContain('cut');
  });
});

describe(`skill list (${engineName})`, () => {
  const list = async (query = '', key: string = SKILL_KEYS.owner) => {
    const response = await t.app.inject({
      method: 'GET',
      url: `/v1/workspace/${WS}/skills${query}`,
      headers: { 'x-service-api-key': key },
    });
    return { status: response.statusCode, body: response.json() };
  };

  it('pages by name with a default of 20 and clamps the limit to 100', async () => {
    const first = await list();
    expect(first.status).toBe(200);
    expect(first.body.data.skills).toHaveLength(20);
    const all = await list('?limit=1000');
    expect(all.body.data.pagination).toMatchObject({ limit: 100, offset: 0 });
    const total = all.body.data.pagination.total;
    expect(total).toBeGreaterThan(200);
    const namesInOrder = all.body.data.skills.map((s: { name: string }) => s.name.toLowerCase());
    expect(namesInOrder).toEqual([...namesInOrder].sort());
    const second = await list('?limit=5&offset=5');
    expect(second.body.data.skills.map((s: { id: string }) => s.id)).toEqual(
      all.body.data.skills.slice(5, 10).map((s: { id: string }) => s.id),
    );
    expect(first.body.data.skills[0]).toEqual({
      id: expect.stringMatching(/^skl_/),
      name: expect.any(String),
      description: expect.any(String),
      visibility: expect.any(String),
      ownerUserId: expect.any(String),
      storagePath: expect.stringMatching(new RegExp(`^skills/${WS}/skl_`)),
      metadata: expect.any(Object),
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
  });

  /** The names of every skill the key may see, in the list's order, page after page. */
  const allNames = async (key: string) => {
    const found: string[] = [];
    for (let offset = 0; ; offset += 100) {
      const page = await list(`?limit=100&offset=${offset}`, key);
      found.push(...page.body.data.skills.map((s: { name: string }) => s.name));
      if (offset + 100 >= page.body.data.pagination.total) return found;
    }
  };

  it('shows a member its own private skills and the shared ones; an owner every skill', async () => {
    const asMember = await allNames(SKILL_KEYS.member);
    const asOwner = await allNames(SKILL_KEYS.owner);
    expect(asMember).toContain('member-private');
    expect(asMember).toContain('admin-shared');
    expect(asMember).not.toContain('pdf-tools');
    expect(asOwner).toContain('pdf-tools');
    expect(asOwner).toContain('member-private');
  });

  it('sorts names case-insensitively: "éa" before "Éb", on both engines, and after a replace', async () => {
    const created = await upload([
      mdPart('upper.md', skillMd('Éb', 'Upper')),
      mdPart('lower.md', skillMd('éa', 'Lower')),
    ]);
    expect(created.status).toBe(200);
    const accented = (names: string[]) => names.filter((x) => x === 'éa' || x === 'Éb');
    expect(accented(await allNames(SKILL_KEYS.owner))).toEqual(['éa', 'Éb']);
    const replaced = await upload([
      { name: 'mode', content: 'replace' },
      mdPart('upper.md', skillMd('Éb', 'Upper v2')),
    ]);
    expect(replaced.body.data.summary).toMatchObject({ updated: 1 });
    expect(accented(await allNames(SKILL_KEYS.owner))).toEqual(['éa', 'Éb']);
  });

  it('lets an organization key list (it may not upload), and refuses a key of another workspace', async () => {
    const asOrg = await list('?limit=1', SKILL_KEYS.org);
    expect(asOrg.status).toBe(200);
    expect(asOrg.body.data.pagination).toMatchObject({ limit: 1, offset: 0 });
    const other = await list('', SKILL_KEYS.other);
    expect([other.status, other.body.code]).toEqual([401, 'unauthorized']);
  });

  it.each(['?limit=0', '?limit=-1', '?limit=abc', '?offset=-1'])('refuses %s with 400', async (query) => {
    const { status, body } = await list(query);
    expect(status).toBe(400);
    expect(body.code).toBe('bad_request');
  });
});

describe(`bulk skill upload: failures leave nothing behind (${engineName})`, () => {
  it('deletes the objects already written when storage fails part way, and inserts no row', async () => {
    let puts = 0;
    const failing = await createTestApp({
      setup: SKILLS_SETUP,
      store: (config) =>
        wrapStore(config, () => {
          puts += 1;
          if (puts === 4) throw new Error('disk full');
        }),
    });
    try {
      const zip = await buildZip(
        Array.from({ length: 3 }, (_, i) => [
          { name: `s${i}/SKILL.md`, content: skillMd(`s${i}`, 'x') },
          { name: `s${i}/data.txt`, content: 'data' },
        ]).flat(),
      );
      const { status, body } = await upload([zipPart('three.zip', zip)], { app: failing });
      expect(status).toBe(500);
      expect(body.code).toBe('internal_error');
      expect(puts).toBeGreaterThanOrEqual(4);
      expect(await snapshot(failing)).toEqual({ rows: [], objects: [] });
    } finally {
      await failing.close();
    }
  });

  it('deletes the objects written when the database transaction fails', async () => {
    const db = t.env.database.db;
    if (t.env.database.dialect === 'sqlite') {
      await sql`CREATE TRIGGER skills_fail BEFORE INSERT ON skills WHEN NEW.name = 'tx-fail-2' BEGIN SELECT RAISE(ABORT, 'forced'); END`.execute(
        db,
      );
    } else {
      await sql`CREATE FUNCTION skills_fail() RETURNS trigger AS $$ BEGIN IF NEW.name = 'tx-fail-2' THEN RAISE EXCEPTION 'forced'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`.execute(
        db,
      );
      await sql`CREATE TRIGGER skills_fail BEFORE INSERT ON skills FOR EACH ROW EXECUTE FUNCTION skills_fail()`.execute(
        db,
      );
    }
    try {
      const before = await snapshot();
      const { status } = await upload([
        mdPart('tx-fail-1.md', skillMd('tx-fail-1', 'x')),
        mdPart('tx-fail-2.md', skillMd('tx-fail-2', 'x')),
      ]);
      expect(status).toBe(500);
      expect(await snapshot()).toEqual(before);
    } finally {
      if (t.env.database.dialect === 'sqlite') await sql`DROP TRIGGER skills_fail`.execute(db);
      else {
        await sql`DROP TRIGGER skills_fail ON skills`.execute(db);
        await sql`DROP FUNCTION skills_fail()`.execute(db);
      }
    }
  });
});

/**
 * `db`, whose first transaction commits and then fails as a connection cut while COMMIT was
 * answered does: the writes are in, the caller is told they failed.
 */
function commitAnswerLost(db: Db): Db {
  let lost = false;
  return new Proxy(db, {
    get(target, property, receiver) {
      if (property !== 'transaction') {
        const value = Reflect.get(target, property, receiver) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      }
      return () => ({
        execute: async <T>(work: (trx: Db) => Promise<T>): Promise<T> => {
          const result = await target.transaction().execute(work);
          if (lost) return result;
          lost = true;
          throw new Error('Connection terminated unexpectedly');
        },
      });
    },
  });
}

describe(`bulk skill upload: a commit whose answer was lost (${engineName})`, () => {
  it('keeps the files of every skill the commit wrote, created or replaced', async () => {
    const access = SKILLS_OWNER;
    let parts = 0;
    const part = async (files: Array<{ name: string; content: string }>) => {
      const zip = await buildZip(files);
      const file = path.join(t.env.root, `lost-commit-${parts++}.zip`);
      await writeFile(file, zip);
      return { filename: 'skills.zip', contentType: 'application/zip', path: file, size: zip.length };
    };
    const deps = (db: Db) => ({ db, store: t.store, clock: () => new Date() });
    const created = await bulkUploadSkills(deps(t.db), access, {
      parts: [await part([{ name: 'lost-replaced/SKILL.md', content: skillMd('lost-replaced', 'v1') }])],
      visibility: 'workspace',
    });
    expect(created.summary.created).toBe(1);

    // Storage and the commit went through; only the commit's answer was lost (the connection
    // dropped: 503, to retry).
    await expect(
      bulkUploadSkills(deps(commitAnswerLost(t.db)), access, {
        parts: [
          await part([
            { name: 'lost-replaced/SKILL.md', content: skillMd('lost-replaced', 'v2') },
            { name: 'lost-created/SKILL.md', content: skillMd('lost-created', 'new') },
          ]),
        ],
        visibility: 'workspace',
        mode: 'replace',
      }),
    ).rejects.toMatchObject({ code: 'service_unavailable' });

    // Before: the folders the commit had just named were deleted as the request's own leftovers:
    // a new skill without its files, and a replaced one whose row named a folder that was gone.
    const rows = (await listWorkspaceSkills(t.db, WS)).filter((row) => row.name.startsWith('lost-'));
    expect(rows.map((row) => [row.name, row.description]).sort()).toEqual([
      ['lost-created', 'new'],
      ['lost-replaced', 'v2'],
    ]);
    for (const row of rows) expect(await t.store.head(`${row.storage_path}SKILL.md`)).not.toBeNull();
    // The replaced skill's previous version, which the failed request did not remove, is the
    // leftovers sweep's: afterwards only the version the row names is stored.
    const inTwoHours = new Date(Date.now() + 2 * 60 * 60 * 1000);
    expect(await sweepOrphanSkillObjects(t.db, t.store, inTwoHours, { warn: () => {} })).toBe(1);
    const replaced = rows.find((row) => row.name === 'lost-replaced')!;
    expect((await storedKeys()).filter((key) => key.startsWith(`skills/${WS}/${replaced.id}/`))).toEqual([
      `${replaced.storage_path}SKILL.md`,
    ]);
  });
});

describe(`bulk skill upload: a storage failure after the commit (${engineName})`, () => {
  it('keeps every committed skill with its files and answers what was committed', async () => {
    let failDeletes = false;
    const flaky = await createTestApp({
      setup: SKILLS_SETUP,
      store: (config) => {
        const real = createObjectStore(config);
        return new Proxy(real, {
          get(target, property, receiver) {
            if ((property === 'delete' || property === 'deletePrefix') && failDeletes) {
              return async () => {
                throw new Error('storage refused the delete');
              };
            }
            const value = Reflect.get(target, property, receiver);
            return typeof value === 'function' ? value.bind(target) : value;
          },
        });
      },
    });
    try {
      const first = await buildZip([
        { name: 'alpha/SKILL.md', content: skillMd('alpha', 'v1') },
        { name: 'alpha/extra.txt', content: 'a file the next version drops' },
      ]);
      expect((await upload([zipPart('v1.zip', first)], { app: flaky })).status).toBe(200);
      failDeletes = true;
      const second = await buildZip([
        { name: 'alpha/SKILL.md', content: skillMd('alpha', 'v2') },
        { name: 'beta/SKILL.md', content: skillMd('beta', 'new') },
        { name: 'beta/run.py', content: 'print(1)' },
      ]);
      const { status, body } = await upload(
        [{ name: 'mode', content: 'replace' }, zipPart('v2.zip', second)],
        {
          app: flaky,
        },
      );
      // Deleting alpha's previous folder failed after the commit: the skills are in, with their files.
      expect(status).toBe(200);
      const named = (skills: Array<{ name: string }>) => skills.map((skill) => skill.name);
      expect([named(body.data.created), named(body.data.updated)]).toEqual([['beta'], ['alpha']]);
      const rows = await listWorkspaceSkills(flaky.env.database.db, WS);
      const keys = await storedKeys(flaky.store);
      for (const row of rows) expect(keys).toContain(`${row.storage_path}SKILL.md`);
      const beta = rows.find((row) => row.name === 'beta')!;
      expect(keys).toContain(`${beta.storage_path}run.py`);
      // The previous version (v1's files, in the skill's folder itself) stays beside the new
      // version's folder inside it: the leftovers sweep removes it, nothing else.
      const alpha = rows.find((row) => row.name === 'alpha')!;
      const folder = `skills/${WS}/${alpha.id}/`;
      expect(alpha.storage_path.startsWith(`${folder}.atrium-version-`)).toBe(true);
      const previous = [`${folder}SKILL.md`, `${folder}extra.txt`];
      expect(keys.filter((key) => key.startsWith(folder)).sort()).toEqual(
        [...previous, `${alpha.storage_path}SKILL.md`].sort(),
      );
      const read = await flaky.app.inject({
        method: 'GET',
        url: `/v1/skills/${alpha.id}`,
        headers: { 'x-service-api-key': SKILL_KEYS.owner },
      });
      // A reader gets v2 alone, in the skill's folder.
      expect(read.json().data.skill).toMatchObject({ storagePath: folder, files: [{ path: 'SKILL.md' }] });
      expect(read.json().data.skill.files).toHaveLength(1);
      failDeletes = false;
      const log = { warn: () => undefined };
      // Not before they are an hour old.
      expect(await sweepOrphanSkillObjects(flaky.env.database.db, flaky.store, new Date(), log)).toBe(0);
      const inTwoHours = new Date(Date.now() + 2 * 60 * 60 * 1000);
      expect(await sweepOrphanSkillObjects(flaky.env.database.db, flaky.store, inTwoHours, log)).toBe(1);
      expect(await storedKeys(flaky.store)).toEqual(keys.filter((key) => !previous.includes(key)));
    } finally {
      await flaky.close();
    }
  });

  it('replaces a skill whose file becomes a folder, and back (each version in a folder of its own)', async () => {
    const version = (description: string, files: Array<[string, string]>) =>
      buildZip([
        { name: 'shape/SKILL.md', content: skillMd('shape', description) },
        ...files.map(([name, content]) => ({ name: `shape/${name}`, content })),
      ]);
    const replace = async (zip: Buffer) =>
      upload([{ name: 'mode', content: 'replace' }, zipPart('shape.zip', zip)]);
    expect((await upload([zipPart('v1.zip', await version('v1', [['ref', 'a file']]))])).status).toBe(200);
    const row = async () =>
      (await listWorkspaceSkills(t.env.database.db, WS)).find((r) => r.name === 'shape')!;
    const { id } = await row();
    const files = async () => {
      const { storage_path: prefix } = await row();
      return (await storedKeys())
        .filter((key) => key.startsWith(`skills/${WS}/${id}`))
        .map((key) => (key.startsWith(prefix) ? key.slice(prefix.length) : key))
        .sort();
    };

    // Was a 500 with SKILL.md already overwritten and the row still at v1.
    expect((await replace(await version('v2', [['ref/a.md', 'now a folder']]))).status).toBe(200);
    expect((await row()).description).toBe('v2');
    expect(await files()).toEqual(['SKILL.md', 'ref/a.md']);
    expect(await readObject(`${(await row()).storage_path}ref/a.md`)).toBe('now a folder');

    expect((await replace(await version('v3', [['ref', 'a file again']]))).status).toBe(200);
    expect((await row()).description).toBe('v3');
    expect(await files()).toEqual(['SKILL.md', 'ref']);
    expect(await readObject(`${(await row()).storage_path}ref`)).toBe('a file again');
  });

  it('keeps the previous version whole when a replace fails while writing, and leaves nothing of its own', async () => {
    let failOn: string | undefined;
    const failing = await createTestApp({
      setup: SKILLS_SETUP,
      store: (config) =>
        wrapStore(config, (key) => {
          if (failOn && key.endsWith(failOn)) throw new Error('disk full');
        }),
    });
    try {
      const version = (description: string, files: Array<[string, string]>) =>
        buildZip([
          { name: 'whole/SKILL.md', content: skillMd('whole', description) },
          ...files.map(([name, content]) => ({ name: `whole/${name}`, content })),
        ]);
      expect(
        (await upload([zipPart('v1.zip', await version('v1', [['a.txt', 'a of v1']]))], { app: failing }))
          .status,
      ).toBe(200);
      const before = await snapshot(failing);
      failOn = '/b.txt';
      const { status } = await upload(
        [
          { name: 'mode', content: 'replace' },
          zipPart(
            'v2.zip',
            await version('v2', [
              ['a.txt', 'a of v2'],
              ['b.txt', 'b of v2'],
            ]),
          ),
        ],
        { app: failing },
      );
      expect(status).toBe(500);
      // Before, v2's SKILL.md and a.txt had overwritten v1's, under v1's row.
      expect(await snapshot(failing)).toEqual(before);
      const [row] = await listWorkspaceSkills(failing.env.database.db, WS);
      expect(row!.description).toBe('v1');
      expect(await readObject(`${row!.storage_path}SKILL.md`, failing.store)).toBe(skillMd('whole', 'v1'));
      expect(await readObject(`${row!.storage_path}a.txt`, failing.store)).toBe('a of v1');
    } finally {
      await failing.close();
    }
  });
});

describe(`bulk skill upload: two replaces of one skill at once (${engineName})`, () => {
  it('runs one; the other skips the skill until the first has finished, so files never mix', async () => {
    let holdWrites: Promise<void> | undefined;
    let writeHeld!: () => void;
    const writeReached = new Promise<void>((resolve) => (writeHeld = resolve));
    const app = await createTestApp({
      setup: SKILLS_SETUP,
      store: (config) =>
        wrapStore(config, async (key) => {
          if (!holdWrites || !key.endsWith('/only-in-v2.txt')) return;
          writeHeld();
          await holdWrites;
        }),
    });
    try {
      const version = (description: string, files: string[]) =>
        buildZip([
          { name: 'twice/SKILL.md', content: skillMd('twice', description) },
          ...files.map((name) => ({ name: `twice/${name}`, content: `${name} of ${description}` })),
        ]);
      const replace = async (zip: Buffer) =>
        upload([{ name: 'mode', content: 'replace' }, zipPart('twice.zip', zip)], { app });
      expect((await upload([zipPart('v1.zip', await version('v1', ['shared.txt']))], { app })).status).toBe(
        200,
      );
      const prefix = async () =>
        (await listWorkspaceSkills(app.env.database.db, WS)).find((r) => r.name === 'twice')!.storage_path;

      let release!: () => void;
      holdWrites = new Promise((resolve) => (release = resolve));
      // v2 stops while writing its files; v3 comes meanwhile.
      const second = replace(await version('v2', ['shared.txt', 'only-in-v2.txt']));
      await writeReached;
      const third = await replace(await version('v3', ['shared.txt', 'only-in-v3.txt']));
      expect(third.status).toBe(200);
      expect(third.body.data.updated).toEqual([]);
      expect(third.body.data.skipped).toEqual([
        {
          name: 'twice',
          file: 'twice.zip',
          reason: 'another upload is replacing this skill right now; upload again once it has finished',
        },
      ]);
      release();
      const v2 = await second;
      expect(v2.status).toBe(200);
      expect(v2.body.data.updated.map((skill: { name: string }) => skill.name)).toEqual(['twice']);
      // Every object of the workspace is in the skill's one folder: nothing of v1 or v3 is left.
      const files = async () => {
        const current = await prefix();
        return (await storedKeys(app.store)).map((key) =>
          key.startsWith(current) ? key.slice(current.length) : key,
        );
      };
      // Before, v3 listed v1's files, wrote its own and removed v2's: a mix of versions.
      expect(await files()).toEqual(['SKILL.md', 'only-in-v2.txt', 'shared.txt']);
      expect(await readObject(`${await prefix()}shared.txt`, app.store)).toBe('shared.txt of v2');

      // Once v2 has finished, the skill is free again.
      const fourth = await replace(await version('v4', ['only-in-v4.txt']));
      expect(fourth.body.data.updated.map((skill: { name: string }) => skill.name)).toEqual(['twice']);
      expect(await files()).toEqual(['SKILL.md', 'only-in-v4.txt']);
    } finally {
      await app.close();
    }
  });

  it('frees the skills it took when taking the rest fails (not held until the hold expires)', async () => {
    const names = ['hold-a', 'hold-b'];
    const upload2 = (mode: string) =>
      upload([
        { name: 'mode', content: mode },
        ...names.map((name) => mdPart(`${name}.md`, skillMd(name, mode))),
      ]);
    expect((await upload2('create')).status).toBe(200);
    const ids = (await listWorkspaceSkills(t.env.database.db, WS))
      .filter((row) => names.includes(row.name))
      .map((row) => row.id)
      .sort();
    const db = t.env.database.db;
    // Taking the second skill (in id order) fails, after the first was taken.
    const second = ids[1]!;
    if (t.env.database.dialect === 'sqlite') {
      await sql`CREATE TRIGGER hold_fail BEFORE INSERT ON skill_replacements WHEN NEW.skill_id = ${sql.lit(second)} BEGIN SELECT RAISE(ABORT, 'forced'); END`.execute(
        db,
      );
    } else {
      await sql`CREATE FUNCTION hold_fail() RETURNS trigger AS $$ BEGIN IF NEW.skill_id = ${sql.lit(second)} THEN RAISE EXCEPTION 'forced'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`.execute(
        db,
      );
      await sql`CREATE TRIGGER hold_fail BEFORE INSERT ON skill_replacements FOR EACH ROW EXECUTE FUNCTION hold_fail()`.execute(
        db,
      );
    }
    try {
      expect((await upload2('replace')).status).toBe(500);
    } finally {
      if (t.env.database.dialect === 'sqlite') await sql`DROP TRIGGER hold_fail`.execute(db);
      else {
        await sql`DROP TRIGGER hold_fail ON skill_replacements`.execute(db);
        await sql`DROP FUNCTION hold_fail()`.execute(db);
      }
    }
    // Before, the first skill stayed held for 10 minutes: skipped as "being replaced".
    const again = await upload2('replace');
    expect(again.status).toBe(200);
    expect(again.body.data.updated.map((skill: { name: string }) => skill.name).sort()).toEqual(names);
  });

  it('frees a skill whose replace never ended (a killed process) once its hold expires', async () => {
    const db = t.env.database.db;
    const now = Date.parse('2026-11-29T12:00:00.000Z');
    const at = (ms: number) => new Date(now + ms).toISOString();
    expect(await holdSkillsForReplace(db, ['skl_held'], 'killed', at(0), at(600_000))).toEqual(
      new Set(['skl_held']),
    );
    // Another replace while the hold lasts: refused; after it: taken over.
    expect(await holdSkillsForReplace(db, ['skl_held'], 'next', at(1_000), at(601_000))).toEqual(new Set());
    expect(await holdSkillsForReplace(db, ['skl_held'], 'next', at(600_001), at(1_200_001))).toEqual(
      new Set(['skl_held']),
    );
    // The killed one's release (had it come back) cannot free its successor's hold.
    await releaseSkillsForReplace(db, 'killed');
    expect(await holdSkillsForReplace(db, ['skl_held'], 'third', at(600_002), at(1_200_002))).toEqual(
      new Set(),
    );
    await releaseSkillsForReplace(db, 'next');
    expect(await holdSkillsForReplace(db, ['skl_held'], 'third', at(600_003), at(1_200_003))).toEqual(
      new Set(['skl_held']),
    );
    await releaseSkillsForReplace(db, 'third');
  });
});

describe(`skill files without a record (${engineName})`, () => {
  it('are removed once they are an hour old; fresh ones and real skills stay', async () => {
    const { status } = await upload([mdPart('sweep-kept.md', skillMd('sweep-kept', 'x'))]);
    expect(status).toBe(200);
    const orphan = `skills/${WS}/skl_orphan_of_a_killed_upload/SKILL.md`;
    await t.store.put(orphan, Readable.from([Buffer.from('---\nname: orphan\n---\n')]), {
      contentType: 'text/markdown',
    });
    const before = await storedKeys();
    expect(before).toContain(orphan);

    const warnings: string[] = [];
    const log = { warn: (_details: unknown, message: string) => void warnings.push(message) };
    // Just written: could be an upload still running on another instance.
    expect(await sweepOrphanSkillObjects(t.env.database.db, t.store, new Date(), log)).toBe(0);
    expect(await storedKeys()).toEqual(before);

    const inTwoHours = new Date(Date.now() + 2 * 60 * 60 * 1000);
    expect(await sweepOrphanSkillObjects(t.env.database.db, t.store, inTwoHours, log)).toBe(1);
    expect(warnings).toEqual([]);
    expect(await storedKeys()).toEqual(before.filter((key) => key !== orphan));
    const [kept] = (await listWorkspaceSkills(t.env.database.db, WS)).filter(
      (row) => row.name === 'sweep-kept',
    );
    expect(await readObject(`${kept!.storage_path}SKILL.md`)).toContain('sweep-kept');
  });

  it('are logged where storage fails to remove them, and the others are still removed', async () => {
    const [stuck, freed] = [`skills/${WS}/skl_orphan_stuck/`, `skills/${WS}/skl_orphan_freed/`];
    for (const prefix of [stuck, freed]) {
      await t.store.put(`${prefix}SKILL.md`, Readable.from([Buffer.from('x')]), {
        contentType: 'text/markdown',
      });
    }
    // As S3 fails when it reports a key it could not delete (s3-store.ts, ObjectsNotDeletedError).
    const refusal = new Error('storage kept an object');
    const refusing = new Proxy(t.store, {
      get(target, property, receiver) {
        if (property === 'deletePrefix') {
          return (prefix: string) =>
            prefix === stuck ? Promise.reject(refusal) : target.deletePrefix(prefix);
        }
        const value = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const warnings: Array<{ details: unknown; message: string }> = [];
    const log = { warn: (details: unknown, message: string) => void warnings.push({ details, message }) };
    const inTwoHours = new Date(Date.now() + 2 * 60 * 60 * 1000);
    // Before: the sweep stopped at the first such folder, and the sweep of projects after it.
    expect(await sweepOrphanSkillObjects(t.env.database.db, refusing, inTwoHours, log)).toBe(1);
    expect(warnings).toEqual([
      {
        details: { err: refusal, storagePrefix: stuck },
        message: 'could not remove the files of a skill without a record; the next sweep tries again',
      },
    ]);
    const keys = await storedKeys();
    expect(keys).toContain(`${stuck}SKILL.md`);
    expect(keys).not.toContain(`${freed}SKILL.md`);
    await t.store.deletePrefix(stuck);
  });
});

/** The configured store, with `beforePut` run (and awaited) before every put: to force failures or hold a write. */
function wrapStore(config: Config, beforePut: (key: string) => void | Promise<void>): ObjectStore {
  const real = createObjectStore(config);
  return new Proxy(real, {
    get(target, property, receiver) {
      if (property === 'put') {
        return async (...args: Parameters<ObjectStore['put']>) => {
          await beforePut(args[0]);
          return target.put(...args);
        };
      }
      const value = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
