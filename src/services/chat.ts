import {
  APICallError,
  convertToModelMessages,
  generateText,
  RetryError,
  stepCountIs,
  streamText,
  type ToolSet,
  type UIMessage,
  type UIMessageChunk,
} from 'ai';
import type { Transaction } from 'kysely';
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import { findAgent } from '../db/repositories/agents.js';
import { insertAgentRun } from '../db/repositories/agent-runs.js';
import {
  addChatSpend,
  appendProjectMemory,
  findAgentWithWorkspace,
  findChat,
  insertChat,
} from '../db/repositories/chats.js';
import { appendMessages, listChatMessageIds, listChatMessages } from '../db/repositories/messages.js';
import { findProject } from '../db/repositories/projects.js';
import { findUser } from '../db/repositories/tenancy.js';
import { addMonthUsage } from '../db/repositories/usage.js';
import type { AgentRunTable, AgentTable, ChatTable, Database } from '../db/schema.js';
import { ApiError, errors } from '../errors.js';
import { type Clock, newId } from '../ids.js';
import { buildSystemPrompt } from '../models/context.js';
import { costUsd, type ModelRegistry, type ResolvedModel } from '../models/registry.js';
import { renderTemplate, type TemplateValue } from '../models/template.js';
import { connectMcpTools, type McpToolSpec } from '../models/tools/mcp.js';
import { REMEMBER_TOOL, rememberTool } from '../models/tools/remember.js';
import { type SubAgent, subAgentTools } from '../models/tools/sub-agents.js';
import type { ToolWarning } from '../models/tools/warnings.js';
import type { Principal } from './access.js';
import { type ObjectReader, projectFilesContext } from './chat-context.js';
import {
  type ConversationMessage,
  chatTitle,
  type IncomingMessage,
  mergeHistory,
  toModelUIMessages,
  validateIncomingMessages,
} from './chat-messages.js';
import { assertWithinChatSpendCap, assertWithinWorkspaceLimits, ledgerMonth } from './usage.js';
import { estimateRequestUsage, type UsageReservations } from './usage-reservations.js';

export const DEFAULT_TEMPERATURE = 0.7;
/** Steps of the tool loop (model call, tool calls, model call…) one request may take. */
const MAX_STEPS = 8;
export const DEFAULT_MCP_CONNECT_TIMEOUT_MS = 5_000;

export interface ChatLogger {
  error(object: object, message: string): void;
  warn(object: object, message: string): void;
}

export interface ChatDeps {
  db: Db;
  clock: Clock;
  config: Pick<Config, 'upstreamTimeoutMs'>;
  models: ModelRegistry;
  /** Reads project file objects; without it, project files are listed by name only. */
  readObject?: ObjectReader;
  mcpConnectTimeoutMs?: number;
  /** Persistence still running after a response ended (a streamed reply); awaited at shutdown. */
  inFlight?: Set<Promise<unknown>>;
  /** Admits model requests against usage reserved by requests in flight (every process). */
  usageReservations?: UsageReservations;
}

export interface UserVariables {
  id?: string;
  name?: string;
  email?: string;
}

export interface ConversationRequest {
  agentId: string;
  messages: IncomingMessage[];
  chatId?: string;
  projectId?: string;
  stream?: boolean;
  temperature?: number;
  model?: string;
  variables?: Record<string, TemplateValue>;
  systemVariables?: { user?: UserVariables };
}

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
}

export type ConversationOutcome =
  { ok: true; text: string; usage: TokenUsage; costUsd: number } | { ok: false; error: ApiError };

/** Writes a caller adds to the conversation's final transaction (an agent run's record). */
export type ExtraWrites = (
  trx: Transaction<Database>,
  outcome: ConversationOutcome,
  finishedAt: Date,
) => Promise<void>;

