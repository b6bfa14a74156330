import {
  MAX_EXTRACTED_CHARS,
  SECTION_SEPARATOR,
  type ExtractFormat,
  type ExtractInput,
  type ExtractedSection,
  type Extraction,
} from '../types.js';
import { detectFormat } from './detect.js';
import { decodeText, normalizeNewlines } from './formats/decode.js';
import { jsonSections } from './formats/json.js';
import { markdownSections } from './formats/markdown.js';

type SectionExtractor = (bytes: Uint8Array, maxChars: number) => Promise<ExtractedSection[]>;

const textOf = (bytes: Uint8Array, maxChars: number) => normalizeNewlines(decodeText(bytes, maxChars));
// trimEnd, not a `/\s+$/` replace: that pattern rescans a long run of spaces from each of its positions.
const whole = (text: string): ExtractedSection[] =>
  text.trim() ? [{ text: text.trimEnd(), heading: null, pages: null }] : [];

/**
 * The extractor of each format, loaded on first use: heavy libraries (pdf.js, mammoth, the XLSX
 * and HTML parsers) stay out of a worker that only sees Markdown.
 */
const EXTRACTORS: Record<ExtractFormat, () => Promise<SectionExtractor>> = {
  text: async () => async (bytes, max) => whole(textOf(bytes, max)),
  code: async () => async (bytes, max) => whole(textOf(bytes, max)),
  markdown: async () => async (bytes, max) => markdownSections(textOf(bytes, max)),
  json: async () => async (bytes, max) => jsonSections(textOf(bytes, max)),
  csv: async () => {
    const { delimitedSections } = await import('./formats/delimited.js');
    return async (bytes, max) => delimitedSections(textOf(bytes, max), ',');
  },
  tsv: async () => {
    const { delimitedSections } = await import('./formats/delimited.js');
    return async (bytes, max) => delimitedSections(textOf(bytes, max), '\t');
  },
  html: async () => {
    const { htmlSections } = await import('./formats/html.js');
    return async (bytes, max) => htmlSections(textOf(bytes, max));
  },
  pdf: async () => (await import('./formats/pdf.js')).pdfSections,
  docx: async () => (await import('./formats/docx.js')).docxSections,
  xlsx: async () => (await import('./formats/xlsx.js')).xlsxSections,
};

const FORMAT_NAMES: Record<ExtractFormat, string> = {
  text: 'text',
  code: 'source file',
  markdown: 'Markdown',
  json: 'JSON',
  csv: 'CSV',
  tsv: 'TSV',
  html: 'HTML',
  pdf: 'PDF',
  docx: 'DOCX',
  xlsx: 'XLSX',
};

/**
 * Extracts one file in the calling thread. Never throws: a file that cannot be read is
 * `failed` with a one-line reason (no stack). The worker runs this; tests and benches may too.
 * `onLoaded` is called once the format's extractor is loaded, before it starts on the bytes.
 */
export async function extractInProcess(
  input: ExtractInput,
  maxChars = MAX_EXTRACTED_CHARS,
  onLoaded?: () => void,
): Promise<Extraction> {
  const detected = detectFormat(input.path, input.mediaType, input.bytes);
  if ('unsupported' in detected) return { status: 'unsupported', reason: detected.unsupported };
  const { format } = detected;
  let sections: ExtractedSection[];
  try {
    const extract = await EXTRACTORS[format]();
    onLoaded?.();
    sections = await extract(input.bytes, maxChars);
  } catch (error) {
    return readFailure(FORMAT_NAMES[format], error);
  }
  const cleaned = sections.map(withoutNul).filter((section) => section.text.trim() !== '');
  const capped = capSections(cleaned, maxChars);
  return capped.truncated
    ? { status: 'ok', format, sections: capped.sections, truncated: true }
    : { status: 'ok', format, sections: capped.sections };
}

