import {
  HEADING_SEPARATOR,
  SECTION_SEPARATOR,
  type ExtractedSection,
  type Extraction,
  type TextChunk,
} from './types.js';

/** Characters a chunk aims for. */
export const CHUNK_TARGET_CHARS = 1_500;
/** Characters a chunk repeats from the end of the one before it, so a passage cut in two is whole in one. */
export const CHUNK_OVERLAP_CHARS = 200;
/** A remainder up to this long stays in the current chunk rather than making a tiny last one. */
const CHUNK_MAX_CHARS = CHUNK_TARGET_CHARS + 300;
/** Never look for a break before this point of a chunk, so chunks do not shrink to a line. */
const CHUNK_MIN_CHARS = Math.floor(CHUNK_TARGET_CHARS / 2);
/**
 * Characters of a heading path kept on each chunk. Every chunk of a section carries its heading
 * (stored, indexed, shown in results and prompts), so an unbounded one (a 100 KB first line
 * made a Markdown heading) would be stored once per chunk: a cost growing with the square of
 * the file's size.
 */
export const CHUNK_HEADING_MAX_CHARS = 500;

interface Placed {
  section: ExtractedSection;
  start: number;
  end: number;
}

/**
 * Cuts an extraction into chunks of about {@link CHUNK_TARGET_CHARS} characters with
 * {@link CHUNK_OVERLAP_CHARS} of overlap. Short neighbouring sections of one origin (PDF pages,
 * a heading and its subsections) share a chunk; a long section is cut at the best boundary
 * available: a blank line, else a line end, else a sentence end, else between words.
 * Offsets point into `extractedText(extraction)`.
 */
export function chunkExtraction(extraction: Extraction): TextChunk[] {
  if (extraction.status !== 'ok') return [];
  const text = extraction.sections.map((s) => s.text).join(SECTION_SEPARATOR);
  const placed: Placed[] = [];
  let offset = 0;
  for (const section of extraction.sections) {
    placed.push({ section, start: offset, end: offset + section.text.length });
    offset += section.text.length + SECTION_SEPARATOR.length;
  }

  for (const item of placed) {
    if (item.section.heading && item.section.heading.length > CHUNK_HEADING_MAX_CHARS) {
      item.section = { ...item.section, heading: capHeading(item.section.heading) };
    }
  }

  const chunks: TextChunk[] = [];
  /** Adds the chunk [start, end) without its surrounding whitespace; returns its trimmed end. */
  const push = (start: number, end: number, heading: string | null, pages: number[] | null): number => {
    [start, end] = trimRange(text, start, end);
    if (end > start) {
      chunks.push({ ordinal: chunks.length, text: text.slice(start, end), heading, pages, start, end });
    }
    return end;
  };

  for (const group of groupSections(placed)) {
    const first = group[0];
    const last = group[group.length - 1];
    if (group.length > 1 || last.end - first.start <= CHUNK_MAX_CHARS) {
      push(first.start, last.end, first.section.heading, unionPages(group));
      continue;
    }
    // One long section: windows with overlap.
    const { heading, pages } = first.section;
    let pos = first.start;
    for (;;) {
      // From the next non-space character: each chunk then starts past the one before.
      while (pos < first.end && /\s/.test(text[pos])) pos++;
      if (pos >= first.end) break;
      if (first.end - pos <= CHUNK_MAX_CHARS) {
        push(pos, first.end, heading, pages);
        break;
      }
      const windowStart = pos;
      const brk = bestBreak(text, pos + CHUNK_MIN_CHARS, pos + CHUNK_TARGET_CHARS);
      const end = push(pos, brk, heading, pages);
      // The overlap is taken back from the chunk's text (its end without trailing whitespace).
      // After a short line and a long run of whitespace that end lies far back, and starting
      // from there would move on one character per chunk (a chunk per character of the file):
      // then the overlap is taken back from the break itself, which is most of a chunk ahead.
      pos = overlapStart(text, end);
      if (pos < windowStart + CHUNK_MIN_CHARS / 2) pos = overlapStart(text, brk);
    }
  }
  return chunks;
}

