import { pipeline } from 'node:stream/promises';
import { Writable, type Readable } from 'node:stream';
import { escapedName, pathFault, type PathFault, refusedCharacter } from '../path-names.js';
import { reservedPathProblem } from './skill-storage.js';
import {
  ArchiveProblem,
  contentProblem,
  entryKindProblem,
  entryStream,
  isSmallEntry,
  type Entry,
  type NamedEntry,
  openZipArchive,
  type Problem,
  readSmallEntry,
  type ZipFile,
} from '../zip-reader.js';

export type { Problem };

/** The limits an archive is checked against before anything of it is stored (docs/skills.md). */
export interface ArchiveLimits {
  /** Entries (files and directories) one archive may list. */
  maxEntries: number;
  /** Entries all the archives of one request may list together (they are all held at once). */
  maxRequestEntries: number;
  /** Files one skill may hold, `SKILL.md` included (each is one object written). */
  maxSkillFiles: number;
  /** Decompressed bytes one skill may hold. */
  maxSkillBytes: number;
  /** Decompressed bytes one request may hold, across all its archives and markdown parts. */
  maxRequestBytes: number;
  /** Bytes of one SKILL.md (or standalone markdown part); it is read into memory to parse. */
  maxSkillMdBytes: number;
}

export const DEFAULT_ARCHIVE_LIMITS: ArchiveLimits = {
  maxEntries: 10_000,
  maxRequestEntries: 10_000,
  maxSkillFiles: 1_000,
  maxSkillBytes: 64 * 1024 * 1024,
  maxRequestBytes: 256 * 1024 * 1024,
  maxSkillMdBytes: 1024 * 1024,
};

/** One file of a skill: where it is in the archive, and its path inside the skill. */
export interface SkillEntry {
  entry: Entry;
  /** Path inside the skill directory, e.g. `scripts/run.py`; `SKILL.md` for the skill file. */
  relativePath: string;
  declaredSize: number;
}

export interface PlannedZipSkill {
  /** The skill directory inside the archive, with a trailing slash; `''` for the archive root. */
  root: string;
  /** The directory's own name, the skill's name when the front matter has none. */
  directoryName: string;
  skillMd: SkillEntry | null;
  files: SkillEntry[];
  declaredBytes: number;
  problem: Problem | null;
}

export interface ArchivePlan {
  zip: ZipFile;
  skills: PlannedZipSkill[];
  /** Problems that belong to no skill (an unsafe entry outside every skill directory, no skills). */
  looseProblems: Problem[];
}

// Storage limits: a file name of at most 255 bytes on common filesystems; S3 keys of 1,024, of
// which the skill's own prefix takes some.
const MAX_SEGMENT_BYTES = 255;
const MAX_NAME_BYTES = 900;
// Segments of a name (`a/b/c.txt` is 3 levels deep). A real skill is a few levels deep; the
// local-disk store makes a directory per level of every file, and 900 bytes allow 450 levels.
const MAX_NAME_DEPTH = 64;

function entryNameFaultReason(name: string, fault: PathFault): string {
  if ('segment' in fault) {
    switch (fault.fault) {
      case 'dot-dot':
        return 'entry name climbs out of the archive (`..`)';
      case 'dot':
        return 'entry name has a `.` segment';
      case 'empty':
        return 'entry name has an empty segment';
      case 'invisible':
        return 'entry name has a segment with no visible character';
      default:
        return `entry name has a segment longer than ${MAX_SEGMENT_BYTES} bytes`;
    }
  }
  switch (fault.fault) {
    case 'empty':
      return 'empty entry name';
    case 'nul':
      return 'entry name contains a NUL byte';
    case 'backslash':
      return 'entry name contains a backslash';
    case 'absolute':
      return 'entry name is an absolute path';
    case 'control':
      return `entry name contains ${refusedCharacter(name)}, a control, bidirectional or line separator character`;
    case 'too-many-bytes':
      return `entry name is longer than ${MAX_NAME_BYTES} bytes`;
  }
}

/**
 * Why an archive entry name is unsafe to use as a storage path, or null when it is safe. Names
 * are checked raw (before any normalization), so `a\..\b` is refused rather than rewritten.
 */
export function unsafeEntryNameReason(name: string): string | null {
  // Depth first: checking each of 450 segments of every name took longer than the rest of
  // planning (half a second for 10,000 such names).
  if (depthOf(name) > MAX_NAME_DEPTH) return `entry name is more than ${MAX_NAME_DEPTH} levels deep`;
  const fault = pathFault(name, {
    directory: true,
    maxSegmentBytes: MAX_SEGMENT_BYTES,
    maxBytes: MAX_NAME_BYTES,
  });
  return fault ? entryNameFaultReason(name, fault) : null;
}

