import { MAX_JSON_CONTAINERS, MAX_JSON_KEY_NAMES } from '../limits.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const COLON = 0x3a;
const ESCAPED_CODE_UNIT = Buffer.from('\\u');

/** What a JSON text may hold at most: objects and arrays, and different key names. */
export interface JsonTextLimitValues {
  containers: number;
  keyNames: number;
}

/** The limit a JSON text passed (JsonTextLimits). */
export type JsonTextLimit = keyof JsonTextLimitValues;

/** The limits of a request's JSON: its body, and /v1/openai's tool-call arguments together. */
export const JSON_TEXT_LIMITS: JsonTextLimitValues = {
  containers: MAX_JSON_CONTAINERS,
  keyNames: MAX_JSON_KEY_NAMES,
};

/** What a JSON text holds past one of JSON_TEXT_LIMITS, as a refusal says it (after "holds"). */
export function jsonLimitPassed(limit: JsonTextLimit): string {
  return limit === 'containers'
    ? `more than ${MAX_JSON_CONTAINERS} objects and arrays`
    : `more than ${MAX_JSON_KEY_NAMES} different key names`;
}

/**
 * The limit a JSON text passes, or null, read on its bytes before it is decoded or parsed
 * (JsonTextLimits). Text shorter than twice the container limit and five times the name limit
 * cannot pass either (an object or array takes two bytes at least, a key of a name of its own
 * five: `"a":0,`), so small bodies are not scanned.
 */
export function jsonTextPastLimits(bytes: Buffer, limits: JsonTextLimitValues): JsonTextLimit | null {
  if (bytes.length <= 2 * limits.containers && bytes.length <= 5 * limits.keyNames) return null;
  return new JsonTextLimits(limits).add(bytes);
}

/**
 * Counts what JSON texts read one after another hold together (a request's tool-call arguments),
 * on their bytes before they are parsed: objects and arrays (parsing millions of empty objects
 * is what costs), and the different names of their keys (parsing new names is what costs: a
 * million keys of a few names parse fast, of a million names slowly; limits.ts). Objects and
 * arrays are their `{` and `[` outside strings; a key is a string followed by a `:` outside
 * strings, its name its bytes (an escape spelling a name another way makes another name, which
 * only counts more). Keys are counted first, their names only once there are more keys than
 * names allowed: a body of fewer keys needs no names kept. Malformed JSON is left to the parser.
 */
export class JsonTextLimits {
  readonly #limits: JsonTextLimitValues;
  #containers = 0;
  #keys = 0;
  /** The names of the keys so far, once there were more keys than names allowed. */
  #names: KeyNames | undefined;
  /** The texts counted before names were kept, whose names are read once they must be. */
  readonly #unnamed: Buffer[] = [];

  constructor(limits: JsonTextLimitValues) {
    this.#limits = limits;
  }

