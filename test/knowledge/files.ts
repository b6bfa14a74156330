/**
 * Files the knowledge tests generate, one generator per format the index handles (and a few it
 * must refuse or survive). Shared by the extraction, indexing, search and retrieval tests.
 */
import { deflateSync } from 'node:zlib';
import { Document, HeadingLevel, Packer, Paragraph, Table, TableCell, TableRow } from 'docx';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import writeXlsxFile from 'write-excel-file/node';

export interface TestFile {
  path: string;
  mediaType: string;
  bytes: Buffer;
}

export const MEDIA = {
  text: 'text/plain',
  markdown: 'text/markdown',
  csv: 'text/csv',
  tsv: 'text/tab-separated-values',
  json: 'application/json',
  html: 'text/html',
  pdf: 'application/pdf',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  png: 'image/png',
  typescript: 'text/typescript',
  python: 'text/x-python',
} as const;

const utf8 = (text: string) => Buffer.from(text, 'utf8');

export function textFile(path: string, text: string, mediaType: string = MEDIA.text): TestFile {
  return { path, mediaType, bytes: utf8(text) };
}

/** Markdown with nested headings: "Install › Linux" holds the apt command. */
export function markdownFile(path = 'docs/install.md', text = SAMPLE_MARKDOWN): TestFile {
  return textFile(path, text, MEDIA.markdown);
}

export const SAMPLE_MARKDOWN = `# Install

Atrium runs on any machine with Node 20. This page covers the supported systems.

## Linux

Install the package with \`sudo apt install atrium-server\`, then enable the unit:

\`\`\`sh
# enable at boot
systemctl enable --now atrium
\`\`\`

## macOS

Use Homebrew: \`brew install atrium\`. The service listens on port 8080.

# Configure

Settings live in \`atrium.yaml\`; the data directory defaults to \`/var/lib/atrium\`.
`;

export function codeFile(path = 'src/rate-limit.ts', text = SAMPLE_CODE): TestFile {
  return textFile(path, text, path.endsWith('.py') ? MEDIA.python : MEDIA.typescript);
}

export const SAMPLE_CODE = `/** Token bucket: refills \`ratePerSecond\` tokens each second up to \`burst\`. */
export function takeToken(bucket: { tokens: number; updatedAt: number }, ratePerSecond: number, burst: number, now: number): boolean {
  const refill = ((now - bucket.updatedAt) / 1000) * ratePerSecond;
  bucket.tokens = Math.min(burst, bucket.tokens + refill);
  bucket.updatedAt = now;
  if (bucket.tokens < 1) return false;
  bucket.tokens -= 1;
  return true;
}
`;

/** A CSV or TSV table; `rows` includes the header row. Quotes fields that need it. */
export function tableFile(
  path: string,
  rows: Array<Array<string | number>>,
  separator: ',' | '\t' = ',',
): TestFile {
  const field = (value: string | number) => {
    const text = String(value);
    return /[",\n\t]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
  };
  const text = rows.map((row) => row.map(field).join(separator)).join('\n') + '\n';
  return textFile(path, text, separator === ',' ? MEDIA.csv : MEDIA.tsv);
}

/** `count` customer rows (header first): customer n lives in city "City n". */
export function customerRows(count: number): Array<Array<string | number>> {
  const rows: Array<Array<string | number>> = [['Customer', 'City', 'Plan', 'Seats']];
  for (let n = 1; n <= count; n++)
    rows.push([`Customer ${n}`, `City ${n}`, n % 3 ? 'Team' : 'Enterprise', n * 5]);
  return rows;
}

export function csvFile(path = 'data/customers.csv', rows = customerRows(120)): TestFile {
  return tableFile(path, rows, ',');
}

export function tsvFile(path = 'data/customers.tsv', rows = customerRows(40)): TestFile {
  return tableFile(path, rows, '\t');
}

export function jsonFile(path = 'config/service.json', value: unknown = SAMPLE_JSON): TestFile {
  // Minified on purpose: extraction must still give lines to cut at.
  return { path, mediaType: MEDIA.json, bytes: utf8(JSON.stringify(value)) };
}

export const SAMPLE_JSON = {
  service: 'billing',
  retries: { max: 5, backoffMs: 250 },
  regions: ['eu-west-1', 'us-east-2'],
  owner: 'payments-team@example.com',
};

export function htmlFile(path = 'site/faq.html', html = SAMPLE_HTML): TestFile {
  return textFile(path, html, MEDIA.html);
}

export const SAMPLE_HTML = `<!doctype html>
<html><head><title>FAQ</title><style>body { color: red }</style><script>var secret = 1;</script></head>
<body>
<h1>Support FAQ</h1>
<p>Answers to the questions our <a href="https://example.com/help">help desk</a> gets most.</p>
<h2>Refunds</h2>
<p>Refunds are issued within <b>14 days</b> of a written request.</p>
<h3>Partial refunds</h3>
<p>Annual plans are refunded pro rata for unused months.</p>
<h2>Contact</h2>
<table><tr><th>Channel</th><th>Hours</th></tr><tr><td>Phone</td><td>9–17 CET</td></tr></table>
<img src="logo.png" alt="logo">
</body></html>
`;

/** A PDF with one page per entry of `pages` (Helvetica, so ASCII/Latin-1 text), lines wrapped. */
export async function pdfFile(
  path = 'docs/handbook.pdf',
  pages: string[] = SAMPLE_PDF_PAGES,
): Promise<TestFile> {
  const pdf = await PDFDocument.create();
  const font = await pdf.embedFont(StandardFonts.Helvetica);
  for (const text of pages) {
    const page = pdf.addPage([612, 792]);
    let y = 740;
    for (const paragraph of text.split('\n')) {
      for (const line of wrap(paragraph, 95)) {
        if (y < 50) break;
        page.drawText(line, { x: 50, y, size: 10, font });
        y -= 14;
      }
      y -= 6;
    }
  }
  return { path, mediaType: MEDIA.pdf, bytes: Buffer.from(await pdf.save()) };
}

export const SAMPLE_PDF_PAGES = [
  'Employee handbook. Chapter 1: Welcome to Northwind Labs.',
  'Chapter 2: Travel. Economy class is booked for flights under six hours.',
  'Chapter 3: Equipment. Each engineer receives a laptop refresh every three years.',
];

function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}