export interface Conversation {
  chatId: string;
  /** Id of the assistant message (persisted when the model succeeds). */
  messageId: string;
  agent: AgentTable;
  model: string;
  warnings: ToolWarning[];
  /**
   * Stream mode: starts the model call and returns the reply as UI message chunks, which must
   * be read to the end (persistence runs at its end). A conversation runs once: stream or complete.
   */
  stream(): ReadableStream<UIMessageChunk<ChatMessageMetadata>>;
  /** JSON mode: runs the model call to its end and persists the exchange. */
  complete(): Promise<ConversationOutcome>;
  /**
   * Stream mode: the stream itself failed (not the provider, which ends in an `error` chunk):
   * stores the exchange as failed unless it is stored already.
   */
  abandon(error: unknown): Promise<ConversationOutcome>;
  /** Settles after the conversation is persisted. */
  done: Promise<ConversationOutcome>;
}

/** `messageMetadata` of streamed replies: the chat on `start`; model and usage on `finish`. */
export interface ChatMessageMetadata {
  chatId: string;
  model?: string;
  usage?: TokenUsage;
}

interface Orchestration {
  agents: string[];
}

function parseJson<T>(text: string | null, fallback: T): T {
  if (!text) return fallback;
  try {
    return JSON.parse(text) as T;
  } catch {
    return fallback;
  }
}

function orchestrationOf(agent: AgentTable): string[] {
  const value = parseJson<Orchestration | null>(agent.orchestration, null);
  return Array.isArray(value?.agents) ? value.agents.filter((id) => typeof id === 'string') : [];
}

function mcpSpecsOf(agent: AgentTable): McpToolSpec[] {
  const tools = parseJson<unknown[]>(agent.tools, []);
  return (Array.isArray(tools) ? tools : []).filter(
    (t): t is McpToolSpec =>
      typeof t === 'object' &&
      t !== null &&
      (t as McpToolSpec).type === 'mcp' &&
      typeof (t as McpToolSpec).url === 'string',
  );
}

/** Provider failures → 502 `upstream_error`; a timeout → 504 `upstream_timeout`. */
export function upstreamFailure(error: unknown, timedOut: boolean, timeoutMs: number): ApiError {
  if (error instanceof ApiError) return error;
  if (timedOut) {
    return new ApiError(
      'upstream_timeout',
      `The model provider did not answer within ${timeoutMs} ms`,
      {},
      { cause: error },
    );
  }
  const last = RetryError.isInstance(error) ? error.lastError : error;
  if (APICallError.isInstance(last)) {
    const status = last.statusCode;
    if (status === undefined) {
      return new ApiError('upstream_error', 'The model provider could not be reached', {}, { cause: error });
    }
    // A body that breaks after a 200 (a dropped stream) is the provider failing, not its status.
    if (status >= 400) {
      return new ApiError(
        'upstream_error',
        `The model provider answered HTTP ${status}`,
        { providerStatus: status },
        { cause: error },
      );
    }
  }
  return new ApiError('upstream_error', 'The model provider failed', {}, { cause: error });
}

function userVariables(
  owner: { id: string; name: string; email: string } | undefined,
  given: UserVariables | undefined,
) {
  return {
    'user.id': given?.id ?? owner?.id ?? '',
    'user.name': given?.name ?? owner?.name ?? '',
    'user.email': given?.email ?? owner?.email ?? '',
  };
}

function rowOf(message: ConversationMessage, workspaceId: string, at: string) {
  return {
    id: message.id,
    workspace_id: workspaceId,
    role: message.role,
    parts: JSON.stringify(message.parts),
    model: null as string | null,
    input_tokens: 0,
    output_tokens: 0,
    cost_usd: 0,
    created_at: at,
  };
}

function replyText(message: UIMessage<ChatMessageMetadata> | undefined): string {
  return (message?.parts ?? []).map((part) => (part.type === 'text' ? part.text : '')).join('');
}

/**
 * Everything `POST /chat` and agent runs share, in the order of DESIGN.md: access → body rules →
 * agent → limits → chat → history → context → tools → model call. Throws an ApiError before
 * anything is persisted; once it returns, the returned stream carries the reply and persists
 * the exchange (user messages; the assistant message and usage when the model succeeded) in
 * one transaction when it ends, even if nobody reads the HTTP response any more.
 */
