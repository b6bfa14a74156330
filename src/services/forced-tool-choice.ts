import { type ToolChoice, type ToolSet, wrapLanguageModel } from 'ai';
import type { LanguageModelV3, LanguageModelV3ToolChoice } from '@ai-sdk/provider';

/**
 * `model` with a client's tool choice (`required`, a named function) forced on its first call
 * only: forced on every step of the tool loop, the model could never answer in text, and each
 * step would be paid for; the later calls are `auto`.
 *
 * It is set on the call rather than given to the AI SDK, whose `generateText` throws
 * (`ToolChoiceViolationError`) when the model answers without the forced call, where
 * `streamText` passes the answer on: a JSON request was a 502 (which the OpenAI SDKs retry) and
 * the same request streamed an answer. Models that do so (atrium/echo, many OpenAI-compatible
 * servers) are now answered with what they said, in JSON as streamed.
 */
export function forceToolChoiceOnFirstCall(
  model: LanguageModelV3,
  choice: ToolChoice<ToolSet>,
): LanguageModelV3 {
  const forced: LanguageModelV3ToolChoice =
    typeof choice === 'string' ? { type: choice } : { type: 'tool', toolName: choice.toolName };
  let first = true;
  return wrapLanguageModel({
    model,
    middleware: {
      specificationVersion: 'v3',
      transformParams: async ({ params }) => {
        // A call without tools (none offered) has nothing to force.
        if (!first || params.tools === undefined || params.tools.length === 0) return params;
        first = false;
        return { ...params, toolChoice: forced };
      },
    },
  });
}
