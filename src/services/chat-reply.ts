import {
  generateText,
  type ModelMessage,
  streamText,
  type ToolChoice,
  type Experimental_DownloadFunction,
  type ToolSet,
  type UIMessage,
  type UIMessageChunk,
} from 'ai';
import type { LanguageModelV3 } from '@ai-sdk/provider';
import { ApiError } from '../errors.js';
import type { StopReason } from './running-replies.js';
import type { ChatMessageMetadata, TokenUsage } from './chat.js';
import type { IdleTimeout } from './chat-idle-timeout.js';
import { cpuTurn } from './cpu-turns.js';
import { withToolChoice } from './forced-tool-choice.js';
import { DirectText } from './direct-text.js';
import { plainTurnChunks } from './plain-turn.js';
import { toolLoopSettings } from './reply-steps.js';
import { KeptChunks } from './kept-chunks.js';
import type { ReplyUsage } from './reply-usage.js';
import type { ChunkSink } from '../http/ui-message-sse.js';
import { upstreamFailure } from './upstream-failure.js';

/**
 * How a reply ended, before it is stored: its parts, usage and finish reason (`stopped` or
 * `interrupted` when cut short, with the text so far), or the provider's failure, with what the
 * provider had produced before it (`partial`: text streamed, completed tool steps), which is
 * stored as the reply with `finishReason: "error"`.
 */
export type ReplyResult =
  | { ok: true; text: string; parts: unknown[]; usage: TokenUsage; finishReason: string }
  | { ok: false; error: ApiError; partial?: PartialReply };

/** The output of a reply that failed after the provider produced some (docs/chat.md). */
export interface PartialReply {
  text: string;
  parts: unknown[];
}

/**
 * A failed reply's parts as its partial output, when they hold any: text or reasoning with some
 * characters, or a tool call. Step boundaries and an empty text part (a failure right after
 * `text-start`) are not output: nothing the user saw.
 */
function partialReply(parts: unknown[]): PartialReply | undefined {
  const output = parts.some((part) => {
    const { type, text } = part as { type: string; text?: unknown };
    if (type === 'text' || type === 'reasoning') return typeof text === 'string' && text.length > 0;
    return type.startsWith('tool-') || type === 'dynamic-tool';
  });
  return output ? { text: replyText(parts), parts } : undefined;
}

/** What storing the reply came to: the client sees an `error` chunk instead of `finish` when it failed. */
export interface StoredReply {
  stored: boolean;
}

/** Sampling settings a client may pass through (the OpenAI-compatible door). */
export interface CallOptions {
  maxOutputTokens?: number;
  topP?: number;
  stopSequences?: string[];
  seed?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  toolChoice?: ToolChoice<ToolSet>;
}

/** What one model call needs; built once per reply. */
export interface ReplyCall {
  model: LanguageModelV3;
  system: string | undefined;
  messages: ModelMessage[];
  temperature: number;
  options?: CallOptions;
  tools: ToolSet;
  abortSignal: AbortSignal;
  /** Aborts the model call (its provider request): a streamed reply ends at its first error. */
  abort(): void;
  idle: IdleTimeout;
  /** Why the reply was cut short, when it was stopped or interrupted (not timed out). */
  stopReason(): StopReason | undefined;
  /**
   * The tokens the reply's model steps have used, counted as they run: charged whatever the
   * outcome, an estimate where the provider reported none (reply-usage.ts).
   */
  usage: ReplyUsage;
  /** How the model call gets the files it cannot read from their URL (file-downloads.ts). */
  download?: Experimental_DownloadFunction;
}

/**
 * A turn whose reply needs no tool loop: no tools offered, no tool choice. Its chunks are made
 * from the model's stream (plain-turn.ts) rather than through `streamText`.
 */
function isPlainTurn(call: ReplyCall): boolean {
  return call.options?.toolChoice === undefined && Object.keys(call.tools).length === 0;
}

/** `model`: the call's model, wrapped to count its usage (and, streaming, to pass text on direct). */
function callSettings(call: ReplyCall, model: LanguageModelV3) {
  const hasTools = Object.keys(call.tools).length > 0;
  const { toolChoice, ...options } = call.options ?? {};
  const called = toolChoice === undefined ? model : withToolChoice(model, toolChoice);
  return {
    model: called,
    system: call.system,
    messages: call.messages,
    // The API accepts system messages from the caller (decisions.md: role `system`).
    allowSystemInMessages: true,
    temperature: call.temperature,
    ...options,
    maxRetries: 0,
    abortSignal: call.abortSignal,
    ...(call.download ? { experimental_download: call.download } : {}),
    ...(hasTools ? { tools: call.tools } : {}),
    ...toolLoopSettings(called, { system: call.system, hasTools }),
  };
}