export interface DocxBlock {
  heading?: string;
  /** 1–3; default 1. */
  level?: 1 | 2 | 3;
  paragraphs?: string[];
  table?: string[][];
}

const HEADING_LEVELS = { 1: HeadingLevel.HEADING_1, 2: HeadingLevel.HEADING_2, 3: HeadingLevel.HEADING_3 };

/** A Word document: headings (Heading 1–3 styles), paragraphs and simple tables. */
export async function docxFile(
  path = 'docs/policy.docx',
  blocks: DocxBlock[] = SAMPLE_DOCX,
): Promise<TestFile> {
  const children: Array<Paragraph | Table> = [];
  for (const block of blocks) {
    if (block.heading)
      children.push(new Paragraph({ text: block.heading, heading: HEADING_LEVELS[block.level ?? 1] }));
    for (const text of block.paragraphs ?? []) children.push(new Paragraph({ text }));
    if (block.table) {
      children.push(
        new Table({
          rows: block.table.map(
            (cells) =>
              new TableRow({
                children: cells.map((cell) => new TableCell({ children: [new Paragraph(cell)] })),
              }),
          ),
        }),
      );
    }
  }
  const document = new Document({ sections: [{ children }] });
  return { path, mediaType: MEDIA.docx, bytes: await Packer.toBuffer(document) };
}

export const SAMPLE_DOCX: DocxBlock[] = [
  { heading: 'Security policy', paragraphs: ['This policy applies to every employee and contractor.'] },
  { heading: 'Passwords', level: 2, paragraphs: ['Passwords are rotated every 90 days and never shared.'] },
  { heading: 'Laptops', level: 2, paragraphs: ['Disk encryption is mandatory on every laptop.'] },
  {
    heading: 'Incident contacts',
    level: 1,
    table: [
      ['Role', 'Name'],
      ['Security lead', 'Dana Whitfield'],
    ],
  },
];

export interface SheetSpec {
  name: string;
  rows: Array<Array<string | number>>;
}

/** A workbook with the given sheets; the first row of each is its header. */
export async function xlsxFile(
  path = 'data/prices.xlsx',
  sheets: SheetSpec[] = SAMPLE_SHEETS,
): Promise<TestFile> {
  const buffer = await writeXlsxFile(
    sheets.map((sheet) => ({
      sheet: sheet.name,
      data: sheet.rows.map((row) => row.map((value) => ({ value }))),
    })),
  ).toBuffer();
  return { path, mediaType: MEDIA.xlsx, bytes: buffer };
}

