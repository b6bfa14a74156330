import type {
  LanguageModelV3,
  LanguageModelV3StreamPart,
  SharedV3ProviderMetadata,
  SharedV3Warning,
} from '@ai-sdk/provider';
import {
  createIdGenerator,
  getErrorMessage,
  isAbortError,
  type ProviderOptions,
  secureJsonParse,
} from '@ai-sdk/provider-utils';
import {
  type AssistantModelMessage,
  type ModelMessage,
  NoOutputGeneratedError,
  NoSuchToolError,
  type ToolModelMessage,
  type UIMessageChunk,
} from 'ai';
import {
  asLanguageModelUsage,
  convertToLanguageModelPrompt,
  prepareCallSettings,
  standardizePrompt,
} from 'ai/internal';
import type { ChatMessageMetadata } from './chat.js';
import type { CallOptions } from './chat-reply.js';
import { isLastStep, lastStepSystem, MAX_STEPS } from './reply-steps.js';
import { logWarnings } from './sdk-warnings.js';

type Chunk = UIMessageChunk<ChatMessageMetadata>;

/** What a plain turn's model call needs (a reply's `ReplyCall` without its tools). */
export interface PlainTurnCall {
  system: string | undefined;
  messages: ModelMessage[];
  temperature: number;
  options?: CallOptions;
  abortSignal: AbortSignal;
  download?: Parameters<typeof convertToLanguageModelPrompt>[0]['download'];
}

/** What the reply around the turn does with its parts: the same callbacks it gives `streamText`. */
export interface PlainTurnHooks {
  messageId: string;
  /** The metadata of the `start` chunk, and of the `finish` chunk with the reply's finish reason. */
  startMetadata(): ChatMessageMetadata;
  finishMetadata(finishReason: string): ChatMessageMetadata;
  /** The text of an `error` chunk (toUIMessageStream's `onError`). */
  errorText(error: unknown): string;
  /** An error of the model's stream itself (streamText's `onError`). */
  onStreamError(error: unknown): void;
  /** A sign of life of the provider (streamText's `onChunk`). */
  onChunk(): void;
  /** A model step ended (streamText's `onStepFinish`). */
  onStepFinish(step: {
    finishReason: string;
    usage: StepUsage;
    content: ReadonlyArray<{ type: string; text?: string; input?: unknown }>;
  }): void;
}

/**
 * The UI message chunks of a turn that offers the model no tools, made from the model's stream
 * directly (issue 16). `streamText` and `toUIMessageStream` build 22 web streams per reply and pass
 * every part through about fifteen stages; for 200 replies starting within a second that set-up,
 * and the finishing work of 200 replies ending together, were most of the delay Atrium added to
 * the running streams (BENCHMARKS.md, "Two experiments on the 200 streams").
 *
 * What it yields is what those two yield for such a turn, chunk for chunk and key for key
 * (test/chat/plain-turn.test.ts gives one scripted model both paths): the prompt and call
 * settings are made by the SDK's own functions (`ai/internal`), the parts are mapped as
 * `toUIMessageStream` maps them with `sendReasoning: false` and `sendSources: true`, and a
 * failure, an abort or a stream without a finish ends as the SDK ends it. A tool call the model
 * makes up (none was offered) is answered as the SDK answers it: a tool error, and another step
 * in which the model reads it, up to the same number of steps, the last of which tells the model
 * to call none and, in its system prompt, to answer (`toolLoopSettings`, reply-steps.ts). The
 * provider's warnings are logged at each step's end, as `streamText` logs them (sdk-warnings.ts).
 *
 * Parts only a request with tools or provider options gets (a provider-executed call or its
 * result, a tool approval request) are not mirrored: Atrium sends a plain turn's providers
 * neither.
 */
