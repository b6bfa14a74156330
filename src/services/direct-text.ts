import type { LanguageModelV3, LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { wrapLanguageModel } from 'ai';
import { stepSignalFor, type TextEventListener, textEventsAllowed } from '../models/text-events.js';
import { TextBuilder } from '../text-builder.js';

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
 *
 * With an OpenAI-style provider, text goes direct one stage earlier still: plain-text events are
 * held back from the provider's parser (models/text-events.ts) and their text is handed on here
 * right after the direct delta of the event they followed. The provider's parts then carry the
 * events' numbers (its raw chunks, counted and dropped here), so the held text keeps its place.
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
    const heldEvents = textEventsAllowed(model);
    const stepEvents = new WeakMap<AbortSignal, HeldEvents>();
    return wrapLanguageModel({
      model,
      middleware: {
        specificationVersion: 'v3',
        transformParams: async ({ type, params }) => {
          if (!heldEvents || type !== 'stream') return params;
          const events = new HeldEvents((n, delta) => this.directDelta(n, delta), this.onDelta);
          const abortSignal = stepSignalFor(events, params.abortSignal);
          stepEvents.set(abortSignal, events);
          // Raw chunks number the provider's parts by event: what held text is placed by.
          return { ...params, abortSignal, includeRawChunks: true };
        },
        wrapStream: async ({ doStream, params }) => {
          const { stream, ...rest } = await doStream();
          const events = params.abortSignal && stepEvents.get(params.abortSignal);
          return { stream: this.tap(stream, events), ...rest };
        },
      },
    });
  }

  /**
   * One step's provider stream: direct deltas out, everything else (and joined text) on. Read
   * with the provider stream's own reader rather than piped through a TransformStream: a direct
   * delta then costs one read, not a pipe's read, write and transform (issue 16).
   */
  private tap(
    source: ReadableStream<LanguageModelV3StreamPart>,
    events?: HeldEvents,
  ): ReadableStream<LanguageModelV3StreamPart> {
    const reader = source.getReader();
    /** The text part whose start was the last part passed on (deltas may go direct). */
    let opened: { providerId: string; n: number } | undefined;
    /** The text part whose deltas are going direct, with its text so far. */
    let direct: { providerId: string; n: number; text: TextBuilder } | undefined;
    const endDirect = (controller: ReadableStreamDefaultController<LanguageModelV3StreamPart>) => {
      if (!direct) return;
      if (direct.text.length > 0) {
        this.joined.set(direct.n, true);
        controller.enqueue({ type: 'text-delta', id: direct.providerId, delta: direct.text.toString() });
      }
      direct = undefined;
    };
    /** True when the part went direct, or is a raw chunk (nothing to pass on). */
    const goesDirect = (part: LanguageModelV3StreamPart): boolean => {
      if (part.type === 'raw') {
        events?.nextEvent();
        return true;
      }
      if (part.type !== 'text-delta' || part.providerMetadata !== undefined) return false;
      if (part.delta === '' && (direct ?? opened)?.providerId === part.id) {
        // An empty delta (OpenAI starts with one) says nothing: it must not end the direct path.
        return true;
      }
      if (direct?.providerId === part.id) {
        direct.text.add(part.delta);
      } else if (opened?.providerId === part.id) {
        direct = { providerId: part.id, n: opened.n, text: new TextBuilder() };
        direct.text.add(part.delta);
        opened = undefined;
        this.joined.set(direct.n, false);
      } else {
        return false;
      }
      this.onDelta();
      if (!events?.isJoined()) this.directDelta(direct.n, part.delta);
      events?.afterDirectDelta(direct.n);
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

/**
 * One model step's held-back text (models/text-events.ts) against the provider's parts: the
 * text held after event k is handed on once event k's own delta has gone direct, and the event
 * that later brings the provider that text joined is not handed on again.
 */
class HeldEvents implements TextEventListener {
  /** The event whose parts the tap is reading (counted by raw chunks, from 1). */
  private current = 0;
  private readonly joinedEvents = new Set<number>();
  /** Held text whose event's delta has not gone direct yet, by that event. */
  private readonly waiting = new Map<number, string[]>();
  /** The event after which held text is handed on at once, with its text part's number. */
  private live: { after: number; n: number } | undefined;

  constructor(
    private readonly handOn: (n: number, delta: string) => void,
    /** A sign of life from the provider (the idle timeout). */
    private readonly onHeld: () => void,
  ) {}

  held(after: number, text: string): void {
    this.onHeld();
    if (this.live?.after === after) {
      this.handOn(this.live.n, text);
      return;
    }
    let texts = this.waiting.get(after);
    if (!texts) this.waiting.set(after, (texts = []));
    texts.push(text);
  }

  joined(event: number): void {
    this.joinedEvents.add(event);
  }

  /** The tap reached the next event's parts. */
  nextEvent(): void {
    this.current++;
  }

  /** Whether the delta being read brings held text, joined (it has gone out already). */
  isJoined(): boolean {
    return this.joinedEvents.delete(this.current);
  }

  /** The current event's delta went direct, in text part `n`: the text held after it follows. */
  afterDirectDelta(n: number): void {
    this.live = { after: this.current, n };
    const texts = this.waiting.get(this.current);
    if (!texts) return;
    this.waiting.delete(this.current);
    for (const text of texts) this.handOn(n, text);
  }
}
