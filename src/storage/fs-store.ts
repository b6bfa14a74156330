import { randomBytes } from 'node:crypto';
import {
  createReadStream,
  createWriteStream,
  readFile as readFileCallback,
  stat as statCallback,
} from 'node:fs';
import { once } from 'node:events';
import fs from 'node:fs/promises';
import path from 'node:path';
import { type Readable, Transform, type TransformCallback, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { ApiError, errors } from '../errors.js';
import type { Clock } from '../ids.js';
import type {
  ObjectInfo,
  ObjectStore,
  PutOptions,
  SignedDownloadOptions,
  SignedUploadOptions,
} from './object-store.js';
import { keySegments, resolveSafePath, resolveSafePrefix } from './safe-path.js';
import { createSignedUrl } from './signed-url.js';

export interface FsObjectStoreOptions {
  /** Everything lives below this folder: `data/` (objects), `meta/` (sidecars), `tmp/` (uploads in flight). */
  root: string;
  signingSecret: string;
  clock: Clock;
  /** Origin of signed URLs when set (ATRIUM_PUBLIC_URL); else `fallbackOrigin` (`http://HOST:PORT`). */
  publicUrl?: string;
  fallbackOrigin: string;
}

/** What we know of an object beyond what the file system keeps; valid only while size and mtime match. */
interface Sidecar {
  contentType: string;
  etag: string;
  size: number;
  mtimeMs: number;
}

/** Counts bytes on their way to storage, and stops the stream past a limit. */
export class MeteredStream extends Transform {
  bytes = 0;

  constructor(private readonly maxBytes: number | undefined) {
    super({ highWaterMark: 1024 * 1024 });
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.maxBytes !== undefined && this.bytes > this.maxBytes) {
      callback(
        errors.payloadTooLarge(
          `The body is larger than the declared ${this.maxBytes} bytes; nothing was stored`,
          {
            maxBytes: this.maxBytes,
          },
        ),
      );
      return;
    }
    callback(null, chunk);
  }
}

/**
 * body → meter → sink. Unlike `pipeline`, a failure does not destroy `body`: when it is an HTTP
 * request the caller still answers on its socket (e.g. 413). A body that closes before its end
 * (cut connection) fails the copy.
 */
export async function copyInto(body: Readable, meter: Transform, sink: Writable): Promise<void> {
  const done = pipeline(meter, sink);
  // A body that breaks off (a client closing its connection mid-upload) is the sender's doing,
  // not a fault of ours: a 400 that is logged without a stack, not a 500.
  const cutOff = (cause?: unknown) =>
    new ApiError('bad_request', 'The body was cut off before its end; nothing was stored', {}, { cause });
  const onError = (error: Error & { code?: string }) =>
    meter.destroy(error.code === 'ECONNRESET' || error.message === 'aborted' ? cutOff(error) : error);
  const onClose = () => {
    if (!body.readableEnded) meter.destroy(cutOff());
  };
  body.on('error', onError);
  body.on('close', onClose);
  body.pipe(meter);
  try {
    await done;
  } finally {
    body.unpipe(meter);
    body.off('error', onError);
    body.off('close', onClose);
  }
}

// The callback forms are about twice as fast as node:fs/promises for many small reads (the
// promise readFile reads in several round trips); listing a project reads one stat and one
// sidecar per object, so this is most of what sync costs.
const statFast = promisify(statCallback);
const readFileFast = promisify(readFileCallback);

/** How many objects `list` looks at at once. */
const LIST_BATCH = 256;

