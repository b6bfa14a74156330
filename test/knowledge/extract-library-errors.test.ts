/**
 * A file's `indexError` is shown to clients: a library's error about the file keeps its first
 * line, one about the server (a module that did not load, a path of the server) does not.
 * pdf.js (unpdf) is replaced by a stand-in that fails as each test says.
 */
import { inflateRawSync } from 'node:zlib';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { getDocumentProxy } from 'unpdf';
import { extractInProcess } from '../../src/knowledge/extract/index.js';
import { corruptPdfFile } from './files.js';

vi.mock('unpdf', () => ({ getDocumentProxy: vi.fn(), extractText: vi.fn() }));

/** What Node itself throws for `act`: the real error, with its real code and fields. */
function thrownBy(act: () => unknown): unknown {
  try {
    act();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

const failWith = (error: unknown) => vi.mocked(getDocumentProxy).mockRejectedValueOnce(error);
afterEach(() => vi.mocked(getDocumentProxy).mockReset());

const MODULE_PATH = '/srv/atrium/node_modules/pdfjs-dist/legacy/build/pdf.worker.mjs';

describe('the indexError of a library that failed', () => {
  it("keeps the first line of the parser's message about the file", async () => {
    failWith(new Error('Invalid PDF structure.\nmore detail'));
    expect(await extractInProcess(corruptPdfFile())).toEqual({
      status: 'failed',
      error: 'PDF could not be read: Invalid PDF structure.',
    });
  });

  it("keeps the message of a damaged file's compressed data (zlib's errors carry an errno too)", async () => {
    const zlibError = thrownBy(() => inflateRawSync(Buffer.from([0xff, 0xff, 0xff, 0xff])));
    expect(zlibError).toMatchObject({ code: 'Z_DATA_ERROR', errno: expect.any(Number) });
    failWith(zlibError);
    // Before: "PDF extraction failed on an internal error" (any errno counted as the server's).
    expect(await extractInProcess(corruptPdfFile())).toEqual({
      status: 'failed',
      error: 'PDF could not be read: invalid block type',
    });
  });

  it("keeps the message of a read past a truncated file's end (Node's ERR_BUFFER_OUT_OF_BOUNDS)", async () => {
    const rangeError = thrownBy(() => Buffer.alloc(2).readUInt32LE(0));
    expect(rangeError).toMatchObject({ code: 'ERR_BUFFER_OUT_OF_BOUNDS' });
    failWith(rangeError);
    expect(await extractInProcess(corruptPdfFile())).toMatchObject({
      status: 'failed',
      error: expect.stringMatching(/^PDF could not be read: /),
    });
  });

  it("counts a failed system call as the server's (its code, errno and syscall)", async () => {
    failWith(
      Object.assign(new Error('EMFILE: too many open files'), {
        code: 'EMFILE',
        errno: -24,
        syscall: 'open',
      }),
    );
    expect(await extractInProcess(corruptPdfFile())).toMatchObject({
      status: 'failed',
      error: 'PDF extraction failed on an internal error',
    });
  });

  it('names no server path when the library did not load; the error goes along for the log', async () => {
    const notFound = Object.assign(
      new Error(`Cannot find module '${MODULE_PATH}' imported from /srv/atrium`),
      {
        code: 'ERR_MODULE_NOT_FOUND',
      },
    );
    const required = Object.assign(new Error('Cannot find module pdfjs-dist'), { code: 'MODULE_NOT_FOUND' });
    // No code, but a path of the server in the message (pdf.js setting up its worker).
    const named = new Error(`Setting up fake worker failed: "Cannot load ${MODULE_PATH}".`);
    const windows = new Error('ENOENT: no such file or directory, open C:\\atrium\\fonts\\a.pfb');
    const url = new Error(`Failed to load file://${MODULE_PATH}`);
    for (const error of [notFound, required, named, windows, url]) {
      failWith(error);
      const extraction = await extractInProcess(corruptPdfFile());
      // Before: "PDF could not be read: Cannot find module '/srv/atrium/node_modules/…'".
      expect(extraction).toEqual({
        status: 'failed',
        error: 'PDF extraction failed on an internal error',
        cause: expect.any(Error),
      });
      const cause = extraction.status === 'failed' ? (extraction.cause as Error) : undefined;
      expect(cause?.message).toBe(error.message);
      // The worker hands the extraction over by postMessage: the cause must survive the copy.
      expect(structuredClone(extraction)).toEqual(extraction);
    }
  });

  it('copies a cause that postMessage could not copy (a thrown value, an error holding a function)', async () => {
    failWith(new Error(`Cannot load ${MODULE_PATH}`, { cause: { retry: () => {} } }));
    const extraction = await extractInProcess(corruptPdfFile());
    expect(structuredClone(extraction)).toMatchObject({
      error: 'PDF extraction failed on an internal error',
    });
    failWith(`${MODULE_PATH}: bad xref`);
    const thrown = await extractInProcess(corruptPdfFile());
    expect(structuredClone(thrown)).toMatchObject({ error: 'PDF extraction failed on an internal error' });
    expect(thrown.status === 'failed' && (thrown.cause as Error).message).toBe(`${MODULE_PATH}: bad xref`);
  });
});
