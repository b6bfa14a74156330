import type { Config } from '../config.js';
import { type Clock, systemClock } from '../ids.js';
import { FsObjectStore } from './fs-store.js';
import type { ObjectStore, StoreLog } from './object-store.js';
import { S3ObjectStore } from './s3-store.js';

export type { ObjectStore, StoreLog } from './object-store.js';

/** The one place that picks a storage backend from config. */
export function createObjectStore(
  config: Pick<Config, 'storage' | 'signingSecret' | 'publicUrl' | 'host' | 'port'>,
  options: { clock?: Clock; log?: StoreLog } = {},
): ObjectStore {
  const { log } = options;
  const clock = options.clock ?? systemClock;
  if (config.storage.kind === 's3') return new S3ObjectStore(config.storage, { clock, log });
  return new FsObjectStore({
    log,
    root: config.storage.root,
    signingSecret: config.signingSecret,
    clock,
    publicUrl: config.publicUrl,
    fallbackOrigin: httpOrigin(config.host, config.port),
  });
}

/** `http://HOST:PORT`, the origin of signed URLs when ATRIUM_PUBLIC_URL is not set. */
export function httpOrigin(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}
