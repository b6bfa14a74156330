/**
 * A stand-in for the extraction worker that starts every file and never finishes one, as a
 * library stuck in a huge file: only the pool's time limit, or its caller's signal, ends it.
 */
import { parentPort } from 'node:worker_threads';
import type { ExtractRequest, WorkerMessage } from '../../src/knowledge/extract/worker.js';

const port = parentPort;
if (port) {
  port.on('message', (request: ExtractRequest) => {
    port.postMessage({ type: 'loaded', id: request.id } satisfies WorkerMessage);
  });
  port.postMessage({ type: 'ready' } satisfies WorkerMessage);
}
