import { HEADING_SEPARATOR, type ExtractedSection } from '../../types.js';

/** Characters of rows per section: a section fits one chunk, so every chunk starts with the header. */
const ROWS_SECTION_CHARS = 1_400;

/**
 * Table rows as readable text: one line per row, cells joined by " | ", in sections of about
 * one chunk that each repeat the header row and name their rows ("rows 2–31", or
 * "Prices › rows 2–31" for a sheet), so a chunk found alone still says what its columns are.
 * Row numbers are the table's own (the header is row 1 when it is the first row).
 */
export function rowSections(
  rows: Array<{ number: number; cells: string[] }>,
  prefix: string | null,
): ExtractedSection[] {
  const nonEmpty = rows.filter((row) => row.cells.some((cell) => cell.trim() !== ''));
  if (!nonEmpty.length) return [];
  const line = (cells: string[]) => cells.map((c) => c.replace(/\s+/g, ' ').trim()).join(' | ');
  const [header, ...body] = nonEmpty;
  const headerLine = line(header.cells);
  const label = (from: number, to: number) =>
    (prefix ? prefix + HEADING_SEPARATOR : '') + (from === to ? `row ${from}` : `rows ${from}–${to}`);
  if (!body.length) return [{ text: headerLine, heading: label(header.number, header.number), pages: null }];

  const sections: ExtractedSection[] = [];
  let lines: string[] = [];
  let size = headerLine.length;
  let first = body[0].number;
  let last = first;
  const flush = () => {
    if (!lines.length) return;
    sections.push({ text: [headerLine, ...lines].join('\n'), heading: label(first, last), pages: null });
    lines = [];
    size = headerLine.length;
  };
  for (const row of body) {
    const text = line(row.cells);
    if (lines.length && size + 1 + text.length > ROWS_SECTION_CHARS) flush();
    if (!lines.length) first = row.number;
    lines.push(text);
    size += 1 + text.length;
    last = row.number;
  }
  flush();
  return sections;
}
