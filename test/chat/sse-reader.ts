import type { UIMessageChunk } from 'ai';

/** Reads a UI message event stream one event at a time: its chunks, and whether `[DONE]` came. */
export class EventReader {
  readonly chunks: UIMessageChunk[] = [];
  done = false;
  private buffer = '';
  private readonly reader: ReadableStreamDefaultReader<string>;

  constructor(response: Response) {
    this.reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  }

  /** Reads until `predicate` holds for the chunks so far, or the stream ends. */
  async until(predicate: (chunks: UIMessageChunk[]) => boolean): Promise<UIMessageChunk[]> {
    while (!predicate(this.chunks)) {
      if (!(await this.next())) break;
    }
    return this.chunks;
  }

  /** Reads to the end of the stream. */
  async all(): Promise<UIMessageChunk[]> {
    while (await this.next());
    return this.chunks;
  }

  text(): string {
    return this.chunks.map((c) => (c.type === 'text-delta' ? c.delta : '')).join('');
  }

  cancel(): Promise<void> {
    return this.reader.cancel();
  }

  private async next(): Promise<boolean> {
    const { done, value } = await this.reader.read();
    if (done) return false;
    this.buffer += value;
    let end: number;
    while ((end = this.buffer.indexOf('\n\n')) >= 0) {
      const event = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const data = event
        .split('\n')
        .filter((line) => line.startsWith('data: '))
        .map((line) => line.slice(6))
        .join('\n');
      if (data === '[DONE]') this.done = true;
      else if (data) this.chunks.push(JSON.parse(data) as UIMessageChunk);
    }
    return true;
  }
}

/**
 * Until `count` pieces of the fake upstream (one word each) have arrived, however many
 * `text-delta` events carried them (pieces arriving together share one).
 */
export const textDeltas = (count: number) => (chunks: UIMessageChunk[]) =>
  (
    chunks
      .map((c) => (c.type === 'text-delta' ? c.delta : ''))
      .join('')
      .match(/\S+\s+/g) ?? []
  ).length >= count;
