import type { ExtractedSection } from '../../types.js';
import { rowSections } from './rows.js';

/**
 * Every sheet of a workbook as header-led row sections headed "<sheet> › rows a–b"
 * (read-excel-file). Dates are written as ISO dates, other cells as their text.
 */
export async function xlsxSections(bytes: Uint8Array): Promise<ExtractedSection[]> {
  const { default: readXlsxFile } = await import('read-excel-file/node');
  const sheets = await readXlsxFile(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  return sheets.flatMap(({ sheet, data }) =>
    rowSections(
      data.map((row, i) => ({ number: i + 1, cells: row.map(cellText) })),
      sheet,
    ),
  );
}

function cellText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (value instanceof Date) {
    const iso = value.toISOString();
    return iso.endsWith('T00:00:00.000Z') ? iso.slice(0, 10) : iso;
  }
  return String(value);
}
