/**
 * Bytes to text: UTF-8 unless a UTF-16 byte-order mark says otherwise; a UTF-8 BOM is dropped.
 * Bytes that are not UTF-8 at all (no valid multi-byte sequence among them) are Windows-1252,
 * the code page of most legacy text on Western systems (a CSV exported by Excel on Windows):
 * read as UTF-8, its accented letters would all be U+FFFD, and its words never found. Otherwise
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
  const head = bytes.subarray(0, limit);
  try {
    // Streamed, so a character cut by the limit is left out rather than counted as invalid.
    // TextDecoder drops a UTF-8 BOM itself.
    return new TextDecoder('utf-8', { fatal: true }).decode(head, { stream: true });
  } catch {
    const text = new TextDecoder('utf-8').decode(head);
    // Valid non-ASCII characters beside the invalid bytes: UTF-8 with a few damaged bytes.
    return /[^\u0000-\u007f\ufffd]/u.test(text) ? text : decodeWindows1252(head);
  }
}

/** Windows-1252's 0x80–0x9F (Latin-1 has control characters there); undefined bytes stay C1. */
const WINDOWS_1252_HIGH =
  '\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f' +
  '\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178';

/** Node's TextDecoder reads `windows-1252` as Latin-1, so the 0x80–0x9F range is mapped here. */
function decodeWindows1252(bytes: Uint8Array): string {
  const latin1 = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
  return latin1.replace(/[\u0080-\u009f]/g, (c) => WINDOWS_1252_HIGH[c.charCodeAt(0) - 0x80]!);
}

/** Unix line ends, so offsets and boundaries behave the same for files from any system. */
export function normalizeNewlines(text: string): string {
  return text.includes('\r') ? text.replace(/\r\n?/g, '\n') : text;
}