function failure(call: ReplyCall, error: unknown, parts: unknown[]): ReplyResult {
  const partial = partialReply(parts);
  return {
    ok: false,
    error: upstreamFailure(error, call.idle.timedOut, call.idle.timeoutMs),
    ...(partial ? { partial } : {}),
  };
}

/** JSON mode: one non-streaming model call (per tool step), to its end. */
export async function completeReply(call: ReplyCall): Promise<ReplyResult> {
  call.idle.touch();
  /** The steps that finished, kept for a failure in a later one: they are stored as its output. */
  const finished: GeneratedStep[] = [];
  try {
    const result = await generateText({
      ...callSettings(call, call.usage.wrap(call.model)),
      onStepFinish: (step) => {
        call.idle.touch();
        call.usage.stepFinished(step);
        finished.push(step);
      },
    });
    if (call.idle.timedOut) throw new Error('upstream timeout');
    return {
      ok: true,
      text: result.steps.map((step) => step.text).join(''),
      parts: replyParts(result.steps),
      usage: call.usage.total(),
      finishReason: result.finishReason,
    };
  } catch (error) {
    const stopped = call.stopReason();
    // A stopped JSON reply has nothing to show: the client is told why it gets no answer (as a
    // streaming client is told of a shutdown), nothing is stored, what it used is paid for.
    if (stopped && !call.idle.timedOut) return { ok: false, error: stoppedError(stopped) };
    return failure(call, error, replyParts(finished));
  }
}

/** What a JSON reply cut short by `reason` answers. */
function stoppedError(reason: StopReason): ApiError {
  switch (reason) {
    case 'interrupted':
      // Another process (behind the load balancer) or this one restarted can answer it.
      return new ApiError(
        'service_unavailable',
        INTERRUPTED_MESSAGE,
        { retryAfterSeconds: 1 },
        // The shutdown's drain working as designed (docs/operations.md): no stack.
        { refusal: 'warn' },
      );
    case 'deleted':
      // What any later request about the chat gets: there is no chat to go on with.
      return new ApiError('not_found', CHAT_DELETED_MESSAGE);
    case 'stopped':
      return new ApiError('conflict', STOPPED_MESSAGE);
  }
}

export interface StreamReplyOptions {
  chatId: string;
  messageId: string;
  modelId: string;
  /** Chunks the service adds right after `start` (citations, tool warnings); stored as parts too. */
  leading: UIMessageChunk<ChatMessageMetadata>[];
  /** Tokens of sub-agents, added to the usage the `finish` chunk reports. */
  extraUsage: TokenUsage;
  /** Called once when the model's stream has ended, before the UI stream closes; stores the reply. */
  onEnd(result: ReplyResult): Promise<StoredReply>;
  /**
   * `sdk`: through `streamText` even when the turn offers no tools (the tests comparing the two
   * paths); by default such a turn's chunks are made from the model's stream (plain-turn.ts).
   */
  pipeline?: 'sdk';
}

/** Messages a client is shown for how a reply ended without a normal finish. */
const INTERRUPTED_MESSAGE = 'The server shut down while this reply was being generated';
const STOPPED_MESSAGE = 'The reply was stopped before it was done';
const CHAT_DELETED_MESSAGE = 'Chat not found: it was deleted while this reply was being generated';
const NOT_STORED_MESSAGE = 'The reply could not be stored';

/**
 * Stream mode: the reply as UI message chunks, pushed to `sink` as they come. `onEnd` stores the reply when the model's stream
 * has ended; only then does the client get its last chunk: `finish` when the reply was stored
 * (a stopped reply too), else an `error` chunk: the provider's failure, the upstream timeout
 * (504 text; the SDK's `abort` chunk would read as the user's own cancel), a shutdown, or a
 * failure to store. The reply ends at its first `error` chunk: the model call is aborted, and the
 * reply is stored as failed with what was handed on before it (docs/chat.md).
 *
 * The message to store is not built chunk by chunk (the SDK's `onFinish` runs two more
 * transform streams and its message state machine per chunk): the chunks handed on are kept,
 * text deltas joined as they come, and made into the message's parts once at the end
 * (kept-chunks.ts). Text deltas come straight from the provider (`DirectText`), in the UI
 * stream's order.
 */
