import fs from 'node:fs';
import zlib from 'node:zlib';
import { Readable, Transform, type TransformCallback, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import yauzl, { type Entry, type ZipFile } from 'yauzl';

/** The limits an archive is checked against before anything of it is stored (docs/skills.md). */
export interface ArchiveLimits {
  /** Entries (files and directories) one archive may list. */
  maxEntries: number;
  /** Decompressed bytes one skill may hold. */
  maxSkillBytes: number;
  /** Decompressed bytes one request may hold, across all its archives and markdown parts. */
  maxRequestBytes: number;
  /** Bytes of one SKILL.md (or standalone markdown part); it is read into memory to parse. */
  maxSkillMdBytes: number;
}

export const DEFAULT_ARCHIVE_LIMITS: ArchiveLimits = {
  maxEntries: 10_000,
  maxSkillBytes: 64 * 1024 * 1024,
  maxRequestBytes: 256 * 1024 * 1024,
  maxSkillMdBytes: 1024 * 1024,
};

/** Why a skill, or a whole archive, was refused: the `code` and `message` of an `errors` item. */
export interface Problem {
  code: string;
  message: string;
}

export class ArchiveProblem extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ArchiveProblem';
  }
}

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

const MAX_SEGMENT_BYTES = 255;
const MAX_NAME_BYTES = 900;
const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;
const S_IFLNK = 0o120000;
const FLAG_ENCRYPTED = 0x1;

/**
 * Why an archive entry name is unsafe to use as a storage path, or null when it is safe. Names
 * are checked raw (before any normalization), so `a\..\b` is refused rather than rewritten.
 */
export function unsafeEntryNameReason(name: string): string | null {
  if (name.length === 0) return 'empty entry name';
  if (name.includes('\0')) return 'entry name contains a NUL byte';
  if (name.includes('\\')) return 'entry name contains a backslash';
  if (name.startsWith('/') || /^[a-zA-Z]:/.test(name)) return 'entry name is an absolute path';
  if (/[\u0000-\u001f\u007f]/.test(name)) return 'entry name contains a control character';
  const segments = name.endsWith('/') ? name.slice(0, -1).split('/') : name.split('/');
  if (segments.includes('..')) return 'entry name climbs out of the archive (`..`)';
  if (segments.includes('.')) return 'entry name has a `.` segment';
  if (segments.includes('')) return 'entry name has an empty segment';
  // Storage limits: a file name of at most 255 bytes on common filesystems; S3 keys of 1,024.
  if (segments.some((segment) => Buffer.byteLength(segment) > MAX_SEGMENT_BYTES)) {
    return `entry name has a segment longer than ${MAX_SEGMENT_BYTES} bytes`;
  }
  if (Buffer.byteLength(name) > MAX_NAME_BYTES) return `entry name is longer than ${MAX_NAME_BYTES} bytes`;
  return null;
}

/** The file type bits of a Unix-made entry (0 when the archive does not record one). */
function unixFileType(entry: Entry): number {
  return ((entry.externalFileAttributes >>> 16) & S_IFMT) >>> 0;
}

/** A problem with the entry itself (not its content): unsafe name, link, device, encryption. */
export function entryProblem(entry: Entry, name: string): Problem | null {
  const unsafe = unsafeEntryNameReason(name);
  if (unsafe) return { code: 'unsafe_path', message: `${unsafe}: ${printable(name)}` };
  const type = unixFileType(entry);
  if (type === S_IFLNK) return { code: 'symlink', message: `entry is a symbolic link: ${name}` };
  if (type !== 0 && type !== S_IFREG && type !== S_IFDIR) {
    return { code: 'special_file', message: `entry is not a regular file: ${name}` };
  }
  if (entry.generalPurposeBitFlag & FLAG_ENCRYPTED) {
    return { code: 'encrypted_entry', message: `entry is encrypted: ${name}` };
  }
  if (entry.compressionMethod !== 0 && entry.compressionMethod !== 8) {
    return {
      code: 'unsupported_compression',
      message: `entry uses compression method ${entry.compressionMethod} (only stored and deflate are read): ${name}`,
    };
  }
  return null;
}

function printable(name: string): string {
  return JSON.stringify(name)
    .slice(1, -1)
    .replace(/[\u0000-\u001f]/g, '?');
}

function isJunk(name: string): boolean {
  return name.startsWith('__MACOSX/') || name === '.DS_Store' || name.endsWith('/.DS_Store');
}

const READ_CHUNK_BYTES = 256 * 1024;

/**
 * Reads the archive file with positional reads of up to 256 KB (yauzl's own file reader reads in
 * 64 KB steps); one descriptor for the whole archive, closed when the zip is closed.
 */
