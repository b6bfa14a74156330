import type { ExtractedSection } from '../../types.js';
import { rowSections } from './rows.js';

/** CSV or TSV as header-led row sections (see {@link rowSections}). */
export function delimitedSections(text: string, separator: ',' | '\t'): ExtractedSection[] {
  const rows = parseDelimited(text, separator).map((cells, i) => ({ number: i + 1, cells }));
  return rowSections(rows, null);
}

/**
 * RFC 4180 parsing: quoted fields may hold separators, quotes (doubled) and line breaks.
 * Lenient, as a search index should be: a stray quote inside an unquoted field is kept as text.
 */
export function parseDelimited(text: string, separator: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  let i = 0;
  const endField = () => {
    row.push(field);
    field = '';
  };
  while (i < text.length) {
    const char = text[i];
    if (quoted) {
      if (char === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i += 2;
          continue;
        }
        quoted = false;
      } else {
        field += char;
      }
      i++;
      continue;
    }
    if (char === '"' && field === '') quoted = true;
    else if (char === separator) endField();
    else if (char === '\n' || char === '\r') {
      endField();
      rows.push(row);
      row = [];
      if (char === '\r' && text[i + 1] === '\n') i++;
    } else field += char;
    i++;
  }
  if (field !== '' || row.length) {
    endField();
    rows.push(row);
  }
  return rows;
}
