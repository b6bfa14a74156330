import { convertToModelMessages, type UIMessageChunk } from 'ai';
import type { Transaction } from 'kysely';
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import { findAgentWithWorkspace, findChat } from '../db/repositories/chats.js';
import { listChatMessages } from '../db/repositories/messages.js';
import { findProject } from '../db/repositories/projects.js';
import { findUser } from '../db/repositories/tenancy.js';
import type { AgentTable, ChatTable, Database, ProjectTable } from '../db/schema.js';
import { type ApiError, errors } from '../errors.js';
import { type Clock, newId } from '../ids.js';
import { buildSystemPrompt } from '../models/context.js';
import { costUsd, type ModelRegistry, type ResolvedModel } from '../models/registry.js';
import { renderTemplate, type TemplateValue } from '../models/template.js';
import type { ToolWarning } from '../models/tools/warnings.js';
import type { Principal } from './access.js';
import { type ObjectReader, projectFilesContext } from './chat-context.js';
import { IdleTimeout } from './chat-idle-timeout.js';
import {
  type ConversationMessage,
  chatTitle,
  type IncomingMessage,
  mergeHistory,
  toModelUIMessages,
  validateIncomingMessages,
} from './chat-messages.js';
import { persistExchange } from './chat-persist.js';
import { completeReply, type ReplyCall, type ReplyResult, streamReply } from './chat-reply.js';
import { buildConversationTools, type ConversationTools, orchestrationOf } from './chat-tools.js';
import { upstreamFailure } from './upstream-failure.js';
import { assertWithinChatSpendCap, assertWithinWorkspaceLimits } from './usage.js';

export { DEFAULT_MCP_CONNECT_TIMEOUT_MS } from './chat-tools.js';
export { upstreamFailure } from './upstream-failure.js';

export const DEFAULT_TEMPERATURE = 0.7;

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

type AgentWithWorkspace = NonNullable<Awaited<ReturnType<typeof findAgentWithWorkspace>>>;
type Workspace = AgentWithWorkspace['workspace'];

/**
 * `POST /chat` and agent runs, in the order of DESIGN.md: access → body rules → agent → limits →
 * chat → history → context → tools → model call. Throws an ApiError before anything is
 * persisted; once it returns, the reply (streamed or complete) persists the exchange in one
 * transaction when it ends, even if nobody reads the HTTP response any more.
 */
export async function startConversation(
  deps: ChatDeps,
  principal: Principal,
  request: ConversationRequest,
  extraWrites?: ExtraWrites,
): Promise<Conversation> {
  validateIncomingMessages(request.messages);
  const { agent, workspace, orchestrated } = await resolveAgent(deps.db, principal, request);
  const startedAt = deps.clock();
  await assertWithinWorkspaceLimits(deps.db, workspace, startedAt);
  const chat = await resolveChat(deps.db, workspace, agent, request);
  assertWithinChatSpendCap(workspace, chat);
  const project = await resolveProject(deps.db, workspace, chat, request);
  const { conversation, added } = await prepareConversation(deps.db, workspace, chat, request);

  const model = await deps.models.resolveForWorkspace(
    deps.db,
    workspace,
    request.model ?? agent.model ?? undefined,
  );
  const values = await templateValues(deps.db, principal, agent, orchestrated, request);
  const system = await buildSystem(deps, agent, project, values);
  const modelMessages = await convertToModelMessages(toModelUIMessages(conversation));

  const chatId = chat?.id ?? newId('cht');
  const messageId = newId('msg');
  const temperature = request.temperature ?? DEFAULT_TEMPERATURE;
  const tools = await buildConversationTools(deps, {
    agent,
    workspace,
    project,
    orchestrated,
    chatId,
    values,
    temperature,
  });
  const abort = new AbortController();
  const idle = new IdleTimeout(deps.config.upstreamTimeoutMs, () =>
    abort.abort(new Error('upstream timeout')),
  );
  const call: ReplyCall = {
    model: model.model,
    system,
    messages: modelMessages,
    temperature,
    tools: tools.tools,
    abortSignal: abort.signal,
    idle,
  };

  const finishing = exchangeFinisher(deps, {
    workspace,
    chat,
    newChat: {
      id: chatId,
      workspace_id: workspace.id,
      agent_id: agent.id,
      project_id: project?.id ?? null,
      title: chatTitle(conversation),
      spend_usd: 0,
      created_at: startedAt.toISOString(),
      updated_at: startedAt.toISOString(),
    },
    added,
    startedAt,
    messageId,
    model,
    tools,
    idle,
    extraWrites,
  });

  let started = false;
  const begin = () => {
    if (started) throw new Error('A conversation runs once');
    started = true;
  };
  return {
    chatId,
    messageId,
    agent,
    model: model.id,
    warnings: tools.warnings,
    done: finishing.done,
    async complete() {
      begin();
      return finishing.finish(await completeReply(call));
    },
    stream() {
      begin();
      return streamReply(call, {
        chatId,
        messageId,
        modelId: model.id,
        warnings: tools.warnings,
        extraUsage: tools.subUsage,
        onEnd: async (result) => {
          await finishing.finish(result);
        },
      });
    },
    abandon: (error) =>
      finishing.finish({ ok: false, error: upstreamFailure(error, idle.timedOut, idle.timeoutMs) }),
  };
}