export async function* plainTurnChunks(
  call: PlainTurnCall,
  model: LanguageModelV3,
  hooks: PlainTurnHooks,
): AsyncGenerator<Chunk> {
  const signal = call.abortSignal;
  const abortChunk = (): Chunk => ({
    type: 'abort',
    ...(signal.reason !== undefined ? { reason: getErrorMessage(signal.reason) } : {}),
  });
  const { toolChoice: _toolChoice, ...options } = call.options ?? {};
  // Settings the SDK refuses make `streamText` throw before its stream has a chunk.
  const settings = prepareCallSettings({ temperature: call.temperature, ...options });
  yield { type: 'start', messageMetadata: hooks.startMetadata(), messageId: hooks.messageId };
  /** Text and reasoning part ids already used in the reply (the SDK renames a repeated one). */
  const textIds = new Set<string>();
  const reasoningIds = new Set<string>();
  let messages: ModelMessage[] | undefined;

  for (let step = 1; ; step++) {
    let stream: ReadableStream<LanguageModelV3StreamPart>;
    try {
      const standardized = await standardizePrompt({
        system: call.system,
        messages: call.messages,
        allowSystemInMessages: true,
      });
      messages ??= standardized.messages;
      const prompt = await convertToLanguageModelPrompt({
        // The loop's last step asks for an answer in words too, as `toolLoopSettings` does.
        prompt: {
          system: isLastStep(step - 1) ? lastStepSystem(call.system) : standardized.system,
          messages,
        },
        supportedUrls: await model.supportedUrls,
        download: call.download,
        abortSignal: signal,
      });
      ({ stream } = await model.doStream({
        ...settings,
        tools: undefined,
        // The loop's last step says `none`, as `toolLoopSettings` sets it on the SDK path (reply-steps.ts).
        toolChoice: isLastStep(step - 1) ? { type: 'none' } : undefined,
        responseFormat: undefined,
        prompt,
        providerOptions: undefined,
        abortSignal: signal,
        headers: undefined,
        includeRawChunks: false,
      }));
    } catch (error) {
      if (signal.aborted) {
        yield abortChunk();
        return;
      }
      hooks.onStreamError(error);
      yield { type: 'error', errorText: hooks.errorText(error) };
      return;
    }

    const turn = new StepState(textIds, reasoningIds);
    const reader = stream.getReader();
    let started = false;
    let read: ReadableStreamReadResult<LanguageModelV3StreamPart> | undefined;
    try {
      for (;;) {
        try {
          read = await reader.read();
        } catch (error) {
          if (isAbortError(error) && signal.aborted) {
            yield abortChunk();
            return;
          }
          throw error;
        }
        if (signal.aborted) {
          void reader.cancel().catch(() => undefined);
          yield abortChunk();
          return;
        }
        if (read.done) break;
        const part = read.value;
        if (part.type === 'stream-start') {
          // The SDK's step keeps the warnings of a `stream-start` that comes first.
          if (!started) turn.warnings = part.warnings;
          continue;
        }
        // As the SDK's step does: any part but the first, `stream-start`, begins the step.
        if (!started) {
          started = true;
          yield { type: 'start-step' };
        }
        if (part.type === 'error') hooks.onStreamError(part.error);
        else if (NOTIFIED_PARTS.has(part.type)) hooks.onChunk();
        for (const chunk of turn.chunks(part, hooks)) yield chunk;
      }
    } finally {
      // The chunks' reader stopped early (it failed): the provider's stream is not read on.
      if (!read?.done && !signal.aborted) void reader.cancel().catch(() => undefined);
    }

    if (!turn.ended && !turn.output) {
      // What the SDK says of such a step, without a step's end.
      const error = new NoOutputGeneratedError({
        message: 'No output generated. The model stream ended without a finish chunk.',
      });
      hooks.onStreamError(error);
      yield { type: 'error', errorText: hooks.errorText(error) };
      return;
    }
    // The SDK checks for an abort before each chunk it hands on, its step's end too.
    if (signal.aborted) {
      yield abortChunk();
      return;
    }
    hooks.onStepFinish({ finishReason: turn.finishReason, usage: turn.usage, content: turn.content });
    logWarnings(turn.warnings, model);
    yield { type: 'finish-step' };
    if (turn.madeUpCalls === 0 || step >= MAX_STEPS) {
      yield {
        type: 'finish',
        finishReason: turn.finishReason as 'stop',
        messageMetadata: hooks.finishMetadata(turn.finishReason),
      };
      return;
    }
    // The model reads each made-up call's error in the next step, as the SDK's loop gives it.
    messages = [...messages!, ...turn.responseMessages()];
  }
}