/** Segments of a name: `a/b/c.txt` and `a/b/c/` → 3. */
function depthOf(name: string): number {
  let depth = isDirectory(name) ? 0 : 1;
  for (let slash = name.indexOf('/'); slash >= 0; slash = name.indexOf('/', slash + 1)) depth++;
  return depth;
}

/** A problem with the entry itself (not its content): unsafe name, link, device, encryption. */
function entryProblem(entry: Entry, name: string): Problem | null {
  const unsafe = unsafeEntryNameReason(name);
  if (unsafe) return { code: 'unsafe_path', message: `${unsafe}: ${escapedName(name)}` };
  return entryKindProblem(entry, name);
}

/** What macOS's archiver adds beside the files: never part of a skill. */
function isJunk(name: string): boolean {
  return name.startsWith('__MACOSX/') || name === '.DS_Store' || name.endsWith('/.DS_Store');
}

/** `a/b/c.txt` → `a/b/`; `a/b/` → `a/b/`; `c.txt` → `''`. */
const dirname = (name: string) => name.slice(0, name.lastIndexOf('/') + 1);
/** `a/b/c.txt` → `c.txt`; a directory name without its trailing slash: `a/b` → `b`. */
const basename = (name: string) => name.slice(name.lastIndexOf('/') + 1);
const isDirectory = (name: string) => name.endsWith('/');

/**
 * Reads an archive's central directory and works out its skills: every directory holding a
 * `SKILL.md` (the outermost one when they nest; the archive root when `SKILL.md` is there),
 * the files of each, and the directories next to them that lack a `SKILL.md`. Nothing is
 * inflated here. Throws ArchiveProblem when the archive as a whole cannot be used; `admit` (see
 * openZipArchive) may refuse its entries before they are read.
 */
export async function planArchive(
  zipPath: string,
  limits: ArchiveLimits,
  admit?: (entryCount: number) => void,
): Promise<ArchivePlan> {
  const { zip, entries } = await openZipArchive(zipPath, limits.maxEntries, admit);
  return { zip, ...groupEntries(entries, limits) };
}

/** The plan of an archive from its entries: which skills it holds, and what is wrong with each. */
function groupEntries(entries: NamedEntry[], limits: ArchiveLimits): Omit<ArchivePlan, 'zip'> {
  const { usable, refused } = sortOutEntries(entries);
  const roots = skillRoots(usable);
  const skills = collectSkills(roots, usable);
  const directories = directoryEntries(roots, usable);
  // Too many files, then a path conflict, then a reserved path is the skill's first problem; a
  // refused entry inside it comes after.
  for (const skill of skills) {
    skill.problem =
      tooManyFiles(skill, limits) ??
      pathConflict(skill, directories.get(skill.root) ?? []) ??
      reservedPath(skill);
  }
  const looseProblems = chargeRefusedEntries(refused, skills);
  const missing = directoriesWithoutSkillMd(usable, roots).map(missingSkill);
  if (skills.length === 0 && missing.length === 0 && looseProblems.length === 0) {
    looseProblems.push({ code: 'no_skills', message: 'the archive holds no SKILL.md' });
  }
  return { skills: [...skills, ...missing], looseProblems };
}

/** Entries that can be stored, apart from those that cannot (with why); junk is dropped. */
function sortOutEntries(entries: NamedEntry[]) {
  const usable: NamedEntry[] = [];
  const refused: Array<NamedEntry & { problem: Problem }> = [];
  for (const item of entries) {
    const problem = entryProblem(item.entry, item.name);
    if (problem) refused.push({ ...item, problem });
    else if (!isJunk(item.name)) usable.push(item);
  }
  return { usable, refused };
}

/*
 * Planning never builds the paths of a name's enclosing directories one by one: each costs the
 * name's length, so a name 440 levels deep cost 440 times its length, and 2,000 such entries
 * held the event loop for 20 s. Skill roots (directories, ending in `/`) are kept sorted
 * instead: everything inside a directory sorts right after it, so (roots never nest) the root
 * that holds a name is the last root sorted at or before it, found by a binary search.
 */

/**
 * The directories that are skills, sorted: each one holding a `SKILL.md`, except inside another
 * one (a skill's whole tree is its content, so a nested `SKILL.md` is just one of its files).
 * A `SKILL.md` at the top makes the whole archive one skill, root `''`.
 */
function skillRoots(usable: NamedEntry[]): string[] {
  const withSkillMd = usable
    .filter(({ name }) => !isDirectory(name) && basename(name) === 'SKILL.md')
    .map(({ name }) => dirname(name));
  const roots: string[] = [];
  // Sorted, a root comes right after the one it is nested in, or after another nested there.
  for (const root of [...new Set(withSkillMd)].sort()) {
    const outer = roots.at(-1);
    if (outer === undefined || !root.startsWith(outer)) roots.push(root);
  }
  return roots;
}

