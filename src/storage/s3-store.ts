import { once } from 'node:events';
import { Writable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { Readable } from 'node:stream';
import { DEFAULT_S3_IDLE_TIMEOUT_MS, type StorageConfig } from '../config.js';
import { errors } from '../errors.js';
import type { Clock } from '../ids.js';
import { isS3HandlerTimeout } from '../network-errors.js';
import { contentDisposition } from './content-disposition.js';
import type * as Store from './object-store.js';
import { keySegments } from './safe-path.js';
import { copyInto, meterFor, readWhole } from './streams.js';

export type S3StorageConfig = Extract<StorageConfig, { kind: 's3' }>;

/** Parts of a multipart upload; S3's minimum is 5 MiB. At most one part is held in memory. */
const PART_SIZE = 8 * 1024 * 1024;

const stripQuotes = (etag: string | undefined) => (etag ?? '').replace(/^"|"$/g, '');

function isNotFound(error: unknown): boolean {
  const e = error as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NotFound' || e?.name === 'NoSuchKey' || e?.$metadata?.httpStatusCode === 404;
}

/** Per-key DeleteObjects errors that are S3's own trouble, gone on a later try. */
const SERVER_SIDE_DELETE_ERRORS = new Set(['InternalError', 'ServiceUnavailable', 'SlowDown']);

/**
 * DeleteObjects answers 200 and lists the keys it could not delete one by one: those objects
 * stay in the bucket, so the delete failed. A key S3 failed on its side makes this a server
 * fault, as the SDK marks a 5xx (`$fault`), so a request meeting it is a 503 to retry
 * (network-errors.ts); another (AccessDenied) is a 500.
 */
export class ObjectsNotDeletedError extends Error {
  readonly $fault: 'server' | 'client';

  constructor(
    readonly bucket: string,
    readonly prefix: string,
    readonly failures: ReadonlyArray<{ key: string; code: string; message: string }>,
  ) {
    const shown = failures
      .slice(0, 3)
      .map((failure) => `${failure.key} (${failure.code}: ${failure.message})`)
      .join(', ');
    const more = failures.length > 3 ? ` and ${failures.length - 3} more` : '';
    super(
      `S3 did not delete ${failures.length} object(s) under ${prefix} in bucket ${bucket}: ${shown}${more}`,
    );
    this.name = 'ObjectsNotDeletedError';
    this.$fault = failures.some((failure) => SERVER_SIDE_DELETE_ERRORS.has(failure.code))
      ? 'server'
      : 'client';
  }
}

/**
 * Buffers at most one part, then uploads it: a stream of unknown length becomes one PutObject
 * (small) or a multipart upload (large), aborted on any failure so nothing partial remains.
 */
class S3UploadSink extends Writable {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private uploadId: string | undefined;
  private readonly parts: { ETag: string | undefined; PartNumber: number }[] = [];
  /** The request under way (creating the upload, a part, completing it), which a destroy waits for. */
  private inFlight: Promise<void> | undefined;
  total = 0;
  etag = '';

  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
    private readonly key: string,
    private readonly options: Store.PutOptions,
    private readonly log: Store.StoreLog | undefined,
  ) {
    super({ highWaterMark: 1024 * 1024 });
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    this.total += chunk.length;
    if (this.buffered < PART_SIZE) return callback();
    this.inFlight = this.flushPart();
    this.inFlight.then(() => callback(), callback);
  }

  private takeBuffer(): Buffer {
    const buffer = Buffer.concat(this.chunks, this.buffered);
    this.chunks = [];
    this.buffered = 0;
    return buffer;
  }

  private async flushPart(): Promise<void> {
    if (!this.uploadId) {
      const created = await this.client.send(
        new CreateMultipartUploadCommand({
          Bucket: this.bucket,
          Key: this.key,
          ContentType: this.options.contentType,
        }),
      );
      this.uploadId = created.UploadId;
    }
    const PartNumber = this.parts.length + 1;
    const body = this.takeBuffer();
    const part = await this.client.send(
      new UploadPartCommand({
        Bucket: this.bucket,
        Key: this.key,
        UploadId: this.uploadId,
        PartNumber,
        Body: body,
        ContentLength: body.length,
      }),
    );
    this.parts.push({ ETag: part.ETag, PartNumber });
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.inFlight = (async () => {
      if (this.options.exactBytes !== undefined && this.total !== this.options.exactBytes) {
        throw errors.badRequest(
          `The body has ${this.total} bytes but ${this.options.exactBytes} were declared; nothing was stored`,
        );
      }
      if (!this.uploadId) {
        const body = this.takeBuffer();
        const put = await this.client.send(
          new PutObjectCommand({
            Bucket: this.bucket,
            Key: this.key,
            Body: body,
            ContentLength: body.length,
            ContentType: this.options.contentType,
          }),
        );
        this.etag = stripQuotes(put.ETag);
        return;
      }
      if (this.buffered > 0) await this.flushPart();
      const done = await this.client.send(
        new CompleteMultipartUploadCommand({
          Bucket: this.bucket,
          Key: this.key,
          UploadId: this.uploadId,
          MultipartUpload: { Parts: this.parts },
        }),
      );
      this.etag = stripQuotes(done.ETag);
    })();
    this.inFlight.then(() => callback(), callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.chunks = [];
    // A body that fails while the upload is being created (or a part sent) would otherwise find
    // no upload id yet, and leave the upload open with the parts sent after: wait for it first.
    const settled = this.inFlight?.then(
      () => undefined,
      () => undefined,
    );
    if (settled) void settled.then(() => this.abortIfOpen(error, callback));
    else this.abortIfOpen(error, callback);
  }

  private abortIfOpen(error: Error | null, callback: (error?: Error | null) => void): void {
    const uploadId = this.uploadId;
    if (error && uploadId) {
      this.client
        .send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: this.key, UploadId: uploadId }))
        .catch((abortError: unknown) => {
          // The put fails with its own error all the same; an upload left open keeps its parts
          // (and their cost) until a bucket lifecycle rule or an operator aborts it by this id.
          this.log?.warn(
            { err: abortError, bucket: this.bucket, storagePath: this.key, uploadId },
            'could not abort an incomplete multipart upload: abort it by its upload id',
          );
        })
        .finally(() => callback(error));
      return;
    }
    callback(error);
  }
}