/**
 * A file the format's library failed on. Its message is kept (first line) when it is about the
 * file; one about the server (a module that did not load, a system call, any server path) would
 * show clients the server's paths in `indexError`: the file gets Atrium's words and the error
 * goes along as the cause, for the log.
 */
function readFailure(format: string, error: unknown): Extraction {
  if (isServerFault(error)) {
    return {
      status: 'failed',
      error: `${format} extraction failed on an internal error`,
      cause: copyable(error),
    };
  }
  return { status: 'failed', error: `${format} could not be read: ${shortReason(error)}` };
}

/** A path of the server: absolute (POSIX or Windows, after a quote, space or bracket) or a file: URL. */
const SERVER_PATH = /file:\/\/|(?:^|[\s'"`(])\/[^\s/'"`]+\/|\b[A-Za-z]:\\/;

/** Node's codes for a module or package that did not load. */
const MODULE_LOAD_CODE =
  /^(?:MODULE_NOT_FOUND|ERR_(?:MODULE|PACKAGE|REQUIRE|IMPORT|UNKNOWN_FILE_EXTENSION|UNSUPPORTED_DIR_IMPORT)\w*)$/;

/**
 * Node's own failures (a module that did not load; system calls, which name their `syscall`)
 * are the server's; parsers' errors have messages about the file, some a code of their own
 * (read-excel-file's `INVALID_ZIP`; zlib's `Z_DATA_ERROR` on a damaged file, with an errno but
 * no system call; Node's `ERR_BUFFER_OUT_OF_BOUNDS` when a parser reads past a truncated file's
 * end), so any other code does not decide.
 */
function isServerFault(error: unknown): boolean {
  const { code, syscall } = (typeof error === 'object' && error !== null ? error : {}) as {
    code?: unknown;
    syscall?: unknown;
  };
  if (typeof code === 'string' && MODULE_LOAD_CODE.test(code)) return true;
  if (typeof syscall === 'string') return true;
  return SERVER_PATH.test(error instanceof Error ? error.message : String(error));
}

/**
 * The error as postMessage can copy it from the worker: an Error's own copy fails on a cause
 * or field that holds a function, and a thrown value need not be an Error at all. Its stack
 * still names its type.
 */
function copyable(error: unknown): Error {
  if (!(error instanceof Error)) return new Error(String(error));
  const copy = new Error(error.message);
  copy.stack = error.stack;
  return copy;
}

/**
 * NUL characters removed from the text and the heading: PostgreSQL text cannot hold them (one
 * refused chunk fails the store of its whole batch), and they carry nothing to search.
 */
function withoutNul(section: ExtractedSection): ExtractedSection {
  const heading = section.heading?.replaceAll('\0', '') ?? null;
  return { ...section, text: section.text.replaceAll('\0', ''), heading };
}

/** Keeps whole sections up to `maxChars` of extracted text (separators included), cutting the last one. */
export function capSections(
  sections: ExtractedSection[],
  maxChars: number,
): { sections: ExtractedSection[]; truncated: boolean } {
  let total = 0;
  for (let i = 0; i < sections.length; i++) {
    const room = maxChars - total - (i > 0 ? SECTION_SEPARATOR.length : 0);
    const section = sections[i];
    if (section.text.length > room) {
      const kept = sections.slice(0, i);
      // Never keep half of a surrogate pair.
      const cut = /[\ud800-\udbff]/.test(section.text[room - 1] ?? '') ? room - 1 : room;
      if (cut > 0) kept.push({ ...section, text: section.text.slice(0, cut) });
      return { sections: kept, truncated: true };
    }
    total += section.text.length + (i > 0 ? SECTION_SEPARATOR.length : 0);
  }
  return { sections, truncated: false };
}

/** The first line of an error's message, short: enough to tell a user why, nothing internal. */
export function shortReason(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const line = message.split('\n')[0].trim() || 'unknown error';
  return line.length > 200 ? `${line.slice(0, 197)}...` : line;
}
