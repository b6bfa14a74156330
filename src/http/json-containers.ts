const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;

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
