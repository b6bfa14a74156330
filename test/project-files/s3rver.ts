import { createHash } from 'node:crypto';
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import S3rver from 's3rver';
import FilesystemStore from 's3rver/lib/stores/filesystem.js';
import type { S3StorageConfig } from '../../src/storage/s3-store.js';

/** Writes `content` to `file` and resolves once every byte is in it, with its size and MD5. */
async function writeWhole(file: string, content: Readable | Buffer): Promise<{ size: number; md5: string }> {
  await mkdir(path.dirname(file), { recursive: true });
  const hash = createHash('md5');
  let size = 0;
  const count = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      hash.update(chunk);
      size += chunk.length;
      callback(null, chunk);
    },
  });
  const source = Buffer.isBuffer(content) ? Readable.from([content]) : content;
  await pipeline(source, count, createWriteStream(file));
  return { size, md5: hash.digest('hex') };
}

/**
 * s3rver's store, but a PUT (an object or a part of a multipart upload) is answered only once its
 * bytes are in the file. s3rver's own (3.7.1) resolves once the body has passed its MD5 counter,
 * not once the file stream has opened and written the file on libuv's thread pool: on a loaded
 * machine the 200 went out before the object's file existed (seen 1 in 3,000 PUTs under CPU and
 * disk load), and the sync that followed listed the project without it (cycle-s3.test.ts
 * "registers one of a file and a folder…" answered 200, one object added, instead of 409).
 */
class WrittenFilesystemStore extends FilesystemStore {
  override async putObject(object: {
    bucket: string;
    key: string;
    content: Readable | Buffer;
    metadata: object;
  }) {
    const written = await writeWhole(
      this.getResourcePath(object.bucket, object.key, 'object'),
      object.content,
    );
    await this.putMetadata(object.bucket, object.key, object.metadata, written.md5);
    return written;
  }

  override async putPart(bucket: string, uploadId: string, partNumber: number, content: Readable) {
    const part = path.join(this.getResourcePath(bucket, undefined, 'uploads'), uploadId, String(partNumber));
    const written = await writeWhole(part, content);
    await writeFile(`${part}.md5`, written.md5);
    return written;
  }
}

/** A local S3-compatible server (s3rver) on a random port with one bucket, for tests and benches. */
export async function startS3rver(bucket = 'atrium-test') {
  const directory = mkdtempSync(path.join(tmpdir(), 'atrium-s3rver-'));
  const server = new S3rver({
    port: 0,
    address: '127.0.0.1',
    silent: true,
    directory,
    configureBuckets: [{ name: bucket }],
  });
  // Requests reach the store through the context; the server uses its own field at start.
  server.store = server.context.store = new WrittenFilesystemStore(directory);
  const address = (await server.run()) as AddressInfo;
  const config: S3StorageConfig = {
    kind: 's3',
    endpoint: `http://127.0.0.1:${address.port}`,
    region: 'us-east-1',
    bucket,
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    forcePathStyle: true,
  };
  return {
    config,
    async close() {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
