import type { LanguageModelV3, LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { wrapLanguageModel } from 'ai';

/**
 * Text deltas taken straight from the provider's stream to the reply's reader, around the AI
 * SDK. `streamText` and `toUIMessageStream` pass every part through about fifteen web-stream
 * stages; at a model's pace (one token per read) that costs several times more than the
 * provider's own parsing, per token, for every reply a process carries. So while a text part is
 * open, its deltas leave the provider's stream here (`tap`), and reach the SDK only as one
 * delta with the part's whole text when the part ends (or before any other part), so the SDK's
 * steps, its next-step prompt and its usage are what they were.
 *
 * The reader (`read`) keeps the UI message stream's order: a direct delta is handed on only
 * once the reader has handed on the `text-start` of its part (held until then), and the one
 * joined delta the SDK later yields for that part is dropped, as its text has gone out already.
 * Text parts are matched by their order: the SDK turns every provider `text-start` into one UI
 * `text-start` (renaming its id, so the UI id is the one the reader saw).
 */
export class DirectText {
  /** Provider `text-start`s passed to the SDK so far (the tap's count). */
  private startsForwarded = 0;
  /** UI `text-start`s handed on so far (the reader's count). */
  private startsRead = 0;
  /** The open text part the reader has handed on the start of: its number and UI id. */
  private readerPart: { n: number; id: string; joinedDropped: boolean } | undefined;
  /** Text parts whose deltas went direct, with whether their joined delta went to the SDK. */
  private readonly joined = new Map<number, boolean>();
  /** Direct deltas waiting for the reader to reach their part's start. */
  private waiting: Array<{ n: number; delta: string }> = [];
  private closed = false;

  /**
   * @param deliver hands a direct delta on, as the reader would hand on a UI chunk
   * @param onDelta a sign of life from the provider (the idle timeout)
   */
  constructor(
    private readonly deliver: (chunk: { type: 'text-delta'; id: string; delta: string }) => void,
    private readonly onDelta: () => void,
  ) {}

  /** The model, with every streamed step's provider stream going through the tap. */
  wrap(model: LanguageModelV3): LanguageModelV3 {
    return wrapLanguageModel({
      model,
      middleware: {
        specificationVersion: 'v3',
        wrapStream: async ({ doStream }) => {
          const { stream, ...rest } = await doStream();
          return { stream: this.tap(stream), ...rest };
        },
      },
    });
  }

  /**
   * One step's provider stream: direct deltas out, everything else (and joined text) on. Read
   * with the provider stream's own reader rather than piped through a TransformStream: a direct
   * delta then costs one read, not a pipe's read, write and transform (issue 16).
   */
  private tap(source: ReadableStream<LanguageModelV3StreamPart>): ReadableStream<LanguageModelV3StreamPart> {
    const reader = source.getReader();
    /** The text part whose start was the last part passed on (deltas may go direct). */
    let opened: { providerId: string; n: number } | undefined;
    /** The text part whose deltas are going direct, with its text so far. */
    let direct: { providerId: string; n: number; text: string } | undefined;
    const endDirect = (controller: ReadableStreamDefaultController<LanguageModelV3StreamPart>) => {
      if (!direct) return;
      if (direct.text !== '') {
        this.joined.set(direct.n, true);
        controller.enqueue({ type: 'text-delta', id: direct.providerId, delta: direct.text });
      }
      direct = undefined;
    };
    /** True when the part went direct (nothing to pass on). */
    const goesDirect = (part: LanguageModelV3StreamPart): boolean => {
      if (part.type !== 'text-delta' || part.providerMetadata !== undefined) return false;
      if (direct?.providerId === part.id) {
        direct.text += part.delta;
      } else if (opened?.providerId === part.id && part.delta !== '') {
        direct = { providerId: part.id, n: opened.n, text: part.delta };
        opened = undefined;
        this.joined.set(direct.n, false);
      } else {
        return false;
      }
      this.onDelta();
      this.directDelta(direct.n, part.delta);
      return true;
    };
    return new ReadableStream<LanguageModelV3StreamPart>({
      // Reads until a part is passed on (or the stream ends); a read that fails errors this stream.
      pull: async (controller) => {
        for (;;) {
          const { done, value: part } = await reader.read();
          if (done) {
            endDirect(controller);
            controller.close();
            return;
          }
          if (goesDirect(part)) continue;
          endDirect(controller);
          opened =
            part.type === 'text-start' ? { providerId: part.id, n: ++this.startsForwarded } : undefined;
          controller.enqueue(part);
          return;
        }
      },
      cancel: (reason) => reader.cancel(reason),
    });
  }

  private directDelta(n: number, delta: string): void {
    if (this.closed) return;
    if (this.readerPart?.n === n) this.deliver({ type: 'text-delta', id: this.readerPart.id, delta });
    else this.waiting.push({ n, delta });
  }

  /**
   * The reader's side, for each UI chunk the SDK yields: false when the chunk must not be handed
   * on (a part's joined text, already sent direct). Call before handing the chunk on, and
   * `afterRead` after it.
   */
  read(chunk: { type: string; id?: string }): boolean {
    const part = this.readerPart;
    if (chunk.type !== 'text-delta' || !part || part.joinedDropped || !this.joined.get(part.n)) return true;
    // A direct part's deltas reach the SDK only as this one, before any later delta of the part.
    part.joinedDropped = true;
    return false;
  }

  /** After a UI chunk was handed on: a text part's start lets its waiting direct deltas go. */
  afterRead(chunk: { type: string; id?: string }): void {
    if (chunk.type === 'text-start') {
      const n = ++this.startsRead;
      this.readerPart = { n, id: chunk.id!, joinedDropped: false };
      const ready = this.waiting.filter((w) => w.n === n);
      this.waiting = this.waiting.filter((w) => w.n > n);
      for (const { delta } of ready) this.deliver({ type: 'text-delta', id: chunk.id!, delta });
    } else if (chunk.type === 'text-end' && this.readerPart) {
      this.joined.delete(this.readerPart.n);
      this.readerPart = undefined;
    }
  }

  /** The reader has reached the end: direct deltas arriving later are not handed on. */
  close(): void {
    this.closed = true;
    this.readerPart = undefined;
    this.waiting = [];
  }
}