/**
 * The agent and its workspace in one query; visibility as in accessAgentWorkspace: an agent the
 * key cannot act on is reported missing, so existence does not leak across tenants.
 */
async function resolveAgent(db: Db, principal: Principal, request: ConversationRequest) {
  const found = await findAgentWithWorkspace(db, request.agentId);
  const visible =
    found &&
    (principal.kind === 'workspace'
      ? found.workspace.id === principal.workspaceId
      : found.workspace.organization_id === principal.organizationId);
  if (!found || !visible) throw errors.notFound('Agent');
  const orchestrated = orchestrationOf(found.agent);
  if (request.stream && orchestrated.length > 0) {
    throw errors.badRequest('An agent with multi-agent orchestration requires stream: false', [
      { path: 'body.stream', message: 'must be false for an orchestrating agent' },
    ]);
  }
  return { ...found, orchestrated };
}

/** The chat the request continues (404 unknown, 400 of another agent), or undefined: a new one. */
async function resolveChat(
  db: Db,
  workspace: Workspace,
  agent: AgentTable,
  request: ConversationRequest,
): Promise<ChatTable | undefined> {
  if (request.chatId === undefined) return undefined;
  const chat = await findChat(db, workspace.id, request.chatId);
  if (!chat) throw errors.notFound('Chat');
  if (chat.agent_id !== agent.id) {
    throw errors.badRequest('This chat belongs to another agent', [
      { path: 'body.chatId', message: 'belongs to another agent' },
    ]);
  }
  return chat;
}

/** The project of the request or of the chat; a chat stays in its project. */
async function resolveProject(
  db: Db,
  workspace: Workspace,
  chat: ChatTable | undefined,
  request: ConversationRequest,
): Promise<ProjectTable | undefined> {
  if (chat?.project_id && request.projectId !== undefined && request.projectId !== chat.project_id) {
    throw errors.badRequest('This chat belongs to another project', [
      { path: 'body.projectId', message: 'differs from the project of the chat' },
    ]);
  }
  const projectId = request.projectId ?? chat?.project_id ?? undefined;
  if (!projectId) return undefined;
  const project = await findProject(db, workspace.id, projectId);
  if (!project) throw errors.notFound('Project');
  return project;
}

function parseParts(text: string): ConversationMessage['parts'] {
  try {
    const parts = JSON.parse(text) as unknown;
    return Array.isArray(parts) ? (parts as ConversationMessage['parts']) : [];
  } catch {
    return [];
  }
}

/** The stored history, then the request's messages not stored yet (decisions.md). */
async function prepareConversation(
  db: Db,
  workspace: Workspace,
  chat: ChatTable | undefined,
  request: ConversationRequest,
) {
  const stored: ConversationMessage[] = chat
    ? (await listChatMessages(db, workspace.id, chat.id)).map((row) => ({
        id: row.id,
        role: row.role,
        parts: parseParts(row.parts),
      }))
    : [];
  return mergeHistory(stored, request.messages);
}

