import { generateText, type ToolSet } from 'ai';
import { findAgent } from '../db/repositories/agents.js';
import { appendProjectMemory } from '../db/repositories/projects.js';
import type { AgentRunTable, AgentTable, ProjectTable } from '../db/schema.js';
import { ApiError, errors } from '../errors.js';
import { newId } from '../ids.js';
import { buildSystemPrompt } from '../models/context.js';
import { costUsd } from '../models/registry.js';
import { renderTemplate, type TemplateValue } from '../models/template.js';
import { connectMcpTools, type McpToolSpec } from '../models/tools/mcp.js';
import type { McpReach } from '../models/tools/mcp-address.js';
import type { Config } from '../config.js';
import { REMEMBER_TOOL, rememberTool } from '../models/tools/remember.js';
import { PROJECT_FILE_TOOLS, projectFileTools } from '../models/tools/project-files.js';
import { projectFileReads } from '../knowledge/file-tools.js';
import { type SubAgent, subAgentToolNames, subAgentTools } from '../models/tools/sub-agents.js';
import { MAX_PROJECT_MEMORY_LENGTH } from '../limits.js';
import type { ToolWarning } from '../models/tools/warnings.js';
import type { ChatDeps, TokenUsage } from './chat.js';
import { toolLoopSettings } from './reply-steps.js';
import { storedRunError } from './run-error.js';
import type { IdleTimeout } from './chat-idle-timeout.js';
import type { SubAgentRun } from './chat-persist.js';
import { ReplyUsage } from './reply-usage.js';
import type { StopReason } from './running-replies.js';
import { upstreamFailure } from './upstream-failure.js';

export const DEFAULT_MCP_CONNECT_TIMEOUT_MS = 5_000;

/** The tools of one reply, what could not be set up, and what sub-agents did and cost. */
export interface ConversationTools {
  tools: ToolSet;
  warnings: ToolWarning[];
  /** Sub-agent runs of this reply, recorded with the exchange. */
  subRuns: SubAgentRun[];
  /** Tokens and cost of the sub-agents, added to the reply's own. */
  subUsage: TokenUsage & { costUsd: number };
  /** Closes the MCP clients; call once the reply has ended. */
  close(): Promise<void>;
}

export interface ToolContext {
  agent: AgentTable;
  workspace: { id: string; default_model: string | null };
  project: ProjectTable | undefined;
  /** Agent ids an orchestrating agent delegates to. */
  orchestrated: string[];
  chatId: string;
  /** The user whose key made the request: sub-agent runs are theirs, as the lead's run is. */
  userId: string;
  values: Record<string, TemplateValue>;
  temperature: number;
  /**
   * The reply's provider idle timeout, paused while an MCP tool call runs, touched as a
   * sub-agent's provider answers (while it runs, the lead waits for that provider alone).
   */
  idle: IdleTimeout;
  /** Why the reply was cut short, when it was stopped or interrupted (not timed out). */
  stopReason(): StopReason | undefined;
  /** The reply's abort: its MCP servers still connecting are given up (McpConnectOptions.signal). */
  abortSignal?: AbortSignal;
}

/**
 * A JSON column of the agent's row (`tools`, `orchestration`), as written by the setup file or
 * the admin API. A value that is not JSON of the expected shape is a fault, not "none": the
 * request fails with 500 and the log names the agent and the column, instead of the agent
 * quietly running without its tools or sub-agents. (The value itself is not logged: it may
 * hold MCP URLs with credentials.)
 */