export async function startConversation(
  deps: ChatDeps,
  principal: Principal,
  request: ConversationRequest,
  extraWrites?: ExtraWrites,
): Promise<Conversation> {
  const { db } = deps;
  validateIncomingMessages(request.messages);
  // One query for the agent and its workspace; visibility as in accessAgentWorkspace: an agent
  // the key cannot act on is reported missing, so existence does not leak across tenants.
  const found = await findAgentWithWorkspace(db, request.agentId);
  const visible =
    found &&
    (!principal.agentIds || principal.agentIds.includes(found.agent.id)) &&
    (principal.workspaceId
      ? found.workspace.id === principal.workspaceId
      : found.workspace.organization_id === principal.organizationId);
  if (!found || !visible) throw errors.notFound('Agent');
  const { agent, workspace } = found;
  const orchestrated = orchestrationOf(agent);
  if (request.stream && orchestrated.length > 0) {
    throw errors.badRequest('An agent with multi-agent orchestration requires stream: false', [
      { path: 'body.stream', message: 'must be false for an orchestrating agent' },
    ]);
  }
  const startedAt = deps.clock();
  await assertWithinWorkspaceLimits(db, workspace, startedAt);

  let chat: ChatTable | undefined;
  if (request.chatId !== undefined) {
    chat = await findChat(db, workspace.id, request.chatId);
    if (!chat) throw errors.notFound('Chat');
    if (chat.agent_id !== agent.id) {
      throw errors.badRequest('This chat belongs to another agent', [
        { path: 'body.chatId', message: 'belongs to another agent' },
      ]);
    }
  }
  assertWithinChatSpendCap(workspace, chat);

  if (chat?.project_id && request.projectId !== undefined && request.projectId !== chat.project_id) {
    throw errors.badRequest('This chat belongs to another project', [
      { path: 'body.projectId', message: 'differs from the project of the chat' },
    ]);
  }
  const projectId = request.projectId ?? chat?.project_id ?? undefined;
  const project = projectId ? await findProject(db, workspace.id, projectId) : undefined;
  if (projectId && !project) throw errors.notFound('Project');

  const stored: ConversationMessage[] = chat
    ? (await listChatMessages(db, workspace.id, chat.id)).map((row) => ({
        id: row.id,
        role: row.role,
        parts: parseJson(row.parts, []),
      }))
    : [];
  const { conversation, added } = mergeHistory(stored, request.messages);

  const model: ResolvedModel = await deps.models.resolveForWorkspace(
    db,
    workspace,
    request.model ?? agent.model ?? undefined,
  );
  // The key owner is read only when a prompt can use it.
  const needsUser = orchestrated.length > 0 || agent.instructions.includes('{{');
  const owner = needsUser ? await findUser(db, principal.userId) : undefined;
  const values: Record<string, TemplateValue> = {
    ...request.variables,
    ...userVariables(owner, request.systemVariables?.user),
  };
  const system = buildSystemPrompt({
    agentInstructions: renderTemplate(agent.instructions, values),
    project: project
      ? {
          instructions: project.instructions,
          memory: project.memory,
          files: await projectFilesContext(db, project, deps.readObject),
        }
      : undefined,
  });
  const modelMessages = await convertToModelMessages(toModelUIMessages(conversation));

  const chatId = chat?.id ?? newId('cht');
  const messageId = newId('msg');
  const temperature = request.temperature ?? DEFAULT_TEMPERATURE;
  const timeoutMs = deps.config.upstreamTimeoutMs;
  const abort = new AbortController();
  let timedOut = false;
  let idleTimer: NodeJS.Timeout | undefined;
  let lastActivity = 0;
  // One timer per request, not one per chunk: when it fires, it re-arms for the idle time left.
  const checkIdle = () => {
    const idle = performance.now() - lastActivity;
    if (idle >= timeoutMs) {
      timedOut = true;
      abort.abort(new Error('upstream timeout'));
    } else {
      idleTimer = setTimeout(checkIdle, timeoutMs - idle);
    }
  };
  const armTimer = () => {
    lastActivity = performance.now();
    idleTimer ??= setTimeout(checkIdle, timeoutMs);
  };

  // Tools: MCP servers, `remember` in project chats, sub-agents of an orchestrating agent.
  const mcp = await connectMcpTools(
    mcpSpecsOf(agent),
    deps.mcpConnectTimeoutMs ?? DEFAULT_MCP_CONNECT_TIMEOUT_MS,
  );
  const warnings: ToolWarning[] = [...mcp.warnings];
  const tools: ToolSet = { ...mcp.tools };
  if (project) {
    tools[REMEMBER_TOOL] = rememberTool(async (note) => {
      await appendProjectMemory(db, workspace.id, project.id, note, deps.clock().toISOString());
    });
  }
  const subRuns: AgentRunTable[] = [];
  const subUsage: TokenUsage & { costUsd: number } = { inputTokens: 0, outputTokens: 0, costUsd: 0 };
  if (orchestrated.length > 0) {
    const subAgents: SubAgent[] = [];
    for (const id of orchestrated) {
      const sub = id === agent.id ? undefined : await findAgent(db, workspace.id, id);
      if (!sub) {
        warnings.push({
          tool: id,
          code: 'agent_unavailable',
          message: `Agent "${id}" does not exist in this workspace`,
        });
        continue;
      }
      subAgents.push({ id: sub.id, title: sub.title, description: sub.description });
    }
    Object.assign(
      tools,
      subAgentTools(subAgents, async (sub, message, abortSignal) => {
        const subAgent = await findAgent(db, workspace.id, sub.id);
        if (!subAgent) throw new Error(`Agent ${sub.id} is gone`);
        const subModel = await deps.models.resolveForWorkspace(db, workspace, subAgent.model ?? undefined);
        const began = deps.clock();
        const run: AgentRunTable = {
          id: newId('run'),
          workspace_id: workspace.id,
          agent_id: subAgent.id,
          chat_id: chatId,
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
        subRuns.push(run);
        try {
          const result = await generateText({
            model: subModel.model,
            system: buildSystemPrompt({ agentInstructions: renderTemplate(subAgent.instructions, values) }),
            prompt: message,
            temperature,
            maxRetries: 0,
            abortSignal,
          });
          run.response = result.text;
          run.input_tokens = result.totalUsage.inputTokens ?? 0;
          run.output_tokens = result.totalUsage.outputTokens ?? 0;
          run.cost_usd = costUsd(subModel.pricing, run.input_tokens, run.output_tokens);
          subUsage.inputTokens += run.input_tokens;
          subUsage.outputTokens += run.output_tokens;
          subUsage.costUsd += run.cost_usd;
          return result.text;
        } catch (error) {
          run.status = 'failed';
          run.error = upstreamFailure(error, false, timeoutMs).message;
          throw error;
        } finally {
          const ended = deps.clock();
          run.completed_at = ended.toISOString();
          run.execution_time_ms = Math.max(0, ended.getTime() - began.getTime());
        }
      }),
    );
  }
  const hasTools = Object.keys(tools).length > 0;

  const callSettings = {
    model: model.model,
    system,
    messages: modelMessages,
    // The API accepts system messages from the caller (decisions.md: role `system`).
    allowSystemInMessages: true,
    temperature,
    maxRetries: 0,
    abortSignal: abort.signal,
    ...(hasTools ? { tools, stopWhen: stepCountIs(MAX_STEPS) } : {}),
  };

  // The limits once more, now counting what requests in flight have reserved, and this
  // request's own reservation until its usage is stored.
  const reservation = await deps.usageReservations
    ?.admit({
      workspace,
      chatId: chat?.id,
      estimate: () => estimateRequestUsage(model.pricing, { system, messages: modelMessages }),
    })
    .catch(async (error: unknown) => {
      await mcp.close();
      throw error;
    });

  let settle!: (outcome: ConversationOutcome) => void;
  const done = new Promise<ConversationOutcome>((resolve) => {
    settle = resolve;
  });
  deps.inFlight?.add(done);
  done.finally(() => deps.inFlight?.delete(done));

  const success = (text: string, usage: TokenUsage | undefined): ConversationOutcome => ({
    ok: true,
    text,
    usage: {
      inputTokens: (usage?.inputTokens ?? 0) + subUsage.inputTokens,
      outputTokens: (usage?.outputTokens ?? 0) + subUsage.outputTokens,
    },
    costUsd: costUsd(model.pricing, usage?.inputTokens ?? 0, usage?.outputTokens ?? 0) + subUsage.costUsd,
  });

  /** One transaction: the chat (when new), the new messages, usage, sub-agent runs, extras. */
  let persisting: Promise<ConversationOutcome> | undefined;
  const persist = (result: ConversationOutcome, parts: unknown[]): Promise<ConversationOutcome> => {
    persisting ??= write(result, parts);
    return persisting;
  };
  const write = async (result: ConversationOutcome, parts: unknown[]): Promise<ConversationOutcome> => {
    clearTimeout(idleTimer);
    const finishedAt = deps.clock();
    const now = finishedAt.toISOString();
    let outcome = result;
    try {
      await withConflictRetry(Boolean(chat), (attempt) =>
        db.transaction().execute(async (trx) => {
          if (!chat) {
            await insertChat(trx, {
              id: chatId,
              workspace_id: workspace.id,
              agent_id: agent.id,
              project_id: project?.id ?? null,
              title: chatTitle(conversation),
              spend_usd: outcome.ok ? outcome.costUsd : 0,
              created_at: startedAt.toISOString(),
              updated_at: now,
            });
          }
          // An existing chat's row is locked first (the spend update), so concurrent turns on one
          // chat write one after the other; then what a concurrent turn already stored is skipped.
          if (chat) await addChatSpend(trx, chatId, outcome.ok ? outcome.costUsd : 0, now);
          const storedNow =
            chat || attempt > 0 ? await listChatMessageIds(trx, workspace.id, chatId) : undefined;
          const rows = added
            .filter((message) => !storedNow?.has(message.id))
            .map((message) => rowOf(message, workspace.id, startedAt.toISOString()));
          if (outcome.ok) {
            rows.push({
              id: messageId,
              workspace_id: workspace.id,
              role: 'assistant',
              parts: JSON.stringify(parts),
              model: model.id,
              input_tokens: outcome.usage.inputTokens,
              output_tokens: outcome.usage.outputTokens,
              cost_usd: outcome.costUsd,
              created_at: now,
            });
          }
          await appendMessages(trx, chatId, rows, chat ? undefined : 0);
          if (outcome.ok && (outcome.usage.inputTokens > 0 || outcome.usage.outputTokens > 0)) {
            await addMonthUsage(
              trx,
              workspace.id,
              ledgerMonth(finishedAt),
              { ...outcome.usage, costUsd: outcome.costUsd },
              now,
            );
          }
          for (const run of subRuns) await insertAgentRun(trx, run);
          await extraWrites?.(trx, outcome, finishedAt);
        }),
      );
    } catch (error) {
      outcome = { ok: false, error: errors.internal(error) };
    } finally {
      await mcp.close();
      // The usage is stored (or the request failed): its reservation stops counting.
      await reservation?.release();
    }
    settle(outcome);
    return outcome;
  };

  let started = false;
  const begin = () => {
    if (started) throw new Error('A conversation runs once');
    started = true;
    armTimer();
  };

  /** JSON mode: one non-streaming model call (per tool step), then persistence. */
  const complete = async (): Promise<ConversationOutcome> => {
    begin();
    try {
      const result = await generateText({ ...callSettings, onStepFinish: armTimer });
      if (timedOut) throw new Error('upstream timeout');
      return await persist(
        success(result.steps.map((step) => step.text).join(''), {
          inputTokens: result.totalUsage.inputTokens ?? 0,
          outputTokens: result.totalUsage.outputTokens ?? 0,
        }),
        replyParts(result.steps),
      );
    } catch (error) {
      return persist({ ok: false, error: upstreamFailure(error, timedOut, timeoutMs) }, []);
    }
  };

  /** Stream mode: the reply as UI message chunks; persistence runs when the stream ends. */
  const stream = (): ReadableStream<UIMessageChunk<ChatMessageMetadata>> => {
    begin();
    let failure: unknown;
    let usage: TokenUsage | undefined;
    const result = streamText({
      ...callSettings,
      onChunk: armTimer,
      onError: ({ error }) => {
        failure ??= error;
      },
    });
    const chunks = result.toUIMessageStream<UIMessage<ChatMessageMetadata>>({
      originalMessages: [],
      generateMessageId: () => messageId,
      sendReasoning: false,
      messageMetadata: ({ part }) => {
        if (part.type === 'start') return { chatId };
        if (part.type === 'finish') {
          usage = {
            inputTokens: part.totalUsage.inputTokens ?? 0,
            outputTokens: part.totalUsage.outputTokens ?? 0,
          };
          return {
            chatId,
            model: model.id,
            usage: {
              inputTokens: usage.inputTokens + subUsage.inputTokens,
              outputTokens: usage.outputTokens + subUsage.outputTokens,
            },
          };
        }
        return undefined;
      },
      onError: (error) => upstreamFailure(error, timedOut, timeoutMs).message,
      onFinish: async ({ responseMessage, isAborted }) => {
        if (failure !== undefined || isAborted || timedOut) {
          await persist({ ok: false, error: upstreamFailure(failure, timedOut || isAborted, timeoutMs) }, []);
        } else {
          await persist(success(replyText(responseMessage), usage), responseMessage.parts);
        }
      },
    });
    return warnings.length > 0 ? withWarningsChunk(chunks, warnings) : chunks;
  };

  const abandon = (error: unknown) =>
    persist({ ok: false, error: upstreamFailure(error, timedOut, timeoutMs) }, []);

  return { chatId, messageId, agent, model: model.id, warnings, stream, complete, abandon, done };
}

/** SQLite and PostgreSQL report a unique or primary key violation differently. */
function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}