const isCode = (error: unknown, ...codes: string[]) =>
  typeof error === 'object' && error !== null && codes.includes((error as NodeJS.ErrnoException).code ?? '');

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
  private readonly metaRoot: string;
  private readonly tmpRoot: string;

  constructor(private readonly options: FsObjectStoreOptions) {
    const root = path.resolve(options.root);
    this.dataRoot = path.join(root, 'data');
    this.metaRoot = path.join(root, 'meta');
    this.tmpRoot = path.join(root, 'tmp');
  }

  async put(key: string, body: Readable, options: PutOptions): Promise<ObjectInfo> {
    const dataPath = resolveSafePath(this.dataRoot, key);
    const metaPath = resolveSafePath(this.metaRoot, key);
    await fs.mkdir(this.tmpRoot, { recursive: true });
    const tmpName = `${Date.now()}-${randomBytes(8).toString('hex')}`;
    const tmpData = path.join(this.tmpRoot, `${tmpName}.data`);
    const tmpMeta = path.join(this.tmpRoot, `${tmpName}.meta`);
    const limit = [options.maxBytes, options.exactBytes].filter((n): n is number => n !== undefined);
    const meter = new MeteredStream(limit.length > 0 ? Math.min(...limit) : undefined);
    try {
      const sink = createWriteStream(tmpData, { flags: 'wx', mode: 0o600, highWaterMark: 1024 * 1024 });
      try {
        await copyInto(body, meter, sink);
      } finally {
        // The temp file must be closed before it is removed, or a late open would recreate it.
        if (!sink.closed) await once(sink, 'close');
      }
      if (options.exactBytes !== undefined && meter.bytes !== options.exactBytes) {
        throw errors.badRequest(
          `The body has ${meter.bytes} bytes but ${options.exactBytes} were declared; nothing was stored`,
        );
      }
      // On disk before it becomes visible: a crash after the rename never shows a torn file.
      if (options.durable !== false) {
        const file = await fs.open(tmpData, 'r+');
        try {
          await file.datasync();
        } finally {
          await file.close();
        }
      }
      const stat = await fs.stat(tmpData);
      const sidecar: Sidecar = {
        contentType: options.contentType,
        // A fresh version id per write, not a content hash: hashing cost a third of upload
        // throughput, and any write is a change worth reporting (S3 multipart ETags behave alike).
        etag: randomBytes(16).toString('hex'),
        size: stat.size,
        mtimeMs: stat.mtimeMs,
      };
      await fs.writeFile(tmpMeta, JSON.stringify(sidecar), { mode: 0o600 });
      await this.moveIntoPlace(key, tmpMeta, metaPath);
      await this.moveIntoPlace(key, tmpData, dataPath);
      return {
        key,
        size: stat.size,
        etag: sidecar.etag,
        lastModified: stat.mtime,
        contentType: options.contentType,
      };
    } finally {
      await Promise.all([fs.rm(tmpData, { force: true }), fs.rm(tmpMeta, { force: true })]);
    }
  }

  /**
   * Temp files older than `olderThanMs` belong to writes that can no longer finish (a process
   * that crashed mid-upload); younger ones may be uploads in flight on another process.
   */
  async sweepStaleTemp(olderThanMs = 60 * 60 * 1000, now = this.options.clock()): Promise<number> {
    let removed = 0;
    const cutoff = now.getTime() - olderThanMs;
    for (const name of await fs.readdir(this.tmpRoot).catch(() => [] as string[])) {
      const file = path.join(this.tmpRoot, name);
      const stat = await fs.stat(file).catch(() => undefined);
      if (stat && stat.mtimeMs < cutoff) {
        await fs.rm(file, { force: true });
        removed++;
      }
    }
    return removed;
  }

  private async moveIntoPlace(key: string, from: string, to: string): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await fs.mkdir(path.dirname(to), { recursive: true });
        await fs.rename(from, to);
        return;
      } catch (error) {
        // A concurrent delete may prune the folder between mkdir and rename: try once more.
        if (isCode(error, 'ENOENT') && attempt === 0) continue;
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

  private async info(key: string, dataPath: string): Promise<ObjectInfo | null> {
    let stat: import('node:fs').Stats;
    try {
      stat = await statFast(dataPath);
    } catch (error) {
      if (isCode(error, 'ENOENT', 'ENOTDIR')) return null;
      throw error;
    }
    if (!stat.isFile()) return null;
    const sidecar = await this.readSidecar(key);
    const current =
      sidecar && sidecar.size === stat.size && sidecar.mtimeMs === stat.mtimeMs ? sidecar : undefined;
    return {
      key,
      size: stat.size,
      // Objects written behind Atrium's back have no (valid) sidecar: size + mtime tell a change.
      etag: current?.etag ?? `${stat.size}-${Math.trunc(stat.mtimeMs)}`,
      lastModified: stat.mtime,
      contentType: current?.contentType,
    };
  }

  private async readSidecar(key: string): Promise<Sidecar | undefined> {
    try {
      const parsed = JSON.parse(await readFileFast(resolveSafePath(this.metaRoot, key), 'utf8')) as Sidecar;
      return typeof parsed.etag === 'string' && typeof parsed.contentType === 'string' ? parsed : undefined;
    } catch {
      return undefined;
    }
  }

  async get(key: string, range?: { start: number; end?: number }) {
    const dataPath = resolveSafePath(this.dataRoot, key);
    const info = await this.info(key, dataPath);
    if (!info) return null;
    const body = createReadStream(dataPath, {
      start: range?.start,
      end: range?.end,
      highWaterMark: 256 * 1024,
    });
    return { body: body as Readable, info };
  }

  head(key: string): Promise<ObjectInfo | null> {
    return this.info(key, resolveSafePath(this.dataRoot, key));
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    const folder = prefix.endsWith('/') || prefix === '' ? prefix : undefined;
    if (folder === undefined) throw new Error('FsObjectStore.list expects a folder prefix ending in "/"');
    const start = folder === '' ? this.dataRoot : resolveSafePrefix(this.dataRoot, folder);
    // Folders are read first (cheap), then files are looked at in parallel batches across
    // folders: one stat and one sidecar each, so round trips overlap instead of queueing.
    let batch: { key: string; file: string }[] = [];
    const flush = async () => {
      const infos = await Promise.all(batch.map(({ key, file }) => this.info(key, file)));
      batch = [];
      return infos.filter((info): info is ObjectInfo => info !== null);
    };
    for await (const entry of this.walk(start, folder)) {
      batch.push(entry);
      if (batch.length === LIST_BATCH) yield* await flush();
    }
    yield* await flush();
  }

  private async *walk(dir: string, keyPrefix: string): AsyncGenerator<{ key: string; file: string }> {
    let entries: import('node:fs').Dirent[];
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch (error) {
      if (isCode(error, 'ENOENT', 'ENOTDIR')) return;
      throw error;
    }
    for (const entry of entries) {
      if (entry.isFile()) yield { key: `${keyPrefix}${entry.name}`, file: path.join(dir, entry.name) };
    }
    for (const entry of entries) {
      if (entry.isDirectory()) yield* this.walk(path.join(dir, entry.name), `${keyPrefix}${entry.name}/`);
    }
  }

  async delete(key: string): Promise<void> {
    const dataPath = resolveSafePath(this.dataRoot, key);
    const metaPath = resolveSafePath(this.metaRoot, key);
    await fs.rm(dataPath, { force: true });
    await fs.rm(metaPath, { force: true });
    await this.pruneEmptyFolders(key);
  }

  /** Removes folders left empty by a delete, up to (not including) the root. */
  private async pruneEmptyFolders(key: string): Promise<void> {
    const segments = keySegments(key).slice(0, -1);
    for (let depth = segments.length; depth > 0; depth--) {
      const folderKey = segments.slice(0, depth).join('/');
      try {
        await fs.rmdir(resolveSafePath(this.dataRoot, folderKey));
        await fs.rmdir(resolveSafePath(this.metaRoot, folderKey)).catch(() => {});
      } catch {
        return; // not empty (or gone): stop climbing
      }
    }
  }

  async deletePrefix(prefix: string): Promise<void> {
    await fs.rm(resolveSafePrefix(this.dataRoot, prefix), { recursive: true, force: true });
    await fs.rm(resolveSafePrefix(this.metaRoot, prefix), { recursive: true, force: true });
  }

  /** With `PORT=0` the port is known only once the server listens (see server.ts). */
  setFallbackOrigin(origin: string): void {
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
    await fs.mkdir(this.dataRoot, { recursive: true });
    await fs.access(this.dataRoot, fs.constants.W_OK);
  }
}
