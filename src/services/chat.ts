import { cpuTurn } from './cpu-turns.js';
import { convertToModelMessages, type ModelMessage, type ToolSet, type UIMessageChunk } from 'ai';
import {
  type FileDownloader,
  type PrefetchedFiles,
  prefetchFiles,
  withUnavailableAsNotes,
} from './file-downloads.js';
import type { Transaction } from 'kysely';
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import { findAgentWithWorkspace } from '../db/repositories/agents.js';
import { findChat } from '../db/repositories/chats.js';
import { findWorkspaceWithRole } from '../db/repositories/tenancy.js';
import { listChatMessagesWithParts } from '../db/repositories/messages.js';
import { findProject } from '../db/repositories/projects.js';
import { findUserCached } from '../db/repositories/tenancy.js';
import type { AgentTable, ChatTable, Database, ProjectTable } from '../db/schema.js';
import { ApiError, errors } from '../errors.js';
import { isDependencyUnavailable } from '../network-errors.js';
import { type Clock, newId } from '../ids.js';
import { buildSystemPrompt } from '../models/context.js';
import { costUsd, type ModelRegistry, type ResolvedModel } from '../models/registry.js';
import { renderTemplate, type TemplateValue } from '../models/template.js';
import type { ToolWarning } from '../models/tools/warnings.js';
import type { LateAnswerWaits } from '../models/tools/mcp-fetch.js';
import { sourceDocumentParts } from '../knowledge/citations.js';
import type { TurnSource } from '../knowledge/retrieval.js';
import { accessWorkspaceIfAllowed, isManager, type Principal } from './access.js';
import { type ProjectTurn, projectTurn } from './chat-context.js';
import { IdleTimeout } from './chat-idle-timeout.js';
import {
  type ConversationMessage,
  chatTitle,
  dropLeftovers,
  type IncomingMessage,
  MODEL_PART_TYPES,
  mergeHistory,
  nothingForTheModel,
  toModelUIMessages,
  validateIncomingMessages,
} from './chat-messages.js';
import { isUniqueViolation, storeReply, storeTurn } from './chat-persist.js';
import {
  type CallOptions,
  completeReply,
  type ReplyCall,
  type ReplyResult,
  type StoredReply,
  streamReply,
} from './chat-reply.js';
import { canSeeChat, type ChatViewer, chatViewer } from './chat-visibility.js';
import type { ReplyTicket, RunningReplies, StopReason } from './running-replies.js';
import { buildConversationTools, type ConversationTools, mcpSpecsOf, orchestrationOf } from './chat-tools.js';
import { upstreamFailure } from './upstream-failure.js';
import type { ChunkSink } from '../http/ui-message-sse.js';
import { assertWithinChatSpendCap, assertWithinWorkspaceLimits } from './usage.js';
import { estimateRequestUsage, type Reservation, type UsageReservations } from './usage-reservations.js';
import { ReplyUsage } from './reply-usage.js';
import { clientToolOffer } from './client-tool-offer.js';

export const DEFAULT_TEMPERATURE = 0.7;

export interface ChatDeps {
  db: Db;
  clock: Clock;
  config: Pick<Config, 'upstreamTimeoutMs' | 'mcpAllowPrivateNetwork'>;
  models: ModelRegistry;
  mcpConnectTimeoutMs?: number;
  /** The replies being generated: concurrency limit, stop, resume, shutdown. */
  replies: RunningReplies;
  /** Admits model requests against usage reserved by requests in flight (every process). */
  usageReservations?: UsageReservations;
  /** How file parts' URLs are fetched for models that cannot read them (tests give their own). */
  fileDownloader?: FileDownloader;
  /** The late MCP `initialize` answers the process waits for (chat-tools.ts); no limit when not given. */
  lateMcpInitializeWaits?: LateAnswerWaits;
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
  /** The client's own chat id (`useChat`'s `id`): continues that chat, or names a new one. */
  clientChatId?: string;
  /**
   * Set when `clientChatId` comes from a conversation key (/v1/openai): only a chat of the caller's
   * own is continued. Without a chat of `clientChatId`, the caller's chat of
   * `formerClientChatId` (the key's client id before it named its user) is continued.
   */
  conversationKey?: { formerClientChatId: string };
  /** Stream mode whose stream is shared for resuming (`Conversation.resumable`; `/v1/chat`). */
  resumable?: boolean;
  /** `regenerate-message` replaces `regenerateMessageId` (else the last assistant message). */
  trigger?: 'submit-message' | 'regenerate-message';
  regenerateMessageId?: string;
  /**
   * `submit-message` with a `messageId` (`useChat`'s edit, `sendMessage({ text, messageId })`): a
   * stored user message of that id, and every message after it, are replaced by the request's
   * message of that id, stored as the user's turn.
   */
  editMessageId?: string;
  projectId?: string;
  stream?: boolean;
  temperature?: number;
  model?: string;
  variables?: Record<string, TemplateValue>;
  systemVariables?: { user?: UserVariables };
  /**
   * Doors other than `/chat` (the OpenAI-compatible one) set these. `store: false` answers and
   * counts usage but stores no chat and no message.
   */
  store?: boolean;
  /**
   * Given the stored messages of the named chat: the request's messages to store, and the stored
   * messages the client's conversation no longer holds (removed as the turn is stored); or
   * undefined to store nothing.
   */
  reconcileHistory?: (
    stored: ConversationMessage[],
  ) => { added: IncomingMessage[]; dropped: string[] } | undefined;
  /** What the model sees instead of the converted conversation (the client resends it whole). */
  modelMessages?: ModelMessage[];
  /** Tools the client runs itself (no `execute`): a call ends the reply with the call. */
  clientTools?: ToolSet;
  callOptions?: CallOptions;
}

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
}

