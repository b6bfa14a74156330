import fs from 'node:fs';
import zlib from 'node:zlib';
import { Readable, Transform, type TransformCallback } from 'node:stream';
import yauzl, { type Entry, type ZipFile } from 'yauzl';

/*
 * Reading zip archives safely: the central directory with a cap on entries, each entry's name
 * as stored (so the caller can refuse it rather than have it rewritten), what kind of entry it
 * is, and its bytes inflated with a check that they are exactly as many as the header says.
 * Nothing here knows what the archive is for.
 */

export type { Entry, ZipFile };

/** Why an archive, or one entry of it: a `code` and a message fit to show the uploader. */
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

/** An entry with its name decoded (raw: backslashes and `..` kept, for the caller to refuse). */
export interface NamedEntry {
  entry: Entry;
  name: string;
}

const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;
const S_IFLNK = 0o120000;
const FLAG_ENCRYPTED = 0x1;

/** The file type bits of a Unix-made entry (0 when the archive does not record one). */
function unixFileType(entry: Entry): number {
  return ((entry.externalFileAttributes >>> 16) & S_IFMT) >>> 0;
}

/** Why an entry cannot be read as a plain file or directory (link, device, encryption), or null. */
export function entryKindProblem(entry: Entry, name: string): Problem | null {
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
        // Names are decoded and checked by the caller, not by yauzl, so that one unsafe entry can
        // be refused on its own instead of the whole archive; sizes are checked by counting the
        // inflated bytes.
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

/** General purpose bit 11: the entry's name is UTF-8. */
const FLAG_UTF8 = 0x800;
/** The Info-ZIP Unicode Path extra field, a UTF-8 name beside the header's. */
const UNICODE_PATH_FIELD = 0x7075;
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

function entryName(entry: Entry): string {
  const raw = entry.fileName as unknown as Buffer;
  // Strict: keeps backslashes as they are so that they can be refused. NFC, as project file names
  // are: a macOS zip's decomposed `é` and a typed one are one path (the same path twice is then a
  // conflict), not two files that list alike.
  return rawName(entry, raw).normalize('NFC');
}

/**
 * A name without the UTF-8 flag is CP437 by the zip specification, but Info-ZIP's zip on Linux
 * and macOS's Archive Utility write UTF-8 names without it: read as CP437, `é` became `├⌐`. So an
 * unflagged name that is valid UTF-8 and not plain ASCII is read as UTF-8 (as `unzip` on a UTF-8
 * system and most archive tools do); CP437 text with accents is almost never valid UTF-8.
 */
function rawName(entry: Entry, raw: Buffer): string {
  const flagged = (entry.generalPurposeBitFlag & FLAG_UTF8) !== 0;
  const unicodeField = entry.extraFields.some((field) => field.id === UNICODE_PATH_FIELD);
  if (!flagged && !unicodeField && raw.some((byte) => byte >= 0x80)) {
    try {
      return strictUtf8.decode(raw);
    } catch {
      // Not UTF-8: CP437, below.
    }
  }
  return yauzl.getFileNameLowLevel(entry.generalPurposeBitFlag, raw, entry.extraFields, true);
}

/**
 * What a failure to read the archive is: the client's (not a zip, truncated, corrupt) or, when
 * a file operation failed (ENOENT, EMFILE, EIO: an error with a `syscall`), the server's, which
 * goes on as it is: never the client's `invalid_archive`, and never a server path in its message.
 */
const unreadable = (error: unknown) =>
  (error as NodeJS.ErrnoException | undefined)?.syscall !== undefined
    ? error
    : new ArchiveProblem('invalid_archive', `not a readable zip archive (${(error as Error).message})`);

/**
 * Opens a zip file and reads its central directory (nothing is inflated). Throws ArchiveProblem
 * when the file is not a readable zip or lists more than `maxEntries` entries. `admit` is given
 * the number of entries before any is read, and throws to refuse them (a caller's budget across
 * archives). The caller closes the returned zip.
 */
export async function openZipArchive(
  zipPath: string,
  maxEntries: number,
  admit: (entryCount: number) => void = () => {},
): Promise<{ zip: ZipFile; entries: NamedEntry[] }> {
  let zip: ZipFile;
  try {
    zip = await openZip(zipPath);
  } catch (error) {
    throw unreadable(error);
  }
  try {
    if (zip.entryCount > maxEntries) {
      throw new ArchiveProblem(
        'too_many_entries',
        `the archive lists ${zip.entryCount} entries; at most ${maxEntries} are read`,
      );
    }
    admit(zip.entryCount);
    const entries = await readAllEntries(zip).catch((error: unknown) => {
      throw unreadable(error);
    });
    return { zip, entries: entries.map((entry) => ({ entry, name: entryName(entry) })) };
  } catch (error) {
    zip.close();
    throw error;
  }
}

const inflatesPast = (label: string, declared: number) =>
  new ArchiveProblem(
    'size_mismatch',
    `entry ${label} inflates past the ${declared} bytes its header declares (a zip bomb?)`,
  );

const inflatesTo = (label: string, count: number, declared: number) =>
  new ArchiveProblem(
    'size_mismatch',
    `entry ${label} inflates to ${count} bytes, its header declares ${declared}`,
  );

/**
 * Counts the bytes that really come out of an entry and fails as soon as they pass what the
 * archive declared, so an entry that lies about its size is stopped after `declared` bytes.
 */
class ByteCounter extends Transform {
  count = 0;

  constructor(
    private readonly declared: number,
    private readonly label: string,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.count += chunk.length;
    if (this.count > this.declared) callback(inflatesPast(this.label, this.declared));
    else callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    if (this.count !== this.declared) callback(inflatesTo(this.label, this.count, this.declared));
    else callback();
  }
}

function openEntryStream(zip: ZipFile, entry: Entry): Promise<NodeJS.ReadableStream> {
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry, (error, stream) => (error || !stream ? reject(error) : resolve(stream)));
  });
}

