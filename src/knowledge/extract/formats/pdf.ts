import type { ExtractedSection } from '../../types.js';

/** A PDF's text layer, one section per page with its page number (unpdf, i.e. pdf.js). */
export async function pdfSections(bytes: Uint8Array): Promise<ExtractedSection[]> {
  const { extractText, getDocumentProxy } = await import('unpdf');
  // pdf.js takes ownership of (and may detach) the buffer it is given: hand it a copy.
  const pdf = await getDocumentProxy(new Uint8Array(bytes));
  try {
    const { text } = await extractText(pdf, { mergePages: false });
    return text.flatMap((page, i) => {
      const body = withoutBlanksAtLineEnds(page).trim();
      return body ? [{ text: body, heading: null, pages: [i + 1] }] : [];
    });
  } finally {
    await pdf.destroy();
  }
}

/**
 * The text without the spaces and tabs that end its lines, found by hand: `/[ \t]+\n/g` rescans
 * a run of spaces or tabs that no line end follows from each of its positions, so a run of
 * 200,000 took minutes (pdf.js collapses such runs today; the cleanup must not rely on it).
 */
export function withoutBlanksAtLineEnds(text: string): string {
  return text
    .split('\n')
    .map((line) => {
      let end = line.length;
      while (end > 0 && (line[end - 1] === ' ' || line[end - 1] === '\t')) end--;
      return line.slice(0, end);
    })
    .join('\n');
}
