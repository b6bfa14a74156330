import type { LanguageModelV3, LanguageModelV3CallOptions, LanguageModelV3Prompt } from '@ai-sdk/provider';
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
  private running: { prompt: LanguageModelV3Prompt; abortSignal: AbortSignal | undefined } | undefined;
  /** Output characters streamed to the client since the last step finished. */
  private streamedCharacters = 0;

  /** The model, with each call's prompt noted (no stage is added to its stream). */
  wrap(model: LanguageModelV3): LanguageModelV3 {
    return wrapLanguageModel({
      model,
      middleware: {
        specificationVersion: 'v3',
        wrapGenerate: ({ doGenerate, params }) => this.calling(params, doGenerate),
        wrapStream: ({ doStream, params }) => this.calling(params, doStream),
      },
    });
  }

  private async calling<T>(params: LanguageModelV3CallOptions, call: () => PromiseLike<T>): Promise<T> {
    this.running = { prompt: params.prompt, abortSignal: params.abortSignal };
    try {
      return await call();
    } catch (error) {
      // A call the provider refused (an error answer, no connection) costs nothing; one cut short
      // while waiting for the answer had its prompt sent.
      if (!params.abortSignal?.aborted) this.running = undefined;
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
   * A UI chunk streamed to the client, in the stream's order: the output of the step under way,
   * which a step's end (`finish-step`) clears.
   */
  streamed(chunk: { type: string; delta?: string; inputTextDelta?: string }): void {
    if (chunk.type === 'text-delta') this.streamedCharacters += chunk.delta?.length ?? 0;
    else if (chunk.type === 'tool-input-delta') this.streamedCharacters += chunk.inputTextDelta?.length ?? 0;
    else if (chunk.type === 'finish-step') this.streamedCharacters = 0;
  }

  /**
   * The reply's usage so far: the finished steps', and the estimate of the one that did not
   * finish, when Atrium cut it short or the provider failed it after some output.
   */
  total(): TokenUsage {
    const running = this.running;
    const cutShort = running?.abortSignal?.aborted === true;
    if (!running || (!cutShort && this.streamedCharacters === 0)) return { ...this.finished };
    return {
      inputTokens:
        this.finished.inputTokens + estimatePromptTokens({ system: undefined, messages: running.prompt }),
      outputTokens: this.finished.outputTokens + estimateTokens(this.streamedCharacters),
    };
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