export function streamReply(
  call: ReplyCall,
  options: StreamReplyOptions,
  sink: ChunkSink<UIMessageChunk<ChatMessageMetadata>>,
): void {
  call.idle.touch();
  let failed: unknown;
  /** Errors of the model's stream itself (streamText's `onError`), as opposed to tools' errors. */
  const streamErrors = new Set<unknown>();
  let finishReason = 'stop';
  /**
   * The reply ended at its first `error` chunk: nothing after it is handed on or stored. Clients
   * stop reading there (`useChat` and the OpenAI SDKs raise it), so what comes after (a provider
   * that goes on after an error event or a line that is no JSON) would be stored unseen.
   */
  let endedAtError = false;
  /** A model step has started and not finished (one that fails ends with `finish`, as the SDK's). */
  let inStep = false;
  const kept = new KeptChunks();
  const direct = new DirectText((chunk) => {
    if (endedAtError) return;
    kept.add(chunk);
    call.usage.streamed(chunk);
    sink.chunk(chunk);
  }, call.idle.touch);
  const startMetadata = () => ({ chatId: options.chatId });
  const finishMetadata = (reason: string) => {
    finishReason = reason;
    // Every step has finished: its usage as reported, or its estimate where none was.
    const usage = call.usage.total();
    return {
      chatId: options.chatId,
      model: options.modelId,
      finishReason,
      usage: {
        inputTokens: usage.inputTokens + options.extraUsage.inputTokens,
        outputTokens: usage.outputTokens + options.extraUsage.outputTokens,
      },
    };
  };
  const onStreamError = (error: unknown) => {
    failed ??= error;
    streamErrors.add(error);
  };
  // The stream's own failures are the provider's (502/504 text); any other error reaching here
  // is a tool's (an unknown tool, bad input, a failed call): its own words, as JSON mode stores
  // them (replyParts).
  const errorText = (error: unknown) =>
    streamErrors.has(error) || call.idle.timedOut
      ? upstreamFailure(error, call.idle.timedOut, call.idle.timeoutMs).message
      : toolErrorText(error);
  /** The model call, as UI message chunks (before `handOn`). */
  const modelChunks = (): AsyncIterable<UIMessageChunk<ChatMessageMetadata>> => {
    const model = call.usage.wrap(direct.wrap(call.model));
    if (options.pipeline !== 'sdk' && isPlainTurn(call)) {
      return plainTurnChunks(call, model, {
        messageId: options.messageId,
        startMetadata,
        finishMetadata,
        errorText,
        onStreamError,
        onChunk: call.idle.touch,
        onStepFinish: (step) => call.usage.stepFinished(step),
      });
    }
    const result = streamText({
      ...callSettings(call, model),
      onChunk: call.idle.touch,
      onStepFinish: (step) => call.usage.stepFinished(step),
      onError: ({ error }) => onStreamError(error),
    });
    return result.toUIMessageStream<UIMessage<ChatMessageMetadata>>({
      // With no `onFinish`, this only makes `start` carry the message id.
      originalMessages: [],
      generateMessageId: () => options.messageId,
      sendReasoning: false,
      sendSources: true,
      messageMetadata: ({ part }) => {
        if (part.type === 'start') return startMetadata();
        if (part.type === 'finish') return finishMetadata(part.finishReason);
        return undefined;
      },
      onError: errorText,
    });
  };

  let aborted = false;
  /**
   * How the model's stream ended, once it has: what `onEnd` stores. `stopped`: why it was cut
   * short, when a stop (or shutdown) aborted it.
   */
  const ended = async (stopped: StopReason | undefined): Promise<ReplyResult> => {
    const parts = await kept.parts();
    if (!stopped && (failed !== undefined || aborted || call.idle.timedOut)) {
      const partial = partialReply(parts);
      return {
        ok: false,
        error: upstreamFailure(failed, call.idle.timedOut || aborted, call.idle.timeoutMs),
        ...(partial ? { partial } : {}),
      };
    }
    return {
      ok: true,
      text: replyText(parts),
      parts,
      usage: call.usage.total(),
      // A deleted chat's reply ends as a stopped one (nothing of it is stored: its chat is gone).
      finishReason: stopped === 'deleted' ? 'stopped' : (stopped ?? finishReason),
    };
  };

  let finish: Extract<UIMessageChunk<ChatMessageMetadata>, { type: 'finish' }> | undefined;
  /** Each chunk the SDK yields, handed on to the sink at once (direct deltas reach it the same way). */
  const handOn = (chunk: UIMessageChunk<ChatMessageMetadata>) => {
    if (endedAtError || !direct.read(chunk)) return;
    kept.add(chunk);
    call.usage.streamed(chunk);
    if (chunk.type === 'start-step' || chunk.type === 'finish-step') inStep = chunk.type === 'start-step';
    if (chunk.type === 'finish') finish = chunk;
    else if (chunk.type === 'abort') aborted = true;
    else {
      sink.chunk(chunk);
      // The parts the service adds come right after `start`, as they are stored first.
      if (chunk.type === 'start') for (const part of options.leading) sink.chunk(part);
    }
    direct.afterRead(chunk);
    if (chunk.type === 'error') {
      endedAtError = true;
      failed ??= new Error(chunk.errorText);
      // Charged as the provider failed it (nothing before any output), not as cut short.
      call.usage.stepFailed();
      // As a stop ends a reply, but stored as failed: the model's stream ends in an `abort`, dropped.
      call.abort();
    }
  };
  /** After the SDK's last chunk: store the reply, then its last chunk says how that went. */
  const lastChunk = async (): Promise<UIMessageChunk<ChatMessageMetadata> | undefined> => {
    direct.close();
    await cpuTurn();
    // Decided once, as the model's stream ended: a stop that lands while the reply is being
    // stored cut nothing short, so the client is told what was stored.
    const stopped = aborted && !call.idle.timedOut ? call.stopReason() : undefined;
    const outcome = await options.onEnd(await ended(stopped));
    if (!outcome.stored) {
      return endedAtError ? undefined : { type: 'error', errorText: NOT_STORED_MESSAGE };
    }
    if (stopped === 'interrupted') return { type: 'error', errorText: INTERRUPTED_MESSAGE };
    // spec/chats.md: a stop, or a DELETE of the chat, ends a streamed reply with `finish`.
    if (stopped === 'stopped' || stopped === 'deleted') {
      return {
        type: 'finish',
        messageMetadata: { chatId: options.chatId, model: options.modelId, finishReason: 'stopped' },
      };
    }
    // A reply that ended at an error within a model step: its finish says so, as the stored
    // message does (one that failed before its step began, an HTTP error, has none).
    if (endedAtError) {
      return inStep
        ? { type: 'finish', finishReason: 'error', messageMetadata: finishMetadata('error') }
        : undefined;
    }
    if (finish) return finish;
    // Aborted without a stop: the upstream went silent past its timeout.
    return { type: 'error', errorText: upstreamFailure(undefined, true, call.idle.timeoutMs).message };
  };
  // Read to its end whatever becomes of the client, so the reply is stored.
  void (async () => {
    try {
      // Setting the model call up is the heaviest part of a reply that no running stream waits
      // for: it takes its turn (cpu-turns.ts).
      await cpuTurn();
      for await (const chunk of modelChunks()) handOn(chunk);
      const last = await lastChunk();
      if (last) sink.chunk(last);
    } catch (error) {
      sink.fail(error);
      return;
    }
    sink.end();
  })();
}

