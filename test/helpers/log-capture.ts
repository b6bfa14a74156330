import { Writable } from 'node:stream';

export type LogLine = Record<string, unknown> & { level: number; msg: string; reqId?: string };

/** A pino destination that keeps every line written to it, parsed. */
export function captureLog() {
  const lines: LogLine[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line));
      callback();
    },
  });
  return { lines, stream };
}
