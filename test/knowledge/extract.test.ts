import { afterAll, describe, expect, it } from 'vitest';
import { CHUNK_HEADING_MAX_CHARS } from '../../src/knowledge/chunk.js';
import { createExtractorPool, extractFile, extractInProcess } from '../../src/knowledge/extract/index.js';
import { withoutBlanksAtLineEnds } from '../../src/knowledge/extract/formats/pdf.js';
import { extractedText, MAX_EXTRACTED_CHARS, type Extraction } from '../../src/knowledge/types.js';
import { CRASH_MESSAGE } from './crashing-worker.js';
import {
  corruptPdfFile,
  docxFile,
  htmlFile,
  jsonFile,
  markdownFile,
  MEDIA,
  pdfFile,
  pngFile,
  sampleFiles,
  SLOW_FILE_TIMEOUT_MS,
  slowPdfFile,
  tableFile,
  textFile,
  xlsxFile,
  type TestFile,
} from './files.js';

const pool = createExtractorPool();
afterAll(() => pool.close());

const TIMEOUT = { timeoutMs: 30_000 };
const extract = (file: TestFile) => pool.extract(file, TIMEOUT);

function ok(extraction: Extraction) {
  if (extraction.status !== 'ok') throw new Error(`expected ok, got ${JSON.stringify(extraction)}`);
  return extraction;
}

