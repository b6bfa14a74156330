import { createWriteStream } from 'node:fs';
import { readdir, rm, stat, utimes } from 'node:fs/promises';
import path from 'node:path';
import { Transform, type TransformCallback, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyRequest } from 'fastify';
import type { Visibility } from '../db/schema.js';
import { ApiError, errors } from '../errors.js';
import { unlessMissing } from '../storage/fs-errors.js';
import { SKILL_VISIBILITIES, type UploadedPart } from '../services/skills.js';

/** Room for multipart boundaries and part headers on top of the file bytes themselves. */
const MULTIPART_OVERHEAD_BYTES = 1024 * 1024;
/** Every zip part stays open until the request ends: bounded, and above the 200 skills anyway. */
const MAX_PARTS = 250;
const MAX_FIELDS = 20;
/** The one body type of a skill upload (`details.accepted` of its 415). */
const MULTIPART = ['multipart/form-data'];

export interface SpooledUpload {
  parts: UploadedPart[];
  visibility: Visibility | undefined;
  /** `create` (same-name skills are skipped) or `replace` (they are replaced, keeping their ids). */
  mode?: SkillUploadMode;
}

export const SKILL_UPLOAD_MODES = ['create', 'replace'] as const;
export type SkillUploadMode = (typeof SKILL_UPLOAD_MODES)[number];

/** Counts the bytes of every file part of a request together and stops at the limit. */
class CombinedLimit {
  total = 0;
  constructor(readonly maxBytes: number) {}

  /** A pass-through for one part; its `bytes` is that part's size once the pipeline ends. */
  meter(): Transform & { bytes: number } {
    const meter = new Transform({
      transform: (chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback) => {
        meter.bytes += chunk.length;
        this.total += chunk.length;
        if (this.total > this.maxBytes) {
          callback(tooLarge(this.maxBytes));
          return;
        }
        callback(null, chunk);
      },
    }) as Transform & { bytes: number };
    meter.bytes = 0;
    return meter;
  }
}

const discard = () =>
  new Writable({
    write(_chunk, _encoding, callback) {
      callback();
    },
  });

function tooLarge(maxBytes: number): ApiError {
  return errors.payloadTooLarge(
    `The files of one upload may come to at most ${maxBytes} bytes; nothing was stored`,
    {
      maxBytes,
    },
  );
}

function tooManyParts(): ApiError {
  return errors.badRequest(`An upload may have at most ${MAX_PARTS} parts and ${MAX_FIELDS} fields`);
}

/** A file name fit to echo back: its last path segment, no control characters, bounded. */
function displayName(filename: string, index: number): string {
  const last = (filename.split(/[/\\]/).pop() ?? '').replace(/[\u0000-\u001f\u007f]/g, '').slice(0, 255);
  return last === '' ? `files[${index}]` : last;
}

/** Multipart and busboy failures → the API error they stand for; a client's mistake is never a 500. */
export function multipartError(error: unknown, maxBytes: number): ApiError {
  if (error instanceof ApiError) return error;
  // A failing temporary file (disk full, permissions) is our fault, not the client's.
  if ((error as { syscall?: string }).syscall) return errors.internal(error);
  const code = (error as { code?: string }).code;
  if (code === 'FST_PARTS_LIMIT' || code === 'FST_FILES_LIMIT' || code === 'FST_FIELDS_LIMIT') {
    return tooManyParts();
  }
  const status = (error as { statusCode?: number }).statusCode;
  if (status === 413) return tooLarge(maxBytes);
  if (status === 406)
    return errors.unsupportedMediaType('The request must be multipart/form-data', MULTIPART);
  return errors.badRequest(`Malformed multipart body (${(error as Error).message ?? 'unreadable'})`);
}

/**
 * Reads the multipart body as a stream: each `files` part goes to its own temporary file in
 * `dir` while the combined size is counted, so the request fails with 413 as soon as it passes
 * `maxBytes` and nothing is ever held in memory. `onVisibility` runs as soon as the field is
 * read, so a key that may not use it is refused before the rest of the body is read.
 */
