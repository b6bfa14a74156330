import { CHUNK_HEADING_MAX_CHARS } from '../../chunk.js';
import { HEADING_SEPARATOR, MAX_EXTRACTED_CHARS, type ExtractedSection } from '../../types.js';

/**
 * An ATX heading's opening; {@link atxHeading} cuts out the title by hand. A pattern for the whole
 * line (`[ \t]+(.*?)[ \t#]*$`) backtracks, rescanning a run of `#`, spaces or tabs from each of
 * its positions: one crafted line of a few hundred KB held the extraction worker for minutes.
 */
const ATX_OPENING = /^ {0,3}(#{1,6})[ \t]/;
const SETEXT_UNDERLINE = /^ {0,3}(=+|-+)[ \t]*$/;
const FENCE = /^ {0,3}(`{3,}|~{3,})/;

/**
 * Markdown cut at its headings: each section runs from a heading to the next one and carries
 * the heading path ("Install › Linux"). Text before the first heading has no heading. Fenced
 * code is skipped when looking for headings, so a `# comment` in a shell block stays code.
 */
export function markdownSections(text: string): ExtractedSection[] {
  // YAML front matter (Jekyll, Hugo, Astro…) is its own section: its `---` lines are not headings.
  const frontMatter = /^---\n[\s\S]*?\n---[ \t]*(?:\n|$)/.exec(text);
  if (frontMatter) {
    const head = frontMatter[0].trim();
    return [{ text: head, heading: null, pages: null }, ...markdownSections(text.slice(head.length))];
  }
  return sectionsAtHeadings(text, (line, next) => {
    const atx = atxHeading(line);
    if (atx) return { ...atx, consumesNext: false };
    if (next !== undefined && line.trim() && !line.startsWith(' ')) {
      const setext = SETEXT_UNDERLINE.exec(next);
      if (setext && !/^\s*[-*+]\s/.test(line)) {
        return { level: setext[1][0] === '=' ? 1 : 2, title: line.trim(), consumesNext: true };
      }
    }
    return null;
  });
}

const isBlank = (character: string | undefined) => character === ' ' || character === '\t';

/**
 * `## Title ##`: the level, and the title without the spaces around it or its closing `#`s. As in
 * CommonMark, a closing run of `#` follows a space or a tab (or is all there is): in `C#`, `foo#`
 * or `foo \#` the `#` is the title's.
 */
function atxHeading(line: string): { level: number; title: string } | null {
  const opening = ATX_OPENING.exec(line);
  if (!opening) return null;
  let start = opening[0].length;
  while (isBlank(line[start])) start++;
  let end = line.length;
  while (end > start && isBlank(line[end - 1])) end--;
  let closing = end;
  while (closing > start && line[closing - 1] === '#') closing--;
  if (closing === start) end = start;
  else if (closing < end && isBlank(line[closing - 1])) {
    end = closing;
    while (end > start && isBlank(line[end - 1])) end--;
  }
  return { level: opening[1].length, title: line.slice(start, end) };
}

export interface HeadingLine {
  level: number;
  title: string;
  /** The heading's underline (setext) belongs to it. */
  consumesNext: boolean;
}

/**
 * Heading characters all sections of one file may carry together. Each section carries its whole
 * heading path, so thousands of headings under long titles made the sections many times larger
 * than the file (a 4.5 MB file ran the worker out of memory). Past it, heading lines stay in the
 * text of the section before them: a document needs hundreds of thousands of headings to get there.
 */
const MAX_HEADING_CHARS = MAX_EXTRACTED_CHARS;

/** Splits text at lines `headingOf` recognises, tracking the path of enclosing headings. */
export function sectionsAtHeadings(
  text: string,
  headingOf: (line: string, next: string | undefined) => HeadingLine | null,
): ExtractedSection[] {
  const lines = text.split('\n');
  const sections: ExtractedSection[] = [];
  const path: Array<{ level: number; title: string }> = [];
  let current: string[] = [];
  let heading: string | null = null;
  let fence: string | null = null;
  let headingChars = 0;

  const flush = () => {
    const body = current.join('\n').trim();
    if (body) sections.push({ text: body, heading, pages: null });
    current = [];
  };

  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fenceMatch = FENCE.exec(line);
    if (fence) {
      if (fenceMatch && fenceMatch[1][0] === fence[0] && fenceMatch[1].length >= fence.length) fence = null;
      current.push(line);
      continue;
    }
    if (fenceMatch) {
      fence = fenceMatch[1];
      current.push(line);
      continue;
    }
    const found = headingCharsLeft(headingChars) ? headingOf(line, lines[i + 1]) : null;
    if (!found) {
      current.push(line);
      continue;
    }
    flush();
    while (path.length && path[path.length - 1].level >= found.level) path.pop();
    // Each title is kept only as long as a chunk's whole heading path may be: the path is joined
    // again at every heading, so a title of megabytes under thousands of sub-headings made
    // extraction quadratic in time and memory.
    const title = capTitle(found.title.trim());
    if (title) path.push({ level: found.level, title });
    heading = path.length ? path.map((p) => p.title).join(HEADING_SEPARATOR) : null;
    headingChars += heading?.length ?? 0;
    current.push(line);
    if (found.consumesNext) current.push(lines[++i]);
  }
  flush();
  return sections;
}

/**
 * A title cut to what a chunk's heading path keeps, and one character more: chunk.ts then still
 * sees the path as too long, and cuts it with its mark (`…`).
 */
function capTitle(title: string): string {
  return title.length > CHUNK_HEADING_MAX_CHARS ? title.slice(0, CHUNK_HEADING_MAX_CHARS + 1) : title;
}

function headingCharsLeft(used: number): boolean {
  return used < MAX_HEADING_CHARS;
}