/**
 * Two requests on one chat may both take the next message position; the loser's transaction
 * fails on the (chat_id, position) key and is run again, after the winner's messages.
 */
async function withConflictRetry(
  retryable: boolean,
  write: (attempt: number) => Promise<void>,
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await write(attempt);
      return;
    } catch (error) {
      if (!retryable || attempt >= 4 || !isUniqueViolation(error)) throw error;
    }
  }
}

type GeneratedStep = Awaited<ReturnType<typeof generateText>>['steps'][number];

/** The assistant message's UI parts from the steps of a generateText call (as a stream gives). */
function replyParts(steps: GeneratedStep[]): unknown[] {
  const parts: unknown[] = [];
  for (const step of steps) {
    parts.push({ type: 'step-start' });
    for (const part of step.content) {
      if (part.type === 'text' && part.text) parts.push({ type: 'text', text: part.text, state: 'done' });
      else if (part.type === 'tool-call') {
        const output = step.content.find((p) => p.type === 'tool-result' && p.toolCallId === part.toolCallId);
        const error = step.content.find((p) => p.type === 'tool-error' && p.toolCallId === part.toolCallId);
        parts.push({
          ...(part.dynamic
            ? { type: 'dynamic-tool', toolName: part.toolName }
            : { type: `tool-${part.toolName}` }),
          toolCallId: part.toolCallId,
          input: part.input,
          ...(error && error.type === 'tool-error'
            ? { state: 'output-error', errorText: String((error.error as Error)?.message ?? error.error) }
            : {
                state: 'output-available',
                output: output?.type === 'tool-result' ? output.output : undefined,
              }),
        });
      }
    }
  }
  return parts;
}

/**
 * A streamed reply carries tool set-up warnings as a transient `data-warnings` chunk right
 * after `start` (clients see it in `onData`; it is not part of the stored message).
 */
function withWarningsChunk(
  stream: ReadableStream<UIMessageChunk<ChatMessageMetadata>>,
  warnings: ToolWarning[],
): ReadableStream<UIMessageChunk<ChatMessageMetadata>> {
  let sent = false;
  return stream.pipeThrough(
    new TransformStream<UIMessageChunk<ChatMessageMetadata>, UIMessageChunk<ChatMessageMetadata>>({
      transform(chunk, controller) {
        controller.enqueue(chunk);
        if (!sent && chunk.type === 'start') {
          sent = true;
          controller.enqueue({ type: 'data-warnings', data: warnings, transient: true });
        }
      },
    }),
  );
}

/** Runs a conversation to its end in JSON mode: the reply, or the ApiError of the failure. */
export async function completeConversation(conversation: Conversation) {
  const outcome = await conversation.complete();
  if (!outcome.ok) throw outcome.error;
  return outcome;
}