export async function spoolSkillUpload(
  request: FastifyRequest,
  dir: string,
  maxBytes: number,
  onVisibility: (visibility: Visibility) => void,
): Promise<SpooledUpload> {
  if (!request.isMultipart()) {
    throw errors.unsupportedMediaType(
      'The request must be multipart/form-data with `files` parts',
      MULTIPART,
    );
  }
  const declaredLength = Number(request.headers['content-length']);
  if (Number.isFinite(declaredLength) && declaredLength > maxBytes + MULTIPART_OVERHEAD_BYTES) {
    throw tooLarge(maxBytes);
  }
  const combined = new CombinedLimit(maxBytes);
  const result: SpooledUpload = { parts: [], visibility: undefined };
  try {
    const parts = request.parts({
      limits: {
        fileSize: maxBytes + 1,
        parts: MAX_PARTS,
        fieldSize: 1024,
        fields: MAX_FIELDS,
        headerPairs: 100,
      },
    });
    let fields = 0;
    for await (const part of parts) {
      if (part.type === 'field') {
        fields++;
        if (part.fieldname === 'mode') {
          const mode = String(part.value).trim();
          if (!(SKILL_UPLOAD_MODES as readonly string[]).includes(mode)) {
            throw errors.badRequest(`mode must be one of ${SKILL_UPLOAD_MODES.join(', ')}`, [
              { path: 'body.mode', message: `must be one of ${SKILL_UPLOAD_MODES.join(', ')}` },
            ]);
          }
          result.mode = mode as SkillUploadMode;
          continue;
        }
        if (part.fieldname !== 'visibility') continue;
        const value = String(part.value).trim();
        if (!(SKILL_VISIBILITIES as readonly string[]).includes(value)) {
          throw errors.badRequest(`visibility must be one of ${SKILL_VISIBILITIES.join(', ')}`, [
            { path: 'body.visibility', message: `must be one of ${SKILL_VISIBILITIES.join(', ')}` },
          ]);
        }
        result.visibility = value as Visibility;
        onVisibility(result.visibility);
        continue;
      }
      // A body cut short destroys the part's stream before it reaches us; piping a destroyed
      // stream would wait forever. So does busboy's field limit, before its own error comes.
      if (part.file.destroyed) {
        if (fields >= MAX_FIELDS) throw tooManyParts();
        throw errors.badRequest('Malformed multipart body (a part ends early)');
      }
      if (part.fieldname !== 'files' && part.fieldname !== 'files[]') {
        // Unknown fields are ignored, as in JSON bodies; the bytes still count towards the limit.
        await pipeline(part.file, combined.meter(), discard());
        continue;
      }
      const index = result.parts.length;
      const filePath = path.join(dir, `part-${index}`);
      const meter = combined.meter();
      await pipeline(part.file, meter, createWriteStream(filePath, { flags: 'wx', mode: 0o600 }));
      if ((part.file as { truncated?: boolean }).truncated) throw tooLarge(maxBytes);
      result.parts.push({
        filename: displayName(part.filename ?? '', index),
        contentType: part.mimetype ?? 'application/octet-stream',
        path: filePath,
        size: meter.bytes,
      });
    }
  } catch (error) {
    throw multipartError(error, maxBytes);
  }
  return result;
}

/** Where bulk uploads spool their parts, one `req-…` directory per request. */
export function skillUploadRoot(dataDir: string): string {
  return path.join(dataDir, 'tmp', 'skill-uploads');
}

/**
 * Removes request directories a crashed process left behind. Only those not written to for
 * `olderThanMs`: another process sharing the data dir may be spooling right now, and an upload
 * may run longer than an hour on a slow link (32 MiB at the minimum rate). A running request
 * marks its directory every few minutes (keepSpoolFresh), and a part being written is newer
 * than its directory: the newest time of the directory and its parts decides.
 */
export async function sweepStaleUploads(root: string, olderThanMs: number, now: Date): Promise<number> {
  let removed = 0;
  for (const name of await unlessMissing(readdir(root), [])) {
    if (!name.startsWith('req-')) continue;
    const dir = path.join(root, name);
    const written = await lastWritten(dir);
    // Gone meanwhile (its request ended, another process swept it): nothing to do.
    if (written === undefined || now.getTime() - written < olderThanMs) continue;
    await rm(dir, { recursive: true, force: true });
    removed++;
  }
  return removed;
}

/** How often a running request marks its spool directory as in use: well within the sweep's hour. */
const SPOOL_FRESH_EVERY_MS = 5 * 60 * 1000;

/**
 * Marks a request's spool directory as in use (its time set to now) every `everyMs` until
 * stopped: a request may read a part it does not keep, or process its archive, for a long time
 * without writing a part, and the sweep must not take its spool meanwhile. `stop()` resolves once
 * a mark begun before it has ended: none lands after (one did, on a loaded machine). One mark at
 * a time: a tick while one is under way (a thread pool busy with other file work) makes none,
 * or stop() would wait for the newest mark only, and an older one could still land after it.
 * `mark` is the mark itself (tests hold it under way).
 */
export function keepSpoolFresh(
  dir: string,
  everyMs = SPOOL_FRESH_EVERY_MS,
  mark = (now: Date) => utimes(dir, now, now),
): { stop(): Promise<void> } {
  let marking: Promise<void> | undefined;
  const timer = setInterval(() => {
    if (marking) return;
    // Gone (the request removed it) or unwritable: the sweep's own checks still hold.
    marking = mark(new Date())
      .catch(() => undefined)
      .finally(() => {
        marking = undefined;
      });
  }, everyMs);
  timer.unref();
  return {
    stop: () => {
      clearInterval(timer);
      return marking ?? Promise.resolve();
    },
  };
}

/** When a request's spool directory was last written to: its own time or its newest part's. */
async function lastWritten(dir: string): Promise<number | undefined> {
  const info = await unlessMissing(stat(dir), undefined);
  if (!info) return undefined;
  let newest = info.mtimeMs;
  for (const name of await unlessMissing(readdir(dir), [])) {
    const part = await unlessMissing(stat(path.join(dir, name)), undefined);
    if (part && part.mtimeMs > newest) newest = part.mtimeMs;
  }
  return newest;
}