/** Provider parts streamText tells `onChunk` of. */
const NOTIFIED_PARTS = new Set([
  'text-delta',
  'reasoning-delta',
  'source',
  'tool-call',
  'tool-input-start',
  'tool-input-delta',
]);

type StepUsage = { inputTokens: number | undefined; outputTokens: number | undefined };

/** What a step produced, in the shape of the SDK's step content (for the next step's prompt). */
type StepContent =
  | { type: 'text' | 'reasoning'; text: string; providerMetadata: SharedV3ProviderMetadata | undefined }
  | { type: 'file'; data: string; mediaType: string; providerMetadata: SharedV3ProviderMetadata | undefined }
  | {
      type: 'tool-call';
      toolCallId: string;
      toolName: string;
      input: unknown;
      providerExecuted: boolean | undefined;
      providerMetadata: SharedV3ProviderMetadata | undefined;
      error: string;
    };

/** Text or reasoning content, as the SDK's step content holds it. */
type PartContent = Extract<StepContent, { type: 'text' | 'reasoning' }>;

/** A step's open text (or reasoning) parts, tracked as the SDK tracks them. */
class OpenParts {
  /** The UI id of each open part, by the provider's id (the SDK's step renames a repeated id). */
  readonly uiIds = new Map<string, string>();
  /** Each open part's content, by UI id (what the SDK's event processor adds deltas to). */
  readonly content = new Map<string, PartContent>();

  constructor(
    /** The UI ids used in the reply so far, text and reasoning apart. */
    readonly used: Set<string>,
  ) {}
}

type TextChunk = Extract<Chunk, { type: 'text-start' | 'text-delta' | 'text-end' }>;

/** One model step: its parts mapped to UI chunks, and what the step produced. */
class StepState {
  /** The step's `finish` part: it ends the step whatever came after it (the SDK hands it on last). */
  private finish: { reason: string; usage: StepUsage } | undefined;
  /** An `error` part came. */
  private failed = false;
  /** A part that is output came (the SDK's `isOutputChunkType`). */
  output = false;
  /** The provider's warnings about the call (its `stream-start`). */
  warnings: SharedV3Warning[] = [];
  readonly content: StepContent[] = [];
  private readonly text: OpenParts;
  private readonly reasoning: OpenParts;
  /**
   * The step's first text chunk's part, and the provider metadata its deltas carry: the last a
   * delta of it brought (the SDK's text output stage keeps it for the part's later deltas).
   */
  private firstText: { id: string; metadata: SharedV3ProviderMetadata | undefined } | undefined;

  constructor(textIds: Set<string>, reasoningIds: Set<string>) {
    this.text = new OpenParts(textIds);
    this.reasoning = new OpenParts(reasoningIds);
  }

  /** A `finish` or `error` part came. */
  get ended(): boolean {
    return this.finish !== undefined || this.failed;
  }

  get finishReason(): string {
    return this.finish?.reason ?? (this.failed ? 'error' : 'other');
  }

  get usage(): StepUsage {
    return this.finish?.usage ?? { inputTokens: undefined, outputTokens: undefined };
  }

  /** Tool calls the model made up, each answered with its error. */
  get madeUpCalls(): number {
    return this.content.filter((part) => part.type === 'tool-call').length;
  }

