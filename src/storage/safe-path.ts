import path from 'node:path';
import { pathFault, type WholePathFault } from '../path-names.js';

export class UnsafePathError extends Error {
  constructor(
    readonly key: string,
    reason: string,
  ) {
    super(`Unsafe storage path: ${reason}`);
    this.name = 'UnsafePathError';
  }
}

const KEY_FAULT_REASONS: Record<WholePathFault, string> = {
  empty: 'empty key',
  nul: 'NUL byte',
  backslash: 'backslash',
  absolute: 'absolute path',
  control: 'control character',
  'too-many-bytes': 'too long',
};

/** Which names are allowed is up to the caller that makes a key (see keySegments). */
const ANY_NAME = { allowControl: true, allowInvisible: true } as const;

/**
 * Splits a storage key (`a/b/c.txt`) into its segments, refusing anything that could name a
 * place outside the tree: NUL bytes, backslashes, absolute keys, empty, `.` and `..` segments.
 * Which names are allowed at all (control characters, names that show nothing, lengths) is up
 * to the caller that makes the key; the store only keeps keys inside its root.
 */
export function keySegments(key: string): string[] {
  if (typeof key !== 'string') throw new UnsafePathError(String(key), 'empty key');
  const fault = pathFault(key, ANY_NAME);
  if (fault) {
    const reason = 'segment' in fault ? `segment "${fault.segment}"` : KEY_FAULT_REASONS[fault.fault];
    throw new UnsafePathError(key, reason);
  }
  return key.split('/');
}

/**
 * Whether `key` is one keySegments accepts. A file system holds names no key can (`a\b` on
 * Linux): such a file is no object of the store, since no method could read or delete it.
 */
export function isSafeKey(key: string): boolean {
  return pathFault(key, ANY_NAME) === null;
}

/**
 * The one resolver every local path goes through: `root` joined with `key`, proven to stay
 * inside `root` after normalisation. Throws UnsafePathError otherwise.
 */
export function resolveSafePath(root: string, key: string): string {
  const segments = keySegments(key);
  const base = path.resolve(root);
  const resolved = path.resolve(base, ...segments);
  const relative = path.relative(base, resolved);
  if (relative === '' || relative.startsWith('..') || path.isAbsolute(relative)) {
    throw new UnsafePathError(key, 'escapes the storage root');
  }
  return resolved;
}

/** Like resolveSafePath, for a prefix that may end in `/` (a folder). */
export function resolveSafePrefix(root: string, prefix: string): string {
  const trimmed = prefix.replace(/\/+$/, '');
  return resolveSafePath(root, trimmed);
}
