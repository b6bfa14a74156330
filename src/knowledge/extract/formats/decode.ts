/**
 * Bytes to text: UTF-8 unless a UTF-16 byte-order mark says otherwise; a UTF-8 BOM is dropped and
 * invalid sequences become U+FFFD. Only the first `maxChars` × 4 bytes are decoded, enough for
 * `maxChars` characters of any UTF-8 text, so a huge file costs no more than the cap.
 */
export function decodeText(bytes: Uint8Array, maxChars: number): string {
  const limit = Math.min(bytes.length, maxChars * 4);
  if (bytes[0] === 0xff && bytes[1] === 0xfe) {
    return new TextDecoder('utf-16le').decode(bytes.subarray(2, limit));
  }
  if (bytes[0] === 0xfe && bytes[1] === 0xff) {
    return new TextDecoder('utf-16be').decode(bytes.subarray(2, limit));
  }
  // TextDecoder drops a UTF-8 BOM itself.
  return new TextDecoder('utf-8').decode(bytes.subarray(0, limit));
}

/** Unix line ends, so offsets and boundaries behave the same for files from any system. */
export function normalizeNewlines(text: string): string {
  return text.includes('\r') ? text.replace(/\r\n?/g, '\n') : text;
}
