/**
 * Text extraction of project files, off the request path: each file is extracted in a worker
 * thread with a time limit, so a hostile or huge file fails alone.
 */
import type { ExtractInput, ExtractOptions, Extraction } from '../types.js';
import { createExtractorPool, type ExtractorPool } from './pool.js';

export { createExtractorPool } from './pool.js';
export { extractInProcess } from './run.js';

let shared: ExtractorPool | null = null;

/**
 * Extracts one file in the process's shared extraction worker (started on first use; it does
 * not keep the process alive when idle). Never throws: unreadable files are `failed`, images,
 * archives and binaries `unsupported`. A component that wants its own threads (or to shut them
 * down) uses {@link createExtractorPool} instead.
 */
export function extractFile(input: ExtractInput, options: ExtractOptions): Promise<Extraction> {
  shared ??= createExtractorPool();
  return shared.extract(input, options);
}
