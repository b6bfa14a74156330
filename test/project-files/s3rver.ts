import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';
import type { S3StorageConfig } from '../../src/storage/s3-store.js';

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