/** A reply's text: its text parts, joined. */
function replyText(parts: unknown[]): string {
  return parts
    .map((part) => ((part as { type: string }).type === 'text' ? (part as { text: string }).text : ''))
    .join('');
}

type GeneratedStep = Awaited<ReturnType<typeof generateText>>['steps'][number];

/** What a tool's error says, in a reply's tool part (stream and JSON mode alike). */
function toolErrorText(error: unknown): string {
  return String((error as Error)?.message ?? error);
}

/** The assistant message's UI parts from the steps of a generateText call (as a stream gives). */
function replyParts(steps: GeneratedStep[]): unknown[] {
  const parts: unknown[] = [];
  for (const step of steps) {
    parts.push({ type: 'step-start' });
    for (const part of step.content) {
      if (part.type === 'text' && part.text) parts.push({ type: 'text', text: part.text, state: 'done' });
      else if (part.type === 'tool-call') {
        const output = step.content.find((p) => p.type === 'tool-result' && p.toolCallId === part.toolCallId);
        const error = step.content.find((p) => p.type === 'tool-error' && p.toolCallId === part.toolCallId);
        parts.push({
          ...(part.dynamic
            ? { type: 'dynamic-tool', toolName: part.toolName }
            : { type: `tool-${part.toolName}` }),
          toolCallId: part.toolCallId,
          input: part.input,
          ...(error && error.type === 'tool-error'
            ? { state: 'output-error', errorText: toolErrorText(error.error) }
            : output?.type === 'tool-result'
              ? { state: 'output-available', output: output.output }
              : // A client tool: the client runs it, so the reply ends with its call.
                { state: 'input-available' }),
        });
      }
    }
  }
  return parts;
}
