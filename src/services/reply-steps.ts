import type { LanguageModelV3 } from '@ai-sdk/provider';
import { stepCountIs, wrapLanguageModel } from 'ai';

/** Steps of a reply's tool loop (model call, tool calls, model call…) one request may take. */
export const MAX_STEPS = 8;

/**
 * When a reply's tool loop stops, with tools offered or not. The AI SDK answers a call of a tool
 * nobody offered (a name the model made up) with a tool error and goes on only while the stop
 * condition allows: with its default of one step, a model without tools that made up a call
 * ended the reply there, empty, on a call no one runs. With more steps it reads the error and
 * answers, as it does when tools are offered.
 */
const toolLoopStop = stepCountIs(MAX_STEPS);

/** Whether the step (numbered from 0, as the SDK's `prepareStep` numbers it) is the loop's last. */
export function isLastStep(stepNumber: number): boolean {
  return stepNumber >= MAX_STEPS - 1;
}

/** What the last step of a loop without tools adds to the system prompt. */
const LAST_STEP_NOTE = 'No tools are available: answer now from what you have.';

/**
 * The system prompt of the last step of a loop that declares no tools. Its `toolChoice: none`
 * never reaches the provider: the provider packages (@ai-sdk/openai-compatible, openai,
 * anthropic) drop a tool choice when no tools are declared. A model that makes up a call at
 * every step is told in words instead, the one thing every provider passes on.
 */
export function lastStepSystem(system: string | undefined): string {
  return system ? `${system}\n\n${LAST_STEP_NOTE}` : LAST_STEP_NOTE;
}

/**
 * The tool loop settings of a `generateText` / `streamText` call on `model` with `system` and
 * tools or none: at most MAX_STEPS steps, the last of which tells the model to call no tool
 * (`toolChoice: none`; without tools, `lastStepSystem` too), so a model that would go on calling
 * tools answers from the results it has. Before, its last call was run and nobody read it: a
 * completed run with an empty `agentResponse`, a `/v1/chat` reply without text,
 * `finish_reason: "length"` at the OpenAI door.
 *
 * `none` is set on the model's call rather than given to the SDK (as forced-tool-choice.ts sets a
 * client's choice): the SDK fails the step with `ToolChoiceViolationError` when a model calls a
 * tool all the same (many OpenAI-compatible servers ignore `tool_choice`), and a reply that would
 * have ended on that call would fail instead; now the call is run, as any step's, and the loop
 * ends on it as before. The tools stay declared (not `activeTools: []`): providers refuse a
 * history of tool calls without tool definitions (Anthropic). The plain path (plain-turn.ts) sends
 * the same `none` and system prompt on its last step.
 */
export function toolLoopSettings(
  model: LanguageModelV3,
  call: { system: string | undefined; hasTools: boolean },
) {
  let lastStepModel: LanguageModelV3 | undefined;
  return {
    stopWhen: toolLoopStop,
    prepareStep: ({ stepNumber }: { stepNumber: number }) => {
      if (!isLastStep(stepNumber)) return undefined;
      lastStepModel ??= withToolChoiceNone(model);
      return { model: lastStepModel, ...(call.hasTools ? {} : { system: lastStepSystem(call.system) }) };
    },
  };
}

/** Unlike forced-tool-choice.ts's `none`, set on a call without tools too: the plain path does, and both paths send the same. */
function withToolChoiceNone(model: LanguageModelV3): LanguageModelV3 {
  return wrapLanguageModel({
    model,
    middleware: {
      specificationVersion: 'v3',
      transformParams: async ({ params }) => ({ ...params, toolChoice: { type: 'none' } }),
    },
  });
}
