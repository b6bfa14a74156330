import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3Prompt,
  LanguageModelV3StreamPart,
} from '@ai-sdk/provider';
import { wrapLanguageModel } from 'ai';
import type { TokenUsage } from './chat.js';
import { estimatePromptTokens, estimateTokens } from './usage-estimate.js';

/** What the AI SDK tells of a finished model step (`onStepFinish` of streamText and generateText). */
interface FinishedStep {
  finishReason: string;
  usage: { inputTokens: number | undefined; outputTokens: number | undefined };
  content: ReadonlyArray<{ type: string; text?: string; input?: unknown }>;
}

/**
 * The tokens a reply's model steps have used, to be charged whatever the outcome: what the
 * provider reported for each finished step, and an estimate (usage-estimate.ts) where it
 * reported nothing. A step cut short (a stop, a client gone, the idle timeout, a shutdown) never
 * gets a report, nor does any step of a provider that sends no usage; the provider had its
 * prompt and produced output all the same, so leaving them out would make every reply that is
 * stopped before its end free. The estimate of such a step is its prompt plus its output: what
 * the step produced when it finished, what was streamed of it when it was cut short. A step the
 * provider failed (an error answer, a broken stream) before it produced anything costs nothing,
 * as providers bill it.
 */
export class ReplyUsage {
  private readonly finished: TokenUsage = { inputTokens: 0, outputTokens: 0 };
  /** The model call under way; undefined between calls and after a refused one. */
  private running: RunningCall | undefined;
  /** Output characters streamed to the client since the last step finished. */
  private streamedCharacters = 0;

  /** The model, with each call's prompt noted (no stage is added to its stream). */
  wrap(model: LanguageModelV3): LanguageModelV3 {
    return wrapLanguageModel({
      model,
      middleware: {
        specificationVersion: 'v3',
        wrapGenerate: ({ doGenerate, params }) => this.calling(params, doGenerate),
        wrapStream: async ({ doStream, params }) => {
          const running = this.runningCall(params);
          const result = await this.calling(running, doStream);
          return { ...result, stream: noteReportedUsage(result.stream, running) };
        },
      },
    });
  }

  /** A new call, noted unless it was cut short before it began: then nothing was sent. */
  private runningCall(params: LanguageModelV3CallOptions): RunningCall | undefined {
    if (params.abortSignal?.aborted) return undefined;
    return {
      prompt: params.prompt,
      abortSignal: params.abortSignal,
      reported: undefined,
      produced: false,
      reasoningCharacters: 0,
    };
  }

  private async calling<T>(
    call: RunningCall | LanguageModelV3CallOptions | undefined,
    answer: () => PromiseLike<T>,
  ): Promise<T> {
    const running = call && 'reported' in call ? call : call && this.runningCall(call);
    this.running = running;
    try {
      return await answer();
    } catch (error) {
      // A call the provider refused (an error answer, no connection) costs nothing; one cut short
      // while waiting for the answer had its prompt sent.
      if (!running?.abortSignal?.aborted) this.running = undefined;
      throw error;
    }
  }

  /** A model step has finished: its reported usage, else its estimate, is counted. */
  stepFinished(step: FinishedStep): void {
    const prompt = this.running?.prompt;
    this.running = undefined;
    const output = outputCharacters(step.content);
    const reported = step.usage.inputTokens !== undefined || step.usage.outputTokens !== undefined;
    if (!reported && step.finishReason === 'error' && output === 0) return;
    this.finished.inputTokens +=
      step.usage.inputTokens ?? (prompt ? estimatePromptTokens({ system: undefined, messages: prompt }) : 0);
    this.finished.outputTokens += step.usage.outputTokens ?? estimateTokens(output);
  }

  /**
   * The model call under way failed (its provider's `error`) and is aborted there, its step never
   * finishing (a streamed reply ends at its first error): charged as a step the provider failed,
   * nothing when it had produced nothing before the error (and reported no usage), else as one
   * cut short (`total`).
   */
  stepFailed(): void {
    const running = this.running;
    if (running && !running.produced && running.reported === undefined && this.streamedCharacters === 0) {
      this.running = undefined;
    }
  }

