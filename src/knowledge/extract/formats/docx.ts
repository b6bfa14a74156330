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
    {
      ignoreEmptyParagraphs: true,
      // Images are dropped from the text anyway: do not base64-encode them into the HTML.
      convertImage: mammoth.images.imgElement(async () => ({ src: '' })),
    },
  );
  return htmlSections(value);
}
