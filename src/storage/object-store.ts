import type { Readable } from 'node:stream';
import { ApiError } from '../errors.js';

/** What storage knows of one object. */
export interface ObjectInfo {
  /** The storage path (key) of the object, e.g. `projects/{workspaceId}/{projectId}/docs/a.md`. */
  key: string;
  size: number;
  /** A fingerprint of the content (S3 ETag; fs: size + mtime), to tell a replaced object. */
  etag: string;
  lastModified: Date;
  contentType?: string;
}

export interface SignedUploadOptions {
  contentType: string;
  /** The exact size the caller declared; the PUT may not exceed it. */
  sizeBytes: number;
  expiresInSeconds: number;
}

export interface SignedDownloadOptions {
  filename: string;
  contentType: string;
  /**
   * The version (etag) the URL serves. Once the object at the key is another one (deleted and
   * uploaded again, replaced), the URL stops working instead of serving the new bytes.
   */
  etag: string;
  expiresInSeconds: number;
}

export interface PutOptions {
  contentType: string;
  /** A body longer than this fails with 413 payload_too_large and stores nothing. */
  maxBytes?: number;
  /** When set, a body of any other length stores nothing (413 when longer, 400 when shorter). */
  exactBytes?: number;
  /**
   * fs: flush the bytes to disk before the object becomes visible (default true), so a power
   * loss never leaves a torn object. Writers of many small objects that can redo their work
   * after a crash may turn it off. Ignored by s3.
   */
  durable?: boolean;
  /**
   * fs: the write replaces or creates the object only if this holds of the one in place when
   * the bytes are ready (a signed PUT's `If-Match` / `If-None-Match`); else it fails with 412
   * `precondition_failed` and stores nothing. Ignored by s3, whose presigned PUTs S3 checks.
   */
  condition?: WriteCondition;
}

/** A conditional write's test of the object in place (null: none is). */
export interface WriteCondition {
  holds(current: Pick<ObjectInfo, 'etag' | 'lastModified'> | null): boolean;
  /**
   * Only when no object is in place (`If-None-Match: *`): made with one atomic create, so of
   * writes racing for a new path, in any process, one wins.
   */
  onlyIfAbsent: boolean;
}

/** 412: a conditional write's condition does not hold of `current`, the object in place. */
export function preconditionFailed(key: string, current: Pick<ObjectInfo, 'etag'> | null): ApiError {
  return new ApiError(
    'precondition_failed',
    current
      ? 'The object is not in the state the upload is conditional on (If-Match, If-None-Match, If-Unmodified-Since); nothing was stored'
      : 'There is no object for the upload to replace (If-Match); nothing was stored',
    { storagePath: key, etag: current?.etag ?? null },
  );
}

/** Where a store reports faults that do not fail the operation at hand (the app's logger). */
export interface StoreLog {
  warn(details: Record<string, unknown>, message: string): void;
}

/**
 * Removes every object under `prefix`, for callers that go on when storage keeps some (a sweep's
 * other folders, a row already deleted): the failure is logged with `message`, and false
 * returned. Whatever stays is left to a later sweep.
 */
export async function deletePrefixOrLog(
  store: ObjectStore,
  prefix: string,
  log: StoreLog,
  message: string,
): Promise<boolean> {
  try {
    await store.deletePrefix(prefix);
    return true;
  } catch (error) {
    log.warn({ err: error, storagePrefix: prefix }, message);
    return false;
  }
}

/**
 * The one storage interface; `fs-store` and `s3-store` implement it and a factory picks one
 * from config. Every method streams, except `readAll`: only it holds a whole object in memory,
 * up to the limit its caller gives.
 */
export interface ObjectStore {
  readonly kind: 'fs' | 's3';
  /** Stores a stream under `key`, atomically: a failed or oversized write leaves nothing behind. */
  put(key: string, body: Readable, options: PutOptions): Promise<ObjectInfo>;
  get(
    key: string,
    range?: { start: number; end?: number },
  ): Promise<{ body: Readable; info: ObjectInfo } | null>;
  /**
   * What storage knows of the object at `key` now, or null. `listed`: what this store's `list`
   * (or `head`) gave for the key earlier; while the object is still that version, it may be
   * answered again without reading the object's metadata (fs: one stat instead of a stat and a
   * record read). Sync looks again at every new object so.
   */
  head(key: string, listed?: ObjectInfo): Promise<ObjectInfo | null>;
  /**
   * The whole object as bytes, for readers that need all of it at once (the indexer): null
   * when there is none, `too-large` when it holds more than `maxBytes` (nothing is read then).
   * On fs, four system calls, where `get` and a stream take about ten round trips.
   */
  readAll(key: string, maxBytes: number): Promise<Buffer | 'too-large' | null>;
  /** Every object whose key starts with `prefix`. */
  list(prefix: string): AsyncIterable<ObjectInfo>;
  /**
   * The folders directly under `prefix` (ending in `/`): the distinct next segments of the keys
   * below it, without listing the objects (S3: one request per thousand folders).
   */
  listFolders(prefix: string): AsyncIterable<string>;
  delete(key: string): Promise<void>;
  /** Every object under `prefix`; rejects when any stays (S3 may refuse keys one by one). */
  deletePrefix(prefix: string): Promise<void>;
  createUploadUrl(key: string, options: SignedUploadOptions): Promise<string>;
  createDownloadUrl(key: string, options: SignedDownloadOptions): Promise<string>;
  /**
   * Removes what writes that can no longer finish left behind (a process killed mid-upload)
   * when older than `olderThanMs`; resolves with how many were removed.
   */
  sweepStaleTemp(olderThanMs: number, now: Date): Promise<number>;
  /** Readiness: resolves when storage answers. */
  check(): Promise<void>;
  /**
   * The server's own origin once it listens (with `PORT=0` the port is known only then): the
   * origin of signed URLs when no public URL is configured. S3's URLs name the bucket instead.
   */
  setServerOrigin(origin: string): void;
}