  *chunks(part: LanguageModelV3StreamPart, hooks: PlainTurnHooks): Generator<Chunk> {
    if (
      part.type !== 'finish' &&
      part.type !== 'error' &&
      part.type !== 'response-metadata' &&
      part.type !== 'raw'
    ) {
      this.output = true;
    }
    switch (part.type) {
      case 'text-start':
      case 'reasoning-start': {
        const type = part.type === 'text-start' ? 'text' : 'reasoning';
        const parts = this[type];
        const id = reserve(parts.used, part.id);
        parts.uiIds.set(part.id, id);
        const content: PartContent = { type, text: '', providerMetadata: part.providerMetadata };
        this.content.push(content);
        parts.content.set(id, content);
        if (type === 'text')
          yield this.textOutput({ type: 'text-start', id, ...meta(part.providerMetadata) });
        return;
      }
      case 'text-delta':
      case 'reasoning-delta': {
        const type = part.type === 'text-delta' ? 'text' : 'reasoning';
        // The SDK's step drops an empty text delta that brings no metadata before anything sees it.
        if (type === 'text' && part.delta.length === 0 && part.providerMetadata == null) return;
        const parts = this[type];
        const id = parts.uiIds.get(part.id) ?? part.id;
        if (type === 'text') {
          yield this.textOutput({
            type: 'text-delta',
            id,
            delta: part.delta,
            ...meta(part.providerMetadata),
          });
        }
        const content = parts.content.get(id);
        if (!content) {
          yield partNotFound(type, id, hooks);
          return;
        }
        content.text += part.delta;
        content.providerMetadata = part.providerMetadata ?? content.providerMetadata;
        return;
      }
      case 'text-end':
      case 'reasoning-end': {
        const type = part.type === 'text-end' ? 'text' : 'reasoning';
        const parts = this[type];
        const id = parts.uiIds.get(part.id) ?? part.id;
        parts.uiIds.delete(part.id);
        if (type === 'text') yield this.textOutput({ type: 'text-end', id, ...meta(part.providerMetadata) });
        const content = parts.content.get(id);
        if (!content) {
          yield partNotFound(type, id, hooks);
          return;
        }
        content.providerMetadata = part.providerMetadata ?? content.providerMetadata;
        parts.content.delete(id);
        return;
      }
      case 'source':
        if (part.sourceType === 'url') {
          yield {
            type: 'source-url',
            sourceId: part.id,
            url: part.url,
            title: part.title,
            ...meta(part.providerMetadata),
          };
        } else {
          yield {
            type: 'source-document',
            sourceId: part.id,
            mediaType: part.mediaType,
            title: part.title,
            filename: part.filename,
            ...meta(part.providerMetadata),
          };
        }
        return;
      case 'file': {
        const data = typeof part.data === 'string' ? part.data : Buffer.from(part.data).toString('base64');
        this.content.push({
          type: 'file',
          data,
          mediaType: part.mediaType,
          providerMetadata: part.providerMetadata,
        });
        yield {
          type: 'file',
          mediaType: part.mediaType,
          url: `data:${part.mediaType};base64,${data}`,
          ...meta(part.providerMetadata),
        };
        return;
      }
      case 'tool-input-start':
        yield {
          type: 'tool-input-start',
          toolCallId: part.id,
          toolName: part.toolName,
          ...(part.inputEncoding != null ? { inputEncoding: part.inputEncoding } : {}),
          ...(part.providerExecuted != null ? { providerExecuted: part.providerExecuted } : {}),
          ...meta(part.providerMetadata),
          dynamic: part.dynamic ?? false,
        };
        return;
      case 'tool-input-delta':
        yield { type: 'tool-input-delta', toolCallId: part.id, inputTextDelta: part.delta };
        return;
      case 'tool-call': {
        // No tool was offered: every call is of a tool nobody has (parseToolCall's NoSuchToolError),
        // answered with its error right away (the SDK merges its tool results in as they come).
        const input = parsedInput(part.input);
        const error = new NoSuchToolError({ toolName: part.toolName });
        this.content.push({
          type: 'tool-call',
          toolCallId: part.toolCallId,
          toolName: part.toolName,
          input,
          providerExecuted: part.providerExecuted,
          providerMetadata: part.providerMetadata,
          error: getErrorMessage(error),
        });
        yield {
          type: 'tool-input-error',
          toolCallId: part.toolCallId,
          toolName: part.toolName,
          input,
          ...(part.providerExecuted != null ? { providerExecuted: part.providerExecuted } : {}),
          ...meta(part.providerMetadata),
          dynamic: true,
          errorText: hooks.errorText(error),
        };
        yield {
          type: 'tool-output-error',
          toolCallId: part.toolCallId,
          errorText: hooks.errorText(getErrorMessage(error)),
          dynamic: true,
        };
        return;
      }
      case 'finish':
        this.finish = { reason: part.finishReason.unified, usage: asLanguageModelUsage(part.usage) };
        return;
      case 'error':
        this.failed = true;
        yield { type: 'error', errorText: hooks.errorText(part.error) };
        return;
      default:
        // tool-input-end, response-metadata and raw say nothing a client is sent; tool-result and
        // tool-approval-request come only for tools a request offered.
        return;
    }
  }

