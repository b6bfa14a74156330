import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { TextBuilder } from '../text-builder.js';

/*
 * Issue 16: a model's tokens, taken from an OpenAI-style event stream before the provider parses
 * them. At a model's pace a network read holds one event, and the AI SDK provider spends four
 * web-stream stages, a JSON parse and a schema validation on it: most of what a streamed token
 * costs the process. Once a text part runs (the last event the provider was given was plain
 * text), the next plain-text events are held back here and their text goes straight to the
 * reply (`TextEventListener.held`); the provider gets them later as one event with the joined
 * text, right before the next other event or the end, so its parts, its steps and its usage are
 * what they were. `DirectText` (services/direct-text.ts) keeps the order on the reply's side.
 */

/** Where a step's held-back text goes; events are numbered from 1 as the provider gets them. */
export interface TextEventListener {
  /** Text held back from an event that followed event `after` (a plain-text event) in the stream. */
  held(after: number, text: string): void;
  /** Event `event` is the held text joined: its text has gone out already. */
  joined(event: number): void;
}

/** Listeners by the abort signal of the step's model call, which the provider hands to fetch. */
const listeners = new WeakMap<AbortSignal, TextEventListener>();
const tappableModels = new WeakSet<object>();

/** Marks a model whose provider reads OpenAI chat completion chunks through Atrium's fetch. */
export function allowTextEvents<T extends object>(model: T): T {
  tappableModels.add(model);
  return model;
}

export function textEventsAllowed(model: object): boolean {
  return tappableModels.has(model);
}

/**
 * An abort signal for one model step, following `signal`, whose fetch reports held text to
 * `listener`. A signal rather than an AsyncLocalStorage: on Node 20 that would hook every promise
 * of the process.
 */
export function stepSignalFor(listener: TextEventListener, signal: AbortSignal | undefined): AbortSignal {
  const step = new AbortController();
  if (signal?.aborted) step.abort(signal.reason);
  else signal?.addEventListener('abort', () => step.abort(signal.reason), { once: true });
  listeners.set(step.signal, listener);
  return step.signal;
}

/** The listener of the model step a fetch with this signal belongs to, if any. */
export function textEventListenerOf(signal: AbortSignal | null | undefined): TextEventListener | undefined {
  return signal ? listeners.get(signal) : undefined;
}

const TOP_LEVEL_KEYS = new Set([
  'id',
  'object',
  'created',
  'model',
  'system_fingerprint',
  'service_tier',
  'usage',
  'choices',
  'obfuscation',
]);
const CHOICE_KEYS = new Set(['index', 'delta', 'finish_reason', 'logprobs']);
const DELTA_KEYS = new Set(['role', 'content', 'refusal']);

interface Chunk {
  choices: [{ delta: { content: string } }];
}

/**
 * A chat completion chunk that only adds text: one choice, a non-empty string `content`, no
 * finish, usage, log-probabilities, refusal or tool call, and no field the providers could read
 * otherwise. The provider turns such a chunk, inside a running text part, into exactly one text
 * delta. Anything else is not plain.
 */
function plainText(data: string): Chunk | undefined {
  if (data.charCodeAt(0) !== 123 /* { */) return undefined;
  let value: Record<string, unknown>;
  try {
    value = JSON.parse(data) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (!onlyKeys(value, TOP_LEVEL_KEYS) || value.usage != null) return undefined;
  const choices = value.choices;
  if (!Array.isArray(choices) || choices.length !== 1) return undefined;
  const choice = choices[0] as Record<string, unknown>;
  if (!isObject(choice) || !onlyKeys(choice, CHOICE_KEYS)) return undefined;
  if ((choice.index ?? 0) !== 0 || choice.finish_reason != null || choice.logprobs != null) return undefined;
  const delta = choice.delta as Record<string, unknown>;
  if (!isObject(delta) || !onlyKeys(delta, DELTA_KEYS) || delta.refusal != null) return undefined;
  if (delta.role != null && delta.role !== 'assistant') return undefined;
  if (typeof delta.content !== 'string' || delta.content === '') return undefined;
  return value as unknown as Chunk;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function onlyKeys(value: Record<string, unknown>, allowed: Set<string>): boolean {
  for (const key in value) if (!allowed.has(key)) return false;
  return true;
}

function encodeEvent(event: EventSourceMessage): string {
  let text = event.event ? `event: ${event.event}\n` : '';
  if (event.id !== undefined) text += `id: ${event.id}\n`;
  return `${text}data: ${event.data.replaceAll('\n', '\ndata: ')}\n\n`;
}

/**
 * An OpenAI-style event stream's bytes, rewritten for the provider: every event as it came,
 * except plain-text events right after a plain-text event, whose text goes to the listener and
 * reaches the provider joined. Events the provider does not count (`[DONE]`) are not numbered.
 */
export class TextEventFilter {
  private readonly decoder = new TextDecoder();
  private readonly parser = createParser({ onEvent: (event) => this.event(event) });
  private out = '';
  /** Events given to the provider so far. */
  private given = 0;
  /** Whether the last event given was plain text (the provider's text part is running). */
  private lastGivenPlain = false;
  private holding: { after: number; text: TextBuilder } | undefined;

  constructor(private readonly listener: TextEventListener) {}

  /** What the provider gets for bytes read from the network (possibly nothing yet). */
  write(bytes: Uint8Array): string {
    this.parser.feed(this.decoder.decode(bytes, { stream: true }));
    return this.take();
  }

  /** The stream ended or broke: the text still held, as one event. */
  end(): string {
    this.release();
    return this.take();
  }

  private take(): string {
    const out = this.out;
    this.out = '';
    return out;
  }

  private event(event: EventSourceMessage): void {
    const plain = event.event === undefined ? plainText(event.data) : undefined;
    if (plain && (this.holding || this.lastGivenPlain)) {
      const text = plain.choices[0].delta.content;
      this.holding ??= { after: this.given, text: new TextBuilder() };
      this.holding.text.add(text);
      this.listener.held(this.holding.after, text);
      return;
    }
    this.release();
    this.out += encodeEvent(event);
    if (event.data === '[DONE]') return;
    this.given++;
    this.lastGivenPlain = plain !== undefined;
  }

  /**
   * The held text goes to the provider as one chunk with nothing but that text: no id, model or
   * time, which the OpenAI provider would otherwise announce as response metadata here, a part
   * that would end the direct path before this text.
   */
  private release(): void {
    const holding = this.holding;
    if (!holding) return;
    this.holding = undefined;
    const joined = {
      choices: [{ index: 0, delta: { content: holding.text.toString() }, finish_reason: null }],
    };
    this.out += `data: ${JSON.stringify(joined)}\n\n`;
    this.given++;
    this.lastGivenPlain = true;
    this.listener.joined(this.given);
  }
}
