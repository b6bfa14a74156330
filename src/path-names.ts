/*
 * What makes a name or a relative path unusable, decided in one place for everything that
 * becomes (part of) a storage key or a folder someone browses: project file names and folders,
 * zip entry names, storage keys, skill names. Callers choose the limits that are theirs and word
 * the answer for their audience; the faults themselves are found here.
 */

/** What can be wrong with one name (a file or folder name, one segment of a path). */
export type NameFault =
  | 'empty'
  | 'nul'
  | 'control'
  | 'backslash'
  | 'slash'
  | 'dot'
  | 'dot-dot'
  | 'too-many-characters'
  | 'too-many-bytes';

export interface NameRules {
  /** Let control characters (but NUL) through; they are refused otherwise. */
  allowControl?: boolean;
  /** Let `.` and `..` through, for a name that never becomes a path segment. */
  allowDots?: boolean;
  /** At most this many characters (code points). */
  maxCharacters?: number;
  /** At most this many UTF-8 bytes (a file system's limit on one name). */
  maxBytes?: number;
}

/**
 * Control characters: C0 (U+0000–U+001F), DEL and C1 (U+0080–U+009F, among them U+0085, a line
 * break to many tools), Unicode's `Cc`: a name holding one cannot be typed, and breaks the lines
 * of what shows it.
 */
const CONTROL = /\p{Cc}/u;
const WINDOWS_DRIVE = /^[a-zA-Z]:/;

/** The first thing wrong with `name` used as one segment of a path, or null when it is fine. */
export function nameFault(name: string, rules: NameRules = {}): NameFault | null {
  if (name.length === 0) return 'empty';
  if (name.includes('\0')) return 'nul';
  if (!rules.allowControl && CONTROL.test(name)) return 'control';
  if (name.includes('\\')) return 'backslash';
  if (name.includes('/')) return 'slash';
  if (!rules.allowDots && name === '.') return 'dot';
  if (!rules.allowDots && name === '..') return 'dot-dot';
  if (rules.maxCharacters !== undefined && [...name].length > rules.maxCharacters)
    return 'too-many-characters';
  if (rules.maxBytes !== undefined && Buffer.byteLength(name) > rules.maxBytes) return 'too-many-bytes';
  return null;
}

export interface PathRules {
  /** Let control characters through (storage keys: the caller decides what names it writes). */
  allowControl?: boolean;
  /** A trailing `/` names a directory (zip directory entries) rather than an empty last segment. */
  directory?: boolean;
  /** At most this many UTF-8 bytes in one segment. */
  maxSegmentBytes?: number;
  /** At most this many UTF-8 bytes in the whole path. */
  maxBytes?: number;
}

export type WholePathFault = 'empty' | 'nul' | 'backslash' | 'absolute' | 'control' | 'too-many-bytes';

/** What is wrong with a relative path: the whole of it, or one of its segments. */
export type PathFault = { fault: WholePathFault } | { fault: NameFault; segment: string };

/**
 * Segment faults by how much they say: climbing out (`..`) is the one worth naming when a path
 * has several, so it is reported before a `.`, an empty segment or a long one.
 */
const SEGMENT_FAULT_ORDER: NameFault[] = ['dot-dot', 'dot', 'empty', 'too-many-bytes'];

/**
 * The first thing wrong with `path` as a relative `a/b/c` path below some root, or null. Checked
 * raw, before any normalisation, so that `a\..\b` or `a/./b` is refused rather than rewritten.
 */
export function pathFault(path: string, rules: PathRules = {}): PathFault | null {
  if (path.length === 0) return { fault: 'empty' };
  if (path.includes('\0')) return { fault: 'nul' };
  if (path.includes('\\')) return { fault: 'backslash' };
  if (path.startsWith('/') || WINDOWS_DRIVE.test(path)) return { fault: 'absolute' };
  if (!rules.allowControl && CONTROL.test(path)) return { fault: 'control' };
  const body = rules.directory && path.endsWith('/') ? path.slice(0, -1) : path;
  const segmentRules: NameRules = { allowControl: true, maxBytes: rules.maxSegmentBytes };
  const faults = body.split('/').flatMap((segment) => {
    const fault = nameFault(segment, segmentRules);
    return fault ? [{ fault, segment }] : [];
  });
  const worst = SEGMENT_FAULT_ORDER.map((fault) => faults.find((found) => found.fault === fault)).find(
    Boolean,
  );
  if (worst) return worst;
  if (rules.maxBytes !== undefined && Buffer.byteLength(path) > rules.maxBytes)
    return { fault: 'too-many-bytes' };
  return null;
}
