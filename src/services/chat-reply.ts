import {
  generateText,
  type LanguageModel,
  type ModelMessage,
  stepCountIs,
  streamText,
  type ToolSet,
  type UIMessage,
  type UIMessageChunk,
} from 'ai';
import type { ApiError } from '../errors.js';
import type { ToolWarning } from '../models/tools/warnings.js';
import type { ChatMessageMetadata, TokenUsage } from './chat.js';
import type { IdleTimeout } from './chat-idle-timeout.js';
import { upstreamFailure } from './upstream-failure.js';

/** Steps of the tool loop (model call, tool calls, model call…) one request may take. */
const MAX_STEPS = 8;

/** How a reply ended, before it is stored: its parts and usage, or the provider's failure. */
export type ReplyResult =
  { ok: true; text: string; parts: unknown[]; usage: TokenUsage } | { ok: false; error: ApiError };

/** What one model call needs; built once per reply. */
export interface ReplyCall {
  model: LanguageModel;
  system: string | undefined;
  messages: ModelMessage[];
  temperature: number;
  tools: ToolSet;
  abortSignal: AbortSignal;
  idle: IdleTimeout;
}

function callSettings(call: ReplyCall) {
  const hasTools = Object.keys(call.tools).length > 0;
  return {
    model: call.model,
    system: call.system,
    messages: call.messages,
    // The API accepts system messages from the caller (decisions.md: role `system`).
    allowSystemInMessages: true,
    temperature: call.temperature,
    maxRetries: 0,
    abortSignal: call.abortSignal,
    ...(hasTools ? { tools: call.tools, stopWhen: stepCountIs(MAX_STEPS) } : {}),
  };
}

function failure(call: ReplyCall, error: unknown): ReplyResult {
  return { ok: false, error: upstreamFailure(error, call.idle.timedOut, call.idle.timeoutMs) };
}

/** JSON mode: one non-streaming model call (per tool step), to its end. */
export async function completeReply(call: ReplyCall): Promise<ReplyResult> {
  call.idle.touch();
  try {
    const result = await generateText({ ...callSettings(call), onStepFinish: call.idle.touch });
    if (call.idle.timedOut) throw new Error('upstream timeout');
    return {
      ok: true,
      text: result.steps.map((step) => step.text).join(''),
      parts: replyParts(result.steps),
      usage: {
        inputTokens: result.totalUsage.inputTokens ?? 0,
        outputTokens: result.totalUsage.outputTokens ?? 0,
      },
    };
  } catch (error) {
    return failure(call, error);
  }
}

export interface StreamReplyOptions {
  chatId: string;
  messageId: string;
  modelId: string;
  warnings: ToolWarning[];
  /** Tokens of sub-agents, added to the usage the `finish` chunk reports. */
  extraUsage: TokenUsage;
  /** Called once when the model's stream has ended, before the UI stream closes. */
  onEnd(result: ReplyResult): Promise<void>;
}

/** Stream mode: the reply as UI message chunks; `onEnd` runs when the model's stream ends. */
export function streamReply(
  call: ReplyCall,
  options: StreamReplyOptions,
): ReadableStream<UIMessageChunk<ChatMessageMetadata>> {
  call.idle.touch();
  let failed: unknown;
  let usage: TokenUsage | undefined;
  const result = streamText({
    ...callSettings(call),
    onChunk: call.idle.touch,
    onError: ({ error }) => {
      failed ??= error;
    },
  });
  const chunks = result.toUIMessageStream<UIMessage<ChatMessageMetadata>>({
    originalMessages: [],
    generateMessageId: () => options.messageId,
    sendReasoning: false,
    messageMetadata: ({ part }) => {
      if (part.type === 'start') return { chatId: options.chatId };
      if (part.type === 'finish') {
        usage = {
          inputTokens: part.totalUsage.inputTokens ?? 0,
          outputTokens: part.totalUsage.outputTokens ?? 0,
        };
        return {
          chatId: options.chatId,
          model: options.modelId,
          usage: {
            inputTokens: usage.inputTokens + options.extraUsage.inputTokens,
            outputTokens: usage.outputTokens + options.extraUsage.outputTokens,
          },
        };
      }
      return undefined;
    },
    onError: (error) => upstreamFailure(error, call.idle.timedOut, call.idle.timeoutMs).message,
    onFinish: async ({ responseMessage, isAborted }) => {
      if (failed !== undefined || isAborted || call.idle.timedOut) {
        await options.onEnd({
          ok: false,
          error: upstreamFailure(failed, call.idle.timedOut || isAborted, call.idle.timeoutMs),
        });
      } else {
        await options.onEnd({
          ok: true,
          text: replyText(responseMessage),
          parts: responseMessage.parts,
          usage: usage ?? { inputTokens: 0, outputTokens: 0 },
        });
      }
    },
  });
  return options.warnings.length > 0 ? withWarningsChunk(chunks, options.warnings) : chunks;
}

function replyText(message: UIMessage<ChatMessageMetadata> | undefined): string {
  return (message?.parts ?? []).map((part) => (part.type === 'text' ? part.text : '')).join('');
}

type GeneratedStep = Awaited<ReturnType<typeof generateText>>['steps'][number];

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
            ? { state: 'output-error', errorText: String((error.error as Error)?.message ?? error.error) }
            : {
                state: 'output-available',
                output: output?.type === 'tool-result' ? output.output : undefined,
              }),
        });
      }
    }
  }
  return parts;
}

/**
 * A streamed reply carries tool set-up warnings as a transient `data-warnings` chunk right
 * after `start` (clients see it in `onData`; it is not part of the stored message).
 */
function withWarningsChunk(
  stream: ReadableStream<UIMessageChunk<ChatMessageMetadata>>,
  warnings: ToolWarning[],
): ReadableStream<UIMessageChunk<ChatMessageMetadata>> {
  let sent = false;
  return stream.pipeThrough(
    new TransformStream<UIMessageChunk<ChatMessageMetadata>, UIMessageChunk<ChatMessageMetadata>>({
      transform(chunk, controller) {
        controller.enqueue(chunk);
        if (!sent && chunk.type === 'start') {
          sent = true;
          controller.enqueue({ type: 'data-warnings', data: warnings, transient: true });
        }
      },
    }),
  );
}
