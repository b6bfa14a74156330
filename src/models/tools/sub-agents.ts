import { type ToolSet, tool } from 'ai';
import { z } from 'zod';

export interface SubAgent {
  id: string;
  title: string;
  description: string;
}

/** Runs one sub-agent on a message and returns its reply text. */
export type RunSubAgent = (
  agent: SubAgent,
  message: string,
  abortSignal: AbortSignal | undefined,
) => Promise<string>;

function toolName(agentId: string): string {
  return agentId.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64);
}

/** Orchestration: each agent named in `orchestration.agents` becomes a tool of the lead agent. */
export function subAgentTools(agents: SubAgent[], run: RunSubAgent): ToolSet {
  const tools: ToolSet = {};
  for (const agent of agents) {
    tools[toolName(agent.id)] = tool({
      description: `Ask the agent "${agent.title}"${agent.description ? ` (${agent.description})` : ''}. It answers one message.`,
      inputSchema: z.object({ message: z.string().min(1).describe('What to ask the agent') }),
      execute: async ({ message }, { abortSignal }) => ({ reply: await run(agent, message, abortSignal) }),
    });
  }
  return tools;
}