/**
 * How a conversation ended. `usage` and `costUsd` are what it spent, sub-agents included, and
 * what was charged: a failed reply too is charged for its steps (reply-usage.ts) and sub-agent runs.
 */
export type ConversationOutcome =
  | { ok: true; text: string; usage: TokenUsage; costUsd: number; finishReason: string; parts: unknown[] }
  | {
      ok: false;
      error: ApiError;
      usage: TokenUsage;
      costUsd: number;
      /** Storing the exchange itself failed: nothing of it (no run record either) was written. */
      unstored?: true;
    };

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
  /** The passages of project files the model was given, as the reply cites them (`[n]`). */
  sources: TurnSource[];
  /** Whether the exchange is stored (false with `store: false` or a diverged history). */
  stored: boolean;
  /**
   * Stream mode: starts the model call and pushes the reply's UI message chunks to `sink` as
   * they come, to the end (persistence runs at its end). A conversation runs once: stream or
   * complete.
   */
  stream(sink: ChunkSink<UIMessageChunk<ChatMessageMetadata>>): void;
  /** JSON mode: runs the model call to its end and persists the exchange. */
  complete(): Promise<ConversationOutcome>;
  /**
   * Stream mode: the stream itself failed (not the provider, which ends in an `error` chunk):
   * stores the exchange as failed unless it is stored already.
   */
  abandon(error: unknown): Promise<ConversationOutcome>;
  /** Settles after the conversation is persisted. */
  done: Promise<ConversationOutcome>;
  /** Stream mode: the reply's event-stream text, kept for resuming while it runs. */
  resumable(sse: ReadableStream<string>): Promise<void>;
  /**
   * Stops the reply as `POST /chat/{chatId}/stop` does: the provider call is aborted, the text
   * so far is stored as `stopped`, what it used is charged (the step cut short estimated). No-op
   * once it ended.
   */
  stop(): void;
}

/** `messageMetadata` of streamed replies: the chat on `start`; model and usage on `finish`. */
export interface ChatMessageMetadata {
  chatId: string;
  model?: string;
  usage?: TokenUsage;
  finishReason?: string;
}

type AgentWithWorkspace = NonNullable<Awaited<ReturnType<typeof findAgentWithWorkspace>>>;
type Workspace = AgentWithWorkspace['workspace'];

/**
 * `POST /chat` and agent runs, in the order of DESIGN.md: access → body rules → agent → limits →
 * chat → history → context → admission → the user's turn stored → tools → model call. Every
 * refusal is thrown before anything is stored; once the turn is stored the chat id is usable
 * (read, stop, resume, continue), and the reply (streamed or complete) stores itself when it
 * ends, even if nobody reads the HTTP response any more.
 */
