import path from 'node:path';

export class UnsafePathError extends Error {
  constructor(
    readonly key: string,
    reason: string,
  ) {
    super(`Unsafe storage path: ${reason}`);
    this.name = 'UnsafePathError';
  }
}

/**
 * Splits a storage key (`a/b/c.txt`) into its segments, refusing anything that could name a
 * place outside the tree: NUL bytes, backslashes, absolute keys, empty, `.` and `..` segments.
 */
export function keySegments(key: string): string[] {
  if (typeof key !== 'string' || key.length === 0) throw new UnsafePathError(String(key), 'empty key');
  if (key.includes('\0')) throw new UnsafePathError(key, 'NUL byte');
  if (key.includes('\\')) throw new UnsafePathError(key, 'backslash');
  if (key.startsWith('/') || path.isAbsolute(key) || /^[a-zA-Z]:/.test(key)) {
    throw new UnsafePathError(key, 'absolute path');
  }
  const segments = key.split('/');
  for (const segment of segments) {
    if (segment === '' || segment === '.' || segment === '..') {
      throw new UnsafePathError(key, `segment "${segment}"`);
    }
  }
  return segments;
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