/**
 * An attempt the HTTP handler gave up on after its connect or idle timeout, thrown in place of
 * the SDK's `TimeoutError`, which its retry strategy would send again: an endpoint that never
 * answers then held the caller for three timeouts. Its message stays the handler's, which
 * marks it a 503 to retry (network-errors.ts); the client retries, after `Retry-After`.
 */
class S3AttemptTimedOut extends Error {
  override readonly name = 'S3AttemptTimedOut';
}

/**
 * The longest the readiness probe waits for S3, as `/readyz` waits for the database
 * (`ATRIUM_DB_CONNECT_TIMEOUT_MS`'s default): the idle timeout alone, with the SDK's three
 * attempts, held a probe of a hung endpoint for six minutes.
 */
const S3_CHECK_TIMEOUT_MS = 10_000;

/**
 * A setting S3 turned down (the bucket, the credentials), in words naming the settings to look at
 * and never their secret values; the SDK's error, which says only "The specified bucket does not
 * exist", is its cause.
 */
export class S3SettingsError extends Error {
  override readonly name = 'S3SettingsError';
}

/** S3 error codes that every request of this store meets alike: a setting is wrong. */
const CREDENTIALS_REFUSED = new Set(['InvalidAccessKeyId', 'SignatureDoesNotMatch']);

/**
 * S3 and compatibles (AWS S3, MinIO, R2…). Uploads and downloads go straight to S3 through
 * presigned URLs that bind content type, content length and expiry.
 */
export class S3ObjectStore implements Store.ObjectStore {
  readonly kind = 's3' as const;
  readonly client: S3Client;
  private readonly bucket: string;
  /** Where the bucket is, for messages: S3_ENDPOINT, or AWS and its region. */
  private readonly endpoint: string;

