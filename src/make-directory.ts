import fs from 'node:fs';
import path from 'node:path';
import { hasErrorCode } from './storage/fs-errors.js';

/*
 * `mkdir -p` for the directories Atrium is told to use (the data dir, the database's folder, the
 * file store's root), one level at a time. Node's own recursive mkdir never ends where a parent
 * exists but refuses new entries with ENOENT (`/proc`, `/sys`): it makes the parent (EEXIST) and
 * tries the child again, forever, so `atrium serve` hung with nothing said. Here the failure is
 * the error of the level that could not be made.
 */

/** The levels of `dir` that do not exist yet, outermost first. */
function missingLevels(dir: string, exists: (dir: string) => boolean): string[] {
  const missing: string[] = [];
  for (let level = path.resolve(dir); !exists(level); level = path.dirname(level)) {
    missing.unshift(level);
    if (path.dirname(level) === level) break;
  }
  return missing;
}

/** Makes `dir` and its missing parents; returns the first one made (as `mkdir -p` does), if any. */
export function makeDirectorySync(dir: string): string | undefined {
  const missing = missingLevels(dir, (level) => fs.existsSync(level));
  for (const level of missing) {
    try {
      fs.mkdirSync(level);
    } catch (error) {
      // Another process made it meanwhile (several start on one data dir).
      if (!hasErrorCode(error, 'EEXIST')) throw error;
    }
  }
  return missing[0];
}

/** {@link makeDirectorySync} off the main thread. */
export async function makeDirectory(dir: string): Promise<string | undefined> {
  const exists = new Map<string, boolean>();
  // Walks up with async stats first, then decides synchronously on what they found.
  for (let level = path.resolve(dir); ; level = path.dirname(level)) {
    const found = await fs.promises.stat(level).then(
      () => true,
      () => false,
    );
    exists.set(level, found);
    if (found || path.dirname(level) === level) break;
  }
  const missing = missingLevels(dir, (level) => exists.get(level) ?? true);
  for (const level of missing) {
    try {
      await fs.promises.mkdir(level);
    } catch (error) {
      if (!hasErrorCode(error, 'EEXIST')) throw error;
    }
  }
  return missing[0];
}
