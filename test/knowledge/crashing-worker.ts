/**
 * A stand-in for the extraction worker that crashes on every file, as a worker dies of an
 * uncaught error inside a library (pdf.js, mammoth): an Error whose message names a server path
 * and a stack frame, or (file `throws-a-string.pdf`) a thrown value that is not an Error at all.
 */
import { parentPort } from 'node:worker_threads';
import type { ExtractRequest, WorkerMessage } from '../../src/knowledge/extract/worker.js';

export const CRASH_MESSAGE =
  "Cannot find module '/srv/atrium/node_modules/pdfjs-dist/legacy/build/pdf.worker.mjs'\n" +
  '    at finalizeResolution (node:internal/modules/esm/resolve:264:11)';

// Tests import CRASH_MESSAGE from here too: only a worker thread has a parent port.
const port = parentPort;
if (port) {
  port.on('message', (request: ExtractRequest) => {
    // Thrown from a timer, outside any promise chain: nothing in the worker can catch it.
    setTimeout(() => {
      if (request.path.endsWith('throws-a-string.pdf')) throw '/srv/atrium/data/secret.pdf: bad xref';
      throw new Error(CRASH_MESSAGE);
    });
  });
  port.postMessage({ type: 'ready' } satisfies WorkerMessage);
}
