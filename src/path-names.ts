/*
 * What makes a name or a relative path unusable, decided in one place for everything that
 * becomes (part of) a storage key or a folder someone browses: project file names and folders,
 * zip entry names, storage keys, skill names. Callers choose the limits that are theirs and word
 * the answer for their audience; the faults themselves are found here.
 */
import { showsCharacter } from './text.js';

/** What can be wrong with one name (a file or folder name, one segment of a path). */
export type NameFault =
  | 'empty'
  | 'nul'
  | 'control'
  | 'backslash'
  | 'slash'
  | 'dot'
  | 'dot-dot'
  | 'invisible'
  | 'too-many-characters'
  | 'too-many-bytes';

export interface NameRules {
  /** Let control characters (but NUL) and the other refused characters through. */
  allowControl?: boolean;
  /** Let `.` and `..` through, for a name that never becomes a path segment. */
  allowDots?: boolean;
  /** Let a name that shows no character through (the `invisible` fault). */
  allowInvisible?: boolean;
  /** At most this many characters (code points). */
  maxCharacters?: number;
  /** At most this many UTF-8 bytes (a file system's limit on one name). */
  maxBytes?: number;
}

/**
 * Characters no name may hold, one rule for every name (the `control` fault):
 * - control characters: C0 (U+0000–U+001F), DEL and C1 (U+0080–U+009F, among them U+0085, a
 *   line break to many tools), Unicode's `Cc`: a name holding one cannot be typed, and breaks
 *   the lines of what shows it;
 * - the invisible characters that make a name read as another ("Trojan Source", CVE-2021-42574):
 *   bidirectional embeddings and overrides (U+202A–U+202E), isolates (U+2066–U+2069), the
 *   direction marks (U+200E, U+200F, U+061C), so `invoice\u202Efdp.exe` shows as `invoiceexe.pdf`;
 *   and the line and paragraph separators (U+2028, U+2029), line breaks to JavaScript and
 *   Unicode-aware viewers.
 * Other format characters stay allowed: U+200D joins emoji, U+200C shapes Persian and Indic text.
 */
const REFUSED = /[\p{Cc}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/u;
const REFUSED_ALL = new RegExp(REFUSED.source, 'gu');
const WINDOWS_DRIVE = /^[a-zA-Z]:/;

/** The first thing wrong with `name` used as one segment of a path, or null when it is fine. */
export function nameFault(name: string, rules: NameRules = {}): NameFault | null {
  if (name.length === 0) return 'empty';
  if (name.includes('\0')) return 'nul';
  if (!rules.allowControl && REFUSED.test(name)) return 'control';
  if (name.includes('\\')) return 'backslash';
  if (name.includes('/')) return 'slash';
  if (!rules.allowDots && name === '.') return 'dot';
  if (!rules.allowDots && name === '..') return 'dot-dot';
  // Spaces, zero-width and blank filler characters alone: the name looks nameless in every list.
  if (!rules.allowInvisible && !showsCharacter(name)) return 'invisible';
  if (rules.maxCharacters !== undefined && [...name].length > rules.maxCharacters)
    return 'too-many-characters';
  if (rules.maxBytes !== undefined && Buffer.byteLength(name) > rules.maxBytes) return 'too-many-bytes';
  return null;
}

/** `U+202E`: how Unicode writes a code point, so an answer can name a character it cannot show. */
function codePointLabel(character: string): string {
  return `U+${character.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
}

/**
 * The first character of `name` that the `control` and `nul` faults refuse, as `U+202E`, or
 * null: what an error names rather than shows, since showing it is the trick.
 */
export function refusedCharacter(name: string): string | null {
  const found = REFUSED.exec(name);
  return found ? codePointLabel(found[0]) : null;
}

/** `\u{202E}`: a character written so that an answer shows it, whatever it is. */
function escaped(character: string): string {
  return `\\u{${character.codePointAt(0)!.toString(16).toUpperCase()}}`;
}

/**
 * `name` fit to echo in an error: each refused character written as `\u{202E}`, so the answer
 * shows what the name holds and neither reorders nor breaks the line that quotes it; and every
 * character of a segment that shows nothing (`\u{200B}`), which quoted raw would read as no
 * name at all. Invisible characters within a visible segment (an emoji's U+200D) stay as they are.
 */
export function escapedName(name: string): string {
  return name
    .split('/')
    .map((segment) =>
      segment === '' || showsCharacter(segment)
        ? segment.replace(REFUSED_ALL, escaped)
        : [...segment].map(escaped).join(''),
    )
    .join('/');
}

export interface PathRules {
  /**
   * Let control and the other refused characters through (storage keys: the caller decides what
   * names it writes).
   */
  allowControl?: boolean;
  /** Let segments that show no character through (storage keys, as above). */
  allowInvisible?: boolean;
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
 * has several, so it is reported before a `.`, an empty segment, one that shows nothing or a
 * long one.
 */
const SEGMENT_FAULT_ORDER: NameFault[] = ['dot-dot', 'dot', 'empty', 'invisible', 'too-many-bytes'];

/**
 * The first thing wrong with `path` as a relative `a/b/c` path below some root, or null. Checked
 * raw, before any normalisation, so that `a\..\b` or `a/./b` is refused rather than rewritten.
 */
export function pathFault(path: string, rules: PathRules = {}): PathFault | null {
  if (path.length === 0) return { fault: 'empty' };
  if (path.includes('\0')) return { fault: 'nul' };
  if (path.includes('\\')) return { fault: 'backslash' };
  if (path.startsWith('/') || WINDOWS_DRIVE.test(path)) return { fault: 'absolute' };
  if (!rules.allowControl && REFUSED.test(path)) return { fault: 'control' };
  const body = rules.directory && path.endsWith('/') ? path.slice(0, -1) : path;
  const segmentRules: NameRules = {
    allowControl: true,
    allowInvisible: rules.allowInvisible,
    maxBytes: rules.maxSegmentBytes,
  };
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