  /**
   * A text chunk through the SDK's text output stage: the step's first text chunk names the part
   * whose later deltas carry the provider metadata an earlier delta of it brought.
   */
  private textOutput(chunk: TextChunk): TextChunk {
    this.firstText ??= { id: chunk.id, metadata: undefined };
    if (chunk.type !== 'text-delta' || chunk.id !== this.firstText.id) return chunk;
    const metadata = (this.firstText.metadata = chunk.providerMetadata ?? this.firstText.metadata);
    return { type: 'text-delta', id: chunk.id, delta: chunk.delta, ...meta(metadata) };
  }

  /** The step as the next step's prompt has it: its assistant message and its calls' errors. */
  responseMessages(): ModelMessage[] {
    const content: AssistantModelMessage['content'] = [];
    const errors: ToolModelMessage['content'] = [];
    for (const part of this.content) {
      const providerOptions = part.providerMetadata as ProviderOptions | undefined;
      if (part.type === 'tool-call') {
        content.push({
          type: 'tool-call',
          toolCallId: part.toolCallId,
          toolName: part.toolName,
          // The SDK's own rule for an invalid call's input that is not an object.
          input: typeof part.input !== 'object' ? {} : part.input,
          providerExecuted: part.providerExecuted,
          providerOptions,
        });
        errors.push({
          type: 'tool-result',
          toolCallId: part.toolCallId,
          toolName: part.toolName,
          output: { type: 'error-text', value: part.error },
        });
      } else if (part.type === 'file') {
        content.push({ type: 'file', data: part.data, mediaType: part.mediaType, providerOptions });
      } else if (part.type === 'reasoning' || part.text.length > 0) {
        content.push({ type: part.type, text: part.text, providerOptions });
      }
    }
    return [
      { role: 'assistant', content },
      { role: 'tool', content: errors },
    ];
  }
}

/** A chunk's `providerMetadata`, present only when the part had some (as the SDK sends it). */
function meta(providerMetadata: SharedV3ProviderMetadata | undefined) {
  return providerMetadata != null ? { providerMetadata } : {};
}

/** A delta or end of a part that is not open: the SDK's error chunk after it. */
function partNotFound(type: string, id: string, hooks: PlainTurnHooks): Chunk {
  return { type: 'error', errorText: hooks.errorText(`${type} part ${id} not found`) };
}

/** A tool call's input text as the SDK keeps it: parsed when it is JSON, else as it came. */
function parsedInput(text: string): unknown {
  try {
    return secureJsonParse(text);
  } catch {
    return text;
  }
}

/** The SDK's own form of a made-up part id. */
const generatePartId = createIdGenerator({ prefix: 'aitxt', size: 24 });

/** A part id not used before in the reply, as the SDK reserves them. */
function reserve(used: Set<string>, id: string): string {
  let unique = id;
  if (used.has(unique)) {
    const generated = generatePartId();
    unique = generated;
    for (let suffix = 1; used.has(unique); suffix++) unique = `${generated}-${suffix}`;
  }
  used.add(unique);
  return unique;
}