/** An ArchiveProblem as it is; anything else (corrupt data, a read error) as `corrupt_entry`. */
export function contentProblem(error: unknown, label: string): ArchiveProblem {
  if (error instanceof ArchiveProblem) return error;
  return new ArchiveProblem('corrupt_entry', `entry ${label} cannot be read (${(error as Error).message})`);
}

/** Entries up to this size (compressed and declared) are read and inflated in one step. */
const SMALL_ENTRY_BYTES = 256 * 1024;

/** Whether `readSmallEntry` takes the entry (else stream it with `entryStream`). */
export const isSmallEntry = (entry: Entry) =>
  entry.compressedSize <= SMALL_ENTRY_BYTES && entry.uncompressedSize <= SMALL_ENTRY_BYTES;

function readLocalHeader(zip: ZipFile, entry: Entry): Promise<number> {
  return new Promise((resolve, reject) =>
    zip.readLocalFileHeader(entry, { minimal: true }, (error, header) =>
      error ? reject(error) : resolve(header.fileDataStart),
    ),
  );
}

/**
 * A small entry in one read and one bounded inflate: most entries are small, and a stream per
 * entry (a zlib instance, several thread-pool hops) costs more than the bytes themselves. The
 * inflate stops one byte past the declared size, so a lying entry costs no more than that.
 * Rejects with an ArchiveProblem; `label` names the entry in its message.
 */
export async function readSmallEntry(zip: ZipFile, entry: Entry, label: string): Promise<Buffer> {
  const declared = entry.uncompressedSize;
  try {
    const dataStart = await readLocalHeader(zip, entry);
    const compressed = Buffer.allocUnsafe(entry.compressedSize);
    const reader = (zip as unknown as { reader: yauzl.RandomAccessReader }).reader;
    await new Promise<void>((resolve, reject) =>
      reader.read(compressed, 0, compressed.length, dataStart, (error) =>
        error ? reject(error) : resolve(),
      ),
    );
    const data = entry.compressionMethod === 0 ? compressed : inflateAtMost(compressed, declared, label);
    if (data.length !== declared) throw inflatesTo(label, data.length, declared);
    return data;
  } catch (error) {
    throw contentProblem(error, label);
  }
}

function inflateAtMost(compressed: Buffer, declared: number, label: string): Buffer {
  try {
    return zlib.inflateRawSync(compressed, { maxOutputLength: declared + 1 });
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw inflatesPast(label, declared);
    throw error;
  }
}

/**
 * Inflates one entry, checked: the stream gives exactly the declared number of bytes or fails
 * with an ArchiveProblem (corrupt data, or an entry that lies about its size).
 */
export async function entryStream(zip: ZipFile, entry: Entry, label: string): Promise<Readable> {
  if (isSmallEntry(entry)) {
    return Readable.from([await readSmallEntry(zip, entry, label)], { objectMode: false });
  }
  let source: NodeJS.ReadableStream;
  try {
    source = await openEntryStream(zip, entry);
  } catch (error) {
    throw contentProblem(error, label);
  }
  const counter = new ByteCounter(entry.uncompressedSize, label);
  // Corrupt deflate data surfaces as an error of the source; hand it to the counter so the
  // consumer sees one stream that fails with a readable reason.
  source.on('error', (error) => counter.destroy(contentProblem(error, label)));
  return source.pipe(counter);
}
