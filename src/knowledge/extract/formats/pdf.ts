import type { ExtractedSection } from '../../types.js';

/** A PDF's text layer, one section per page with its page number (unpdf, i.e. pdf.js). */
export async function pdfSections(bytes: Uint8Array): Promise<ExtractedSection[]> {
  const { extractText, getDocumentProxy } = await import('unpdf');
  // pdf.js takes ownership of (and may detach) the buffer it is given: hand it a copy.
  const pdf = await getDocumentProxy(new Uint8Array(bytes));
  try {
    const { text } = await extractText(pdf, { mergePages: false });
    return text.flatMap((page, i) => {
      const body = page.replace(/[ \t]+\n/g, '\n').trim();
      return body ? [{ text: body, heading: null, pages: [i + 1] }] : [];
    });
  } finally {
    await pdf.destroy();
  }
}