describe('extraction in the worker', () => {
  it('extracts every supported format, refuses the image and fails the corrupt PDF', async () => {
    for (const { file, status, phrase } of await sampleFiles()) {
      const extraction = await extract(file);
      expect(extraction.status, file.path).toBe(status);
      if (phrase) expect(extractedText(extraction), file.path).toContain(phrase);
    }
  }, 120_000);

  it('names the format it used', async () => {
    expect(ok(await extract(markdownFile())).format).toBe('markdown');
    expect(ok(await extract(textFile('src/app.py', 'print("hi")\n', 'text/x-python'))).format).toBe('code');
    expect(ok(await extract(await xlsxFile())).format).toBe('xlsx');
  }, 60_000);

  it('keeps the Markdown heading path per section, ignoring # lines inside fenced code', async () => {
    const { sections } = ok(await extract(markdownFile()));
    expect(sections.map((s) => s.heading)).toEqual([
      'Install',
      'Install › Linux',
      'Install › macOS',
      'Configure',
    ]);
    const linux = sections[1];
    expect(linux.text).toContain('# enable at boot');
    expect(linux.text).toContain('systemctl enable --now atrium');
  });

  it('keeps YAML front matter apart and reads underlined headings', async () => {
    const text =
      '---\ntitle: Guide\ntags: [a]\n---\nIntro.\n\nSetup\n=====\n\nSteps.\n\nDetails\n-------\n\nMore.\n';
    const { sections } = ok(await extract(markdownFile('guide.md', text)));
    expect(sections.map((s) => [s.heading, s.text])).toEqual([
      [null, '---\ntitle: Guide\ntags: [a]\n---'],
      [null, 'Intro.'],
      ['Setup', 'Setup\n=====\n\nSteps.'],
      ['Setup › Details', 'Details\n-------\n\nMore.'],
    ]);
  });

  // Each line below took minutes to read (patterns rescanning a long run of `#` or spaces from
  // each of its positions); read in linear time, they finish far within the time limit.
  it('reads a crafted Markdown heading line of 250 KB within the time limit', async () => {
    const title = '#'.repeat(250_000) + 'x';
    const { sections } = ok(await extract(markdownFile('crafted.md', `# ${title}\nBody.`)));
    // A title is kept as long as a chunk's heading path may be, and one character more (chunk.ts marks the cut).
    expect(sections.map((s) => s.heading)).toEqual([title.slice(0, CHUNK_HEADING_MAX_CHARS + 1)]);
    const spaced = ok(await extract(markdownFile('spaced.md', `# a${' '.repeat(250_000)}x ##\nBody.`)));
    expect(spaced.sections[0].heading).toBe(`a${' '.repeat(CHUNK_HEADING_MAX_CHARS)}`);
  }, 120_000);

  // Each section carries its whole heading path, joined again at every heading: a long title
  // over half a million sub-headings ran the worker out of memory (4.5 MB of Markdown).
  it('reads a long title over many sub-headings in time and memory that grow with the file', async () => {
    const text = `# ${'a'.repeat(2_000_000)}\n` + '## x\n'.repeat(500_000);
    const { sections } = ok(await extract(markdownFile('nested.md', text)));
    expect(sections[0].heading).toBe('a'.repeat(CHUNK_HEADING_MAX_CHARS + 1));
    expect(sections[1].heading).toBe(`${'a'.repeat(CHUNK_HEADING_MAX_CHARS + 1)} › x`);
    const headingChars = sections.reduce((sum, section) => sum + (section.heading?.length ?? 0), 0);
    expect(headingChars).toBeLessThanOrEqual(MAX_EXTRACTED_CHARS + 1_000);
  }, 120_000);

  it('keeps a `#` that is part of a heading’s title (CommonMark: a closing run follows a space)', async () => {
    const text = ['# Learning C#', '## foo#', '## foo \\#', '## Closed ##', '## #', 'Body.'].join('\n');
    const { sections } = ok(await extract(markdownFile('hashes.md', text)));
    expect(sections.map((s) => s.heading)).toEqual([
      'Learning C#',
      'Learning C# › foo#',
      'Learning C# › foo \\#',
      'Learning C# › Closed',
      'Learning C#',
    ]);
  });

  it('reads a text file holding a 250 KB run of spaces within the time limit', async () => {
    const line = `a${' '.repeat(250_000)}b`;
    const { sections } = ok(await extract(textFile('spaced.txt', `${line} \n\n`)));
    expect(sections.map((s) => s.text)).toEqual([line]);
  }, 120_000);

  // pdf.js collapses runs of spaces, so no PDF brought this to the page cleanup; its pattern
  // (`/[ \t]+\n/g`) took about 95 s on the run below, which no line end follows.
  it('strips the spaces and tabs ending the lines of a PDF page, in time linear in a long run of them', () => {
    const run = `a${' \t'.repeat(100_000)}b`;
    expect(withoutBlanksAtLineEnds(`${run}\n x \t\n\t\n  y  `)).toBe(`${run}\n x\n\n  y`);
  });

  it('gives one section per PDF page with its page number', async () => {
    const pages = ['Alpha page text.', 'Beta page text.', '', 'Delta page mentions the fjord.'];
    const { sections } = ok(await extract(await pdfFile('doc.pdf', pages)));
    expect(sections.map((s) => s.pages)).toEqual([[1], [2], [4]]);
    expect(sections[2].text).toContain('fjord');
    expect(sections.every((s) => s.heading === null)).toBe(true);
  }, 60_000);

  it('keeps DOCX headings (Heading 1–3 styles) as heading paths and lays out tables', async () => {
    const { sections } = ok(await extract(await docxFile()));
    expect(sections.map((s) => s.heading)).toEqual([
      'Security policy',
      'Security policy › Passwords',
      'Security policy › Laptops',
      'Incident contacts',
    ]);
    expect(sections[3].text).toMatch(/Security lead\s+Dana Whitfield/);
  }, 60_000);

  it('names the sheet and rows of XLSX sections and repeats the header row', async () => {
    const { sections } = ok(await extract(await xlsxFile()));
    expect(sections.map((s) => s.heading)).toEqual(['Prices › rows 2–4', 'Discounts › rows 2–3']);
    expect(sections[0].text).toBe(
      'Plan | Monthly EUR | Seats included\nStarter | 19 | 3\nTeam | 49 | 10\nEnterprise | 199 | 50',
    );
  }, 60_000);

  it('splits a long CSV into row blocks that each start with the header', async () => {
    const rows: Array<Array<string | number>> = [['Sku', 'Description', 'Price']];
    for (let n = 1; n <= 300; n++) rows.push([`SKU-${n}`, `Widget, model ${n}\n"deluxe"`, n]);
    const { sections } = ok(await extract(tableFile('data/skus.csv', rows)));
    expect(sections.length).toBeGreaterThan(5);
    for (const section of sections) {
      expect(section.text.startsWith('Sku | Description | Price\n')).toBe(true);
      expect(section.text.length).toBeLessThanOrEqual(1_500);
    }
    expect(sections[0].heading).toBe(`rows 2–${Number(sections[1].heading!.match(/rows (\d+)/)![1]) - 1}`);
    expect(sections.at(-1)!.heading).toMatch(/–301$/);
    // Quoted commas, quotes and line breaks stay inside their cell.
    expect(sections[0].text).toContain('SKU-1 | Widget, model 1 "deluxe" | 1');
  });

  it('reads TSV with tabs as the separator', async () => {
    const file = tableFile(
      't.tsv',
      [
        ['Name', 'Role'],
        ['Ada', 'Engineer, senior'],
      ],
      '\t',
    );
    expect(ok(await extract(file)).sections[0].text).toBe('Name | Role\nAda | Engineer, senior');
  });

  it('turns HTML into text under its headings, without scripts, styles or link targets', async () => {
    const { sections } = ok(await extract(htmlFile()));
    expect(sections.map((s) => s.heading)).toEqual([
      'Support FAQ',
      'Support FAQ › Refunds',
      'Support FAQ › Refunds › Partial refunds',
      'Support FAQ › Contact',
    ]);
    const text = sections.map((s) => s.text).join('\n');
    expect(text).not.toMatch(/secret|color: red|example\.com/);
    expect(text).toContain('Refunds are issued within 14 days');
    expect(text).toMatch(/Phone\s+9–17 CET/);
  });

  it('pretty-prints minified JSON so it can be cut into chunks', async () => {
    const { sections } = ok(await extract(jsonFile()));
    expect(sections[0].text).toContain('\n  "retries": {\n    "max": 5,');
  });

  it('keeps JSON numbers exactly as written while pretty-printing', async () => {
    const json = '{"orderId":12345678901234567891,"price":19.90,"sku":9007199254740993,"tiny":1.0e-7}';
    const { sections } = ok(await extract(textFile('orders.json', json, 'application/json')));
    expect(sections[0].text).toBe(
      '{\n  "orderId": 12345678901234567891,\n  "price": 19.90,\n  "sku": 9007199254740993,\n  "tiny": 1.0e-7\n}',
    );
  });

  it('keeps JSON with duplicate keys as written, losing neither value', async () => {
    const json = '{"region": "eu-west-1", "region": "us-east-2"}';
    const { sections } = ok(await extract(textFile('dup.json', json, 'application/json')));
    expect(sections[0].text).toBe(json);
  });

  it('reads UTF-16 text and Windows line ends', async () => {
    const utf16 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('Héllo\r\nwörld', 'utf16le')]);
    const file = { path: 'notes.txt', mediaType: 'text/plain', bytes: utf16 };
    expect(ok(await extract(file)).sections[0].text).toBe('Héllo\nwörld');
  });

  it('reads text that is not UTF-8 as Windows-1252 (Latin-1 and its curly quotes, euro sign)', async () => {
    // "Café – 10 € “net”" as Excel on Windows exports it: no byte of it is valid UTF-8.
    const cp1252 = Buffer.from([
      0x43, 0x61, 0x66, 0xe9, 0x20, 0x96, 0x20, 0x31, 0x30, 0x20, 0x80, 0x20, 0x93, 0x6e, 0x65, 0x74, 0x94,
    ]);
    const file = {
      path: 'prices.csv',
      mediaType: 'text/csv',
      bytes: Buffer.concat([Buffer.from('name\n'), cp1252]),
    };
    expect(extractedText(ok(await extract(file)))).toContain('Café – 10 € “net”');
    const notes = {
      path: 'notes.txt',
      mediaType: 'text/plain',
      bytes: Buffer.from([0x64, 0xe9, 0x6a, 0xe0]),
    };
    expect(extractedText(ok(await extract(notes)))).toBe('déjà');
  });

  it('keeps UTF-8 text with a stray invalid byte as UTF-8, the byte replaced', async () => {
    const bytes = Buffer.concat([
      Buffer.from('Grüße aus Köln '),
      Buffer.from([0xff]),
      Buffer.from(' – schön'),
    ]);
    const file = { path: 'notes.txt', mediaType: 'text/plain', bytes };
    expect(extractedText(ok(await extract(file)))).toBe('Grüße aus Köln \ufffd – schön');
  });

  it('drops NUL characters that appear past the binary sniff', async () => {
    const text = 'a'.repeat(10_000) + '\0tail';
    const extraction = ok(await extract(textFile('notes.txt', text)));
    expect(extractedText(extraction)).toBe('a'.repeat(10_000) + 'tail');
  });

  it('decides by extension, media type and content', async () => {
    const png = pngFile();
    const cases: Array<[TestFile, string]> = [
      [png, 'unsupported'],
      [{ ...png, path: 'looks-like.md', mediaType: 'text/markdown' }, 'unsupported'],
      [
        { path: 'bundle.zip', mediaType: 'application/zip', bytes: Buffer.from('PK\x03\x04rest') },
        'unsupported',
      ],
      [
        { path: 'blob', mediaType: 'application/octet-stream', bytes: Buffer.from([1, 2, 0, 4, 5]) },
        'unsupported',
      ],
      [{ path: 'README', mediaType: 'application/octet-stream', bytes: Buffer.from('plain words') }, 'ok'],
      [
        { path: 'Dockerfile', mediaType: 'application/octet-stream', bytes: Buffer.from('FROM node:20') },
        'ok',
      ],
      [{ path: 'movie.mp4', mediaType: 'video/mp4', bytes: Buffer.from('....ftypisom') }, 'unsupported'],
    ];
    for (const [file, status] of cases) expect((await extract(file)).status, file.path).toBe(status);
    expect(await extract(png)).toEqual({ status: 'unsupported', reason: 'images are not indexed' });
  });

  it('reads a text format as text even when its first bytes spell a magic number', async () => {
    const cases: Array<[TestFile, string, string]> = [
      [textFile('mz.txt', 'MZ Holdings annual report'), 'text', 'MZ Holdings'],
      [textFile('codes.csv', 'MZ,Mozambique\nMW,Malawi\n', 'text/csv'), 'csv', 'Mozambique'],
      [
        textFile('pdf-notes.md', '%PDF-1.7 is the header of every PDF.', 'text/markdown'),
        'markdown',
        '%PDF-1.7',
      ],
      [textFile('gif.txt', 'GIF89a was the last revision of the format.'), 'text', 'GIF89a'],
    ];
    for (const [file, format, phrase] of cases) {
      const extraction = ok(await extract(file));
      expect(extraction.format, file.path).toBe(format);
      expect(extractedText(extraction), file.path).toContain(phrase);
    }
  });

  it('still refuses a real binary renamed with a text extension, naming what it is', async () => {
    const png = { ...pngFile(), path: 'looks-like.md', mediaType: 'text/markdown' };
    expect(await extract(png)).toEqual({ status: 'unsupported', reason: 'images are not indexed' });
    const exe = {
      path: 'tool.txt',
      mediaType: 'text/plain',
      bytes: Buffer.from('MZ\x90\x00\x03\x00\x00\x00'),
    };
    expect(await extract(exe)).toEqual({ status: 'unsupported', reason: 'binary files are not indexed' });
  });

  it('fails a corrupt PDF with a short reason and no stack trace', async () => {
    const extraction = await extract(corruptPdfFile());
    expect(extraction.status).toBe('failed');
    const error = extraction.status === 'failed' ? extraction.error : '';
    expect(error).toMatch(/^PDF could not be read: /);
    expect(error).not.toMatch(/\n|\bat .*:\d+/);
    expect(error.length).toBeLessThan(250);
  }, 60_000);

  it('fails a file that exceeds the time limit, replaces the worker, and the next file still extracts', async () => {
    await extract(await pdfFile()); // pdf.js loaded: the limit now measures extraction alone
    const started = pool.workersStarted;
    const slow = await pool.extract(slowPdfFile(), { timeoutMs: SLOW_FILE_TIMEOUT_MS });
    expect(slow).toEqual({
      status: 'failed',
      error: `extraction timed out after ${SLOW_FILE_TIMEOUT_MS} ms`,
    });
    const next = await extract(await pdfFile());
    expect(extractedText(next)).toContain('laptop refresh every three years');
    expect(pool.workersStarted).toBe(started + 1); // the timed-out worker was terminated and replaced
    await extract(markdownFile());
    expect(pool.workersStarted).toBe(started + 1); // and the replacement is reused
  }, 120_000);

  // A worker dies of an error no extractor catches (pdf.js failing in a timer, say): its message
  // may name server paths and stack frames, and clients see a file's failure as its indexError.
  it('fails a file whose worker crashes in Atrium’s words, the crash kept for the log; a fresh worker takes the next', async () => {
    const crashing = createExtractorPool({ workerScript: new URL('./crashing-worker.ts', import.meta.url) });
    try {
      const bytes = Buffer.from('%PDF-1.7\n');
      const error = await crashing.extract({ path: 'docs/report.pdf', mediaType: MEDIA.pdf, bytes }, TIMEOUT);
      expect(error).toEqual({
        status: 'failed',
        error: 'extraction worker crashed',
        cause: expect.any(Error),
      });
      expect(error.status === 'failed' && (error.cause as Error).message).toBe(CRASH_MESSAGE);
      // A thrown value that is not an Error has no message to read: the file fails the same way.
      const thrown = await crashing.extract(
        { path: 'docs/throws-a-string.pdf', mediaType: MEDIA.pdf, bytes },
        TIMEOUT,
      );
      expect(thrown).toMatchObject({ status: 'failed', error: 'extraction worker crashed' });
      expect(crashing.workersStarted).toBe(2);
    } finally {
      await crashing.close();
    }
  }, 60_000);

  it('caps extracted text at MAX_EXTRACTED_CHARS and marks it truncated', async () => {
    const line = 'The quick brown fox jumps over the lazy dog.\n';
    const big = textFile('big.log', line.repeat(Math.ceil((MAX_EXTRACTED_CHARS + 1_000_000) / line.length)));
    const extraction = ok(await extract(big));
    expect(extraction.truncated).toBe(true);
    expect(extractedText(extraction).length).toBeLessThanOrEqual(MAX_EXTRACTED_CHARS);
    expect(extractedText(extraction).length).toBeGreaterThan(MAX_EXTRACTED_CHARS - line.length);
    const small = ok(await extract(markdownFile()));
    expect(small.truncated).toBeUndefined();
  }, 60_000);

  it('caps across sections too, with a pool-specific limit', async () => {
    const small = createExtractorPool({ maxChars: 100 });
    try {
      const extraction = ok(await small.extract(markdownFile(), TIMEOUT));
      expect(extraction.truncated).toBe(true);
      expect(extractedText(extraction).length).toBe(100);
      expect(extraction.sections[0].heading).toBe('Install');
    } finally {
      await small.close();
    }
  }, 60_000);

  it('extractFile uses a shared worker and gives the same result as in-process extraction', async () => {
    const file = markdownFile();
    expect(await extractFile(file, TIMEOUT)).toEqual(await extractInProcess(file));
  }, 60_000);

  it('fails what is still pending when the pool closes', async () => {
    const closing = createExtractorPool();
    const pending = closing.extract(markdownFile(), TIMEOUT);
    await closing.close();
    expect(await pending).toEqual({ status: 'failed', error: 'extraction is shut down' });
    expect(await closing.extract(markdownFile(), TIMEOUT)).toEqual({
      status: 'failed',
      error: 'extraction is shut down',
    });
  });
});
