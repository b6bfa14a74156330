import type { SetupProblem } from './validate.js';

/** A setup file's bytes as its text, or why they are no UTF-8 text. */
export type SetupFileText = { ok: true; text: string } | { ok: false; problems: SetupProblem[] };

/** Byte-order marks of the encodings an editor may save a file in, UTF-32 first (its LE mark begins with UTF-16's). */
const OTHER_BYTE_ORDER_MARKS: Array<[encoding: string, mark: number[]]> = [
  ['UTF-32', [0xff, 0xfe, 0x00, 0x00]],
  ['UTF-32', [0x00, 0x00, 0xfe, 0xff]],
  ['UTF-16', [0xff, 0xfe]],
  ['UTF-16', [0xfe, 0xff]],
];

/**
 * Decodes a setup file, which must be UTF-8 (a UTF-8 byte-order mark is dropped). A file saved
 * as UTF-16 (as Windows editors offer), UTF-32 or Latin-1, read as UTF-8, was a riddle of U+FFFD
 * and NUL characters that the YAML parser or the shape check then complained about; it is told
 * what it is instead. No problem quotes the file's text, which may hold plaintext keys.
 */
export function decodeSetupFile(bytes: Uint8Array, fileName: string): SetupFileText {
  const refused = (why: string): SetupFileText => ({
    ok: false,
    problems: [{ path: '(file)', message: `${fileName} ${why}: the setup file must be UTF-8` }],
  });
  const marked = OTHER_BYTE_ORDER_MARKS.find(([, mark]) => mark.every((byte, i) => bytes[i] === byte));
  if (marked) return refused(`is ${marked[0]} (it starts with a ${marked[0]} byte-order mark)`);
  // UTF-8 text holds no NUL; UTF-16 or UTF-32 text without a mark is full of them.
  if (bytes.includes(0)) return refused('holds NUL bytes (UTF-16 or UTF-32 text?)');
  try {
    return { ok: true, text: new TextDecoder('utf-8', { fatal: true }).decode(bytes) };
  } catch {
    return refused('is not UTF-8 text');
  }
}