  /**
   * A UI chunk streamed to the client, in the stream's order: the output of the step under way,
   * which a step's end (`finish-step`) clears. Reasoning is never sent to the client: the model
   * stream's reasoning is counted where it is read (noteReportedUsage).
   */
  streamed(chunk: { type: string; delta?: string; inputTextDelta?: string }): void {
    if (chunk.type === 'text-delta') this.streamedCharacters += chunk.delta?.length ?? 0;
    else if (chunk.type === 'tool-input-delta') this.streamedCharacters += chunk.inputTextDelta?.length ?? 0;
    else if (chunk.type === 'finish-step') this.streamedCharacters = 0;
  }

  /**
   * The reply's usage so far: the finished steps', and the estimate of the one that did not
   * finish, when Atrium cut it short or the provider failed it after some output: the text and
   * tool-call input streamed to the client, and the reasoning the provider streamed (which the
   * client is never sent, but the provider bills as output).
   */
  total(): TokenUsage {
    const running = this.running;
    const cutShort = running?.abortSignal?.aborted === true;
    const output = this.streamedCharacters + (running?.reasoningCharacters ?? 0);
    if (!running || (!cutShort && output === 0)) return { ...this.finished };
    // A step whose model stream ended with its usage, cut short later (while its tools ran).
    const reported = running.reported;
    return {
      inputTokens:
        this.finished.inputTokens +
        (reported?.inputTokens ?? estimatePromptTokens({ system: undefined, messages: running.prompt })),
      outputTokens: this.finished.outputTokens + (reported?.outputTokens ?? estimateTokens(output)),
    };
  }
}

interface RunningCall {
  prompt: LanguageModelV3Prompt;
  abortSignal: AbortSignal | undefined;
  /** The usage the provider reported at the end of the call's stream, before its step finished. */
  reported: { inputTokens: number | undefined; outputTokens: number | undefined } | undefined;
  /**
   * The provider's stream had output before its first `error` part: text, reasoning (never
   * streamed to the client) or a tool call. What comes after the error is not counted.
   */
  produced: boolean;
  /** The reasoning the provider's stream had sent before its first `error` part, in characters. */
  reasoningCharacters: number;
}

/**
 * The model's stream as it is, the usage of its `finish` part noted on the call: the AI SDK
 * finishes a step only once its tools have run, so a stop while a tool runs would otherwise
 * lose what the provider reported. Read with the stream's own reader, as direct-text.ts does.
 */
function noteReportedUsage(
  source: ReadableStream<LanguageModelV3StreamPart>,
  running: RunningCall | undefined,
): ReadableStream<LanguageModelV3StreamPart> {
  if (!running) return source;
  const reader = source.getReader();
  let failed = false;
  return new ReadableStream<LanguageModelV3StreamPart>({
    pull: async (controller) => {
      const { done, value: part } = await reader.read();
      if (done) {
        controller.close();
        return;
      }
      if (part.type === 'error') failed = true;
      else if (!failed) {
        if (!running.produced) running.produced = isOutput(part);
        if (part.type === 'reasoning-delta') running.reasoningCharacters += part.delta.length;
      }
      if (part.type === 'finish') {
        running.reported = {
          inputTokens: part.usage.inputTokens.total,
          outputTokens: part.usage.outputTokens.total,
        };
      }
      controller.enqueue(part);
    },
    cancel: (reason) => reader.cancel(reason),
  });
}

/** Whether a provider part is output (some text, reasoning or tool-call input, or a tool call). */
function isOutput(part: LanguageModelV3StreamPart): boolean {
  switch (part.type) {
    case 'text-delta':
    case 'reasoning-delta':
    case 'tool-input-delta':
      return part.delta.length > 0;
    case 'tool-call':
      return true;
    default:
      return false;
  }
}

/** The characters a finished step produced: its text, reasoning and tool calls' input. */
function outputCharacters(content: FinishedStep['content']): number {
  let characters = 0;
  for (const part of content) {
    if (part.type === 'text' || part.type === 'reasoning') characters += part.text?.length ?? 0;
    else if (part.type === 'tool-call') characters += JSON.stringify(part.input ?? '').length;
  }
  return characters;
}