class ArchiveFileReader extends yauzl.RandomAccessReader {
  constructor(private readonly fd: number) {
    super();
  }

  override _readStreamForRange(start: number, end: number): Readable {
    const fd = this.fd;
    let position = start;
    return new Readable({
      highWaterMark: READ_CHUNK_BYTES,
      read() {
        const length = Math.min(READ_CHUNK_BYTES, end - position);
        if (length <= 0) {
          this.push(null);
          return;
        }
        const buffer = Buffer.allocUnsafe(length);
        fs.read(fd, buffer, 0, length, position, (error, bytesRead) => {
          if (error) return this.destroy(error);
          if (bytesRead === 0) return this.destroy(new Error('unexpected end of the archive file'));
          position += bytesRead;
          this.push(bytesRead === length ? buffer : buffer.subarray(0, bytesRead));
        });
      },
    });
  }

  override read(
    buffer: Buffer,
    offset: number,
    length: number,
    position: number,
    callback: (error: Error | null) => void,
  ) {
    fs.read(this.fd, buffer, offset, length, position, (error, bytesRead) => {
      if (error) return callback(error);
      callback(bytesRead < length ? new Error('unexpected end of the archive file') : null);
    });
  }

  override close(callback: (error: Error | null) => void) {
    fs.close(this.fd, callback);
  }
}

async function openZip(zipPath: string): Promise<ZipFile> {
  const fd = await new Promise<number>((resolve, reject) =>
    fs.open(zipPath, 'r', (error, opened) => (error ? reject(error) : resolve(opened))),
  );
  try {
    const { size } = await fs.promises.stat(zipPath);
    return await new Promise<ZipFile>((resolve, reject) => {
      yauzl.fromRandomAccessReader(
        new ArchiveFileReader(fd),
        size,
        // Names are decoded and checked here, not by yauzl, so that one unsafe entry refuses its
        // skill instead of the whole archive; sizes are checked by counting the inflated bytes.
        {
          lazyEntries: true,
          autoClose: false,
          decodeStrings: false,
          validateEntrySizes: false,
          strictFileNames: true,
        },
        (error, zip) => (error || !zip ? reject(error) : resolve(zip)),
      );
    });
  } catch (error) {
    fs.close(fd, () => {});
    throw error;
  }
}

function readAllEntries(zip: ZipFile): Promise<Entry[]> {
  return new Promise((resolve, reject) => {
    const entries: Entry[] = [];
    zip.on('entry', (entry: Entry) => {
      entries.push(entry);
      zip.readEntry();
    });
    zip.once('end', () => resolve(entries));
    zip.once('error', reject);
    zip.readEntry();
  });
}

function entryName(entry: Entry): string {
  const raw = entry.fileName as unknown as Buffer;
  // Strict: keeps backslashes as they are so that they can be refused.
  return yauzl.getFileNameLowLevel(entry.generalPurposeBitFlag, raw, entry.extraFields, true);
}

const dirname = (name: string) => name.slice(0, name.lastIndexOf('/') + 1);
const basename = (name: string) => name.slice(name.lastIndexOf('/') + 1);

/**
 * Reads an archive's central directory and works out its skills: every directory holding a
 * `SKILL.md` (the outermost one when they nest; the archive root when `SKILL.md` is there),
 * the files of each, and the directories next to them that lack a `SKILL.md`. Nothing is
 * inflated here. Throws ArchiveProblem when the archive as a whole cannot be used.
 */
export async function planArchive(zipPath: string, limits: ArchiveLimits): Promise<ArchivePlan> {
  let zip: ZipFile;
  try {
    zip = await openZip(zipPath);
  } catch (error) {
    throw new ArchiveProblem('invalid_archive', `not a readable zip archive (${(error as Error).message})`);
  }
  try {
    if (zip.entryCount > limits.maxEntries) {
      throw new ArchiveProblem(
        'too_many_entries',
        `the archive lists ${zip.entryCount} entries; at most ${limits.maxEntries} are read`,
      );
    }
    let entries: Entry[];
    try {
      entries = await readAllEntries(zip);
    } catch (error) {
      throw new ArchiveProblem('invalid_archive', `not a readable zip archive (${(error as Error).message})`);
    }
    return { zip, ...groupEntries(entries.map((entry) => ({ entry, name: entryName(entry) }))) };
  } catch (error) {
    zip.close();
    throw error;
  }
}

interface NamedEntry {
  entry: Entry;
  name: string;
}

