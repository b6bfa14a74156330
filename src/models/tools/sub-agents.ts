import { type ToolSet, tool } from 'ai';
import { z } from 'zod';

export interface SubAgent {
  id: string;
  title: string;
  description: string;
  /** The name the lead's model calls it by (`subAgentToolNames`). */
  toolName: string;
}

/** Runs one sub-agent on a message and returns its reply text. */
export type RunSubAgent = (
  agent: SubAgent,
  message: string,
  abortSignal: AbortSignal | undefined,
) => Promise<string>;

/** Longest tool name the providers take (OpenAI's function names: `^[a-zA-Z0-9_-]{1,64}$`). */
const MAX_TOOL_NAME_LENGTH = 64;

function baseName(agentId: string): string {
  return agentId.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, MAX_TOOL_NAME_LENGTH);
}

/**
 * The tool name of each sub-agent, by agent id. Ids come out as one name (`agt.twin` and
 * `agt:twin`, long ids alike in their first 64 characters) or as the name of one of the lead's
 * own tools (`taken`): one tool silently replaced the other. The own tools keep their names; the
 * sub-agents, in the order configured, get theirs or, when it is taken, the name cut to leave room
 * for `_2`, `_3`, … . Every configured id gets a name, also one whose agent is gone, so a later
 * sub-agent's name does not move when an earlier one is deleted: a chat's stored calls keep naming it.
 */
export function subAgentToolNames(agentIds: string[], taken: Iterable<string>): Map<string, string> {
  const used = new Set(taken);
  const names = new Map<string, string>();
  for (const id of agentIds) {
    if (names.has(id)) continue;
    const base = baseName(id);
    let name = base;
    for (let n = 2; used.has(name); n++) {
      const suffix = `_${n}`;
      name = base.slice(0, MAX_TOOL_NAME_LENGTH - suffix.length) + suffix;
    }
    used.add(name);
    names.set(id, name);
  }
  return names;
}

/** Orchestration: each agent named in `orchestration.agents` becomes a tool of the lead agent. */
export function subAgentTools(agents: SubAgent[], run: RunSubAgent): ToolSet {
  const tools: ToolSet = {};
  for (const agent of agents) {
    tools[agent.toolName] = tool({
      description: `Ask the agent "${agent.title}"${agent.description ? ` (${agent.description})` : ''}. It answers one message.`,
      inputSchema: z.object({ message: z.string().min(1).describe('What to ask the agent') }),
      execute: async ({ message }, { abortSignal }) => ({ reply: await run(agent, message, abortSignal) }),
    });
  }
  return tools;
}
