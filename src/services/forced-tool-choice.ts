import { type ToolChoice, type ToolSet, wrapLanguageModel } from 'ai';
import type { LanguageModelV3, LanguageModelV3ToolChoice } from '@ai-sdk/provider';

/**
 * `model` with a client's tool choice set on its calls.
 *
 * `none` is set on every call, with the tools still sent: providers (Anthropic's API among them)
 * refuse a history holding tool calls from a request that defines no tools, so leaving them out
 * broke the conversation. The provider's `none` covers every tool of the call, so it reaches
 * here only for an agent without tools of its own (client-tool-offer.ts). A forced choice
 * (`required`, a named function) is set on the first call only: forced on every step of the tool
 * loop, the model could never answer in text, and each step would be paid for; the later calls
 * are `auto`.
 *
 * It is set on the call rather than given to the AI SDK, whose `generateText` throws
 * (`ToolChoiceViolationError`) when the model answers without the forced call, or calls a tool
 * despite `none`, where `streamText` passes a forced choice's answer on: a JSON request was a 502
 * (which the OpenAI SDKs retry) and the same request streamed an answer. Models that do so
 * (atrium/echo, many OpenAI-compatible servers) are now answered with what they said, in JSON as
 * streamed, as under `auto`.
 */
export function withToolChoice(model: LanguageModelV3, choice: ToolChoice<ToolSet>): LanguageModelV3 {
  const chosen: LanguageModelV3ToolChoice =
    typeof choice === 'string' ? { type: choice } : { type: 'tool', toolName: choice.toolName };
  const everyCall = chosen.type === 'none';
  let first = true;
  return wrapLanguageModel({
    model,
    middleware: {
      specificationVersion: 'v3',
      transformParams: async ({ params }) => {
        // A call without tools (none offered) has nothing to choose from.
        if ((!first && !everyCall) || params.tools === undefined || params.tools.length === 0) return params;
        first = false;
        return { ...params, toolChoice: chosen };
      },
    },
  });
}
