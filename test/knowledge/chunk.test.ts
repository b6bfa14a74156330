import { describe, expect, it } from 'vitest';
import {
  CHUNK_HEADING_MAX_CHARS,
  CHUNK_OVERLAP_CHARS,
  CHUNK_TARGET_CHARS,
  chunkExtraction,
} from '../../src/knowledge/chunk.js';
import { extractInProcess } from '../../src/knowledge/extract/index.js';
import {
  extractedText,
  type ExtractedSection,
  type Extraction,
  type TextChunk,
} from '../../src/knowledge/types.js';
import { markdownFile } from './files.js';

const ok = (sections: ExtractedSection[]): Extraction => ({ status: 'ok', format: 'text', sections });
const section = (text: string, heading: string | null = null, pages: number[] | null = null) => ({
  text,
  heading,
  pages,
});

/** Deterministic prose: sentences of words from a small vocabulary, paragraphs of ~`paragraphChars`. */
function prose(chars: number, paragraphChars = 600): string {
  const words = ['ledger', 'invoice', 'gateway', 'refund', 'quota', 'tenant', 'replica', 'cursor', 'budget'];
  let text = '';
  let paragraph = 0;
  let n = 0;
  while (text.length < chars) {
    const sentence = Array.from(
      { length: 8 + (n % 7) },
      (_, i) => words[(n * 7 + i * 3) % words.length],
    ).join(' ');
    text += sentence[0].toUpperCase() + sentence.slice(1) + '. ';
    paragraph += sentence.length + 2;
    if (paragraph > paragraphChars) {
      text = text.trimEnd() + '\n\n';
      paragraph = 0;
    }
    n++;
  }
  return text.trim();
}

/** Offsets, text and coverage hold for every chunking. */
function expectConsistent(extraction: Extraction, chunks: TextChunk[]) {
  const full = extractedText(extraction);
  chunks.forEach((chunk, i) => {
    expect(chunk.ordinal).toBe(i);
    expect(chunk.text).toBe(full.slice(chunk.start, chunk.end));
    expect(chunk.text).toBe(chunk.text.trim());
    if (i > 0) expect(chunk.start).toBeGreaterThan(chunks[i - 1].start);
  });
  // No non-space character of the text is left out of every chunk.
  const covered = new Uint8Array(full.length);
  for (const chunk of chunks) covered.fill(1, chunk.start, chunk.end);
  for (let i = 0; i < full.length; i++)
    if (!covered[i] && /\S/.test(full[i])) throw new Error(`offset ${i} not covered`);
}

