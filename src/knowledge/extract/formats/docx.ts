import type { ExtractedSection } from '../../types.js';
import { htmlSections } from './html.js';

/**
 * A Word document through mammoth's HTML (its Heading 1–6 styles become h1–h6), then as HTML:
 * sections with their heading path, tables laid out as text.
 */
export async function docxSections(bytes: Uint8Array): Promise<ExtractedSection[]> {
  const mammoth = (await import('mammoth')).default;
  const { value } = await mammoth.convertToHtml(
    { buffer: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) },
    { ignoreEmptyParagraphs: true },
  );
  return htmlSections(value);
}
