import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { makeDirectorySync } from './make-directory.js';
import { directoriesChanged, syncDirectorySync } from './storage/directory-sync.js';
import { hasErrorCode } from './storage/fs-errors.js';

/**
 * How long a reader waits for a secret file that another process has created but not written
 * yet (on a file system without hard links, see {@link createExclusively}): the writer needs
 * microseconds; this leaves room for a machine that is busy starting several processes.
 */
const WRITE_WAIT_MS = 2000;

/**
 * The secret in `file` (trimmed; '' when the file is empty), made first if there is none.
 * Processes sharing a data dir may start at once: each writes a secret of its own to a temp
 * file, fsyncs it and links it to the name. A link fails when the name is taken, so the first
 * one stays, whole, and every process reads it. Where the file system has no hard links, the
 * first to create the name exclusively wins instead, and readers wait until it is written.
 */
export function readOrCreateSecretFile(file: string): string {
  const found = readSecretFile(file);
  if (found !== undefined) return found;
  const dir = path.dirname(file);
  // The first directory this made, when the data dir did not exist yet.
  const created = makeDirectorySync(dir);
  const text = `${randomBytes(32).toString('base64url')}\n`;
  if (!linkIntoPlace(file, text)) createExclusively(file, text);
  // The name too must reach the disk: lost in a power cut, it would have the next start
  // generate another secret, and every URL signed before would fail. So must the names of the
  // directories made for it, up to the one that was there.
  for (const changed of directoriesChanged(dir, created)) syncDirectorySync(changed);
  const secret = readSecretFile(file);
  if (secret === undefined) throw new Error(`${file} was removed while it was being made`);
  return secret;
}

/**
 * Places `text` at `file` by a hard link, unless another process placed its own first; false
 * when the file system has no hard links.
 */
function linkIntoPlace(file: string, text: string): boolean {
  // A crash before the unlink leaves this small file behind, never an empty `file`.
  const temp = `${file}.${randomBytes(8).toString('hex')}.tmp`;
  writeDurably(temp, text);
  try {
    fs.linkSync(temp, file);
  } catch (error) {
    if (hasErrorCode(error, 'EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS')) return false;
    // EEXIST: another process made it first, and its secret is the one.
    if (!hasErrorCode(error, 'EEXIST')) throw error;
  } finally {
    fs.unlinkSync(temp);
  }
  return true;
}

/**
 * Creates `file` with `text` unless another process created it first (its secret is then the
 * one). The name exists, empty, until the text is written: readers wait for it, and a crash in
 * between leaves an empty file, which the start refuses rather than take an empty secret.
 */
function createExclusively(file: string, text: string): void {
  try {
    writeDurably(file, text);
  } catch (error) {
    if (!hasErrorCode(error, 'EEXIST')) throw error;
  }
}

/** A new file (never an existing one) holding `text`, on the disk when this returns. */
function writeDurably(file: string, text: string): void {
  const fd = fs.openSync(file, 'wx', 0o600);
  try {
    fs.writeFileSync(fd, text);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The trimmed text of `file`, or undefined when there is none. An empty file may be a secret
 * another process has created but not written yet (it writes the whole text in one write): it
 * is read again while the file is new, for {@link WRITE_WAIT_MS} at most. An empty file older
 * than that (a crash between create and write) is taken as it is, and the start refuses it.
 * Any text is taken at once, a secret written by hand without a final newline included.
 */
function readSecretFile(file: string): string | undefined {
  const deadline = Date.now() + WRITE_WAIT_MS;
  for (;;) {
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (error) {
      if (hasErrorCode(error, 'ENOENT')) return undefined;
      throw error;
    }
    if (text !== '' || Date.now() >= deadline || !changedWithin(file, WRITE_WAIT_MS)) {
      return text.trim();
    }
    sleep(10);
  }
}

/**
 * Whether `file` changed less than `ms` ago, or less than `ms` ahead of the clock: a file just
 * written may carry a time a fraction of a millisecond past Date.now() (which drops that
 * fraction), and another clock (a file server's) may run a little ahead. A time further ahead
 * does not count as recent.
 */
function changedWithin(file: string, ms: number): boolean {
  const age = Date.now() - fs.statSync(file).mtimeMs;
  return Math.abs(age) < ms;
}

/** Blocks the thread: the configuration is read synchronously, once, at start. */
function sleep(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
