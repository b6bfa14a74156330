const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const ESCAPED_CODE_UNIT = Buffer.from('\\u');

/**
 * Whether a JSON text holds more than `limit` objects and arrays: its `{` and `[` outside
 * strings, counted on the bytes before the text is decoded or parsed (parsing millions of empty
 * objects is what costs). Text shorter than twice the limit cannot hold more (each takes two
 * bytes at least), so small bodies are not scanned. Strings are skipped with `indexOf` (a
 * 16 MB data URL is one string), a quote counting as their end unless an odd number of
 * backslashes precede it. Malformed JSON is left to the parser.
 */
export function jsonContainersOver(bytes: Buffer, limit: number): boolean {
  return bytes.length > 2 * limit && countJsonContainers(bytes, limit) > limit;
}

/** The objects and arrays of a JSON text (see jsonContainersOver), counted up to `limit` + 1. */
export function countJsonContainers(bytes: Buffer, limit: number): number {
  let count = 0;
  let i = 0;
  while (i < bytes.length) {
    const byte = bytes[i];
    if (byte === QUOTE) {
      let end = i;
      for (;;) {
        end = bytes.indexOf(QUOTE, end + 1);
        if (end === -1) return count;
        let backslashes = 0;
        while (bytes[end - 1 - backslashes] === BACKSLASH) backslashes++;
        if (backslashes % 2 === 0) break;
      }
      i = end + 1;
    } else {
      if ((byte === OPEN_BRACE || byte === OPEN_BRACKET) && ++count > limit) return count;
      i++;
    }
  }
  return count;
}

/**
 * Whether a JSON text that parsed can hold nothing the input guard refuses (plugins/input-guard.ts),
 * read on its bytes: no `\u` escape (in text decoded strictly as UTF-8, an escape is the only way
 * to write a NUL or an unpaired surrogate) and no object or array nested deeper than `maxDepth`
 * (the guard's own count: the body itself is at depth 1 here). Walking a parsed body of a million
 * keys took as long as parsing it; this takes a few milliseconds. Strings are skipped as in
 * countJsonContainers. An escaped backslash before a `u` also reads as an escape: the guard then
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