/** The skill root a name lies in (roots are sorted and never nest), or undefined. */
function rootOf(name: string, roots: string[]): string | undefined {
  const root = roots[lastAtOrBefore(roots, name)];
  return root !== undefined && name.startsWith(root) ? root : undefined;
}

/** The index of the last of `sorted` that sorts at or before `name`; -1 when none does. */
function lastAtOrBefore(sorted: string[], name: string): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (sorted[middle]! <= name) low = middle + 1;
    else high = middle;
  }
  return low - 1;
}

/** Each skill with every file below its root (directory entries are implied by the files). */
function collectSkills(roots: string[], usable: NamedEntry[]): PlannedZipSkill[] {
  const skills = new Map(roots.map((root) => [root, plannedSkill(root, null)]));
  for (const { entry, name } of usable) {
    if (isDirectory(name)) continue;
    const root = rootOf(name, roots);
    if (root === undefined) continue;
    const skill = skills.get(root)!;
    const file: SkillEntry = {
      entry,
      relativePath: name.slice(root.length),
      declaredSize: entry.uncompressedSize,
    };
    if (file.relativePath === 'SKILL.md') skill.skillMd = file;
    skill.files.push(file);
    skill.declaredBytes += file.declaredSize;
  }
  return [...skills.values()];
}

/**
 * The directory entries (`a/b/`) of each skill, as paths inside it without the slash (`b`): they
 * store nothing (folders are implied by the files), but one named like a file is a conflict.
 */
function directoryEntries(roots: string[], usable: NamedEntry[]): Map<string, string[]> {
  const byRoot = new Map<string, string[]>();
  for (const { name } of usable) {
    if (!isDirectory(name)) continue;
    const root = rootOf(name, roots);
    if (root === undefined || name === root) continue;
    const paths = byRoot.get(root) ?? [];
    paths.push(name.slice(root.length, -1));
    byRoot.set(root, paths);
  }
  return byRoot;
}

function plannedSkill(root: string, problem: Problem | null): PlannedZipSkill {
  return {
    root,
    directoryName: basename(root.slice(0, -1)),
    skillMd: null,
    files: [],
    declaredBytes: 0,
    problem,
  };
}

function tooManyFiles(skill: PlannedZipSkill, limits: ArchiveLimits): Problem | null {
  if (skill.files.length <= limits.maxSkillFiles) return null;
  return {
    code: 'too_many_files',
    message: `the skill holds ${skill.files.length} files; at most ${limits.maxSkillFiles} are accepted`,
  };
}

/**
 * Two entries with one name, or a file where another entry needs a directory (a file inside it,
 * or a directory entry `data/` of its own), cannot both be stored: the skill is refused rather
 * than stored with one of them silently lost. Sorted, the same path twice are neighbours, and
 * the files inside `data/` come together, found by one binary search from a file `data`.
 */
function pathConflict(skill: PlannedZipSkill, directories: string[]): Problem | null {
  const sorted = skill.files.map(({ relativePath }) => relativePath).sort();
  for (const [index, path] of sorted.entries()) {
    if (path === sorted[index + 1]) {
      return { code: 'path_conflict', message: `the archive holds ${skill.root}${path} twice` };
    }
    // No file's path ends in `/`, so the first one after `data/` is the first inside it.
    const inside = `${path}/`;
    if (sorted[lastAtOrBefore(sorted, inside) + 1]?.startsWith(inside)) {
      return {
        code: 'path_conflict',
        message: `${skill.root}${path} is both a file and a directory in the archive`,
      };
    }
  }
  const fileAndDirectory = directories.find((path) => sorted[lastAtOrBefore(sorted, path)] === path);
  if (fileAndDirectory === undefined) return null;
  return {
    code: 'path_conflict',
    message: `${skill.root}${fileAndDirectory} is both a file and a directory in the archive`,
  };
}

/**
 * A file whose path in the skill begins with a version folder's name (`.atrium-version-…/`):
 * that name is where replaces store a skill's versions, inside its folder (src/services/skill-storage.ts),
 * and reads of the skill leave such folders out, so the file could never be read back.
 */
function reservedPath(skill: PlannedZipSkill): Problem | null {
  for (const { relativePath } of skill.files) {
    const reason = reservedPathProblem(relativePath);
    if (reason) return { code: 'reserved_path', message: `${skill.root}${reason}` };
  }
  return null;
}

/**
 * A refused entry inside a skill refuses that skill (its first problem wins); one outside every
 * skill is a problem of the archive, returned.
 */