function groupEntries(named: NamedEntry[]): Omit<ArchivePlan, 'zip'> {
  const safe: NamedEntry[] = [];
  const unsafe: Array<NamedEntry & { problem: Problem }> = [];
  for (const item of named) {
    const problem = entryProblem(item.entry, item.name);
    if (problem) unsafe.push({ ...item, problem });
    else if (!isJunk(item.name)) safe.push(item);
  }

  const skillMdNames = safe.filter((e) => !e.name.endsWith('/') && basename(e.name) === 'SKILL.md');
  let roots = [...new Set(skillMdNames.map((e) => dirname(e.name)))];
  // A skill's whole tree is its content: a SKILL.md inside another skill is one of its files.
  if (roots.includes('')) roots = [''];
  else roots = roots.filter((root) => !roots.some((other) => other !== root && root.startsWith(other)));
  roots.sort();

  const skills = new Map<string, PlannedZipSkill>();
  for (const root of roots) {
    const trimmed = root.slice(0, -1);
    skills.set(root, {
      root,
      directoryName: basename(trimmed),
      skillMd: null,
      files: [],
      declaredBytes: 0,
      problem: null,
    });
  }
  const owner = (name: string) => roots.find((root) => name.startsWith(root));

  for (const { entry, name } of safe) {
    const root = owner(name);
    if (root === undefined || name.endsWith('/')) continue;
    const skill = skills.get(root)!;
    const file: SkillEntry = {
      entry,
      relativePath: name.slice(root.length),
      declaredSize: entry.uncompressedSize,
    };
    if (file.relativePath === 'SKILL.md') skill.skillMd = file;
    skill.files.push(file);
    skill.declaredBytes += entry.uncompressedSize;
  }

  // Two entries with one name, or a file where another entry needs a directory, cannot both be
  // stored: the skill is refused rather than stored with one of them silently lost.
  for (const skill of skills.values()) {
    const paths = new Set<string>();
    for (const file of skill.files) {
      if (paths.has(file.relativePath)) {
        skill.problem ??= {
          code: 'path_conflict',
          message: `the archive holds ${skill.root}${file.relativePath} twice`,
        };
      }
      paths.add(file.relativePath);
    }
    for (const file of skill.files) {
      const segments = file.relativePath.split('/');
      for (let depth = 1; depth < segments.length; depth++) {
        const ancestor = segments.slice(0, depth).join('/');
        if (paths.has(ancestor)) {
          skill.problem ??= {
            code: 'path_conflict',
            message: `${skill.root}${ancestor} is both a file and a directory in the archive`,
          };
        }
      }
    }
  }

  const looseProblems: Problem[] = [];
  for (const { name, problem } of unsafe) {
    const root = owner(name);
    const skill = root === undefined ? undefined : skills.get(root);
    if (skill) skill.problem ??= problem;
    else looseProblems.push(problem);
  }

  // Directories beside skill directories (or at the top when there is no skill at all) that
  // hold no SKILL.md were meant as skills: report them rather than ignore them silently.
  const containers =
    roots.length === 0
      ? ['']
      : roots.includes('')
        ? []
        : [...new Set(roots.map((root) => dirname(root.slice(0, -1))))];
  const missing = new Set<string>();
  for (const { name } of safe) {
    for (const container of containers) {
      if (!name.startsWith(container) || roots.some((root) => container.startsWith(root) && root !== ''))
        continue;
      const rest = name.slice(container.length);
      const slash = rest.indexOf('/');
      if (slash <= 0) continue;
      const directory = `${container}${rest.slice(0, slash + 1)}`;
      if (rest.startsWith('.') || skills.has(directory) || roots.some((root) => root.startsWith(directory)))
        continue;
      missing.add(directory);
    }
  }
  const missingSkills: PlannedZipSkill[] = [...missing].sort().map((directory) => ({
    root: directory,
    directoryName: basename(directory.slice(0, -1)),
    skillMd: null,
    files: [],
    declaredBytes: 0,
    problem: { code: 'missing_skill_md', message: `directory ${directory} has no SKILL.md` },
  }));

  if (roots.length === 0 && missingSkills.length === 0 && looseProblems.length === 0) {
    looseProblems.push({ code: 'no_skills', message: 'the archive holds no SKILL.md' });
  }
  return { skills: [...skills.values(), ...missingSkills], looseProblems };
}

/**
 * Counts the bytes that really come out of an entry and fails as soon as they pass what the
 * archive declared, so an entry that lies about its size is stopped after `declared` bytes.
 */
export class ByteCounter extends Transform {
  count = 0;

  constructor(
    private readonly declared: number,
    private readonly label: string,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.count += chunk.length;
    if (this.count > this.declared) {
      callback(
        new ArchiveProblem(
          'size_mismatch',
          `entry ${this.label} inflates past the ${this.declared} bytes its header declares (a zip bomb?)`,
        ),
      );
      return;
    }
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    if (this.count !== this.declared) {
      callback(
        new ArchiveProblem(
          'size_mismatch',
          `entry ${this.label} inflates to ${this.count} bytes, its header declares ${this.declared}`,
        ),
      );
      return;
    }
    callback();
  }
}

