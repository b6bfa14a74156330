import { randomBytes } from 'node:crypto';
import {
  type BigIntStats,
  type Dirent,
  close as closeCallback,
  createWriteStream,
  fstat as fstatCallback,
  fsync as fsyncCallback,
  futimes as futimesCallback,
  open as openCallback,
  read as readCallback,
  readFile as readFileCallback,
  stat as statCallback,
} from 'node:fs';
import fs, { type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { ApiError, errors } from '../errors.js';
import type { Clock } from '../ids.js';
import {
  preconditionFailed,
  type ObjectInfo,
  type ObjectStore,
  type PutOptions,
  type SignedDownloadOptions,
  type SignedUploadOptions,
  type StoreLog,
  type WriteCondition,
} from './object-store.js';
import { directoriesChanged, syncDirectory } from './directory-sync.js';
import { hasErrorCode as isCode, unlessMissing } from './fs-errors.js';
import { copyInto, meterFor } from './streams.js';
import { FlushBehind } from './flush-behind.js';
import { isSafeKey, keySegments, resolveSafePath, resolveSafePrefix } from './safe-path.js';
import { createSignedUrl } from './signed-url.js';
import { makeDirectory } from '../make-directory.js';
import { writeSmallFile } from './small-file.js';

export interface FsObjectStoreOptions {
  /**
   * Everything lives below this folder: `data/` (objects), `versions/` (the metadata of each
   * object's version), `meta/` (sidecars of objects written before versions existed, read
   * only), `tmp/` (uploads in flight).
   */
  root: string;
  signingSecret: string;
  clock: Clock;
  /** Origin of signed URLs when set (ATRIUM_PUBLIC_URL); else `fallbackOrigin` (`http://HOST:PORT`). */
  publicUrl?: string;
  fallbackOrigin: string;
  /** Where faults that do not fail the operation are reported (a corrupt metadata record). */
  log?: StoreLog;
}

/**
 * What we know of an object beyond what the file system keeps. Sidecars of the old layout
 * (`meta/{key}`) are valid only while size and mtime match; version records carry the same
 * fields and are named after them (see `versionName`).
 */
interface Sidecar {
  contentType: string;
  etag: string;
  size: number;
  mtimeMs: number;
}

/**
 * The name of a version's metadata record: the data file's size and modification time to the
 * nanosecond. A write sets that time to a value of its own and claims the name exclusively
 * before its bytes become visible, so two writes never share a record, and the record found
 * for the file at a key is always the one of the write whose bytes it holds. Copies that keep
 * times (`cp -a`, `rsync -a`) keep the pairing.
 */
const versionName = (size: bigint | number, mtimeNs: bigint) => `${size}-${mtimeNs}.json`;

/** Records of writes that never became visible (a crash) are removed after this long. */
const STALE_VERSION_MS = 10 * 60 * 1000;

/** How many damaged records a store remembers having reported; past it the oldest is forgotten. */
const WARNED_RECORDS_KEPT = 1000;

// The callback forms are about twice as fast as node:fs/promises for many small reads (the
// promise readFile reads in several round trips); listing a project reads one stat and one
// sidecar per object, so this is most of what sync costs.
const statFast = promisify(statCallback);
const readFileFast = promisify(readFileCallback);
const openFast = promisify(openCallback);
const fstatFast = promisify(fstatCallback);
const readFast = promisify(readCallback);
const closeFast = promisify(closeCallback);
const futimesFast = promisify(futimesCallback);
const fsyncFast = promisify(fsyncCallback);

/** A file `list` found: its key, its path, and the folder of its version records. */
interface WalkedFile {
  key: string;
  file: string;
  versionDir: string;
}

/** How many objects `list` looks at at once. */
const LIST_BATCH = 256;

const statOrUndefined = (file: string): Promise<BigIntStats | undefined> =>
  unlessMissing(statFast(file, { bigint: true }), undefined);

/** The modification time in milliseconds as a plain `stat` reports it (fraction included). */
const floatMtimeMs = (stat: BigIntStats) =>
  Number(stat.mtimeNs / 1_000_000_000n) * 1e3 + Number(stat.mtimeNs % 1_000_000_000n) / 1e6;

/**
 * A modification time for a new version, in seconds: within the current second (`attempt`
 * seconds back on a retry), at a random point of it, so concurrent writes of equal size almost
 * never ask for the same record name (and when they do, the loser of the `link` asks again).
 */
const versionTime = (attempt: number) => Math.floor(Date.now() / 1000) - attempt + Math.random();

/**
 * A record file's path and state (inode, size, mtime): another write of it changes them. Undefined
 * when its stat fails: the read it serves must not fail for the sake of a log line.
 */
async function recordIdentity(file: string): Promise<string | undefined> {
  const stat = await statFast(file, { bigint: true }).catch(() => undefined);
  return stat && `${file}\0${stat.ino}-${stat.size}-${stat.mtimeNs}`;
}

/** A sidecar's fields, or undefined when the text is not one (logged by the caller). */
function parseSidecar(text: string): Sidecar | undefined {
  try {
    const parsed = JSON.parse(text) as Sidecar;
    return typeof parsed.etag === 'string' && typeof parsed.contentType === 'string' ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Waits for every step, then throws the first failure: a step still running when the write gives
 * up could recreate a temp file after the cleanup removed it.
 */
async function allOrFirstError(steps: (Promise<unknown> | undefined)[]): Promise<void> {
  const outcomes = await Promise.allSettled(steps);
  const failed = outcomes.find((outcome) => outcome.status === 'rejected');
  if (failed) throw failed.reason;
}

function pathConflict(key: string, cause: unknown): ApiError {
  return new ApiError(
    'bad_request',
    'The storage path conflicts with an existing file or folder of the same name',
    { storagePath: key },
    { cause },
  );
}

/**
 * The default backend: objects are files under the data dir, at their key's path, so an
 * operator can look at them. Writes go to `tmp/` and are renamed into place only when complete
 * and within their size, so a cut connection or a crash never leaves a partial object.
 */
export class FsObjectStore implements ObjectStore {
  readonly kind = 'fs' as const;
  private readonly dataRoot: string;
  private readonly versionsRoot: string;
  private readonly metaRoot: string;
  private readonly tmpRoot: string;
  /**
   * The version (`versionName`) of each object this store described, for `head` to tell one
   * that is still that version from a stat alone. Weak: an answer nobody holds is forgotten.
   */
  private readonly versionsDescribed = new WeakMap<ObjectInfo, string>();
  /** The last conditional write of each key waiting or running here (`conditionally`). */
  private readonly conditionalWrites = new Map<string, Promise<void>>();
  /** Damaged records already reported (`recordIdentity`), oldest first. */
  private readonly warnedRecords = new Set<string>();

  constructor(private readonly options: FsObjectStoreOptions) {
    const root = path.resolve(options.root);
    this.dataRoot = path.join(root, 'data');
    this.versionsRoot = path.join(root, 'versions');
    this.metaRoot = path.join(root, 'meta');
    this.tmpRoot = path.join(root, 'tmp');
  }

  /**
   * The bytes go to a temp file, which gets a modification time of its own and is flushed to
   * disk, and the version's metadata record to another, flushed meanwhile; then the record is
   * claimed (`versionName`); then one rename makes the bytes visible, and with them that record;
   * then the folders the rename (and the mkdir before it) changed are flushed, so the new name
   * survives a power cut. Concurrent writes to one key each land whole, the last rename wins, and
   * whoever reads the key gets the metadata of the write whose bytes it holds. A crash before the
   * rename leaves a temp file and maybe a record nobody reads, both swept later; never a torn
   * object or a record beside other bytes.
   */
  async put(key: string, body: Readable, options: PutOptions): Promise<ObjectInfo> {
    const dataPath = resolveSafePath(this.dataRoot, key);
    const versionDir = resolveSafePath(this.versionsRoot, key);
    const tmpName = `${Date.now()}-${randomBytes(8).toString('hex')}`;
    const tmpData = path.join(this.tmpRoot, `${tmpName}.data`);
    const tmpRecord = path.join(this.tmpRoot, `${tmpName}.version`);
    const meter = meterFor(options);
    const durable = options.durable !== false;
    // A fresh version id per write, not a content hash: hashing cost a third of upload
    // throughput, and any write is a change worth reporting (S3 multipart ETags behave alike).
    const etag = randomBytes(16).toString('hex');
    const recordOf = (stat: BigIntStats): Sidecar => ({
      contentType: options.contentType,
      etag,
      size: Number(stat.size),
      mtimeMs: Number(stat.mtimeMs),
    });
    let claimed: string | undefined;
    let moved = false;
    try {
      let stat: BigIntStats;
      // One descriptor from create to fsync: every file operation is a hop to the thread pool,
      // which costs more than a small object's bytes (a 200-skill upload makes 600 objects).
      const fd = await this.createTemp(tmpData);
      const sink = createWriteStream('', { fd, autoClose: false, highWaterMark: 1024 * 1024 });
      try {
        const flushing = durable ? new FlushBehind(tmpData, meter) : undefined;
        try {
          await copyInto(body, meter, sink);
        } finally {
          await flushing?.close();
        }
        if (options.exactBytes !== undefined && meter.bytes !== options.exactBytes) {
          throw errors.badRequest(
            `The body has ${meter.bytes} bytes but ${options.exactBytes} were declared; nothing was stored`,
          );
        }
        const time = versionTime(0);
        await futimesFast(fd, time, time);
        // The stat (size and time) is all the record needs, so the record reaches the disk while
        // the bytes do: the data on disk with that time before it becomes visible (a crash after
        // the rename never shows a torn file), the record so that it is not empty or half-written.
        stat = await fstatFast(fd, { bigint: true });
        await allOrFirstError([
          durable ? fsyncFast(fd) : undefined,
          writeSmallFile(tmpRecord, JSON.stringify(recordOf(stat)), durable),
        ]);
      } finally {
        // Ending the stream closes the descriptor, once a write in flight has ended (never
        // before: the number could be another file's by then); before the file is removed, or a
        // late write would go to a file no longer named. A failed close is not the write's.
        sink.on('error', () => {});
        sink.destroy();
        // Not `once(sink, 'close')`: it rejects on the close's own error, emitted before 'close'.
        if (!sink.closed) await new Promise<void>((resolve) => sink.once('close', () => resolve()));
      }
      for (let attempt = 1; ; attempt++) {
        const target = path.join(versionDir, versionName(stat.size, stat.mtimeNs));
        try {
          await fs.mkdir(versionDir, { recursive: true }).catch((error: unknown) => {
            throw isCode(error, 'ENOTDIR', 'EEXIST') ? pathConflict(key, error) : error;
          });
          // link, not rename: it fails when the name is taken, so no two writes share a record.
          // Its folders are not fsynced (that cost bulk uploads a third): a link lost in a power
          // cut leaves an object without a record, read with a `size-mtime` etag (docs/files.md).
          await fs.link(tmpRecord, target);
          claimed = target;
          break;
        } catch (error) {
          // A concurrent delete of this key (or of its folder's last file) may prune the folder
          // between mkdir and link: make it again.
          if (isCode(error, 'ENOENT') && attempt < 8) continue;
          if (!isCode(error, 'EEXIST') || attempt >= 8) throw error;
          // Another version has this time (or the file system keeps coarse times): another one,
          // which the record holds too.
          const time = versionTime(attempt);
          await fs.utimes(tmpData, time, time);
          stat = await fs.stat(tmpData, { bigint: true });
          await writeSmallFile(tmpRecord, JSON.stringify(recordOf(stat)), durable);
        }
      }
      const { replaced, created } = await this.conditionally(key, options.condition, async () => ({
        replaced: await statOrUndefined(dataPath),
        created: await this.moveIntoPlace(key, tmpData, dataPath, options.condition?.onlyIfAbsent ?? false),
      }));
      moved = true;
      const ours = claimed;
      claimed = undefined;
      // An fsync of the file does not keep its new name (ext4, xfs): without this, a power cut
      // after the caller was told the object is stored could lose it. A folder gone meanwhile
      // went with a concurrent delete of the key, and took the name with it.
      if (options.durable !== false) {
        await Promise.all(
          directoriesChanged(path.dirname(dataPath), created).map((dir) =>
            unlessMissing(syncDirectory(dir), undefined),
          ),
        );
      }
      await this.dropOtherVersions(key, versionDir, ours, replaced);
      return {
        key,
        size: Number(stat.size),
        etag,
        lastModified: new Date(Number(stat.mtimeMs)),
        contentType: options.contentType,
      };
    } finally {
      // The record's temp name is always left (a link gave the record its other name); the
      // data's only when the write failed before its rename.
      const leftovers = [unlessMissing(fs.unlink(tmpRecord), undefined)];
      if (!moved) leftovers.push(unlessMissing(fs.unlink(tmpData), undefined));
      // A write that failed before its rename gives its record back.
      if (claimed) {
        const record = claimed;
        leftovers.push(
          fs
            .rm(record, { force: true })
            .then(() => fs.rmdir(versionDir))
            .catch(() => {}),
        );
      }
      await Promise.all(leftovers);
    }
  }

  /**
   * After a write: the record of the version it replaced, the old layout's sidecar, and records
   * of writes that died before their rename (older than STALE_VERSION_MS) are removed. A record
   * younger than that may belong to a write about to rename, so it stays.
   */
  private async dropOtherVersions(
    key: string,
    versionDir: string,
    ours: string,
    replaced: BigIntStats | undefined,
  ): Promise<void> {
    const doomed = new Set<string>();
    if (replaced?.isFile()) doomed.add(path.join(versionDir, versionName(replaced.size, replaced.mtimeNs)));
    const cutoff = Date.now() - STALE_VERSION_MS;
    for (const entry of await unlessMissing(fs.readdir(versionDir, { withFileTypes: true }), [])) {
      if (!entry.isFile()) continue;
      const file = path.join(versionDir, entry.name);
      if (file === ours || doomed.has(file)) continue;
      const stat = await statOrUndefined(file);
      if (stat && Number(stat.mtimeMs) < cutoff) doomed.add(file);
    }
    doomed.delete(ours);
    await Promise.all([...doomed].map((file) => fs.rm(file, { force: true })));
    await fs.rm(resolveSafePath(this.metaRoot, key), { force: true }).catch(() => {});
  }

  /**
   * Temp files older than `olderThanMs` belong to writes that can no longer finish (a process
   * that crashed mid-upload), and so do version records whose bytes never became visible;
   * younger ones may be writes in flight on another process. Resolves with how many such files
   * it removed. Empty folders of `data/`, `meta/` and `versions/` go too (`sweepFolders`), and
   * are not counted: they are no upload's leftovers.
   */
  async sweepStaleTemp(olderThanMs = 60 * 60 * 1000, now = this.options.clock()): Promise<number> {
    let removed = 0;
    const cutoff = now.getTime() - olderThanMs;
    for (const name of await unlessMissing(fs.readdir(this.tmpRoot), [])) {
      const file = path.join(this.tmpRoot, name);
      // Gone meanwhile (a write finished, another process swept it): nothing to do.
      const stat = await unlessMissing(fs.stat(file), undefined);
      if (stat && stat.mtimeMs < cutoff) {
        await fs.rm(file, { force: true });
        removed++;
      }
    }
    removed += await this.sweepFolders(this.versionsRoot, cutoff, (dir, records) =>
      this.sweepOrphanVersions(dir, records, cutoff),
    );
    await this.sweepFolders(this.dataRoot, cutoff);
    await this.sweepFolders(this.metaRoot, cutoff);
    return removed;
  }

  /**
   * The folders below `root` (never `root` itself), depth first: `tidy`, when given, removes the
   * stale files of each and answers how many it removed; then a folder left empty is removed
   * when it had not changed since `cutoff` before the sweep looked in it (a younger one may be a
   * write's, made just before it renames or links its file in). A process killed between a
   * write's mkdir and its rename, or between a delete's removal of a folder's last file and its
   * pruning, leaves such folders; so does a power cut that lost a record's name but kept its
   * folder. A folder the sweep empties goes in the same sweep, and so does one above it left
   * empty. A write racing the removal of its folder (between its mkdir and its rename or link)
   * gets ENOENT and makes the folder again (`put`, as when a delete prunes it), and rmdir never
   * removes a folder a file has reached meanwhile. Answers how many files `tidy` removed.
   */
  private async sweepFolders(
    root: string,
    cutoff: number,
    tidy?: (dir: string, files: Dirent[]) => Promise<number>,
  ): Promise<number> {
    let removed = 0;
    /** Whether `dir` is gone. */
    const sweep = async (dir: string, isRoot: boolean): Promise<boolean> => {
      let before: BigIntStats | undefined;
      let entries: Dirent[];
      try {
        // Read before its entries: the sweep's own removals below change its modification time.
        before = isRoot ? undefined : await statOrUndefined(dir);
        if (!isRoot && !before?.isDirectory()) return false;
        entries = await unlessMissing(fs.readdir(dir, { withFileTypes: true }), []);
      } catch (error) {
        // A folder put there deeper than the longest path the system takes (as `walk`): left.
        if (isCode(error, 'ENAMETOOLONG')) return false;
        throw error;
      }
      const files = entries.filter((entry) => entry.isFile());
      let left = files.length;
      if (tidy && !isRoot && files.length > 0) {
        const tidied = await tidy(dir, files);
        removed += tidied;
        left -= tidied;
      }
      for (const entry of entries) {
        if (entry.isFile()) continue;
        // Anything else (a link, a socket) is not the sweep's: it keeps its folder.
        if (!entry.isDirectory() || !(await sweep(path.join(dir, entry.name), false))) left++;
      }
      if (isRoot || left > 0 || Number(before!.mtimeMs) >= cutoff) return false;
      try {
        await fs.rmdir(dir);
        return true;
      } catch (error) {
        // Gone meanwhile, or a write's file has reached it: not empty after all.
        if (isCode(error, 'ENOENT', 'ENOTEMPTY', 'EEXIST')) return false;
        throw error;
      }
    };
    await sweep(root, true);
    return removed;
  }

  /**
   * Of the version records in `dir` (a key's folder of `versions/`), removes those older than
   * `cutoff` that are not the record of the file now at the key; answers how many it removed.
   */
  private async sweepOrphanVersions(dir: string, records: Dirent[], cutoff: number): Promise<number> {
    const key = path.relative(this.versionsRoot, dir).split(path.sep).join('/');
    const current = await statOrUndefined(resolveSafePath(this.dataRoot, key));
    const live = current?.isFile() ? versionName(current.size, current.mtimeNs) : undefined;
    let removed = 0;
    for (const entry of records) {
      if (entry.name === live) continue;
      const file = path.join(dir, entry.name);
      const stat = await statOrUndefined(file);
      if (stat && Number(stat.mtimeMs) < cutoff) {
        await fs.rm(file, { force: true });
        removed++;
      }
    }
    return removed;
  }

  /** A new temp file's descriptor, open for writing; `tmp/` is made again when it is missing. */
  private async createTemp(file: string): Promise<number> {
    try {
      return await openFast(file, 'wx', 0o600);
    } catch (error) {
      if (!isCode(error, 'ENOENT')) throw error;
      await fs.mkdir(this.tmpRoot, { recursive: true });
      return await openFast(file, 'wx', 0o600);
    }
  }

  /**
   * Runs `move` (the write's step into place) once `condition` holds of the object in place:
   * else 412 and nothing moves. This process's conditional writes of one key take turns, so two
   * `If-Match` writes of one version here cannot both pass; across processes only
   * `If-None-Match: *` is atomic (the move is then a link, which fails on a taken name).
   */
  private async conditionally<T>(
    key: string,
    condition: WriteCondition | undefined,
    move: () => Promise<T>,
  ): Promise<T> {
    if (!condition) return await move();
    const before = this.conditionalWrites.get(key);
    let done!: () => void;
    const turn = new Promise<void>((resolve) => (done = resolve));
    const queue = (before ?? Promise.resolve()).then(() => turn);
    this.conditionalWrites.set(key, queue);
    try {
      await before;
      const current = await this.head(key);
      if (!condition.holds(current)) throw preconditionFailed(key, current);
      return await move();
    } finally {
      done();
      if (this.conditionalWrites.get(key) === queue) this.conditionalWrites.delete(key);
    }
  }

  /**
   * Gives the temp file `from` the name `to` unless something has it: an object there is 412; a
   * folder there is EEXIST, as a rename onto one is EISDIR.
   */
  private async linkNew(key: string, from: string, to: string): Promise<void> {
    try {
      await fs.link(from, to);
    } catch (error) {
      if (!isCode(error, 'EEXIST') || (await fs.lstat(to)).isDirectory()) throw error;
      throw preconditionFailed(key, await this.head(key));
    }
    await unlessMissing(fs.unlink(from), undefined);
  }

  /**
   * Returns the first folder it made for `to` (the highest), if it made any. `createOnly`: a
   * link instead of a rename, which fails when an object is already at `to` (412).
   */
  private async moveIntoPlace(
    key: string,
    from: string,
    to: string,
    createOnly = false,
  ): Promise<string | undefined> {
    let created: string | undefined;
    for (let attempt = 0; ; attempt++) {
      try {
        const made = await fs.mkdir(path.dirname(to), { recursive: true });
        // A retry after a concurrent prune may make folders above those of an earlier attempt.
        if (made !== undefined && (created === undefined || made.length < created.length)) created = made;
        if (createOnly) await this.linkNew(key, from, to);
        else await fs.rename(from, to);
        return created;
      } catch (error) {
        // A concurrent delete may prune the folder between mkdir and rename: try again.
        if (isCode(error, 'ENOENT') && attempt < 8) continue;
        // An empty folder at the path is no object's: a process killed between a write's mkdir
        // and its rename, or between a delete's removal of a folder's last file and the pruning,
        // leaves one, and nothing lists or sweeps it. rmdir removes only an empty one.
        if (
          isCode(error, 'EISDIR', ...(createOnly ? ['EEXIST'] : [])) &&
          attempt < 8 &&
          (await fs.rmdir(to).then(
            () => true,
            () => false,
          ))
        ) {
          continue;
        }
        if (isCode(error, 'ENOTDIR', 'EISDIR', 'EEXIST', 'ENOTEMPTY')) throw pathConflict(key, error);
        if (isCode(error, 'ENAMETOOLONG')) {
          throw new ApiError(
            'bad_request',
            'The storage path is too long for this file system',
            { storagePath: key },
            { cause: error },
          );
        }
        throw error;
      }
    }
  }

  /** `versionDir`: the folder of the key's version records, when `list` has it; `listed`: see `head`. */
  private async info(
    key: string,
    dataPath: string,
    versionDir?: string,
    listed?: ObjectInfo,
  ): Promise<ObjectInfo | null> {
    let stat: BigIntStats;
    try {
      stat = await statFast(dataPath, { bigint: true });
    } catch (error) {
      if (isCode(error, 'ENOENT', 'ENOTDIR')) return null;
      throw error;
    }
    if (!stat.isFile()) return null;
    // The same size and time to the nanosecond is the same version: a write claims its record's
    // name from them before its bytes become visible (`versionName`), so its metadata is the same.
    if (listed?.key === key && this.versionsDescribed.get(listed) === versionName(stat.size, stat.mtimeNs)) {
      return listed;
    }
    return this.describe(key, stat, versionDir);
  }

  /** What is known of the file at `key` whose stat is `stat` (one version, read once). */
  private async describe(
    key: string,
    stat: BigIntStats,
    versionDir = resolveSafePath(this.versionsRoot, key),
  ): Promise<ObjectInfo> {
    const version = path.join(versionDir, versionName(stat.size, stat.mtimeNs));
    const record = (await this.readSidecar(key, version)) ?? (await this.readLegacySidecar(key, stat));
    const size = Number(stat.size);
    const mtimeMs = Number(stat.mtimeMs);
    const info: ObjectInfo = {
      key,
      size,
      // Objects written behind Atrium's back have no record: size + mtime tell a change.
      etag: record?.etag ?? `${size}-${mtimeMs}`,
      lastModified: new Date(mtimeMs),
      contentType: record?.contentType,
    };
    this.versionsDescribed.set(info, versionName(stat.size, stat.mtimeNs));
    return info;
  }

  /** A sidecar of the old layout (`meta/{key}`), valid while size and mtime match. */
  private async readLegacySidecar(key: string, stat: BigIntStats): Promise<Sidecar | undefined> {
    const sidecar = await this.readSidecar(key, resolveSafePath(this.metaRoot, key));
    return sidecar && sidecar.size === Number(stat.size) && sidecar.mtimeMs === floatMtimeMs(stat)
      ? sidecar
      : undefined;
  }

  /**
   * Only a missing file means "no record" (an object written behind Atrium's back). Any other
   * read failure (EMFILE, EACCES, EIO) is thrown: read as "no record", it would change the
   * object's etag and make sync report it `updated`. An unreadable record is logged and ignored.
   */
  private async readSidecar(key: string, file: string): Promise<Sidecar | undefined> {
    const text = await unlessMissing(readFileFast(file, 'utf8'), undefined);
    if (text === undefined) return undefined;
    const sidecar = parseSidecar(text);
    if (!sidecar) await this.warnUnreadable(key, file);
    return sidecar;
  }

  /**
   * Reports a damaged record once per process and state of it (`recordIdentity`): it is read
   * on every read of its object until the object is written again, and a busy download would
   * flood the log. Changed and still damaged, it is reported again.
   */
  private async warnUnreadable(key: string, file: string): Promise<void> {
    const identity = await recordIdentity(file);
    if (identity !== undefined) {
      if (this.warnedRecords.has(identity)) return;
      this.warnedRecords.add(identity);
      if (this.warnedRecords.size > WARNED_RECORDS_KEPT) {
        this.warnedRecords.delete(this.warnedRecords.values().next().value as string);
      }
    }
    this.options.log?.warn({ storagePath: key, file }, 'ignoring an unreadable object metadata record');
  }

  async get(key: string, range?: { start: number; end?: number }) {
    const dataPath = resolveSafePath(this.dataRoot, key);
    // One open file for the metadata and the bytes: a write landing meanwhile changes neither.
    let file: FileHandle;
    try {
      file = await fs.open(dataPath, 'r');
    } catch (error) {
      if (isCode(error, 'ENOENT', 'ENOTDIR', 'EISDIR')) return null;
      throw error;
    }
    try {
      const stat = await file.stat({ bigint: true });
      if (!stat.isFile()) {
        await file.close();
        return null;
      }
      const info = await this.describe(key, stat);
      const body = file.createReadStream({ start: range?.start, end: range?.end, highWaterMark: 256 * 1024 });
      return { body: body as Readable, info };
    } catch (error) {
      await file.close().catch(() => {});
      throw error;
    }
  }

  head(key: string, listed?: ObjectInfo): Promise<ObjectInfo | null> {
    return this.info(key, resolveSafePath(this.dataRoot, key), undefined, listed);
  }

  async readAll(key: string, maxBytes: number): Promise<Buffer | 'too-large' | null> {
    const dataPath = resolveSafePath(this.dataRoot, key);
    let fd: number;
    try {
      fd = await openFast(dataPath, 'r');
    } catch (error) {
      if (isCode(error, 'ENOENT', 'ENOTDIR', 'EISDIR')) return null;
      throw error;
    }
    try {
      const stat = await fstatFast(fd);
      if (!stat.isFile()) return null;
      if (stat.size > maxBytes) return 'too-large';
      // The open file keeps the bytes it was opened with: a replacement is renamed into place.
      const bytes = Buffer.allocUnsafe(stat.size);
      let length = 0;
      while (length < bytes.length) {
        const { bytesRead } = await readFast(fd, bytes, length, bytes.length - length, length);
        if (bytesRead === 0) break;
        length += bytesRead;
      }
      return length === bytes.length ? bytes : bytes.subarray(0, length);
    } finally {
      await closeFast(fd).catch(() => {});
    }
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    const folder = prefix.endsWith('/') || prefix === '' ? prefix : undefined;
    if (folder === undefined) throw new Error('FsObjectStore.list expects a folder prefix ending in "/"');
    const start = folder === '' ? this.dataRoot : resolveSafePrefix(this.dataRoot, folder);
    const versions = folder === '' ? this.versionsRoot : resolveSafePrefix(this.versionsRoot, folder);
    // Folders are read first (cheap), then files are looked at in parallel batches across
    // folders: one stat and one record each, so round trips overlap instead of queueing.
    let batch: WalkedFile[] = [];
    const flush = async () => {
      const infos = await Promise.all(
        batch.map(({ key, file, versionDir }) => this.info(key, file, versionDir)),
      );
      batch = [];
      return infos.filter((info): info is ObjectInfo => info !== null);
    };
    for await (const entry of this.walk(start, versions, folder)) {
      batch.push(entry);
      if (batch.length === LIST_BATCH) yield* await flush();
    }
    yield* await flush();
  }

  async *listFolders(prefix: string): AsyncIterable<string> {
    if (!prefix.endsWith('/')) throw new Error('FsObjectStore.listFolders expects a prefix ending in "/"');
    let entries: import('node:fs').Dirent[];
    try {
      entries = await fs.readdir(resolveSafePrefix(this.dataRoot, prefix), { withFileTypes: true });
    } catch (error) {
      if (isCode(error, 'ENOENT', 'ENOTDIR')) return;
      throw error;
    }
    for (const entry of entries) {
      if (entry.isDirectory() && isSafeKey(`${prefix}${entry.name}`)) yield entry.name;
    }
  }

  /**
   * The files below `dir` whose keys are safe, with where their version records are (below
   * `versionsDir`): each path joins a name `isSafeKey` accepted to a folder resolved safely, as
   * `resolveSafePath` would give it, without resolving the whole key again for every file.
   */
  private async *walk(dir: string, versionsDir: string, keyPrefix: string): AsyncGenerator<WalkedFile> {
    let entries: import('node:fs').Dirent[];
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch (error) {
      // ENAMETOOLONG: a folder put there deeper than the system's longest path, which no key can
      // name either (skipped like the names below, or it would fail every listing above it).
      if (isCode(error, 'ENOENT', 'ENOTDIR', 'ENAMETOOLONG')) return;
      throw error;
    }
    // Files put there behind Atrium's back may have names no key can hold; they are left out, as
    // links are, or the first of them would fail every listing of the folders above it.
    for (const entry of entries) {
      const key = `${keyPrefix}${entry.name}`;
      if (entry.isFile() && isSafeKey(key)) {
        yield { key, file: path.join(dir, entry.name), versionDir: path.join(versionsDir, entry.name) };
      }
    }
    for (const entry of entries) {
      if (entry.isDirectory() && isSafeKey(`${keyPrefix}${entry.name}`)) {
        yield* this.walk(
          path.join(dir, entry.name),
          path.join(versionsDir, entry.name),
          `${keyPrefix}${entry.name}/`,
        );
      }
    }
  }

  async delete(key: string): Promise<void> {
    const dataPath = resolveSafePath(this.dataRoot, key);
    const versionDir = resolveSafePath(this.versionsRoot, key);
    const current = await statOrUndefined(dataPath);
    await fs.rm(dataPath, { force: true });
    // Only the record of the version removed: a write to this key under way keeps its own.
    if (current?.isFile()) {
      await fs.rm(path.join(versionDir, versionName(current.size, current.mtimeNs)), { force: true });
    }
    await fs.rmdir(versionDir).catch(() => {});
    await fs.rm(resolveSafePath(this.metaRoot, key), { force: true });
    await this.pruneEmptyFolders(key);
  }

  /** Removes folders left empty by a delete, up to (not including) the root. */
  private async pruneEmptyFolders(key: string): Promise<void> {
    const segments = keySegments(key).slice(0, -1);
    for (let depth = segments.length; depth > 0; depth--) {
      const folderKey = segments.slice(0, depth).join('/');
      try {
        await fs.rmdir(resolveSafePath(this.dataRoot, folderKey));
        await fs.rmdir(resolveSafePath(this.versionsRoot, folderKey)).catch(() => {});
        await fs.rmdir(resolveSafePath(this.metaRoot, folderKey)).catch(() => {});
      } catch {
        return; // not empty (or gone): stop climbing
      }
    }
  }

  async deletePrefix(prefix: string): Promise<void> {
    await fs.rm(resolveSafePrefix(this.dataRoot, prefix), { recursive: true, force: true });
    await fs.rm(resolveSafePrefix(this.versionsRoot, prefix), { recursive: true, force: true });
    await fs.rm(resolveSafePrefix(this.metaRoot, prefix), { recursive: true, force: true });
  }

  setServerOrigin(origin: string): void {
    this.options.fallbackOrigin = origin;
  }

  private origin(): string {
    return this.options.publicUrl ?? this.options.fallbackOrigin;
  }

  private expiresAt(seconds: number): number {
    return Math.floor(this.options.clock().getTime() / 1000) + seconds;
  }

  async createUploadUrl(key: string, options: SignedUploadOptions): Promise<string> {
    keySegments(key);
    return createSignedUrl(this.origin(), this.options.signingSecret, {
      method: 'PUT',
      key,
      contentType: options.contentType,
      sizeBytes: options.sizeBytes,
      expiresAt: this.expiresAt(options.expiresInSeconds),
    });
  }

  async createDownloadUrl(key: string, options: SignedDownloadOptions): Promise<string> {
    keySegments(key);
    return createSignedUrl(this.origin(), this.options.signingSecret, {
      method: 'GET',
      key,
      contentType: options.contentType,
      filename: options.filename,
      etag: options.etag,
      expiresAt: this.expiresAt(options.expiresInSeconds),
    });
  }

  async check(): Promise<void> {
    await makeDirectory(this.dataRoot);
    await fs.access(this.dataRoot, fs.constants.W_OK);
  }
}
