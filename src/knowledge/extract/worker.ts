/**
 * The extraction worker thread: receives files, answers extractions. It says `ready` once its
 * modules are loaded, so the caller's time limit measures extraction and not thread start-up.
 */
import { parentPort } from 'node:worker_threads';
import type { ExtractInput, Extraction } from '../types.js';
import { extractInProcess } from './run.js';

export interface ExtractRequest extends ExtractInput {
  id: number;
  maxChars: number;
}

export type WorkerMessage = { type: 'ready' } | { type: 'done'; id: number; extraction: Extraction };

const port = parentPort;
if (port) {
  port.on('message', (request: ExtractRequest) => {
    void extractInProcess(request, request.maxChars).then((extraction) => {
      port.postMessage({ type: 'done', id: request.id, extraction } satisfies WorkerMessage);
    });
  });
  port.postMessage({ type: 'ready' } satisfies WorkerMessage);
}
