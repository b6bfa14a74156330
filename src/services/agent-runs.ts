import { insertAgentRun } from '../db/repositories/agent-runs.js';
import { type SourceView, sourceViews } from '../knowledge/citations.js';
import type { AgentRunTable } from '../db/schema.js';
import { ApiError } from '../errors.js';
import { newId } from '../ids.js';
import type { TemplateValue } from '../models/template.js';
import type { ToolWarning } from '../models/tools/warnings.js';
import type { Principal } from './access.js';
import { type ChatDeps, type ConversationOutcome, startConversation, type UserVariables } from './chat.js';
import { shownUsd } from '../models/registry.js';
import { type RunError, runErrorView, storedRunError } from './run-error.js';

export interface AgentRunRequest {
  message: string;
  chatId?: string;
  projectId?: string;
  variables?: Record<string, TemplateValue>;
  systemVariables?: { user?: UserVariables };
  temperature?: number;
  model?: string;
}

export interface AgentRunView {
  id: string;
  status: 'completed' | 'failed';
  agentId: string;
  agentName: string;
  agentResponse: string;
  /** Why the run failed (`null` when it completed): the code and message its request was answered. */
  error: RunError | null;
  chatId: string;
  input: string;
  executionTime: number;
  createdAt: string;
  completedAt: string;
  usage: RunUsage;
  warnings?: ToolWarning[];
  /** Passages of project files the model was given (the reply cites them as `[n]`). */
  sources?: SourceView[];
}

export interface RunUsage {
  inputTokens: number;
  outputTokens: number;
  costUsd: number;
}

export function runUsage(run: Pick<AgentRunTable, 'input_tokens' | 'output_tokens' | 'cost_usd'>): RunUsage {
  return { inputTokens: run.input_tokens, outputTokens: run.output_tokens, costUsd: shownUsd(run.cost_usd) };
}

/**
 * `POST /agents/{agentId}/runs`: one user message through the same path as `/chat` (context,
 * tools, limits, persistence), recorded as an agent run in the same transaction as the
 * messages. A provider failure records the run as `failed` and answers 502/504 with its id.
 */
export async function runAgent(
  deps: ChatDeps,
  principal: Principal,
  agentId: string,
  request: AgentRunRequest,
): Promise<AgentRunView> {
  const runId = newId('run');
  const startedAt = deps.clock();
  let record: AgentRunTable | undefined;
  const conversation = await startConversation(
    deps,
    principal,
    {
      agentId,
      messages: [{ id: newId('msg'), role: 'user', parts: [{ type: 'text', text: request.message }] }],
      chatId: request.chatId,
      projectId: request.projectId,
      variables: request.variables,
      systemVariables: request.systemVariables,
      temperature: request.temperature,
      model: request.model,
      stream: false,
    },
    async (trx, outcome: ConversationOutcome, finishedAt) => {
      record = {
        id: runId,
        workspace_id: conversation.agent.workspace_id,
        agent_id: agentId,
        chat_id: conversation.chatId,
        status: outcome.ok ? 'completed' : 'failed',
        input: request.message,
        response: outcome.ok ? outcome.text : '',
        error: outcome.ok ? null : storedRunError(outcome.error),
        execution_time_ms: Math.max(0, Math.round(finishedAt.getTime() - startedAt.getTime())),
        // A failed run records what it spent, as the ledger does.
        input_tokens: outcome.usage.inputTokens,
        output_tokens: outcome.usage.outputTokens,
        cost_usd: outcome.costUsd,
        created_at: startedAt.toISOString(),
        completed_at: finishedAt.toISOString(),
        user_id: principal.userId,
        // Kept so that the run read back shows what this POST answers (run-history.ts).
        warnings: conversation.warnings.length > 0 ? JSON.stringify(conversation.warnings) : null,
        sources: conversation.sources.length > 0 ? JSON.stringify(sourceViews(conversation.sources)) : null,
      };
      await insertAgentRun(trx, record);
    },
  );
  const outcome = await conversation.complete();
  if (!outcome.ok) {
    const { error } = outcome;
    if (!record || outcome.unstored) throw error;
    throw new ApiError(
      error.code,
      error.message,
      { ...error.details, runId },
      { cause: error.cause, refusal: error.refusal },
    );
  }
  return runView(record as AgentRunTable, conversation.agent.title);
}

/**
 * A run as its POST answered it and as it is read back (`GET /v1/agents/{id}/runs/{runId}`, the
 * run list): `warnings` and `sources` only when it had some.
 */
export function runView(run: AgentRunTable, agentName: string): AgentRunView {
  return {
    id: run.id,
    status: run.status,
    agentId: run.agent_id,
    agentName,
    agentResponse: run.response,
    error: runErrorView(run.error),
    chatId: run.chat_id ?? '',
    input: run.input,
    executionTime: run.execution_time_ms,
    createdAt: run.created_at,
    completedAt: run.completed_at,
    usage: runUsage(run),
    ...(run.warnings ? { warnings: JSON.parse(run.warnings) as ToolWarning[] } : {}),
    ...(run.sources ? { sources: JSON.parse(run.sources) as SourceView[] } : {}),
  };
}