describe('chunkExtraction', () => {
  it('keeps a short text in one chunk', () => {
    const extraction = ok([section('Just one line.')]);
    expect(chunkExtraction(extraction)).toEqual([
      { ordinal: 0, text: 'Just one line.', heading: null, pages: null, start: 0, end: 14 },
    ]);
  });

  it('gives nothing for an extraction that is not ok, or holds only whitespace', () => {
    expect(chunkExtraction({ status: 'failed', error: 'x' })).toEqual([]);
    expect(chunkExtraction({ status: 'unsupported', reason: 'x' })).toEqual([]);
    expect(chunkExtraction(ok([section('  \n\n  ')]))).toEqual([]);
  });

  it('cuts long prose into ~1,500-character chunks that overlap and end at paragraph or sentence ends', () => {
    const extraction = ok([section(prose(20_000))]);
    const chunks = chunkExtraction(extraction);
    expectConsistent(extraction, chunks);
    expect(chunks.length).toBeGreaterThanOrEqual(12);
    expect(chunks.length).toBeLessThanOrEqual(20);
    for (const [i, chunk] of chunks.entries()) {
      expect(chunk.text.length).toBeLessThanOrEqual(CHUNK_TARGET_CHARS + 300);
      if (i < chunks.length - 1) {
        expect(chunk.text.length).toBeGreaterThanOrEqual(CHUNK_TARGET_CHARS / 2);
        expect(chunk.text).toMatch(/\.$/); // a sentence (or paragraph) end, never mid-word
        const overlap = chunk.end - chunks[i + 1].start;
        expect(overlap).toBeGreaterThan(0);
        expect(overlap).toBeLessThanOrEqual(CHUNK_OVERLAP_CHARS);
      }
    }
  });

  it('prefers a paragraph break over a sentence end', () => {
    const paragraphs = prose(9_000, 500);
    const extraction = ok([section(paragraphs)]);
    const full = extractedText(extraction);
    const chunks = chunkExtraction(extraction);
    for (const chunk of chunks.slice(0, -1)) expect(full.slice(chunk.end, chunk.end + 2)).toBe('\n\n');
  });

  it('never splits a word when spaces allow, and still cuts text without any', () => {
    const words = Array.from({ length: 2_000 }, (_, i) => `word${i}`).join(' ');
    const extraction = ok([section(words)]);
    const chunks = chunkExtraction(extraction);
    expectConsistent(extraction, chunks);
    for (const chunk of chunks) expect(chunk.text).toMatch(/^word\d+( word\d+)*$/);

    const solid = ok([section('x'.repeat(5_000))]);
    const solidChunks = chunkExtraction(solid);
    expectConsistent(solid, solidChunks);
    expect(solidChunks.length).toBeGreaterThan(2);
  });

  it('does not cut a surrogate pair in half', () => {
    const extraction = ok([section('😀'.repeat(3_000))]);
    for (const chunk of chunkExtraction(extraction)) {
      expect(chunk.text.charCodeAt(0)).not.toBeGreaterThanOrEqual(0xdc00);
      expect(chunk.text).toMatch(/^(😀)+$/u);
    }
  });

  it('keeps each section’s heading, and packs a heading with its short subsections', async () => {
    const markdown = await extractInProcess(markdownFile());
    const chunks = chunkExtraction(markdown);
    expectConsistent(markdown, chunks);
    expect(chunks.map((c) => c.heading)).toEqual(['Install', 'Configure']);
    expect(chunks[0].text).toContain('## Linux');
    expect(chunks[0].text).toContain('## macOS');

    const long = ok([
      section('# Guide\n\nIntro.', 'Guide'),
      section(prose(4_000), 'Guide › Deploy'),
      section('Last.', 'FAQ'),
    ]);
    const longChunks = chunkExtraction(long);
    expectConsistent(long, longChunks);
    expect(longChunks[0].heading).toBe('Guide');
    expect(longChunks.slice(1, -1).every((c) => c.heading === 'Guide › Deploy')).toBe(true);
    expect(longChunks.at(-1)!.heading).toBe('FAQ');
  });

  it('packs short PDF pages together with all their page numbers, and keeps a long page’s number on each window', () => {
    const pages = ok([
      section('Page one is short.', null, [1]),
      section('Page two is short too.', null, [2]),
      section(prose(4_000), null, [3]),
      section('Page four.', null, [4]),
    ]);
    const chunks = chunkExtraction(pages);
    expectConsistent(pages, chunks);
    expect(chunks[0].pages).toEqual([1, 2]);
    expect(chunks.slice(1, -1).every((c) => c.pages?.join() === '3')).toBe(true);
    expect(chunks.at(-1)!.pages).toEqual([4]);
  });

  it('moves on by most of a chunk after a short line and a long run of whitespace', () => {
    // Once a chunk per character of the file: 14,951 chunks for these 175 KB.
    for (const unit of [
      '\n' + 'a'.repeat(150) + ' '.repeat(1600),
      'intro line\nshort text\n' + '\n'.repeat(800),
    ]) {
      const extraction = ok([section(unit.repeat(100))]);
      const chunks = chunkExtraction(extraction);
      expectConsistent(extraction, chunks);
      const floor = CHUNK_TARGET_CHARS / 2 - CHUNK_OVERLAP_CHARS;
      expect(chunks.length).toBeLessThanOrEqual(Math.ceil((unit.length * 100) / floor) + 1);
    }
  });

  it('cuts a heading path longer than the cap on every chunk', async () => {
    const title = Array.from({ length: 20_000 }, (_, i) => `w${i}`).join(' ');
    const markdown = `# ${title}\n\n` + ('Some body text of the section. '.repeat(40) + '\n\n').repeat(50);
    const extraction = await extractInProcess({
      bytes: Buffer.from(markdown),
      path: 'long.md',
      mediaType: 'text/markdown',
    });
    const chunks = chunkExtraction(extraction);
    expectConsistent(extraction, chunks);
    expect(chunks.length).toBeGreaterThan(10);
    for (const chunk of chunks) {
      expect(chunk.heading!.length).toBe(CHUNK_HEADING_MAX_CHARS);
      expect(chunk.heading!.endsWith('…')).toBe(true);
      expect(title.startsWith(chunk.heading!.slice(0, -1))).toBe(true);
    }
  });

  it('never packs row blocks of different rows together', () => {
    const rows = ok([
      section('A | B\n1 | 2', 'Prices › rows 2–2'),
      section('A | B\n3 | 4', 'Prices › rows 3–3'),
    ]);
    expect(chunkExtraction(rows).map((c) => c.heading)).toEqual(['Prices › rows 2–2', 'Prices › rows 3–3']);
  });
});