function openEntryStream(zip: ZipFile, entry: Entry): Promise<NodeJS.ReadableStream> {
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry, (error, stream) => (error || !stream ? reject(error) : resolve(stream)));
  });
}

function contentProblem(error: unknown, label: string): ArchiveProblem {
  if (error instanceof ArchiveProblem) return error;
  return new ArchiveProblem('corrupt_entry', `entry ${label} cannot be read (${(error as Error).message})`);
}

/** Entries up to this size (compressed and declared) are read and inflated in one step. */
const SMALL_ENTRY_BYTES = 256 * 1024;

function readLocalHeader(zip: ZipFile, entry: Entry): Promise<number> {
  return new Promise((resolve, reject) =>
    zip.readLocalFileHeader(entry, { minimal: true }, (error, header) =>
      error ? reject(error) : resolve(header.fileDataStart),
    ),
  );
}

/**
 * A small entry in one read and one bounded inflate: most skill files are small, and a stream
 * per entry (a zlib instance, several thread-pool hops) costs more than the bytes themselves.
 * The inflate stops one byte past the declared size, so a lying entry costs no more than that.
 */
async function readSmallEntry(zip: ZipFile, file: SkillEntry, label: string): Promise<Buffer> {
  const { entry } = file;
  const dataStart = await readLocalHeader(zip, entry);
  const compressed = Buffer.allocUnsafe(entry.compressedSize);
  const reader = (zip as unknown as { reader: yauzl.RandomAccessReader }).reader;
  await new Promise<void>((resolve, reject) =>
    reader.read(compressed, 0, compressed.length, dataStart, (error) => (error ? reject(error) : resolve())),
  );
  let data: Buffer;
  if (entry.compressionMethod === 0) {
    data = compressed;
  } else {
    try {
      data = zlib.inflateRawSync(compressed, { maxOutputLength: file.declaredSize + 1 });
    } catch (error) {
      if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
        throw new ArchiveProblem(
          'size_mismatch',
          `entry ${label} inflates past the ${file.declaredSize} bytes its header declares (a zip bomb?)`,
        );
      }
      throw error;
    }
  }
  if (data.length !== file.declaredSize) {
    throw new ArchiveProblem(
      'size_mismatch',
      `entry ${label} inflates to ${data.length} bytes, its header declares ${file.declaredSize}`,
    );
  }
  return data;
}

const isSmall = (file: SkillEntry) =>
  file.entry.compressedSize <= SMALL_ENTRY_BYTES && file.declaredSize <= SMALL_ENTRY_BYTES;

/**
 * Inflates one entry of a skill, checked: the result is exactly the declared number of bytes.
 * Rejects with an ArchiveProblem when the entry is corrupt or lies about its size.
 */
export async function entryStream(zip: ZipFile, root: string, file: SkillEntry): Promise<Readable> {
  const label = `${root}${file.relativePath}`;
  if (isSmall(file)) {
    try {
      return Readable.from([await readSmallEntry(zip, file, label)], { objectMode: false });
    } catch (error) {
      throw contentProblem(error, label);
    }
  }
  let source: NodeJS.ReadableStream;
  try {
    source = await openEntryStream(zip, file.entry);
  } catch (error) {
    throw contentProblem(error, label);
  }
  const counter = new ByteCounter(file.declaredSize, label);
  // Corrupt deflate data surfaces as an error of the source; hand it to the counter so the
  // consumer sees one stream that fails with a readable reason.
  source.on('error', (error) => counter.destroy(contentProblem(error, label)));
  return source.pipe(counter);
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
    const isSkillMd = file === skill.skillMd;
    if (isSmall(file)) {
      const data = await readSmallEntry(zip, file, `${skill.root}${file.relativePath}`).catch(
        (error: unknown) => {
          throw contentProblem(error, `${skill.root}${file.relativePath}`);
        },
      );
      if (isSkillMd) skillMdText = decodeText(data, limits);
      continue;
    }
    const stream = await entryStream(zip, skill.root, file);
    const chunks: Buffer[] = [];
    try {
      await pipeline(
        stream,
        new Writable({
          write(chunk: Buffer, _encoding, callback) {
            if (isSkillMd) chunks.push(chunk);
            callback();
          },
        }),
      );
    } catch (error) {
      throw contentProblem(error, `${skill.root}${file.relativePath}`);
    }
    if (isSkillMd) skillMdText = decodeText(Buffer.concat(chunks), limits);
  }
  return skillMdText;
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