function storedJson(
  agent: AgentTable,
  column: 'tools' | 'orchestration',
  valid: (value: unknown) => boolean,
) {
  const text = agent[column];
  if (!text) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  if (value === undefined || !valid(value)) {
    throw errors.internal(new Error(`Agent ${agent.id} has a corrupt stored ${column} value`));
  }
  return value;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

export function orchestrationOf(agent: AgentTable): string[] {
  const value = storedJson(agent, 'orchestration', (v) => v === null || isObject(v));
  const agents = isObject(value) ? value.agents : undefined;
  return Array.isArray(agents) ? agents.filter((id): id is string => typeof id === 'string') : [];
}

export function mcpSpecsOf(agent: AgentTable): McpToolSpec[] {
  const tools = (storedJson(agent, 'tools', Array.isArray) ?? []) as unknown[];
  return tools.filter(
    (t): t is McpToolSpec =>
      isObject(t) && (t as unknown as McpToolSpec).type === 'mcp' && typeof t.url === 'string',
  );
}

/** An agent of the setup file reaches any server; one made over the API public ones (mcp-address.ts). */
function mcpReachOf(agent: AgentTable, config: Pick<Config, 'mcpAllowPrivateNetwork'>): McpReach {
  return agent.managed_by === 'setup' || config.mcpAllowPrivateNetwork ? 'any' : 'public';
}

/**
 * The agent's tools: its MCP servers, `remember`, `searchProjectFiles` and `readProjectFile` in
 * project chats, and one tool per sub-agent of an orchestrating agent. MCP clients opened here are closed again if a later step fails.
 */
export async function buildConversationTools(
  deps: ChatDeps,
  context: ToolContext,
): Promise<ConversationTools> {
  const mcp = await connectMcpTools(mcpSpecsOf(context.agent), {
    connectTimeoutMs: deps.mcpConnectTimeoutMs ?? DEFAULT_MCP_CONNECT_TIMEOUT_MS,
    reach: mcpReachOf(context.agent, deps.config),
    // A tool call gets the time the provider gets to answer: the connection's idle timeout
    // (ATRIUM_IDLE_TIMEOUT_MS) is longer than that, so a streamed reply silent during the call
    // is not cut, and the provider's idle timeout is paused meanwhile.
    calls: { timeoutMs: deps.config.upstreamTimeoutMs, around: context.idle.pausedDuring },
    // A server that answers `initialize` after the connect timeout gets as long as a provider
    // does to answer, for the session it opens to be ended; the reply does not wait for it.
    lateInitializeMs: deps.config.upstreamTimeoutMs,
    lateInitializeWaits: deps.lateMcpInitializeWaits,
    signal: context.abortSignal,
  });
  const result: ConversationTools = {
    tools: { ...mcp.tools },
    warnings: [...mcp.warnings],
    subRuns: [],
    subUsage: { inputTokens: 0, outputTokens: 0, costUsd: 0 },
    close: () => mcp.close(),
  };
  try {
    const { project, workspace } = context;
    if (project) {
      result.tools[REMEMBER_TOOL] = rememberTool((note) =>
        appendProjectMemory(deps.db, workspace.id, project.id, note, {
          now: deps.clock().toISOString(),
          maxLength: MAX_PROJECT_MEMORY_LENGTH,
        }),
      );
      Object.assign(
        result.tools,
        projectFileTools(projectFileReads(deps.db, { workspaceId: workspace.id, projectId: project.id })),
      );
    }
    if (context.orchestrated.length > 0) {
      Object.assign(result.tools, await subAgentToolSet(deps, context, result));
    }
    return result;
  } catch (error) {
    await mcp.close();
    throw error;
  }
}

/**
 * The built-in tools' names, kept from sub-agents in every chat, project or not: a sub-agent's
 * name does not depend on the chat it is called in.
 */
const BUILT_IN_TOOLS = [REMEMBER_TOOL, ...PROJECT_FILE_TOOLS];

/**
 * One tool per sub-agent that exists, listed once however often it is configured; the others
 * become warnings. Named after the lead's own tools (subAgentToolNames).
 */
async function subAgentToolSet(deps: ChatDeps, context: ToolContext, result: ConversationTools) {
  const { db } = deps;
  const { agent, workspace } = context;
  const names = subAgentToolNames(context.orchestrated, [...Object.keys(result.tools), ...BUILT_IN_TOOLS]);
  const subAgents: SubAgent[] = [];
  for (const [id, toolName] of names) {
    const sub = id === agent.id ? undefined : await findAgent(db, workspace.id, id);
    if (!sub) {
      result.warnings.push({
        tool: id,
        code: 'agent_unavailable',
        message: `Agent "${id}" does not exist in this workspace`,
      });
      continue;
    }
    subAgents.push({ id: sub.id, title: sub.title, description: sub.description, toolName });
  }
  return subAgentTools(subAgents, (sub, message, abortSignal) =>
    runSubAgent(deps, context, result, sub.id, message, abortSignal),
  );
}

/**
 * Why a sub-agent's call failed. Cut short with its lead reply (a stop, a `DELETE` of the chat, a
 * `/v1/openai` client gone, a shutdown), it says so: its provider did nothing wrong. While a
 * sub-agent runs the lead waits for its provider alone, so the lead's idle timeout is that
 * provider's silence, told as the lead's client is told it.
 */
function subRunFailure(deps: ChatDeps, context: ToolContext, error: unknown): ApiError {
  const stopped = context.idle.timedOut ? undefined : context.stopReason();
  if (stopped === 'stopped' || stopped === 'deleted') {
    return new ApiError(
      'conflict',
      'The lead reply was stopped before this run was done',
      {},
      { cause: error },
    );
  }
  if (stopped === 'interrupted') {
    return new ApiError(
      'service_unavailable',
      'The server shut down while this run was being generated',
      {},
      { cause: error, refusal: 'warn' },
    );
  }
  return upstreamFailure(error, context.idle.timedOut, deps.config.upstreamTimeoutMs);
}

/** Runs a sub-agent on one message, recording the run and its usage. */
async function runSubAgent(
  deps: ChatDeps,
  context: ToolContext,
  result: ConversationTools,
  subAgentId: string,
  message: string,
  abortSignal: AbortSignal | undefined,
): Promise<string> {
  const { db } = deps;
  const { workspace } = context;
  const subAgent = await findAgent(db, workspace.id, subAgentId);
  if (!subAgent) throw new Error(`Agent ${subAgentId} is gone`);
  const subModel = await deps.models.resolveForWorkspace(db, workspace, subAgent.model ?? undefined);
  const began = deps.clock();
  const run: AgentRunTable = {
    id: newId('run'),
    workspace_id: workspace.id,
    agent_id: subAgent.id,
    chat_id: context.chatId,
    user_id: context.userId,
    status: 'completed',
    input: message,
    response: '',
    error: null,
    execution_time_ms: 0,
    input_tokens: 0,
    output_tokens: 0,
    cost_usd: 0,
    created_at: began.toISOString(),
    completed_at: began.toISOString(),
  };
  result.subRuns.push({ record: run, model: subModel.id });
  // Counted whatever the outcome, an estimate where the provider reported none (reply-usage.ts):
  // a sub-agent cut short by the lead's stop had its prompt sent and its output made.
  const usage = new ReplyUsage();
  // The lead's timer measures the provider it waits for: from here on the sub-agent's (its
  // lead's model has answered; its step ends, and touches the timer, only after this tool).
  context.idle.touch();
  try {
    const model = usage.wrap(subModel.model);
    const system = buildSystemPrompt({
      agentInstructions: renderTemplate(subAgent.instructions, context.values),
    });
    const answer = await generateText({
      model,
      system,
      prompt: message,
      temperature: context.temperature,
      maxRetries: 0,
      abortSignal,
      // No tools of its own, but a call the model makes up still gets its error and an answer.
      ...toolLoopSettings(model, { system, hasTools: false }),
      onStepFinish: (step) => {
        context.idle.touch();
        usage.stepFinished(step);
      },
    });
    run.response = answer.text;
    return answer.text;
  } catch (error) {
    // The lead model and the stored reply get the same words as the sub-run's record and the
    // client of a failed reply: never the provider's own error text (it may name keys, hosts).
    const failure = subRunFailure(deps, context, error);
    run.status = 'failed';
    run.error = storedRunError(failure);
    throw failure;
  } finally {
    const spent = usage.total();
    run.input_tokens = spent.inputTokens;
    run.output_tokens = spent.outputTokens;
    run.cost_usd = costUsd(subModel.pricing, run.input_tokens, run.output_tokens);
    result.subUsage.inputTokens += run.input_tokens;
    result.subUsage.outputTokens += run.output_tokens;
    result.subUsage.costUsd += run.cost_usd;
    const ended = deps.clock();
    run.completed_at = ended.toISOString();
    run.execution_time_ms = Math.max(0, ended.getTime() - began.getTime());
  }
}
