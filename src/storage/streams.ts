/** Stream helpers every storage backend's `put` uses: a size meter and a copy that spares its source. */
import type { Readable, Writable } from 'node:stream';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ApiError, errors } from '../errors.js';
import type { PutOptions } from './object-store.js';

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
  // A body destroyed before the copy began (a client gone while the write was being set up)
  // sends neither 'close' nor 'end' again: without this the copy would wait for it forever,
  // holding its temp file open.
  if (body.destroyed && !body.readableEnded) {
    if (body.errored) onError(body.errored);
    else onClose();
  }
  body.pipe(meter);
  try {
    await done;
  } finally {
    body.unpipe(meter);
    body.off('error', onError);
    body.off('close', onClose);
  }
}

/** The meter of a `put`: stops at the lower of `maxBytes` and `exactBytes`, when either is set. */
export function meterFor(options: Pick<PutOptions, 'maxBytes' | 'exactBytes'>): MeteredStream {
  const limits = [options.maxBytes, options.exactBytes].filter((n): n is number => n !== undefined);
  return new MeteredStream(limits.length > 0 ? Math.min(...limits) : undefined);
}

/**
 * A body read into one buffer, or `too-large` (and the body destroyed) once it holds more than
 * `maxBytes`, whatever size its sender announced (`announcedSize`).
 */
export async function readWhole(
  body: Readable,
  announcedSize: number,
  maxBytes: number,
): Promise<Buffer | 'too-large'> {
  if (announcedSize > maxBytes) {
    body.destroy();
    return 'too-large';
  }
  const parts: Buffer[] = [];
  let length = 0;
  for await (const part of body) {
    const buffer = Buffer.isBuffer(part) ? part : Buffer.from(part as Uint8Array);
    length += buffer.length;
    if (length > maxBytes) {
      body.destroy();
      return 'too-large';
    }
    parts.push(buffer);
  }
  return Buffer.concat(parts, length);
}
