/**
 * Issue 12: extraction and chunking of project files.
 *  - PDF pages per second through the extraction worker (the way the indexer extracts), against
 *    raw unpdf extraction of the same PDF in this process (no worker, no detection, no capping):
 *    the ratio is what the worker costs (copying the bytes in, the sections out).
 *  - Chunking throughput in MB/s of extracted text, against a naive paragraph packer over the
 *    same text (split at blank lines, pack paragraphs up to 1,500 characters, copy each chunk
 *    out): the same linear pass without headings, offsets, overlap or sentence boundaries.
 */
import { chunkExtraction } from '../src/knowledge/chunk.js';
import { createExtractorPool } from '../src/knowledge/extract/index.js';
import type { Extraction } from '../src/knowledge/types.js';
import { pdfFile } from '../test/knowledge/files.js';
import type { Report } from './run.js';
import { loadAverage } from './support/bench-setup.js';

const PAGES = 200;
const RUNS = 5;
const CHUNK_TEXT_CHARS = 20 * 1024 * 1024;

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function timed(fn: () => Promise<unknown> | unknown): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

/** Deterministic prose of about `chars` characters in Markdown sections with headings. */
function markdownProse(chars: number): Extraction {
  const words =
    'shipment carrier invoice warehouse pallet route driver parcel customs depot tracking label'.split(' ');
  const sections = [];
  let total = 0;
  for (let s = 0; total < chars; s++) {
    let text = `## Section ${s}\n\n`;
    for (let p = 0; p < 6; p++) {
      for (let n = 0; n < 9; n++) {
        const sentence = Array.from(
          { length: 12 },
          (_, i) => words[(s * 31 + p * 7 + n * 5 + i) % words.length],
        );
        text += sentence.join(' ') + '. ';
      }
      text = text.trimEnd() + '\n\n';
    }
    sections.push({ text: text.trim(), heading: `Guide › Section ${s}`, pages: null });
    total += text.length;
  }
  return { status: 'ok', format: 'markdown', sections };
}

/** The baseline: paragraphs packed greedily into chunks of at most 1,500 characters. */
function packParagraphs(text: string): string[] {
  const chunks: string[] = [];
  let current = '';
  for (const paragraph of text.split('\n\n')) {
    if (current && current.length + 2 + paragraph.length > 1_500) {
      chunks.push(Buffer.from(current).toString()); // a real copy, as stored chunks are
      current = '';
    }
    current = current ? `${current}\n\n${paragraph}` : paragraph;
  }
  if (current) chunks.push(current);
  return chunks;
}

export async function run(report: Report): Promise<void> {
  report(loadAverage());

  // PDF: the same 200-page document, each page about 1,400 characters of text.
  const pageText = (n: number) =>
    `Page ${n}. ` +
    'Carriers collect parcels from the depot each morning and scan them at every hub they pass. '.repeat(15);
  const pdf = await pdfFile(
    'bench.pdf',
    Array.from({ length: PAGES }, (_, i) => pageText(i + 1)),
  );
  const { extractText, getDocumentProxy } = await import('unpdf');
  const raw = async () => {
    const doc = await getDocumentProxy(new Uint8Array(pdf.bytes));
    const { text } = await extractText(doc, { mergePages: false });
    await doc.destroy();
    if (text.length !== PAGES) throw new Error(`raw extraction gave ${text.length} pages`);
  };
  const pool = createExtractorPool();
  const viaWorker = async () => {
    const extraction = await pool.extract(pdf, { timeoutMs: 600_000 });
    if (extraction.status !== 'ok' || extraction.sections.length !== PAGES) {
      throw new Error(`worker extraction: ${JSON.stringify(extraction).slice(0, 200)}`);
    }
  };
  try {
    const cold = await timed(viaWorker); // worker start + pdf.js load + extraction
    await raw(); // warm pdf.js in this thread too
    const rawTimes: number[] = [];
    const workerTimes: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      rawTimes.push(await timed(raw));
      workerTimes.push(await timed(viaWorker));
    }
    const rawRate = PAGES / (median(rawTimes) / 1000);
    const workerRate = PAGES / (median(workerTimes) / 1000);
    report(
      `PDF extraction, ${PAGES} pages (${(pdf.bytes.length / 1024).toFixed(0)} KB): worker ${workerRate.toFixed(0)} pages/s; raw unpdf in-process ${rawRate.toFixed(0)} pages/s → ${((workerRate / rawRate) * 100).toFixed(0)}% (median of ${RUNS}, warm worker)`,
    );
    report(`  first extraction in a cold worker (thread start, pdf.js load): ${cold.toFixed(0)} ms`);
  } finally {
    await pool.close();
  }

  // Chunking.
  const extraction = markdownProse(CHUNK_TEXT_CHARS);
  const text = extraction.status === 'ok' ? extraction.sections.map((s) => s.text).join('\n\n') : '';
  const megabytes = text.length / (1024 * 1024);
  let chunkCount = 0;
  const chunkTimes: number[] = [];
  const sliceTimes: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    chunkTimes.push(await timed(() => (chunkCount = chunkExtraction(extraction).length)));
    sliceTimes.push(await timed(() => packParagraphs(text)));
  }
  const chunkRate = megabytes / (median(chunkTimes) / 1000);
  const sliceRate = megabytes / (median(sliceTimes) / 1000);
  report(
    `chunking ${megabytes.toFixed(0)} MB of Markdown text into ${chunkCount} chunks: ${chunkRate.toFixed(1)} MB/s; naive paragraph packer on the same text ${sliceRate.toFixed(1)} MB/s → ${((chunkRate / sliceRate) * 100).toFixed(0)}% (median of ${RUNS})`,
  );
}