/** Consecutive sections that fit one chunk together and share an origin. */
function groupSections(placed: Placed[]): Placed[][] {
  const groups: Placed[][] = [];
  let current: Placed[] = [];
  for (const item of placed) {
    const head = current[0];
    if (
      head &&
      item.end - head.start <= CHUNK_TARGET_CHARS &&
      sameOrigin(head.section.heading, item.section.heading)
    ) {
      current.push(item);
      continue;
    }
    if (current.length) groups.push(current);
    current = [item];
  }
  if (current.length) groups.push(current);
  return groups;
}

/** Pages of no heading go together; a subsection goes with its parent heading. */
function sameOrigin(groupHeading: string | null, heading: string | null): boolean {
  if (groupHeading === null || heading === null) return groupHeading === heading;
  return heading === groupHeading || heading.startsWith(groupHeading + HEADING_SEPARATOR);
}

function unionPages(group: Placed[]): number[] | null {
  const pages = new Set<number>();
  for (const { section } of group) for (const page of section.pages ?? []) pages.add(page);
  return pages.size ? [...pages].sort((a, b) => a - b) : null;
}

/** The best place to end a chunk within [lo, hi]: after a blank line, line, sentence or word. */
function bestBreak(text: string, lo: number, hi: number): number {
  const window = text.slice(lo, hi);
  const paragraph = window.lastIndexOf('\n\n');
  if (paragraph >= 0) return lo + paragraph + 2;
  const line = window.lastIndexOf('\n');
  if (line >= 0) return lo + line + 1;
  const sentence = lastMatchEnd(window, /[.!?;:]["')\]]?\s/g);
  if (sentence >= 0) return lo + sentence;
  const space = lastMatchEnd(window, /\s/g);
  if (space >= 0) return lo + space;
  return avoidSurrogateSplit(text, hi);
}

/** Where the next chunk starts: about {@link CHUNK_OVERLAP_CHARS} back, at a line, sentence or word start. */
function overlapStart(text: string, end: number): number {
  const lo = Math.max(0, end - CHUNK_OVERLAP_CHARS);
  const window = text.slice(lo, end);
  const line = window.indexOf('\n');
  if (line >= 0) return lo + line + 1;
  const sentence = firstMatchEnd(window, /[.!?;:]["')\]]?\s+/g);
  if (sentence >= 0 && sentence < window.length) return lo + sentence;
  const word = firstMatchEnd(window, /\s+/g);
  if (word >= 0 && word < window.length) return lo + word;
  return avoidSurrogateSplit(text, lo);
}

function lastMatchEnd(text: string, pattern: RegExp): number {
  let found = -1;
  for (const match of text.matchAll(pattern)) found = match.index + match[0].length;
  return found;
}

function firstMatchEnd(text: string, pattern: RegExp): number {
  const match = pattern.exec(text);
  return match ? match.index + match[0].length : -1;
}

/** Moves an offset off the middle of a surrogate pair. */
function avoidSurrogateSplit(text: string, at: number): number {
  const code = text.charCodeAt(at);
  return code >= 0xdc00 && code <= 0xdfff ? at + 1 : at;
}

/** A heading path cut to {@link CHUNK_HEADING_MAX_CHARS}, marked as cut. */
function capHeading(heading: string): string {
  return avoidSurrogateCut(heading.slice(0, CHUNK_HEADING_MAX_CHARS - 1)) + '…';
}

/** A string without a lone high surrogate at its end. */
function avoidSurrogateCut(text: string): string {
  const code = text.charCodeAt(text.length - 1);
  return code >= 0xd800 && code <= 0xdbff ? text.slice(0, -1) : text;
}

function trimRange(text: string, start: number, end: number): [number, number] {
  while (start < end && /\s/.test(text[start])) start++;
  while (end > start && /\s/.test(text[end - 1])) end--;
  return [start, end];
}
