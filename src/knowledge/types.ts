/**
 * What extraction and chunking hand to the indexer. Extraction turns one file version into
 * sections of plain text; chunking cuts those sections into search-sized pieces that remember
 * where they came from (heading path, PDF pages, sheet rows).
 */

/** One file version to extract. `bytes` is the whole stored object. */
export interface ExtractInput {
  bytes: Uint8Array;
  /** The file's path in the project (its extension helps decide the format). */
  path: string;
  /** The stored media type (may be generic, e.g. `application/octet-stream`). */
  mediaType: string;
}

export interface ExtractOptions {
  /** Extraction taking longer than this fails with "extraction timed out after N ms". */
  timeoutMs: number;
  /** Abandons the extraction (its result no longer wanted): it ends `failed` at once. */
  signal?: AbortSignal;
}

/** Formats with an extractor; `format` of an `ok` extraction is one of these. */
export type ExtractFormat =
  'text' | 'markdown' | 'code' | 'csv' | 'tsv' | 'json' | 'html' | 'pdf' | 'docx' | 'xlsx';

export type Extraction =
  | {
      status: 'ok';
      format: ExtractFormat;
      sections: ExtractedSection[];
      /** Present (true) when the text was cut at {@link MAX_EXTRACTED_CHARS}. */
      truncated?: true;
    }
  | { status: 'unsupported'; reason: string }
  | {
      status: 'failed';
      /** Shown to clients as the file's `indexError`: Atrium's words, never a server path. */
      error: string;
      /** What failed inside (a crashed worker's error), for the log only. */
      cause?: unknown;
    };

/**
 * A run of text with one origin: a Markdown/HTML/DOCX section (heading path like
 * "Install › Linux"), a PDF page (`pages: [3]`), a block of sheet or CSV rows
 * (heading like "Prices › rows 2–31").
 */
export interface ExtractedSection {
  text: string;
  heading: string | null;
  pages: number[] | null;
}

/**
 * A search-sized piece of a file's extracted text. `start`/`end` are offsets into
 * {@link extractedText} of the extraction (the sections joined by a blank line), and
 * `text` is exactly that slice.
 */
export interface TextChunk {
  ordinal: number;
  text: string;
  heading: string | null;
  pages: number[] | null;
  start: number;
  end: number;
}

/** Extracted text kept per file at most (characters); longer text is cut and marked truncated. */
export const MAX_EXTRACTED_CHARS = 5 * 1024 * 1024;

/** Separator between sections in a file's extracted text. */
export const SECTION_SEPARATOR = '\n\n';

/** Heading path separator: "Install › Linux". */
export const HEADING_SEPARATOR = ' › ';

/** The file's whole extracted text: its sections joined; chunk offsets point into it. */
export function extractedText(extraction: Extraction): string {
  if (extraction.status !== 'ok') return '';
  return extraction.sections.map((s) => s.text).join(SECTION_SEPARATOR);
}
