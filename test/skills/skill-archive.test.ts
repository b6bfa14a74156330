import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type ArchiveLimits,
  DEFAULT_ARCHIVE_LIMITS,
  planArchive,
  unsafeEntryNameReason,
  verifySkillContent,
} from '../../src/services/skill-archive.js';
import { ArchiveProblem } from '../../src/zip-reader.js';
import {
  isProblem,
  parseSkillMarkdown,
  SKILL_FRONT_MATTER_MAX,
  SKILL_METADATA_MAX,
  type SkillHeader,
  splitFrontMatter,
} from '../../src/services/skill-markdown.js';
import { buildZip, patchEntry, replaceBytes, skillMd, type ZipEntrySpec } from './zip-builder.js';

const dir = mkdtempSync(path.join(tmpdir(), 'atrium-skill-archive-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let counter = 0;

async function writeZip(entries: ZipEntrySpec[] | Buffer): Promise<string> {
  const bytes = Buffer.isBuffer(entries) ? entries : await buildZip(entries);
  const file = path.join(dir, `a${counter++}.zip`);
  writeFileSync(file, bytes);
  return file;
}

async function plan(entries: ZipEntrySpec[] | Buffer, limits: ArchiveLimits = DEFAULT_ARCHIVE_LIMITS) {
  const archive = await planArchive(await writeZip(entries), limits);
  archive.zip.close();
  return archive;
}

describe('entry names', () => {
  it.each([
    ['../evil.sh', 'climbs'],
    ['skill/../../evil.sh', 'climbs'],
    ['/etc/passwd', 'absolute'],
    ['C:/Windows/x', 'absolute'],
    ['skill\\..\\evil', 'backslash'],
    ['skill/a\0b', 'NUL'],
    ['skill/./a', '`.` segment'],
    ['skill//a', 'empty segment'],
    [`skill/${'n'.repeat(256)}`, 'longer than 255 bytes'],
    [`skill/${`${'d'.repeat(99)}/`.repeat(9)}f`, 'longer than 900 bytes'],
    [`skill/${'d/'.repeat(63)}f`, 'more than 64 levels deep'],
    ['skill/a\u0085b', 'U+0085'],
    ['skill/invoice\u202efdp.exe', 'U+202E'],
    ['skill\u2066/SKILL.md', 'U+2066'],
    ['skill/a\u200fb', 'U+200F'],
    ['skill/a\u061cb', 'U+061C'],
    ['skill/a\u2029b', 'U+2029'],
    ['skill/\u200b', 'a segment with no visible character'],
    ['\u3164/SKILL.md', 'a segment with no visible character'],
    ['skill/\ufe0f\u2800/', 'a segment with no visible character'],
    ['skill/ /run.py', 'a segment with no visible character'],
  ])('refuses %j', (name, reason) => {
    expect(unsafeEntryNameReason(name)).toContain(reason);
  });

  it.each([
    'skill/SKILL.md',
    'skill/scripts/run.py',
    'skill/',
    'a b/ü.md',
    `${'d/'.repeat(63)}f`,
    'd/'.repeat(64),
    'skill/a\u200bb.md',
    'skill/👨\u200d👩.png',
  ])('accepts %j', (name) => {
    expect(unsafeEntryNameReason(name)).toBeNull();
  });
});

describe('planArchive', () => {
  it('finds every skill directory, with nested files, and ignores files outside them', async () => {
    const archive = await plan([
      { name: 'README.md', content: 'not a skill' },
      { name: 'bundle/pdf/SKILL.md', content: skillMd('pdf', 'PDFs') },
      { name: 'bundle/pdf/scripts/deep/extract.py', content: 'print(1)' },
      { name: 'bundle/pdf/', directory: true },
      { name: 'bundle/docx/SKILL.md', content: skillMd('docx', 'Word') },
      { name: '__MACOSX/bundle/._pdf', content: 'junk' },
    ]);
    expect(archive.looseProblems).toEqual([]);
    expect(archive.skills.map((s) => [s.root, s.files.map((f) => f.relativePath).sort(), s.problem])).toEqual(
      [
        ['bundle/docx/', ['SKILL.md'], null],
        ['bundle/pdf/', ['SKILL.md', 'scripts/deep/extract.py'], null],
      ],
    );
  });

  it('treats a SKILL.md at the root as one skill holding the whole archive', async () => {
    const archive = await plan([
      { name: 'SKILL.md', content: skillMd('root', 'Root') },
      { name: 'sub/SKILL.md', content: skillMd('inner', 'Inner') },
      { name: 'sub/data.txt', content: 'x' },
    ]);
    expect(archive.skills).toHaveLength(1);
    expect(archive.skills[0]!.root).toBe('');
    expect(archive.skills[0]!.files).toHaveLength(3);
  });

  it('reports a directory beside the skills that has no SKILL.md', async () => {
    const archive = await plan([
      { name: 'good/SKILL.md', content: skillMd('good', 'Good') },
      { name: 'notes/readme.md', content: 'no skill here' },
    ]);
    expect(archive.skills.map((s) => [s.directoryName, s.problem?.code ?? null])).toEqual([
      ['good', null],
      ['notes', 'missing_skill_md'],
    ]);
  });

  it('refuses only the skill an unsafe entry belongs to', async () => {
    const honest = await buildZip([
      { name: 'good/SKILL.md', content: skillMd('good', 'Good') },
      { name: 'evil/SKILL.md', content: skillMd('evil', 'Evil') },
      { name: 'evil/XX/XX/XX/tmp/pwned', content: 'boom' },
    ]);
    const archive = await plan(replaceBytes(honest, 'XX/XX/XX', '../../..'));
    expect(archive.skills.map((s) => [s.directoryName, s.problem?.code ?? null])).toEqual([
      ['evil', 'unsafe_path'],
      ['good', null],
    ]);
  });

  it('refuses symbolic links, encrypted entries and special files by their headers', async () => {
    const zip = await buildZip([
      { name: 'link/SKILL.md', content: skillMd('link', 'L') },
      { name: 'link/passwd', content: '/etc/passwd', mode: 0o120777 },
      { name: 'locked/SKILL.md', content: skillMd('locked', 'E') },
      { name: 'locked/secret.txt', content: 'secret' },
      { name: 'fifo/SKILL.md', content: skillMd('fifo', 'F') },
      { name: 'fifo/pipe', content: '', mode: 0o010644 },
    ]);
    const archive = await plan(patchEntry(zip, 'locked/secret.txt', { setFlags: 0x1 }));
    expect(Object.fromEntries(archive.skills.map((s) => [s.directoryName, s.problem?.code]))).toEqual({
      fifo: 'special_file',
      link: 'symlink',
      locked: 'encrypted_entry',
    });
  });

  it('refuses a skill where one entry is both a file and a directory, or appears twice', async () => {
    const archive = await plan([
      { name: 'clash/SKILL.md', content: skillMd('clash', 'C') },
      { name: 'clash/data', content: 'a file' },
      { name: 'clash/data/inner.txt', content: 'needs data/ as a directory' },
      { name: 'twice/SKILL.md', content: skillMd('twice', 'T') },
      { name: 'twice/a.txt', content: '1' },
      { name: 'twice/a.txt', content: '2' },
      // A directory entry of the same name as a file: no disk can hold both either.
      { name: 'dirclash/SKILL.md', content: skillMd('dirclash', 'D') },
      { name: 'dirclash/data', content: 'a file' },
      { name: 'dirclash/data/', directory: true },
      // Directory entries that name no file's path are fine, the skill's own and empty ones too.
      { name: 'dirs/', directory: true },
      { name: 'dirs/SKILL.md', content: skillMd('dirs', 'S') },
      { name: 'dirs/ref/', directory: true },
      { name: 'dirs/ref/a.md', content: 'a' },
      { name: 'dirs/empty/', directory: true },
    ]);
    expect(archive.skills.map((s) => [s.directoryName, s.problem])).toEqual([
      [
        'clash',
        { code: 'path_conflict', message: 'clash/data is both a file and a directory in the archive' },
      ],
      [
        'dirclash',
        { code: 'path_conflict', message: 'dirclash/data is both a file and a directory in the archive' },
      ],
      ['dirs', null],
      ['twice', { code: 'path_conflict', message: 'the archive holds twice/a.txt twice' }],
    ]);
  });

  it('puts entry names in NFC: a decomposed and a composed é are one path (twice), one skill folder', async () => {
    const composed = 'r\u00e9.md';
    const decomposed = 're\u0301.md';
    const archive = await plan([
      { name: 'accents/SKILL.md', content: skillMd('accents', 'A') },
      { name: `accents/${composed}`, content: 'typed' },
      { name: `accents/${decomposed}`, content: 'from a Mac' },
      // A macOS zip's folder and file names come decomposed: stored composed, as project files are.
      { name: 'caf\u0065\u0301/SKILL.md', content: skillMd('cafe', 'C') },
      { name: `caf\u0065\u0301/${decomposed}`, content: 'x' },
    ]);
    expect(archive.skills.map((s) => [s.root, s.problem, s.files.map((f) => f.relativePath).sort()])).toEqual(
      [
        [
          'accents/',
          { code: 'path_conflict', message: `the archive holds accents/${composed} twice` },
          ['SKILL.md', composed, composed],
        ],
        ['caf\u00e9/', null, ['SKILL.md', composed]],
      ],
    );
  });

  it('reads UTF-8 names a zip does not flag as UTF-8 (Info-ZIP on Linux, macOS) as UTF-8, and others as CP437', async () => {
    // Info-ZIP's zip 3.0 and macOS's Archive Utility write UTF-8 names without the UTF-8 flag
    // (general purpose bit 11): read as CP437, `données é.txt` became `donn├⌐es ├⌐.txt`.
    const utf8 = 'linux/donn\u00e9es \u00e9.txt';
    const mac = 'caf\u0065\u0301/SKILL.md';
    let zip = await buildZip([
      { name: 'linux/SKILL.md', content: skillMd('linux', 'L') },
      { name: utf8, content: 'x' },
      { name: mac, content: skillMd('cafe', 'C') },
      { name: 'dos/SKILL.md', content: skillMd('dos', 'D') },
      { name: 'dos/cafX.txt', content: 'x' },
    ]);
    // yazl flags every name as UTF-8.
    for (const name of [utf8, mac, 'dos/cafX.txt']) zip = patchEntry(zip, name, { clearFlags: 0x800 });
    // An old DOS/Windows zip: CP437 bytes (0x82 is é there), not valid UTF-8.
    zip = replaceBytes(zip, 'cafX', Buffer.from([0x63, 0x61, 0x66, 0x82]));
    const archive = await plan(zip);
    expect(archive.skills.map((s) => [s.root, s.problem, s.files.map((f) => f.relativePath).sort()])).toEqual(
      [
        ['caf\u00e9/', null, ['SKILL.md']],
        ['dos/', null, ['SKILL.md', 'caf\u00e9.txt']],
        ['linux/', null, ['SKILL.md', 'donn\u00e9es \u00e9.txt']],
      ],
    );
  });

  it('refuses a skill holding a name more than 64 levels deep, naming the entry', async () => {
    // Nesting costs storage a directory per level; a real skill is a few levels deep.
    const tooDeep = `deep/${'d/'.repeat(64)}f.txt`;
    const archive = await plan([
      { name: 'deep/SKILL.md', content: skillMd('deep', 'D') },
      { name: tooDeep, content: 'x' },
      { name: 'fine/SKILL.md', content: skillMd('fine', 'F') },
      { name: `fine/${'d/'.repeat(62)}f.txt`, content: 'x' },
    ]);
    expect(archive.skills.map((s) => [s.directoryName, s.problem])).toEqual([
      ['deep', { code: 'unsafe_path', message: `entry name is more than 64 levels deep: ${tooDeep}` }],
      ['fine', null],
    ]);
  });

  it('places names that sort between a directory and its files (`a`, `a-b/`, `a.txt`, `a/`)', async () => {
    const archive = await plan([
      { name: 'a/SKILL.md', content: skillMd('a', 'A') },
      { name: 'a/b/SKILL.md', content: skillMd('nested', 'N') },
      { name: 'a-b/SKILL.md', content: skillMd('a-b', 'AB') },
      { name: 'a-b/x.txt', content: 'x' },
      { name: 'a-c/f.txt', content: 'outside every skill' },
      { name: 'clash/SKILL.md', content: skillMd('clash', 'C') },
      { name: 'clash/data', content: 'a file' },
      { name: 'clash/data-2/x', content: 'x' },
      { name: 'clash/data.txt', content: 'x' },
      { name: 'clash/data/inner.txt', content: 'needs data/ as a directory' },
      { name: 'ok/', directory: true },
      { name: 'ok/SKILL.md', content: skillMd('ok', 'O') },
      { name: 'ok/a', content: 'x' },
      { name: 'ok/a-b/c', content: 'x' },
      { name: 'ok/a.txt', content: 'x' },
      { name: 'bundle/pdf/SKILL.md', content: skillMd('pdf', 'P') },
      { name: 'bundle/notes/readme.md', content: 'meant as a skill' },
      { name: 'bundle/.git/config', content: 'hidden' },
      { name: 'bundle/readme.txt', content: 'a file beside the skills' },
      { name: 'deep/x/skill/SKILL.md', content: skillMd('deep', 'D') },
      { name: 'deep/x/other/y/z.txt', content: 'meant as a skill' },
      { name: 'deep/elsewhere/f.txt', content: 'not beside a skill' },
      { name: 'empty-dir/', directory: true },
    ]);
    expect(archive.looseProblems).toEqual([]);
    expect(archive.skills.map((s) => [s.root, s.files.map((f) => f.relativePath).sort(), s.problem])).toEqual(
      [
        ['a-b/', ['SKILL.md', 'x.txt'], null],
        ['a/', ['SKILL.md', 'b/SKILL.md'], null],
        ['bundle/pdf/', ['SKILL.md'], null],
        [
          'clash/',
          ['SKILL.md', 'data', 'data-2/x', 'data.txt', 'data/inner.txt'],
          { code: 'path_conflict', message: 'clash/data is both a file and a directory in the archive' },
        ],
        ['deep/x/skill/', ['SKILL.md'], null],
        ['ok/', ['SKILL.md', 'a', 'a-b/c', 'a.txt'], null],
        ['a-c/', [], { code: 'missing_skill_md', message: 'directory a-c/ has no SKILL.md' }],
        [
          'bundle/notes/',
          [],
          { code: 'missing_skill_md', message: 'directory bundle/notes/ has no SKILL.md' },
        ],
        [
          'deep/x/other/',
          [],
          { code: 'missing_skill_md', message: 'directory deep/x/other/ has no SKILL.md' },
        ],
        ['empty-dir/', [], { code: 'missing_skill_md', message: 'directory empty-dir/ has no SKILL.md' }],
      ],
    );
  });

  it('refuses an archive with more entries than the limit before reading them', async () => {
    const entries = Array.from({ length: 12 }, (_, i) => ({ name: `s/f${i}.txt`, content: 'x' }));
    await expect(plan(entries, { ...DEFAULT_ARCHIVE_LIMITS, maxEntries: 10 })).rejects.toMatchObject({
      code: 'too_many_entries',
    });
  });

  it('refuses a skill of more files than the limit, before looking at their paths', async () => {
    const files = (skill: string, count: number) =>
      Array.from({ length: count }, (_, i) => ({ name: `${skill}/f${i}.txt`, content: 'x' }));
    const archive = await plan(
      [
        { name: 'full/SKILL.md', content: skillMd('full', 'F') },
        ...files('full', 2),
        { name: 'over/SKILL.md', content: skillMd('over', 'O') },
        ...files('over', 3),
        { name: 'over/f0.txt', content: 'twice' },
      ],
      { ...DEFAULT_ARCHIVE_LIMITS, maxSkillFiles: 3 },
    );
    expect(archive.skills.map((s) => [s.directoryName, s.problem])).toEqual([
      ['full', null],
      ['over', { code: 'too_many_files', message: 'the skill holds 5 files; at most 3 are accepted' }],
    ]);
  });

  it('refuses an archive that would take the request past its entries, before reading them', async () => {
    const entries = [
      { name: 's/SKILL.md', content: skillMd('s', 'S') },
      { name: 's/a.txt', content: 'x' },
    ];
    const counts: number[] = [];
    const refused = new Error('past the request’s entries');
    const admit = (count: number) => {
      counts.push(count);
      throw refused;
    };
    await expect(planArchive(await writeZip(entries), DEFAULT_ARCHIVE_LIMITS, admit)).rejects.toBe(refused);
    expect(counts).toEqual([2]);
  });

  it('refuses a file that is not a zip', async () => {
    await expect(plan(Buffer.from('this is plain text, not an archive'))).rejects.toBeInstanceOf(
      ArchiveProblem,
    );
  });

  it('plans an archive of 10,000 skills and 2,000 directories without SKILL.md entry by entry', async () => {
    // Planning places each entry among the sorted skill directories (once: every root against
    // every other root and entry, seconds of the event loop for an archive a member may send).
    const entries = [
      ...Array.from({ length: 10_000 }, (_, i) => ({ name: `s${i}/SKILL.md`, content: '', compress: false })),
      ...Array.from({ length: 2_000 }, (_, i) => ({ name: `m${i}/notes.txt`, content: '', compress: false })),
    ];
    const archive = await plan(entries, { ...DEFAULT_ARCHIVE_LIMITS, maxEntries: 20_000 });
    const found = archive.skills.filter((skill) => skill.problem === null);
    const missing = archive.skills.filter((skill) => skill.problem?.code === 'missing_skill_md');
    expect(found).toHaveLength(10_000);
    expect(found.every((skill) => skill.files.length === 1 && skill.skillMd !== null)).toBe(true);
    expect(missing).toHaveLength(2_000);
  });

  it('reports an archive without any SKILL.md', async () => {
    const archive = await plan([{ name: 'loose.txt', content: 'x' }]);
    expect(archive.looseProblems.map((p) => p.code)).toEqual(['no_skills']);
  });
});

describe('an archive that cannot be read', () => {
  it('is the client’s invalid_archive when the bytes are not a zip', async () => {
    const failure = await planArchive(
      await writeZip(Buffer.from('not a zip at all')),
      DEFAULT_ARCHIVE_LIMITS,
    ).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ArchiveProblem);
    expect((failure as ArchiveProblem).code).toBe('invalid_archive');
  });

  it('is the server’s own error, not invalid_archive, when the file cannot be opened', async () => {
    // The spool file gone (swept, a full disk, too many open files): not the client's archive,
    // and its path must not reach the client in an archive error's message.
    const failure = await planArchive(path.join(dir, 'missing.zip'), DEFAULT_ARCHIVE_LIMITS).catch(
      (error: unknown) => error,
    );
    expect(failure).not.toBeInstanceOf(ArchiveProblem);
    expect((failure as NodeJS.ErrnoException).code).toBe('ENOENT');
  });
});

describe('verifySkillContent', () => {
  it('returns the SKILL.md text after inflating every file', async () => {
    const archive = await planArchive(
      await writeZip([
        { name: 's/SKILL.md', content: skillMd('s', 'S') },
        { name: 's/big.bin', content: Buffer.alloc(200_000, 7) },
      ]),
      DEFAULT_ARCHIVE_LIMITS,
    );
    try {
      expect(await verifySkillContent(archive.zip, archive.skills[0]!, DEFAULT_ARCHIVE_LIMITS)).toContain(
        'name: s',
      );
    } finally {
      archive.zip.close();
    }
  });

  it('stops a small entry that lies about its size after one byte past what it declares', async () => {
    const honest = await buildZip([
      { name: 'small-bomb/SKILL.md', content: skillMd('small-bomb', 'B') },
      { name: 'small-bomb/zeros.bin', content: Buffer.alloc(2 * 1024 * 1024) },
    ]);
    const lying = patchEntry(honest, 'small-bomb/zeros.bin', { uncompressedSize: 64 });
    const archive = await planArchive(await writeZip(lying), DEFAULT_ARCHIVE_LIMITS);
    try {
      expect(
        archive.skills[0]!.files.find((f) => f.relativePath === 'zeros.bin')!.entry.compressedSize,
      ).toBeLessThan(256 * 1024);
      await expect(
        verifySkillContent(archive.zip, archive.skills[0]!, DEFAULT_ARCHIVE_LIMITS),
      ).rejects.toMatchObject({
        code: 'size_mismatch',
      });
    } finally {
      archive.zip.close();
    }
  });

  it('reports an entry whose deflate data is corrupt', async () => {
    const honest = await buildZip([
      { name: 'corrupt/SKILL.md', content: skillMd('corrupt', 'C') },
      { name: 'corrupt/data.txt', content: 'hello hello hello hello hello hello hello hello' },
    ]);
    const archive0 = await planArchive(await writeZip(honest), DEFAULT_ARCHIVE_LIMITS);
    const entry = archive0.skills[0]!.files.find((f) => f.relativePath === 'data.txt')!.entry;
    archive0.zip.close();
    const broken = Buffer.from(honest);
    const dataStart = entry.relativeOffsetOfLocalHeader + 30 + 'corrupt/data.txt'.length;
    broken.fill(0xff, dataStart, dataStart + entry.compressedSize);
    const archive = await planArchive(await writeZip(broken), DEFAULT_ARCHIVE_LIMITS);
    try {
      await expect(
        verifySkillContent(archive.zip, archive.skills[0]!, DEFAULT_ARCHIVE_LIMITS),
      ).rejects.toMatchObject({
        code: 'corrupt_entry',
      });
    } finally {
      archive.zip.close();
    }
  });

  it('stops an entry that inflates past the size its header declares (a lying zip bomb)', async () => {
    const honest = await buildZip([
      { name: 'bomb/SKILL.md', content: skillMd('bomb', 'B') },
      { name: 'bomb/zeros.bin', content: Buffer.alloc(5 * 1024 * 1024) },
    ]);
    const lying = patchEntry(honest, 'bomb/zeros.bin', { uncompressedSize: 100 });
    const archive = await planArchive(await writeZip(lying), DEFAULT_ARCHIVE_LIMITS);
    try {
      expect(archive.skills[0]!.declaredBytes).toBeLessThan(1000);
      await expect(
        verifySkillContent(archive.zip, archive.skills[0]!, DEFAULT_ARCHIVE_LIMITS),
      ).rejects.toMatchObject({
        code: 'size_mismatch',
      });
    } finally {
      archive.zip.close();
    }
  });
});

describe('front matter', () => {
  it('reads name, description and keeps the rest as metadata', () => {
    const header = parseSkillMarkdown(
      skillMd('pdf-tools', 'Extract text from PDFs', 'license: MIT\nallowed-tools: [Read]\n'),
      'fallback',
    );
    expect(header).toEqual({
      name: 'pdf-tools',
      description: 'Extract text from PDFs',
      metadata: { license: 'MIT', 'allowed-tools': ['Read'] },
    });
  });

  it('falls back to the file or directory name, and to no front matter at all', () => {
    expect(parseSkillMarkdown(skillMd(undefined, 'D'), 'dir-name')).toMatchObject({ name: 'dir-name' });
    // One spelling per name: the decomposed é of a macOS folder name is stored composed.
    expect(parseSkillMarkdown('# Body\n', 'cafe\u0301')).toMatchObject({ name: 'caf\u00e9' });
    expect(parseSkillMarkdown('# Just markdown\n', 'plain')).toEqual({
      name: 'plain',
      description: '',
      metadata: {},
    });
  });

  it.each([
    ['---\nname: [unclosed\n---\n', 'invalid_front_matter'],
    ['---\nname: x\n', 'invalid_front_matter'],
    ['---\n- a list\n---\n', 'invalid_front_matter'],
    ['---\nname: 12\n---\n', 'invalid_front_matter'],
    [`---\nname: ${'n'.repeat(65)}\n---\n`, 'invalid_name'],
    ['---\nname: "txt.\u202Eexe"\n---\n', 'invalid_name'],
    ['---\nname: "a\u2069b"\n---\n', 'invalid_name'],
    ['---\nname: "a\u200Eb"\n---\n', 'invalid_name'],
    ['---\nname: "a\u061Cb"\n---\n', 'invalid_name'],
    ['---\nname: "a\u2028b"\n---\n', 'invalid_name'],
    [`---\ndescription: ${'d'.repeat(1025)}\n---\n`, 'invalid_front_matter'],
  ])('refuses %j', (text, code) => {
    const result = parseSkillMarkdown(text, 'fallback');
    expect(isProblem(result) && result.code).toBe(code);
  });

  it.each([
    ['txt\u202Eexe', 'U+202E'],
    ['a\u202Ab', 'U+202A'],
    ['a\u200Fb', 'U+200F'],
    ['a\u2029b', 'U+2029'],
    ['a\u0085b', 'U+0085'],
  ])('names the refused character of the skill name %j by its code point', (name, label) => {
    // As the front matter's name and as the directory or file name it falls back to.
    for (const result of [
      parseSkillMarkdown(`---\nname: ${JSON.stringify(name)}\n---\n`, 'x'),
      parseSkillMarkdown('', name),
    ]) {
      expect(result).toEqual({ code: 'invalid_name', message: expect.stringContaining(label) });
      expect(isProblem(result) && result.message).not.toContain(
        String.fromCodePoint(parseInt(label.slice(2), 16)),
      );
    }
  });

  it.each([
    '\u200b',
    '\u2060\u200b',
    '\u3164',
    '\u115f\u1160',
    '\uffa0',
    '\u180e',
    '\ufe0f',
    '\u{e0041}',
    '\u034f',
    '\u2800',
    ' \u200b\u3164 ',
  ])(
    "refuses the skill name %j, which shows no character, as the front matter's name or the one it falls back to",
    (name) => {
      for (const result of [
        parseSkillMarkdown(`---\nname: ${JSON.stringify(name)}\n---\n`, 'x'),
        parseSkillMarkdown('', name),
      ]) {
        expect(result).toEqual({ code: 'invalid_name', message: 'the skill name has no visible character' });
      }
    },
  );

  it.each(['a\u200bb', '👨\u200d👩\u200d👧', 'می\u200cخواهم', '❤\ufe0f'])(
    'accepts the skill name %j, visible with an invisible character inside',
    (name) => {
      expect(parseSkillMarkdown(`---\nname: ${JSON.stringify(name)}\n---\n`, 'x')).toMatchObject({ name });
    },
  );

  it('refuses a front matter longer than SKILL_FRONT_MATTER_MAX, naming the limit, before parsing it', () => {
    // 30,000 keys (~300 KB) kept the event loop busy 5–14 s in the parser's duplicate-key check.
    const keys = Array.from({ length: 30_000 }, (_, i) => `k${i}: v`).join('\n');
    expect(parseSkillMarkdown(`---\nname: many\n${keys}\n---\n`, 'many')).toEqual({
      code: 'invalid_front_matter',
      message: expect.stringContaining(`longer than ${SKILL_FRONT_MATTER_MAX} characters`),
    });
    const nested = `---\nname: deep\nx: ${'['.repeat(SKILL_FRONT_MATTER_MAX)}\n---\n`;
    expect(parseSkillMarkdown(nested, 'deep')).toMatchObject({ code: 'invalid_front_matter' });
  });

  it('reads a front matter of many keys just within SKILL_FRONT_MATTER_MAX', () => {
    let yaml = 'name: many\ndescription: Many keys\n';
    for (let i = 0; yaml.length + `k${i}: v\n`.length <= SKILL_FRONT_MATTER_MAX; i++) yaml += `k${i}: v\n`;
    const header = parseSkillMarkdown(`---\n${yaml}---\nbody`, 'fallback');
    expect(isProblem(header)).toBe(false);
    expect(header).toMatchObject({ name: 'many', metadata: { k0: 'v' } });
    expect(Object.keys((header as SkillHeader).metadata).length).toBeGreaterThan(1_000);
  });

  it('refuses a front matter whose aliases expand its metadata past SKILL_METADATA_MAX, naming the limit', () => {
    // 7.4 KB of YAML, one 7,000-character string and 99 aliases of it: 700 KB as JSON.
    const aliases = `big: &s "${'x'.repeat(7000)}"\nm: [${Array(99).fill('*s').join(', ')}]\n`;
    expect(parseSkillMarkdown(skillMd('bomb', 'd', aliases), 'bomb')).toEqual({
      code: 'invalid_front_matter',
      message: expect.stringContaining(`longer than ${SKILL_METADATA_MAX} characters as JSON`),
    });
  });

  it('keeps a front matter of keys without values just within SKILL_FRONT_MATTER_MAX (no aliases), though its JSON is far longer', () => {
    let yaml = 'name: empty\ndescription: Keys without values\n';
    for (let i = 0; yaml.length + 6 <= SKILL_FRONT_MATTER_MAX; i++) yaml += `k${i.toString(36)}:\n`;
    // Before (a cap of twice the front matter's): refused as metadata over its cap, naming aliases.
    const header = parseSkillMarkdown(`---\n${yaml}---\nbody`, 'fallback');
    expect(isProblem(header), JSON.stringify(header).slice(0, 200)).toBe(false);
    expect(JSON.stringify((header as SkillHeader).metadata).length).toBeGreaterThan(
      2 * SKILL_FRONT_MATTER_MAX,
    );
  });

  it('keeps aliases whose metadata stays within SKILL_METADATA_MAX', () => {
    const aliases = `defaults: &d {shell: bash, notes: "${'n'.repeat(3000)}"}\nbuild: *d\ntest: *d\n`;
    const header = parseSkillMarkdown(skillMd('reuse', 'd', aliases), 'reuse') as SkillHeader;
    const defaults = { shell: 'bash', notes: 'n'.repeat(3000) };
    expect(header.metadata).toEqual({ defaults, build: defaults, test: defaults });
  });

  it('counts the front matter in characters: emoji count once', () => {
    const notes = '😀'.repeat(SKILL_FRONT_MATTER_MAX - 40);
    const header = parseSkillMarkdown(`---\nname: smiles\nnotes: ${notes}\n---\n`, 'x');
    expect(isProblem(header)).toBe(false);
  });

  it('splits front matter with CRLF line ends and a byte-order mark', () => {
    expect(splitFrontMatter('\uFEFF---\r\nname: a\r\n---\r\nbody')).toEqual({
      yaml: 'name: a\r\n',
      body: 'body',
    });
  });
});

describe('multipart errors', () => {
  it('reports a failing temporary file as a server fault, and busboy complaints as 400', async () => {
    const { multipartError } = await import('../../src/http/skill-upload-spool.js');
    const diskFull = Object.assign(new Error('ENOSPC: no space left on device, write'), {
      code: 'ENOSPC',
      syscall: 'write',
    });
    expect(multipartError(diskFull, 10).status).toBe(500);
    expect(multipartError(new Error('Multipart: Boundary not found'), 10)).toMatchObject({
      status: 400,
      code: 'bad_request',
    });
    expect(
      multipartError(Object.assign(new Error('reach parts limit'), { code: 'FST_PARTS_LIMIT' }), 10).status,
    ).toBe(400);
    expect(multipartError(Object.assign(new Error('too large'), { statusCode: 413 }), 10).code).toBe(
      'payload_too_large',
    );
  });
});

describe('sweepStaleUploads', () => {
  it('removes request directories not written to within the limit and keeps the others', async () => {
    const { sweepStaleUploads } = await import('../../src/http/skill-upload-spool.js');
    const { mkdirSync, utimesSync, readdirSync } = await import('node:fs');
    const root = path.join(dir, 'uploads');
    mkdirSync(path.join(root, 'req-old'), { recursive: true });
    writeFileSync(path.join(root, 'req-old', 'part-0'), 'x');
    mkdirSync(path.join(root, 'req-new'));
    mkdirSync(path.join(root, 'unrelated'));
    // A slow upload's directory, made two hours ago, whose part is still being written to.
    mkdirSync(path.join(root, 'req-slow'));
    writeFileSync(path.join(root, 'req-slow', 'part-0'), 'x');
    const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
    utimesSync(path.join(root, 'req-old', 'part-0'), twoHoursAgo, twoHoursAgo);
    utimesSync(path.join(root, 'req-old'), twoHoursAgo, twoHoursAgo);
    utimesSync(path.join(root, 'req-slow'), twoHoursAgo, twoHoursAgo);
    expect(await sweepStaleUploads(root, 3600_000, new Date())).toBe(1);
    expect(readdirSync(root).sort()).toEqual(['req-new', 'req-slow', 'unrelated']);
    expect(await sweepStaleUploads(path.join(dir, 'missing'), 3600_000, new Date())).toBe(0);
  });

  it('keeps a running request’s directory marked as in use, until stopped', async () => {
    const { keepSpoolFresh, sweepStaleUploads } = await import('../../src/http/skill-upload-spool.js');
    const { mkdirSync, statSync, utimesSync } = await import('node:fs');
    const root = path.join(dir, 'uploads-in-use');
    const spool = path.join(root, 'req-reading');
    mkdirSync(spool, { recursive: true });
    writeFileSync(path.join(spool, 'part-0'), 'x');
    // An hour and more of reading a part it does not keep: nothing written to the directory.
    const longAgo = new Date(Date.now() - 2 * 3600_000);
    utimesSync(path.join(spool, 'part-0'), longAgo, longAgo);
    utimesSync(spool, longAgo, longAgo);
    const inUse = keepSpoolFresh(spool, 20);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await sweepStaleUploads(root, 3600_000, new Date())).toBe(0);
    await inUse.stop();
    utimesSync(spool, longAgo, longAgo);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(Math.abs(statSync(spool).mtimeMs - longAgo.getTime())).toBeLessThan(1000);
    expect(await sweepStaleUploads(root, 3600_000, new Date())).toBe(1);
  });
});