  constructor(
    config: S3StorageConfig,
    private readonly options: {
      clock: Clock;
      log?: Store.StoreLog;
      checkTimeoutMs?: number;
    },
  ) {
    this.bucket = config.bucket;
    this.endpoint = config.endpoint ?? `AWS (${config.region})`;
    this.client = new S3Client({
      // An endpoint that stops answering mid-request or mid-body fails the request after this
      // long without a byte, instead of holding its socket and its caller for ever (the SDK sets
      // no limit). Atrium's own reads (the indexer's) and writes (multipart parts from memory)
      // keep the socket busy; clients move bytes through presigned URLs, never through here.
      // No total limit: a big object that keeps moving is never cut.
      requestHandler: {
        connectionTimeout: 10_000,
        socketTimeout: config.idleTimeoutMs ?? DEFAULT_S3_IDLE_TIMEOUT_MS,
      },
      region: config.region,
      endpoint: config.endpoint,
      forcePathStyle: config.forcePathStyle,
      credentials:
        config.accessKeyId && config.secretAccessKey
          ? { accessKeyId: config.accessKeyId, secretAccessKey: config.secretAccessKey }
          : undefined,
      // Flexible checksums would be baked into presigned URLs, which browsers and many
      // S3-compatible servers cannot satisfy; S3 still checks Content-MD5/length itself.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    // Around the whole request, retries included: a wrong setting is said in its words.
    this.client.middlewareStack.add(
      (next) => async (args) => {
        try {
          return await next(args);
        } catch (error) {
          const problem = this.settingsProblem(error);
          throw problem ? new S3SettingsError(problem, { cause: error }) : error;
        }
      },
      { step: 'initialize', priority: 'high', name: 'wrongSettingsInWords' },
    );
    // Inside the retry middleware, around each attempt: a timed-out one ends the request.
    this.client.middlewareStack.add(
      (next) => async (args) => {
        try {
          return await next(args);
        } catch (error) {
          if (isS3HandlerTimeout(error)) throw new S3AttemptTimedOut((error as Error).message);
          throw error;
        }
      },
      { step: 'deserialize', priority: 'low', name: 'timedOutAttemptIsTheLast' },
    );
  }

  async put(key: string, body: Readable, options: Store.PutOptions): Promise<Store.ObjectInfo> {
    keySegments(key);
    const meter = meterFor(options);
    const sink = new S3UploadSink(this.client, this.bucket, key, options, this.options.log);
    try {
      await copyInto(body, meter, sink);
    } finally {
      // A failed put settles once its multipart upload is aborted (or the abort has failed).
      if (!sink.closed) await once(sink, 'close');
    }
    return {
      key,
      size: sink.total,
      etag: sink.etag,
      lastModified: this.options.clock(),
      contentType: options.contentType,
    };
  }

  async get(
    key: string,
    range?: { start: number; end?: number },
  ): Promise<{ body: Readable; info: Store.ObjectInfo } | null> {
    keySegments(key);
    try {
      const result = await this.client.send(
        new GetObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Range: range ? `bytes=${range.start}-${range.end ?? ''}` : undefined,
        }),
      );
      const total = /\/(\d+)$/.exec(result.ContentRange ?? '')?.[1];
      const info: Store.ObjectInfo = {
        key,
        size: total ? Number(total) : (result.ContentLength ?? 0),
        etag: stripQuotes(result.ETag),
        lastModified: result.LastModified ?? new Date(0),
        contentType: result.ContentType,
      };
      return { body: result.Body as Readable, info };
    } catch (error) {
      if (isNotFound(error)) return null;
      // A range past the end of an (empty) object: S3 answers 416; read it whole instead.
      if (range && (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 416) {
        return this.get(key);
      }
      throw error;
    }
  }

  async readAll(key: string, maxBytes: number): Promise<Buffer | 'too-large' | null> {
    const object = await this.get(key);
    if (!object) return null;
    return readWhole(object.body, object.info.size, maxBytes);
  }

  async head(key: string): Promise<Store.ObjectInfo | null> {
    keySegments(key);
    try {
      const result = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return {
        key,
        size: result.ContentLength ?? 0,
        etag: stripQuotes(result.ETag),
        lastModified: result.LastModified ?? new Date(0),
        contentType: result.ContentType,
      };
    } catch (error) {
      if (isNotFound(error)) return null;
      throw error;
    }
  }

  async *list(prefix: string): AsyncIterable<Store.ObjectInfo> {
    let token: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }),
      );
      for (const object of page.Contents ?? []) {
        if (!object.Key) continue;
        yield {
          key: object.Key,
          size: object.Size ?? 0,
          etag: stripQuotes(object.ETag),
          lastModified: object.LastModified ?? new Date(0),
        };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  async *listFolders(prefix: string): AsyncIterable<string> {
    let token: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({
          Bucket: this.bucket,
          Prefix: prefix,
          Delimiter: '/',
          ContinuationToken: token,
        }),
      );
      for (const folder of page.CommonPrefixes ?? []) {
        const name = folder.Prefix?.slice(prefix.length, -1);
        if (name) yield name;
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  async delete(key: string): Promise<void> {
    keySegments(key);
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  async deletePrefix(prefix: string): Promise<void> {
    if (prefix.length === 0) throw new Error('Refusing to delete a whole bucket');
    let batch: string[] = [];
    const failures: Array<{ key: string; code: string; message: string }> = [];
    const flush = async () => {
      if (batch.length === 0) return;
      // Quiet: the answer lists only the keys that were not deleted.
      const result = await this.client.send(
        new DeleteObjectsCommand({
          Bucket: this.bucket,
          Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true },
        }),
      );
      for (const error of result.Errors ?? []) {
        failures.push({ key: error.Key ?? '', code: error.Code ?? 'unknown', message: error.Message ?? '' });
      }
      batch = [];
    };
    // The other batches are still deleted: a retry then has only the failed keys left to do.
    for await (const object of this.list(prefix)) {
      batch.push(object.key);
      if (batch.length === 1000) await flush();
    }
    await flush();
    if (failures.length > 0) throw new ObjectsNotDeletedError(this.bucket, prefix, failures);
  }

  async createUploadUrl(key: string, options: Store.SignedUploadOptions): Promise<string> {
    keySegments(key);
    const command = new PutObjectCommand({
      Bucket: this.bucket,
      Key: key,
      ContentType: options.contentType,
      ContentLength: options.sizeBytes,
    });
    return getSignedUrl(this.client, command, {
      expiresIn: options.expiresInSeconds,
      signingDate: this.options.clock(),
      // Signed as headers (not hoisted to the query), so S3 refuses any other type or length.
      signableHeaders: new Set(['content-type', 'content-length']),
      unhoistableHeaders: new Set(['content-type', 'content-length']),
    });
  }

  async createDownloadUrl(key: string, options: Store.SignedDownloadOptions): Promise<string> {
    keySegments(key);
    const command = new GetObjectCommand({
      Bucket: this.bucket,
      Key: key,
      ResponseContentType: options.contentType,
      ResponseContentDisposition: contentDisposition(options.filename),
      // S3 answers 412 once the object is another version than the one the URL was made for.
      IfMatch: `"${options.etag}"`,
    });
    // In the signed query rather than a header, so that a plain link carries the condition. The
    // presigner's `hoistableHeaders` option does not reach its signer (3.11xx), hence by hand.
    command.middlewareStack.add(
      (next) => async (args) => {
        const request = args.request as { headers: Record<string, string>; query: Record<string, string> };
        const ifMatch = request.headers['if-match'];
        if (ifMatch !== undefined) {
          request.query['if-match'] = ifMatch;
          delete request.headers['if-match'];
        }
        return next(args);
      },
      { step: 'build', name: 'hoistIfMatchToQuery' },
    );
    return getSignedUrl(this.client, command, {
      expiresIn: options.expiresInSeconds,
      signingDate: this.options.clock(),
    });
  }

  /**
   * Nothing to sweep here: a failed put aborts its multipart upload itself, and what a killed
   * process leaves (an incomplete multipart upload) is the bucket's AbortIncompleteMultipartUpload
   * lifecycle rule's to remove (docs/files.md).
   */
  async sweepStaleTemp(): Promise<number> {
    return 0;
  }

  setServerOrigin(): void {
    // Presigned URLs point at the bucket, not at this server.
  }

  /** What a failed request says of the settings, if it is one of theirs: see S3SettingsError. */
  private settingsProblem(error: unknown): string | undefined {
    const code = (error as { name?: string; Code?: string }).Code ?? (error as { name?: string }).name;
    const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
    if (code === 'NoSuchBucket') return this.missingBucket();
    if (code && CREDENTIALS_REFUSED.has(code)) return this.refusedAccess(status ?? 403, code);
    return undefined;
  }

  private missingBucket(): string {
    return `S3 bucket "${this.bucket}" does not exist at ${this.endpoint} (S3_BUCKET, S3_ENDPOINT)`;
  }

  private refusedAccess(status: number, code?: string): string {
    return `S3 refused access to bucket "${this.bucket}" (HTTP ${status}${code ? ` ${code}` : ''}): check S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY, and the bucket's policy`;
  }

  /**
   * HeadBucket, once, within its bound. Its answer has no body, so the SDK's error says only
   * `NotFound: UnknownError` (a missing bucket) or `Unknown: UnknownError` (refused credentials):
   * the error says what failed and which settings to look at instead, never their values.
   */
  async check(): Promise<void> {
    const timeoutMs = this.options.checkTimeoutMs ?? S3_CHECK_TIMEOUT_MS;
    const abortSignal = AbortSignal.timeout(timeoutMs);
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }), { abortSignal });
    } catch (error) {
      if (error instanceof S3SettingsError) throw error;
      const where = `bucket "${this.bucket}" at ${this.endpoint}`;
      const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      let message: string;
      if (abortSignal.aborted) message = `S3 did not answer within ${timeoutMs} ms (${where})`;
      else if (status === 404) message = this.missingBucket();
      else if (status === 401 || status === 403) message = this.refusedAccess(status);
      else if (status === 301 || status === 307) {
        message = `S3 answered HTTP ${status} for ${where}: the bucket is in another region than S3_REGION, or S3_FORCE_PATH_STYLE is needed`;
      } else {
        const cause = error as { name?: string; message?: string };
        message = `S3 did not answer HeadBucket for ${where}${status ? ` (HTTP ${status})` : ''}: ${cause.name ?? 'Error'}: ${cause.message ?? String(error)}`;
      }
      throw new Error(message, { cause: error });
    }
  }
}
