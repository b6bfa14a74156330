/**
 * The extraction worker thread: receives files, answers extractions. It says `ready` once it is
 * up and `loaded` once a file's extractor library is loaded, so the caller's time limit measures
 * extraction, not thread start-up or a first import of pdf.js on a busy machine.
 */
import { parentPort } from 'node:worker_threads';
import type { ExtractInput, Extraction } from '../types.js';
import { extractInProcess } from './run.js';

export interface ExtractRequest extends ExtractInput {
  id: number;
  maxChars: number;
}

export type WorkerMessage =
  { type: 'ready' } | { type: 'loaded'; id: number } | { type: 'done'; id: number; extraction: Extraction };

const port = parentPort;
if (port) {
  // Libraries must not write to the service's output (pdf.js warns on stdout when it loads);
  // what matters reaches the caller as the extraction's reason.
  for (const method of ['log', 'info', 'warn', 'error', 'debug'] as const) console[method] = () => {};
  port.on('message', (request: ExtractRequest) => {
    const loaded = () => port.postMessage({ type: 'loaded', id: request.id } satisfies WorkerMessage);
    void extractInProcess(request, request.maxChars, loaded).then((extraction) => {
      port.postMessage({ type: 'done', id: request.id, extraction } satisfies WorkerMessage);
    });
  });
  port.postMessage({ type: 'ready' } satisfies WorkerMessage);
}