export const SAMPLE_SHEETS: SheetSpec[] = [
  {
    name: 'Prices',
    rows: [
      ['Plan', 'Monthly EUR', 'Seats included'],
      ['Starter', 19, 3],
      ['Team', 49, 10],
      ['Enterprise', 199, 50],
    ],
  },
  {
    name: 'Discounts',
    rows: [
      ['Code', 'Percent'],
      ['SPRING24', 15],
      ['NONPROFIT', 40],
    ],
  },
];

/** A 1×1 transparent PNG. */
export function pngFile(path = 'images/logo.png'): TestFile {
  const bytes = Buffer.from(
    'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
    'base64',
  );
  return { path, mediaType: MEDIA.png, bytes };
}

/** Starts like a PDF, then is garbage: extraction must fail with a reason, not throw. */
export function corruptPdfFile(path = 'docs/broken.pdf'): TestFile {
  const bytes = Buffer.concat([
    Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catal', 'latin1'),
    Buffer.alloc(512, 0x7a),
  ]);
  return { path, mediaType: MEDIA.pdf, bytes };
}

/**
 * A valid 30 KB PDF whose one page draws a million two-letter strings (a compressed content
 * stream): pdf.js needs seconds to lay out its text on any machine, so with a `timeoutMs` of
 * {@link SLOW_FILE_TIMEOUT_MS} or less its extraction times out, deterministically. Extraction's
 * time limit starts once pdf.js is loaded, so a slow first import does not count.
 */
export function slowPdfFile(path = 'docs/slow.pdf'): TestFile {
  const content = `BT /F1 12 Tf 72 720 Td ${'(ab) Tj 1 0 Td '.repeat(1_000_000)}ET`;
  return { path, mediaType: MEDIA.pdf, bytes: rawPdf(content) };
}

/** A `timeoutMs` that the slow PDF always exceeds and every other file here stays far below. */
export const SLOW_FILE_TIMEOUT_MS = 300;

/** A one-page PDF around a raw (Flate-compressed) content stream, with a correct xref table. */
export function rawPdf(content: string): Buffer {
  const data = deflateSync(Buffer.from(content, 'latin1'));
  const objects: Buffer[] = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
    null,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
  ].map((object) =>
    object === null
      ? Buffer.concat([
          Buffer.from(`<< /Length ${data.length} /Filter /FlateDecode >>\nstream\n`, 'latin1'),
          data,
          Buffer.from('\nendstream', 'latin1'),
        ])
      : Buffer.from(object, 'latin1'),
  );
  const parts: Buffer[] = [Buffer.from('%PDF-1.4\n', 'latin1')];
  let size = parts[0].length;
  const offsets: number[] = [];
  const push = (buffer: Buffer) => {
    parts.push(buffer);
    size += buffer.length;
  };
  objects.forEach((object, i) => {
    offsets.push(size);
    push(
      Buffer.concat([Buffer.from(`${i + 1} 0 obj\n`, 'latin1'), object, Buffer.from('\nendobj\n', 'latin1')]),
    );
  });
  const xref = size;
  let trailer = `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const offset of offsets) trailer += `${String(offset).padStart(10, '0')} 00000 n \n`;
  trailer += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  push(Buffer.from(trailer, 'latin1'));
  return Buffer.concat(parts);
}

export interface ExpectedOutcome {
  file: TestFile;
  status: 'ok' | 'unsupported' | 'failed';
  /** A phrase the extracted text contains, for `ok` files. */
  phrase?: string;
}

/**
 * One file of every kind with what extraction yields for it (the slow PDF is left out: it
 * needs a small `timeoutMs`). Handy for indexing tests that walk all formats.
 */
export async function sampleFiles(): Promise<ExpectedOutcome[]> {
  return [
    { file: markdownFile(), status: 'ok', phrase: 'sudo apt install atrium-server' },
    { file: codeFile(), status: 'ok', phrase: 'ratePerSecond' },
    { file: csvFile(), status: 'ok', phrase: 'City 77' },
    { file: tsvFile(), status: 'ok', phrase: 'City 33' },
    { file: jsonFile(), status: 'ok', phrase: 'payments-team@example.com' },
    { file: htmlFile(), status: 'ok', phrase: 'Annual plans are refunded pro rata' },
    { file: await pdfFile(), status: 'ok', phrase: 'laptop refresh every three years' },
    { file: await docxFile(), status: 'ok', phrase: 'Disk encryption is mandatory' },
    { file: await xlsxFile(), status: 'ok', phrase: 'NONPROFIT' },
    { file: pngFile(), status: 'unsupported' },
    { file: corruptPdfFile(), status: 'failed' },
  ];
}
