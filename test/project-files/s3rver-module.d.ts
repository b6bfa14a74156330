declare module 's3rver' {
  import type { AddressInfo } from 'node:net';
  import type FilesystemStore from 's3rver/lib/stores/filesystem.js';

  interface S3rverOptions {
    port?: number;
    address?: string;
    silent?: boolean;
    directory: string;
    configureBuckets?: { name: string; configs?: Array<string | Buffer> }[];
    allowMismatchedSignatures?: boolean;
    resetOnClose?: boolean;
  }

  export default class S3rver {
    constructor(options: S3rverOptions);
    /** The store the server uses itself (buckets at start). */
    store: FilesystemStore;
    /** Koa's context prototype: `store` is what request handlers use. */
    context: { store: FilesystemStore };
    run(): Promise<AddressInfo>;
    close(): Promise<void>;
  }
}

declare module 's3rver/lib/stores/filesystem.js' {
  import type { Readable } from 'node:stream';

  /** The part of s3rver's file-system store that test/project-files/s3rver.ts overrides or calls. */
  export default class FilesystemStore {
    constructor(rootDirectory: string);
    getResourcePath(bucket: string, key: string | undefined, resource: string): string;
    putMetadata(bucket: string, key: string, metadata: object, md5?: string): Promise<void>;
    putObject(object: {
      bucket: string;
      key: string;
      content: Readable | Buffer;
      metadata: object;
    }): Promise<{ size: number; md5: string }>;
    putPart(
      bucket: string,
      uploadId: string,
      partNumber: number,
      content: Readable,
    ): Promise<{ size: number; md5: string }>;
  }
}
