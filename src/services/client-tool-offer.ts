import type { ToolSet } from 'ai';
import type { CallOptions } from './chat-reply.js';

/**
 * The client tools a reply offers beside the agent's own, and the call options it runs with,
 * once the agent's tools for the reply are known.
 *
 * `tool_choice: "none"` holds back the client's tools, not the agent's: the provider's `none`
 * covers every tool of a call, so with tools of the agent's own the client tools are not sent
 * and the agent's stay `auto` (a made-up call of a held-back tool is answered to the model as
 * an error, never relayed). A client tool not offered collides with none of the agent's. The
 * agent's tools define tools for a history holding tool calls, which providers such as
 * Anthropic's refuse from a request without any. Only an agent without tools of its own has
 * the client tools sent with the provider's `none` (forced-tool-choice.ts), for that history.
 */
export function clientToolOffer(
  ownTools: ToolSet,
  clientTools: ToolSet | undefined,
  options: CallOptions | undefined,
): { clientTools: ToolSet | undefined; options: CallOptions | undefined } {
  if (clientTools === undefined || options?.toolChoice !== 'none' || Object.keys(ownTools).length === 0) {
    return { clientTools, options };
  }
  return { clientTools: undefined, options: { ...options, toolChoice: undefined } };
}