export async function startConversation(
  deps: ChatDeps,
  principal: Principal,
  request: ConversationRequest,
  extraWrites?: ExtraWrites,
): Promise<Conversation> {
  await cpuTurn();
  validateIncomingMessages(request.messages);
  const incoming = dropLeftovers(request.messages);
  const { agent, workspace, orchestrated } = await resolveAgent(deps.db, principal, request);
  const startedAt = deps.clock();
  await assertWithinWorkspaceLimits(deps.db, workspace, startedAt);
  const viewer = await viewerIn(deps.db, principal, workspace.id);
  let chat = await resolveChat(deps.db, workspace, agent, viewer, request);
  assertWithinChatSpendCap(workspace, chat);
  const project = await resolveProject(deps.db, workspace, chat, request);
  // A regenerate while a reply of the chat runs: that reply is not stored yet, so its user turn
  // would look unanswered and get a second answer beside it (or, without an id, the answer
  // before it would be replaced). The client stops the reply first.
  // An edit likewise: the running reply would be stored after the edited message, as its answer.
  const rewrites = request.trigger === 'regenerate-message' || request.editMessageId !== undefined;
  const doing = request.trigger === 'regenerate-message' ? 'regenerating' : 'editing a message';
  const rewriteRefusal = `A reply is being generated in this chat: stop it before ${doing}`;
  if (rewrites && chat && (await deps.replies.runningMessageId(chat.id))) {
    throw errors.conflict(rewriteRefusal, { chatId: chat.id });
  }
  let prepared = await prepareConversation(deps.db, workspace, chat, request, incoming);
  const storing = request.store !== false && prepared.storable;

  const model = await deps.models.resolveForWorkspace(
    deps.db,
    workspace,
    request.model ?? agent.model ?? undefined,
    principal.dataVersion,
  );
  const values = await templateValues(deps.db, principal, agent, orchestrated, request);
  let turn = project ? await projectTurn(deps.db, project, prepared.conversation) : undefined;
  let system = buildSystem(agent, turn, values);

  // An unstored exchange gets an id no chat has, so its reply only counts usage; on a chat the
  // request names (a diverged /v1/openai conversation), its cost still goes to that chat's spend
  // and is reserved against its cap.
  let chatId = (storing ? chat?.id : undefined) ?? newId('cht');
  const spendChatId = storing ? undefined : chat?.id;
  const messageId = newId('msg');
  let stopReason: StopReason | undefined;
  // Also the set-up's: a stop while it runs gives up its file downloads and MCP connects at
  // once (the stop answers once the turn is stored, so it would wait for them), and the turn
  // goes on as one stopped right after its set-up (its call, the signal aborted, sends nothing).
  const abort = new AbortController();
  const stopReply = (reason: StopReason) => {
    stopReason ??= reason;
    abort.abort(new Error(`reply ${reason}`));
  };
  // Started by the model call; made now for the MCP tools to pause it while a call runs.
  const idle = new IdleTimeout(deps.config.upstreamTimeoutMs, () =>
    abort.abort(new Error('upstream timeout')),
  );
  // A door that reconciles the client's conversation with the stored one (/v1/openai) answers a
  // named chat one request at a time: a reply still running is not stored yet, so a request
  // beside it (a retry of one still running) would be reconciled against a history without it,
  // and the same turn answered and stored twice (docs/openai.md, "A client that leaves").
  // A regenerate or an edit likewise claims the chat (the look above is only the early answer):
  // two of them sent to two processes at once both found no reply running, and each stored its
  // answer to the same turn, side by side.
  const resumable = request.resumable === true;
  const ticket =
    storing && chat && request.reconcileHistory
      ? await deps.replies.admitAlone(chatId, messageId, stopReply, { resumable })
      : storing && chat && rewrites
        ? await deps.replies.admitAlone(chatId, messageId, stopReply, { resumable, refusal: rewriteRefusal })
        : deps.replies.admit(chatId, messageId, stopReply, { resumable });
  // The limits once more, now counting what requests in flight have reserved, and this
  // request's own reservation until its usage is stored. Before the user's turn is stored: a
  // request refused here (402) stores nothing, like every other refusal.
  let reservation: Reservation | undefined;
  let messages: ModelMessage[];
  let files: PrefetchedFiles;
  try {
    // Files the model cannot read from their URL, fetched now: one of this request's that cannot
    // be is a 400 with nothing stored (file-downloads.ts).
    files = await prefetchFiles({
      model: model.model,
      conversation: prepared.conversation,
      added: prepared.added,
      timeoutMs: deps.config.upstreamTimeoutMs,
      downloader: deps.fileDownloader,
      stop: abort.signal,
    });
    // The model's messages: storing the turn keeps `prepared` as it is.
    messages = request.modelMessages
      ? withUnavailableAsNotes(request.modelMessages, files.unavailable)
      : await convertToModelMessages(toModelUIMessages(prepared.conversation, files.unavailable));
    // The AI SDK refuses an empty prompt without calling the provider: the client's mistake.
    if (messages.length === 0) throw nothingForTheModel(request.messages);
    const estimated = messages;
    reservation = await deps.usageReservations?.admit({
      workspace,
      chatId: spendChatId ?? chatId,
      estimate: () => estimateRequestUsage(model.pricing, { system, messages: estimated }),
    });
  } catch (error) {
    ticket.release();
    throw error;
  }
  // The tools before the user's turn is stored: a client tool named like one of the agent's
  // (known only once its MCP servers answer) is refused with nothing stored.
  let tools: ConversationTools | undefined;
  let callOptions = request.callOptions;
  try {
    await cpuTurn();
    tools = await buildConversationTools(deps, {
      agent,
      workspace,
      project,
      orchestrated,
      chatId,
      userId: principal.userId,
      values,
      temperature: request.temperature ?? DEFAULT_TEMPERATURE,
      idle,
      stopReason: () => stopReason,
      abortSignal: abort.signal,
    });
    // A chat deleted while the turn was set up: the delete's stop ended the set-up at once, maybe
    // before the chat's row is gone, and the turn must not be stored into it meanwhile (nor its
    // history read again with it). Refused as a turn that finds its chat gone is, nothing stored.
    if (stopReason === 'deleted') throw errors.notFound('Chat');
    const offer = clientToolOffer(tools.tools, request.clientTools, request.callOptions);
    if (offer.clientTools) addClientTools(tools, offer.clientTools);
    callOptions = offer.options;
    // Connecting MCP servers may take seconds: a turn stored on this chat meanwhile (another
    // request's, replied to already) is history this reply must see, not the snapshot above.
    // A regenerate or an edit, too: one sent beside it (to another process) may have stored its
    // reply between the read above and this turn's claim of the chat, and replacing what was read
    // then would leave both answers side by side.
    if (chat && !request.modelMessages && (rewrites || mcpSpecsOf(agent).length > 0)) {
      const fresh = await prepareConversation(deps.db, workspace, chat, request, incoming);
      if (fresh.storable === prepared.storable && !sameIds(fresh.conversation, prepared.conversation)) {
        prepared = fresh;
        turn = project ? await projectTurn(deps.db, project, prepared.conversation) : undefined;
        system = buildSystem(agent, turn, values);
        messages = await convertToModelMessages(toModelUIMessages(prepared.conversation, files.unavailable));
      }
    }
  } catch (error) {
    ticket.release();
    await reservation?.release();
    // The agent's MCP clients are open once the tools are built: a later refusal (a client tool
    // named like an agent's, the history read again naming no message to regenerate) closes
    // them, or their connections and the servers' sessions would stay open.
    await tools?.close();
    throw error;
  }
  try {
    const stored = !storing
      ? undefined
      : await storeUserTurn(deps, {
          workspace,
          agent,
          project,
          viewer,
          principal,
          request,
          chat,
          chatId,
          prepared,
          startedAt,
        });
    if (stored && stored.chat.id !== chatId) {
      // Another request created the chat of this client id first: continue that one.
      ticket.release();
      await reservation?.release();
      await tools.close();
      return startConversation(
        deps,
        principal,
        { ...request, clientChatId: undefined, chatId: stored.chat.id },
        extraWrites,
      );
    }
    if (stored) {
      chat = stored.chat;
      prepared = stored.prepared;
      chatId = chat.id;
    }
  } catch (error) {
    ticket.release();
    await reservation?.release();
    await tools.close();
    throw error;
  }
  const call: ReplyCall = {
    model: model.model,
    system,
    messages,
    temperature: request.temperature ?? DEFAULT_TEMPERATURE,
    options: callOptions,
    tools: tools.tools,
    abortSignal: abort.signal,
    abort: () => abort.abort(new Error('reply failed')),
    idle,
    stopReason: () => stopReason,
    usage: new ReplyUsage(),
    download: files.download,
  };
  const sources = turn?.sources ?? [];
  const leading = leadingParts(sources, tools.warnings);
  const finishing = replyFinisher(deps, {
    leading,
    workspaceId: workspace.id,
    agentId: agent.id,
    chatId,
    spendChatId,
    messageId,
    model,
    tools,
    idle,
    usage: call.usage,
    ticket,
    reservation,
    replaces: prepared.replaces,
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
    sources,
    stored: storing,
    done: finishing.done,
    async complete() {
      begin();
      return finishing.finish(await completeReply(call));
    },
    stream(sink) {
      begin();
      streamReply(
        call,
        {
          chatId,
          messageId,
          modelId: model.id,
          leading,
          extraUsage: tools.subUsage,
          onEnd: finishing.store,
        },
        sink,
      );
    },
    resumable: (sse) => ticket.share(sse),
    stop: () => stopReply('stopped'),
    abandon: (error) =>
      finishing.finish({ ok: false, error: upstreamFailure(error, idle.timedOut, idle.timeoutMs) }),
  };
}

/** Client-declared tools next to the agent's; a name both use is refused (the caller closes the tools). */
function addClientTools(tools: ConversationTools, clientTools: ToolSet): void {
  const taken = Object.keys(clientTools).filter((name) => Object.hasOwn(tools.tools, name));
  if (taken.length > 0) {
    throw errors.badRequest(`A client tool is named like one of the agent's tools: ${taken.join(', ')}`, [
      { path: 'body.tools', message: `${taken.join(', ')} collides with an agent tool` },
    ]);
  }
  // Copied as own properties (never through a `__proto__` setter): client tools may have any name.
  tools.tools = Object.assign(Object.create(null) as ToolSet, tools.tools, clientTools);
}

/** The caller's rights over the workspace's chats (by its user's role there). */
async function viewerIn(db: Db, principal: Principal, workspaceId: string): Promise<ChatViewer> {
  const role =
    principal.ownWorkspace?.workspaceId === workspaceId
      ? principal.ownWorkspace.role
      : ((await findWorkspaceWithRole(db, workspaceId, principal.userId))?.role ?? null);
  return chatViewer(principal.userId, role, principal.agentIds);
}

interface TurnInput {
  workspace: Workspace;
  agent: AgentTable;
  project: ProjectTable | undefined;
  viewer: ChatViewer;
  principal: Principal;
  request: ConversationRequest;
  chat: ChatTable | undefined;
  chatId: string;
  prepared: PreparedConversation;
  startedAt: Date;
}

/**
 * Stores the chat (when new) and the user's turn before the model is called. When a concurrent
 * request created the chat of the same client id first, answers that chat instead.
 */
async function storeUserTurn(deps: ChatDeps, input: TurnInput) {
  const { workspace, request } = input;
  const at = input.startedAt.toISOString();
  const newChat: ChatTable | undefined = input.chat
    ? undefined
    : {
        id: input.chatId,
        workspace_id: workspace.id,
        agent_id: input.agent.id,
        project_id: input.project?.id ?? null,
        title: chatTitle(input.prepared.conversation),
        spend_usd: 0,
        client_id: request.clientChatId ?? null,
        created_by: input.principal.userId,
        end_user: request.systemVariables?.user?.id ?? null,
        message_count: 0,
        last_message_at: null,
        created_at: at,
        updated_at: at,
      };
  try {
    await storeTurn(deps.db, {
      workspaceId: workspace.id,
      newChat,
      chatId: input.chatId,
      added: input.prepared.added,
      removes: input.prepared.removes,
      at: input.startedAt,
    });
  } catch (error) {
    if (!newChat?.client_id || !isUniqueViolation(error)) throw error;
    const winner = await findChat(deps.db, workspace.id, newChat.client_id);
    if (!winner) throw error;
    return { chat: winner, prepared: input.prepared };
  }
  return { chat: input.chat ?? (newChat as ChatTable), prepared: input.prepared };
}

/**
 * The agent and its workspace in one query; visibility as in accessAgentWorkspace: an agent the
 * key cannot act on is reported missing, so existence does not leak across tenants.
 */
async function resolveAgent(db: Db, principal: Principal, request: ConversationRequest) {
  const found = await findAgentWithWorkspace(db, request.agentId, principal.dataVersion);
  const visible =
    found &&
    (!principal.agentIds || principal.agentIds.includes(found.agent.id)) &&
    (principal.workspaceId
      ? found.workspace.id === principal.workspaceId
      : found.workspace.organization_id === principal.organizationId);
  if (!found || !visible) throw errors.notFound('Agent');
  // An organization key acting in the agent's workspace: that workspace's rate limit holds too.
  await principal.countIn?.(found.workspace.id, found.workspace.rate_limit_per_minute);
  // A private agent is the owners' and admins' only: a member (or a session token) that cannot
  // see it in the list or by id cannot talk to it either.
  if (found.agent.visibility === 'private') {
    const access = await accessWorkspaceIfAllowed(db, principal, found.workspace.id);
    if (!access || !isManager(access)) throw errors.notFound('Agent');
  }
  const orchestrated = orchestrationOf(found.agent);
  if (request.stream && orchestrated.length > 0) {
    throw errors.badRequest('An agent with multi-agent orchestration requires stream: false', [
      { path: 'body.stream', message: 'must be false for an orchestrating agent' },
    ]);
  }
  return { ...found, orchestrated };
}

/** The id a client may name a chat by (`useChat`'s generated ids fit it). */
const CLIENT_ID = /^[A-Za-z0-9_-]{1,128}$/;

/**
 * The client ids /v1/openai derives from conversation keys begin with this. A /v1/chat client
 * may name an existing chat by such an id but not create one: a chat holding the id another
 * user's key derives would answer that user's requests with 404 for good.
 */
export const CONVERSATION_CLIENT_ID_PREFIX = 'oak_';

/**
 * The chat the request continues, or undefined: a new one. `chatId` names a chat by its id or
 * client id; without it, the body's `id` (the client's chat id) continues the chat it names, else
 * becomes the new chat's client id. A chat the key cannot see is 404, one of another agent 400.
 */
async function resolveChat(
  db: Db,
  workspace: Workspace,
  agent: AgentTable,
  viewer: ChatViewer,
  request: ConversationRequest,
): Promise<ChatTable | undefined> {
  const named = request.chatId ?? request.clientChatId;
  if (named === undefined) return undefined;
  if (request.chatId === undefined && !CLIENT_ID.test(named)) {
    throw errors.badRequest('body.id must be 1–128 characters of A–Z a–z 0–9 _ -', [
      { path: 'body.id', message: 'must be 1–128 characters of A–Z a–z 0–9 _ -' },
    ]);
  }
  const chat = await findChat(db, workspace.id, named);
  if (!chat) {
    if (request.chatId !== undefined) throw errors.notFound('Chat');
    if (request.conversationKey) {
      return formerKeyedChat(db, workspace, agent, viewer, request.conversationKey);
    }
    if (named.startsWith(CONVERSATION_CLIENT_ID_PREFIX)) {
      const message = `must not begin with ${CONVERSATION_CLIENT_ID_PREFIX} for a new chat (reserved for the conversation keys of /v1/openai)`;
      throw errors.badRequest(`body.id ${message}`, [{ path: 'body.id', message }]);
    }
    return undefined;
  }
  // A conversation key only ever names the caller's own chat, even for an admin (its client id
  // hashes the user in; another user's chat holds it only if a /v1/chat client chose that `id`,
  // which it can no longer do for a new chat).
  const own = !request.conversationKey || chat.created_by === viewer.userId;
  if (!canSeeChat(viewer, chat) || !own) throw errors.notFound('Chat');
  if (chat.agent_id !== agent.id) {
    const path = request.chatId !== undefined ? 'body.chatId' : 'body.id';
    throw errors.badRequest('This chat belongs to another agent', [
      { path, message: 'belongs to another agent' },
    ]);
  }
  return chat;
}

/**
 * The chat a conversation key named before its client id included the user (agent and key
 * only), when it is the caller's own: kept after the upgrade. Another user's is ignored, and the
 * caller gets a chat of their own.
 */
async function formerKeyedChat(
  db: Db,
  workspace: Workspace,
  agent: AgentTable,
  viewer: ChatViewer,
  key: NonNullable<ConversationRequest['conversationKey']>,
): Promise<ChatTable | undefined> {
  const chat = await findChat(db, workspace.id, key.formerClientChatId);
  return chat && chat.created_by === viewer.userId && chat.agent_id === agent.id ? chat : undefined;
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

interface PreparedConversation {
  /** What the model sees. */
  conversation: ConversationMessage[];
  /** The request's messages to store. */
  added: ConversationMessage[];
  /** Stored messages the reply replaces (regenerate). */
  replaces: string[];
  /** Stored messages the user's turn replaces (an edit), removed as it is stored. */
  removes: string[];
  /** False when `reconcileHistory` refused the stored history: nothing is stored. */
  storable: boolean;
}

/**
 * The stored history, then the request's messages not stored yet (decisions.md). To regenerate,
 * the history ends before the message to replace (`messageId`, else the last assistant
 * message), and that message and the ones after it are replaced by the new reply; in a chat
 * whose last reply was never stored, nothing is replaced (docs/chat.md, "Regenerate").
 */
async function prepareConversation(
  db: Db,
  workspace: Workspace,
  chat: ChatTable | undefined,
  request: ConversationRequest,
  incoming: IncomingMessage[],
): Promise<PreparedConversation> {
  // Only the parts the model is given: a chat's other stored parts (up to 16 MB a message) are
  // left in the database, so a turn's memory does not grow with them.
  const stored: ConversationMessage[] = chat
    ? (await listChatMessagesWithParts(db, workspace.id, chat.id, MODEL_PART_TYPES)).map((row) => ({
        id: row.id,
        role: row.role,
        parts: parseParts(row.parts),
        finishReason: row.finish_reason,
      }))
    : [];
  let history = stored;
  let replaces: string[] = [];
  if (request.trigger === 'regenerate-message') {
    const named = request.regenerateMessageId;
    // The chat's last reply was never stored (it failed, or was stopped, before its first token),
    // while the client holds it under the id of its `start` chunk: regenerating it, by that id or
    // by none (`regenerate()` on the client's last message), answers the last user turn anew.
    const unanswered = stored.at(-1)?.role === 'user';
    const namedAt = named === undefined ? -1 : stored.findIndex((m) => m.id === named);
    // A named user message (useChat's `regenerate({ messageId })` on it): the client keeps it and
    // asks for a new answer to it, so what follows it is replaced and the model sees it last.
    const target =
      named !== undefined
        ? namedAt >= 0 && stored[namedAt]!.role === 'user'
          ? namedAt + 1
          : namedAt
        : unanswered
          ? -1
          : stored.findLastIndex((m) => m.role === 'assistant');
    if (named !== undefined && namedAt < 0 && !unanswered) throw errors.notFound('Message');
    if (target >= 0) {
      history = stored.slice(0, target);
      replaces = stored.slice(target).map((message) => message.id);
    }
  }
  let kept = new Set(stored.map((message) => message.id));
  let removes: string[] = [];
  const edited = request.editMessageId;
  // An edit names a stored user message the request carries anew; any other id is a new turn's.
  const target =
    edited === undefined || !incoming.some((message) => message.id === edited)
      ? -1
      : stored.findIndex((message) => message.id === edited && message.role === 'user');
  if (target >= 0) {
    history = stored.slice(0, target);
    removes = stored.slice(target).map((message) => message.id);
    // The edited message comes from the request; the messages after it are gone, also when resent.
    kept = new Set([...kept].filter((id) => id !== edited));
  }
  const reconciled =
    chat && request.reconcileHistory ? request.reconcileHistory(stored) : { added: incoming, dropped: [] };
  if (reconciled && reconciled.dropped.length > 0) {
    const dropped = new Set(reconciled.dropped);
    history = history.filter((message) => !dropped.has(message.id));
    removes = [...removes, ...reconciled.dropped];
  }
  const { conversation, added } = mergeHistory(history, reconciled?.added ?? incoming, kept);
  return { conversation, added, replaces, removes, storable: reconciled !== undefined };
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
  const owner = needsUser ? await findUserCached(db, principal.userId, principal.dataVersion) : undefined;
  const given = request.systemVariables?.user;
  return {
    ...request.variables,
    'user.id': given?.id ?? owner?.id ?? '',
    'user.name': given?.name ?? owner?.name ?? '',
    'user.email': given?.email ?? owner?.email ?? '',
  };
}

/** Agent instructions, then the project's instructions, memory, files and excerpts. */
function buildSystem(
  agent: AgentTable,
  turn: ProjectTurn | undefined,
  values: Record<string, TemplateValue>,
): string | undefined {
  return buildSystemPrompt({
    agentInstructions: renderTemplate(agent.instructions, values),
    project: turn?.context,
  });
}

type LeadingPart =
  ReturnType<typeof sourceDocumentParts>[number] | { type: 'data-warnings'; data: ToolWarning[] };

/**
 * Parts the service adds to a reply, streamed right after `start` and stored first with it:
 * one `source-document` per passage the model was given, then tool set-up warnings.
 */
function leadingParts(sources: TurnSource[], warnings: ToolWarning[]): LeadingPart[] {
  const parts: LeadingPart[] = sourceDocumentParts(sources);
  if (warnings.length > 0) parts.push({ type: 'data-warnings', data: warnings });
  return parts;
}

function isCutShort(finishReason: string): boolean {
  return finishReason === 'stopped' || finishReason === 'interrupted';
}

interface FinisherInput {
  leading: LeadingPart[];
  workspaceId: string;
  agentId: string;
  chatId: string;
  /** The chat an unstored reply's cost goes to (see storeReply). */
  spendChatId: string | undefined;
  messageId: string;
  model: ResolvedModel;
  tools: ConversationTools;
  idle: IdleTimeout;
  /** The lead model's usage (the call's counter): charged when the reply fails too. */
  usage: ReplyUsage;
  ticket: ReplyTicket;
  reservation: Reservation | undefined;
  replaces: string[];
  extraWrites: ExtraWrites | undefined;
}

/**
 * Stores the reply once it has ended (first call wins), closes the tools, releases the reply's
 * place among the running ones, and settles `done`. A store failure becomes the outcome (500),
 * so the caller and the log see it.
 */
function replyFinisher(deps: ChatDeps, input: FinisherInput) {
  let settle!: (outcome: ConversationOutcome) => void;
  const done = new Promise<ConversationOutcome>((resolve) => {
    settle = resolve;
  });

  const write = async (result: ReplyResult): Promise<ConversationOutcome> => {
    input.idle.clear();
    await cpuTurn();
    const { subUsage, subRuns } = input.tools;
    // Charged whatever the outcome: the lead model's tokens (estimated where the provider
    // reported none, as for a step cut short) and every sub-agent run's.
    const own = result.ok ? result.usage : input.usage.total();
    // A reply the provider failed after some output is stored with it, as a stopped one is; but
    // not one that regenerates or follows an edit: spec/chats.md keeps what it would replace when
    // the new reply fails ("if the new reply fails, nothing is deleted").
    const partial = result.ok || input.replaces.length > 0 ? undefined : result.partial;
    const usage: TokenUsage = {
      inputTokens: own.inputTokens + subUsage.inputTokens,
      outputTokens: own.outputTokens + subUsage.outputTokens,
    };
    const cost = costUsd(input.model.pricing, own.inputTokens, own.outputTokens) + subUsage.costUsd;
    let outcome: ConversationOutcome = result.ok
      ? {
          ok: true,
          text: result.text,
          usage,
          costUsd: cost,
          finishReason: result.finishReason,
          parts: result.parts,
        }
      : { ok: false, error: result.error, usage, costUsd: cost };
    const finishedAt = deps.clock();
    const settled = outcome;
    try {
      const storedId = await storeReply(deps.db, {
        workspaceId: input.workspaceId,
        chatId: input.chatId,
        spendChatId: input.spendChatId,
        finishedAt,
        // A reply cut short before its first part leaves nothing to show, so nothing to store; nor
        // does one the provider failed before any output.
        message:
          result.ok && (result.parts.length > 0 || !isCutShort(result.finishReason))
            ? {
                id: input.messageId,
                parts: [...input.leading, ...result.parts],
                model: input.model.id,
                finishReason: result.finishReason,
              }
            : partial
              ? {
                  id: input.messageId,
                  parts: [...input.leading, ...partial.parts],
                  model: input.model.id,
                  finishReason: 'error',
                }
              : undefined,
        usage: { ...usage, costUsd: cost },
        reportAs: { agentId: input.agentId, model: input.model.id },
        replaces: result.ok ? input.replaces : [],
        subRuns,
        extraWrites: input.extraWrites ? (trx) => input.extraWrites!(trx, settled, finishedAt) : undefined,
      });
      if (!outcome.ok && storedId !== undefined) {
        // The failure names the reply it stored (the 502/504 of a JSON reply, an agent run's).
        const { error } = outcome;
        outcome = {
          ...outcome,
          error: new ApiError(
            error.code,
            error.message,
            { ...error.details, messageId: storedId },
            { cause: error.cause, refusal: error.refusal },
          ),
        };
      }
    } catch (error) {
      // The database not answering is a 503 the client may retry (docs/api.md), anything else a 500.
      const failure = isDependencyUnavailable(error)
        ? errors.dependencyUnavailable(error)
        : errors.internal(error);
      outcome = { ok: false, error: failure, usage, costUsd: cost, unstored: true };
    } finally {
      input.ticket.release();
      // The usage is stored (or the request failed): its reservation stops counting.
      await input.reservation?.release();
      // Not awaited: ending an MCP session is the server's business, not the answer's (a server
      // slow to answer it would hold the reply; the session's end has a time limit of its own).
      void input.tools.close();
    }
    settle(outcome);
    return outcome;
  };

  let finishing: Promise<ConversationOutcome> | undefined;
  const finish = (result: ReplyResult): Promise<ConversationOutcome> => {
    finishing ??= write(result);
    return finishing;
  };
  return {
    done,
    finish,
    /** Stream mode: stores the reply and says whether that worked. */
    store: async (result: ReplyResult): Promise<StoredReply> => {
      const outcome = await finish(result);
      return { stored: outcome.ok || !outcome.unstored };
    },
  };
}

/** Runs a conversation to its end in JSON mode: the reply, or the ApiError of the failure. */
export async function completeConversation(conversation: Conversation) {
  const outcome = await conversation.complete();
  if (!outcome.ok) throw outcome.error;
  return outcome;
}

/** Whether two conversations hold the same messages in the same order (by id). */
function sameIds(a: ConversationMessage[], b: ConversationMessage[]): boolean {
  return a.length === b.length && a.every((message, i) => message.id === b[i]!.id);
}