/** `{{name}}` values: the request's variables and the acting user (else the key's owner). */
async function templateValues(
  db: Db,
  principal: Principal,
  agent: AgentTable,
  orchestrated: string[],
  request: ConversationRequest,
): Promise<Record<string, TemplateValue>> {
  // The key owner is read only when a prompt can use it.
  const needsUser = orchestrated.length > 0 || agent.instructions.includes('{{');
  const owner = needsUser ? await findUser(db, principal.userId) : undefined;
  const given = request.systemVariables?.user;
  return {
    ...request.variables,
    'user.id': given?.id ?? owner?.id ?? '',
    'user.name': given?.name ?? owner?.name ?? '',
    'user.email': given?.email ?? owner?.email ?? '',
  };
}

/** Agent instructions, then the project's instructions, memory and files. */
async function buildSystem(
  deps: ChatDeps,
  agent: AgentTable,
  project: ProjectTable | undefined,
  values: Record<string, TemplateValue>,
): Promise<string | undefined> {
  return buildSystemPrompt({
    agentInstructions: renderTemplate(agent.instructions, values),
    project: project
      ? {
          instructions: project.instructions,
          memory: project.memory,
          files: await projectFilesContext(deps.db, project, deps.readObject),
        }
      : undefined,
  });
}

interface FinisherInput {
  workspace: Workspace;
  chat: ChatTable | undefined;
  newChat: ChatTable;
  added: ConversationMessage[];
  startedAt: Date;
  messageId: string;
  model: ResolvedModel;
  tools: ConversationTools;
  idle: IdleTimeout;
  extraWrites: ExtraWrites | undefined;
}

/**
 * Stores the exchange once the reply has ended (first call wins), closes the tools, and settles
 * `done`. A store failure becomes the outcome (500), so the caller and the log see it.
 */
function exchangeFinisher(deps: ChatDeps, input: FinisherInput) {
  let settle!: (outcome: ConversationOutcome) => void;
  const done = new Promise<ConversationOutcome>((resolve) => {
    settle = resolve;
  });
  deps.inFlight?.add(done);
  void done.finally(() => deps.inFlight?.delete(done));

  const write = async (result: ReplyResult): Promise<ConversationOutcome> => {
    input.idle.clear();
    const { subUsage, subRuns } = input.tools;
    let outcome: ConversationOutcome = result.ok
      ? {
          ok: true,
          text: result.text,
          usage: {
            inputTokens: result.usage.inputTokens + subUsage.inputTokens,
            outputTokens: result.usage.outputTokens + subUsage.outputTokens,
          },
          costUsd:
            costUsd(input.model.pricing, result.usage.inputTokens, result.usage.outputTokens) +
            subUsage.costUsd,
        }
      : result;
    const finishedAt = deps.clock();
    try {
      const settled = outcome;
      await persistExchange(deps.db, {
        workspaceId: input.workspace.id,
        chat: input.chat,
        newChat: input.newChat,
        added: input.added,
        startedAt: input.startedAt,
        finishedAt,
        reply:
          settled.ok && result.ok
            ? {
                id: input.messageId,
                parts: result.parts,
                model: input.model.id,
                inputTokens: settled.usage.inputTokens,
                outputTokens: settled.usage.outputTokens,
                costUsd: settled.costUsd,
              }
            : undefined,
        subRuns,
        extraWrites: input.extraWrites ? (trx) => input.extraWrites!(trx, settled, finishedAt) : undefined,
      });
    } catch (error) {
      outcome = { ok: false, error: errors.internal(error) };
    } finally {
      await input.tools.close();
    }
    settle(outcome);
    return outcome;
  };

  let finishing: Promise<ConversationOutcome> | undefined;
  return {
    done,
    finish(result: ReplyResult): Promise<ConversationOutcome> {
      finishing ??= write(result);
      return finishing;
    },
  };
}

/** Runs a conversation to its end in JSON mode: the reply, or the ApiError of the failure. */
export async function completeConversation(conversation: Conversation) {
  const outcome = await conversation.complete();
  if (!outcome.ok) throw outcome.error;
  return outcome;
}
