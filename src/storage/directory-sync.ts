import fs from 'node:fs';
import path from 'node:path';
import { hasErrorCode } from './fs-errors.js';

/**
 * Where a directory cannot be fsynced: Windows refuses to open one (EISDIR, EPERM), some file
 * systems to fsync one (EINVAL, ENOTSUP). There the step is skipped.
 */
const UNSUPPORTED = ['EISDIR', 'EINVAL', 'EPERM', 'ENOTSUP'];

/**
 * The directories whose entries a new name in `dir` changed: `dir` itself and, when a recursive
 * mkdir made it (`created`, the first directory that mkdir made), each one above it up to the
 * one that was there, which holds the name of the first one made.
 */
export function directoriesChanged(dir: string, created: string | undefined): string[] {
  const changed = [path.resolve(dir)];
  if (created === undefined) return changed;
  const holder = path.dirname(path.resolve(created));
  for (let made = changed[0]!; made !== holder && made !== path.dirname(made);) {
    made = path.dirname(made);
    changed.push(made);
  }
  return changed;
}

/**
 * fsyncs a directory, so that the names linked, renamed or created in it last: an fsync of the
 * file alone does not keep its name through a power cut (ext4, xfs). Skipped where unsupported.
 */
export function syncDirectorySync(dir: string): void {
  let fd: number;
  try {
    fd = fs.openSync(dir, 'r');
  } catch (error) {
    if (hasErrorCode(error, ...UNSUPPORTED)) return;
    throw error;
  }
  try {
    fs.fsyncSync(fd);
  } catch (error) {
    if (!hasErrorCode(error, ...UNSUPPORTED)) throw error;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * {@link syncDirectorySync} off the main thread: three hops to the thread pool (open, fsync,
 * close), in the callback forms the store's hot paths use (cheaper per call than a FileHandle).
 */
export async function syncDirectory(dir: string): Promise<void> {
  let fd: number;
  try {
    fd = await new Promise<number>((resolve, reject) =>
      fs.open(dir, 'r', (error, opened) => (error ? reject(error) : resolve(opened))),
    );
  } catch (error) {
    if (hasErrorCode(error, ...UNSUPPORTED)) return;
    throw error;
  }
  try {
    await new Promise<void>((resolve, reject) =>
      fs.fsync(fd, (error) => (error ? reject(error) : resolve())),
    );
  } catch (error) {
    if (!hasErrorCode(error, ...UNSUPPORTED)) throw error;
  } finally {
    await new Promise<void>((resolve) => fs.close(fd, () => resolve()));
  }
}