function chargeRefusedEntries(refused: Array<NamedEntry & { problem: Problem }>, skills: PlannedZipSkill[]) {
  const loose: Problem[] = [];
  const byRoot = new Map(skills.map((skill) => [skill.root, skill]));
  const roots = [...byRoot.keys()];
  for (const { name, problem } of refused) {
    const root = rootOf(name, roots);
    const skill = root === undefined ? undefined : byRoot.get(root);
    if (skill) skill.problem ??= problem;
    else loose.push(problem);
  }
  return loose;
}

/**
 * Directories that were meant as skills but hold no `SKILL.md`: those beside the skill
 * directories (or at the top when there is no skill at all), so that they are reported rather
 * than ignored. Hidden directories (`.git/`) and those on the way down to a skill are not.
 *
 * A name outside every skill can lie in only one such directory: the first of its directories
 * that leads to no skill, whose parent is the deepest directory it shares with a skill root.
 * That root sorts right before or right after the name, so two comparisons find it.
 */
function directoriesWithoutSkillMd(usable: NamedEntry[], roots: string[]): string[] {
  if (roots.includes('')) return [];
  const containers = new Set(roots.length === 0 ? [''] : roots.map((root) => dirname(root.slice(0, -1))));
  const missing = new Set<string>();
  for (const { name } of usable) {
    const at = lastAtOrBefore(roots, name);
    const before = roots[at];
    if (before !== undefined && name.startsWith(before)) continue;
    const [sharedBefore, sharedAfter] = [sharedDirectory(name, before), sharedDirectory(name, roots[at + 1])];
    const shared = sharedBefore.length > sharedAfter.length ? sharedBefore : sharedAfter;
    if (!containers.has(shared)) continue;
    const slash = name.indexOf('/', shared.length);
    if (slash < 0 || name[shared.length] === '.') continue;
    missing.add(name.slice(0, slash + 1));
  }
  return [...missing].sort();
}

/** The deepest directory two names both lie in (or are): `a/b/c` and `a/bc/` → `a/`. */
function sharedDirectory(a: string, b = ''): string {
  let same = 0;
  while (same < a.length && same < b.length && a[same] === b[same]) same++;
  return a.slice(0, a.lastIndexOf('/', same - 1) + 1);
}

function missingSkill(directory: string): PlannedZipSkill {
  return plannedSkill(directory, {
    code: 'missing_skill_md',
    message: `directory ${directory} has no SKILL.md`,
  });
}

/** Inflates one file of a planned skill, checked (see `entryStream`). */
export function skillFileStream(zip: ZipFile, root: string, file: SkillEntry): Promise<Readable> {
  return entryStream(zip, file.entry, `${root}${file.relativePath}`);
}

/**
 * Inflates every file of a planned skill without writing anything, counting the real bytes,
 * and returns the text of its SKILL.md. This is the check that runs before anything is stored.
 */
export async function verifySkillContent(zip: ZipFile, skill: PlannedZipSkill, limits: ArchiveLimits) {
  if (skill.skillMd && skill.skillMd.declaredSize > limits.maxSkillMdBytes) {
    throw new ArchiveProblem(
      'skill_md_too_large',
      `SKILL.md is ${skill.skillMd.declaredSize} bytes; at most ${limits.maxSkillMdBytes} are read`,
    );
  }
  let skillMdText = '';
  for (const file of skill.files) {
    const label = `${skill.root}${file.relativePath}`;
    // Only SKILL.md is kept; every other file is read to the end and dropped.
    const keep = file === skill.skillMd;
    const data = isSmallEntry(file.entry)
      ? await readSmallEntry(zip, file.entry, label)
      : await drain(await entryStream(zip, file.entry, label), keep, label);
    if (keep) skillMdText = decodeText(data, limits);
  }
  return skillMdText;
}

/** Reads a stream to its end; its bytes when `keep`, else an empty buffer. */
async function drain(stream: Readable, keep: boolean, label: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  try {
    await pipeline(
      stream,
      new Writable({
        write(chunk: Buffer, _encoding, callback) {
          if (keep) chunks.push(chunk);
          callback();
        },
      }),
    );
  } catch (error) {
    throw contentProblem(error, label);
  }
  return Buffer.concat(chunks);
}

/** UTF-8 text of a skill file; a byte-order mark is dropped. */
export function decodeText(bytes: Buffer, limits: ArchiveLimits): string {
  if (bytes.length > limits.maxSkillMdBytes) {
    throw new ArchiveProblem(
      'skill_md_too_large',
      `SKILL.md is ${bytes.length} bytes; at most ${limits.maxSkillMdBytes} are read`,
    );
  }
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw new ArchiveProblem('invalid_skill_md', 'SKILL.md is not UTF-8 text');
  }
}