  /** Counts `bytes` in with the texts before; the first limit they pass together, or null. */
  add(bytes: Buffer): JsonTextLimit | null {
    // A text long enough to hold more keys than there are names left has its names read in the
    // same pass as its count: counting first read a body of a million keys twice.
    if (!this.#names && bytes.length > 5 * (this.#limits.keyNames - this.#keys) && this.#keepNames()) {
      return 'keyNames';
    }
    const counted = scanJson(
      bytes,
      this.#limits.containers - this.#containers,
      this.#names,
      this.#limits.keyNames,
    );
    this.#containers += counted.containers;
    if (this.#containers > this.#limits.containers) return 'containers';
    if (this.#names) return this.#names.size > this.#limits.keyNames ? 'keyNames' : null;
    this.#keys += counted.keys;
    if (this.#keys <= this.#limits.keyNames) {
      this.#unnamed.push(bytes);
      return null;
    }
    return this.#keepNames(bytes) ? 'keyNames' : null;
  }

  /** Starts keeping names: those of the texts counted so far (and `more`); whether they pass. */
  #keepNames(...more: Buffer[]): boolean {
    const names = (this.#names = new KeyNames());
    for (const text of [...this.#unnamed.splice(0), ...more]) {
      scanJson(text, Infinity, names, this.#limits.keyNames);
      if (names.size > this.#limits.keyNames) return true;
    }
    return false;
  }
}

/** Slots of KeyNames' memory of recent names (a power of two). */
const RECENT_NAME_SLOTS = 4096;

/**
 * The different names of keys, read from a text's bytes (latin1: a character a byte, so equal
 * names are equal bytes). Most keys repeat a name (the fields of records, of message parts), and
 * reading each into a string cost more than parsing the text: a slot per hash of a name's bytes
 * holds the last name read with that hash, and a key whose bytes are that name is not read again
 * (a million keys of 20 or 1,000 names: 40–50 ms against 140). Names sharing a slot are only read
 * again, never counted wrong: the set decides.
 */
class KeyNames {
  readonly #names = new Set<string>();
  readonly #recent = new Array<string | undefined>(RECENT_NAME_SLOTS);

  get size(): number {
    return this.#names.size;
  }

  /** Adds the name of the key whose bytes are `bytes` from `start` to `end`. */
  add(bytes: Buffer, start: number, end: number): void {
    let hash = 0x811c9dc5;
    for (let i = start; i < end; i++) hash = Math.imul(hash ^ bytes[i]!, 0x01000193);
    const slot = hash & (RECENT_NAME_SLOTS - 1);
    const recent = this.#recent[slot];
    if (recent !== undefined && isNameAt(recent, bytes, start, end)) return;
    const name = bytes.toString('latin1', start, end);
    this.#recent[slot] = name;
    this.#names.add(name);
  }
}

function isNameAt(name: string, bytes: Buffer, start: number, end: number): boolean {
  if (name.length !== end - start) return false;
  for (let i = 0; i < name.length; i++) if (name.charCodeAt(i) !== bytes[start + i]) return false;
  return true;
}

/**
 * One pass over a JSON text: its objects and arrays (counted up to `containersLeft` + 1) and its
 * keys, whose names go into `names` when given (up to `maxNames` + 1 of them). Strings are
 * skipped by endOfString: a 16 MB data URL is one string, passed with `indexOf`.
 */
function scanJson(
  bytes: Buffer,
  containersLeft: number,
  names: KeyNames | undefined,
  maxNames: number,
): { containers: number; keys: number } {
  let containers = 0;
  let keys = 0;
  // The last string read: a key when a `:` follows it.
  let stringStart = 0;
  let stringEnd = 0;
  let i = 0;
  while (i < bytes.length) {
    const byte = bytes[i]!;
    const kind = BYTE_KIND[byte]!;
    if (kind === STRING) {
      stringStart = i + 1;
      i = endOfString(bytes, i);
      if (i === -1) break;
      stringEnd = i - 1;
    } else {
      if (kind === 1 && ++containers > containersLeft) break;
      if (byte === COLON) {
        keys++;
        if (names) {
          names.add(bytes, stringStart, stringEnd);
          if (names.size > maxNames) break;
        }
      }
      i++;
    }
  }
  return { containers, keys };
}

/**
 * Whether a JSON text that parsed can hold nothing the input guard refuses (plugins/input-guard.ts),
 * read on its bytes: no `\u` escape (in text decoded strictly as UTF-8, an escape is the only way
 * to write a NUL or an unpaired surrogate) and no object or array nested deeper than `maxDepth`
 * (the guard's own count: the body itself is at depth 1 here). Walking a parsed body of a million
 * keys took as long as parsing it; this takes a few milliseconds. Strings are skipped as in
 * scanJson. An escaped backslash before a `u` also reads as an escape: the guard then
 * walks the body, which is only slower.
 */
export function isPlainJsonWithin(bytes: Buffer, maxDepth: number): boolean {
  if (bytes.includes(ESCAPED_CODE_UNIT)) return false;
  let depth = 0;
  let i = 0;
  while (i < bytes.length) {
    const kind = BYTE_KIND[bytes[i]!]!;
    if (kind === OTHER) i++;
    else if (kind === STRING) {
      i = endOfString(bytes, i);
      if (i === -1) return false;
    } else {
      depth += kind;
      if (depth > maxDepth) return false;
      i++;
    }
  }
  return true;
}

/**
 * What a byte outside strings does to the scan (one table lookup, not a comparison per kind:
 * a fifth faster on a body of a million short keys): opens (+1) or closes (-1) an object or
 * array, begins a string, or nothing.
 */
const OTHER = 0;
const STRING = 2;
const BYTE_KIND = new Int8Array(256);
BYTE_KIND[OPEN_BRACE] = 1;
BYTE_KIND[OPEN_BRACKET] = 1;
BYTE_KIND[CLOSE_BRACE] = -1;
BYTE_KIND[CLOSE_BRACKET] = -1;
BYTE_KIND[QUOTE] = STRING;

/** Bytes of a string read one by one before `indexOf` takes over: most keys are short. */
const SHORT_STRING = 32;

/**
 * The index after the string opening at `start`, or -1 when it does not end. A call of `indexOf`
 * per string cost more than the string's bytes in a body of a million short keys, so the first
 * bytes are read here.
 */
function endOfString(bytes: Buffer, start: number): number {
  const stop = Math.min(bytes.length, start + SHORT_STRING);
  for (let i = start + 1; i < stop; i++) {
    const byte = bytes[i];
    if (byte === QUOTE) return i + 1;
    if (byte === BACKSLASH) i++;
  }
  let end = start;
  for (;;) {
    end = bytes.indexOf(QUOTE, end + 1);
    if (end === -1) return -1;
    let backslashes = 0;
    while (bytes[end - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return end + 1;
  }
}
