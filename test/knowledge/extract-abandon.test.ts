import { describe, expect, it } from 'vitest';
import { createExtractorPool } from '../../src/knowledge/extract/index.js';
import { MEDIA } from './files.js';

const file = (path: string) => ({ path, mediaType: MEDIA.text, bytes: Buffer.from('text') });

describe('an extraction its caller abandons', () => {
  it('ends at once, running or waiting, and a fresh worker takes the next file', async () => {
    const pool = createExtractorPool({ workerScript: new URL('./silent-worker.ts', import.meta.url) });
    try {
      const running = new AbortController();
      const waiting = new AbortController();
      const first = pool.extract(file('running.txt'), { timeoutMs: 60_000, signal: running.signal });
      const second = pool.extract(file('waiting.txt'), { timeoutMs: 60_000, signal: waiting.signal });
      waiting.abort();
      expect(await second).toEqual({ status: 'failed', error: 'extraction abandoned' });
      running.abort();
      expect(await first).toEqual({ status: 'failed', error: 'extraction abandoned' });
      expect(pool.workersStarted).toBe(1);

      // Already abandoned: not started at all.
      expect(
        await pool.extract(file('late.txt'), { timeoutMs: 60_000, signal: AbortSignal.abort() }),
      ).toEqual({
        status: 'failed',
        error: 'extraction abandoned',
      });
      // The stuck worker was stopped: the next file gets a fresh one (and times out on it).
      expect(await pool.extract(file('next.txt'), { timeoutMs: 200 })).toMatchObject({
        status: 'failed',
        error: 'extraction timed out after 200 ms',
      });
      expect(pool.workersStarted).toBe(2);
    } finally {
      await pool.close();
    }
  }, 60_000);
});
