import { describe, expect, it } from 'vitest';
import { extractInProcess } from '../../src/knowledge/extract/index.js';
import { chunkExtraction } from '../../src/knowledge/chunk.js';
import { extractedText } from '../../src/knowledge/types.js';
import { buildRetrievalSet } from './retrieval-set.js';

const words = (text: string) => text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];

/** Runs of `n` consecutive words, to find questions that copy their passage. */
function shingles(text: string, n: number): Set<string> {
  const list = words(text);
  const result = new Set<string>();
  for (let i = 0; i + n <= list.length; i++) result.add(list.slice(i, i + n).join(' '));
  return result;
}

describe('the labelled retrieval set', () => {
  it('has at least 20 mixed files of several chunks and 50 questions, each answered by an existing file', async () => {
    const set = await buildRetrievalSet();
    expect(set.files.length).toBeGreaterThanOrEqual(20);
    expect(set.questions.length).toBeGreaterThanOrEqual(50);
    expect(new Set(set.files.map((f) => f.path)).size).toBe(set.files.length);

    const formats = new Set<string>();
    const texts = new Map<string, string>();
    let chunks = 0;
    for (const file of set.files) {
      const extraction = await extractInProcess(file);
      expect(extraction.status, file.path).toBe('ok');
      if (extraction.status === 'ok') formats.add(extraction.format);
      texts.set(file.path, extractedText(extraction));
      chunks += chunkExtraction(extraction).length;
    }
    expect([...formats].sort()).toEqual([
      'code',
      'csv',
      'docx',
      'html',
      'json',
      'markdown',
      'pdf',
      'text',
      'tsv',
      'xlsx',
    ]);
    expect(chunks).toBeGreaterThanOrEqual(2 * set.files.length);

    for (const { question, expectedPath, phrase } of set.questions) {
      const text = texts.get(expectedPath);
      expect(text, `${question} → ${expectedPath}`).toBeDefined();
      if (phrase) expect(text, `${question}: "${phrase}"`).toContain(phrase);
      // Paraphrased: no run of five words of the question appears in its file.
      const copied = [...shingles(question, 5)].filter((run) => shingles(text!, 5).has(run));
      expect(copied, question).toEqual([]);
    }
  }, 60_000);
});
