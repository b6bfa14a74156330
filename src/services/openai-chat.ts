import { createHash } from 'node:crypto';
import { jsonSchema, type ModelMessage, tool, type ToolSet, type UIMessageChunk } from 'ai';
import { ApiError, errors, type ValidationIssue } from '../errors.js';
import { JSON_TEXT_LIMITS, jsonLimitPassed, JsonTextLimits } from '../http/json-containers.js';
import { findUnstorableInput } from '../http/plugins/input-guard.js';
import { type ChunkSink, eventText, type TextTarget } from '../http/ui-message-sse.js';
import type { TemplateValue } from '../models/template.js';
import { type ConversationMessage, type IncomingMessage, isPlainBase64 } from './chat-messages.js';
import type { CallOptions } from './chat-reply.js';
import {
  type ChatMessageMetadata,
  type Conversation,
  CONVERSATION_CLIENT_ID_PREFIX,
  type ConversationOutcome,
  type ConversationRequest,
  type TokenUsage,
  type UserVariables,
} from './chat.js';

/**
 * The OpenAI-compatible door (spec/openai-compatible.md): Chat Completions requests become the
 * conversation input of `startConversation`, and its outcome or UI message stream becomes
 * `chat.completion` / `chat.completion.chunk` objects. No model call happens here.
 */

type Part = { type: string; [key: string]: unknown };

export interface OpenAIMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  content?: string | null | Part[];
  tool_calls?: unknown;
  tool_call_id?: unknown;
  [key: string]: unknown;
}

export interface CompletionRequest {
  model: string;
  messages: OpenAIMessage[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean } | null;
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  max_completion_tokens?: number;
  stop?: string | string[] | null;
  logprobs?: boolean;
  seed?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
  user?: string;
  tools?: Array<{
    type: 'function';
    function: { name: string; description?: string; parameters?: object; strict?: boolean | null };
  }>;
  tool_choice?: 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } };
  chat_id?: string;
  project_id?: string;
  variables?: Record<string, TemplateValue>;
  system_variables?: { user?: UserVariables };
  [key: string]: unknown;
}

/** How the caller names a chat to store the exchange in, if at all. */
export interface ChatNaming {
  chatId?: string;
  conversationKey?: string;
  /** The user of the key: a conversation key names one of this user's chats. */
  userId: string;
}

/** Parameters OpenAI clients may send that Atrium cannot honour: refused, not silently ignored. */
function refusedParameters(body: CompletionRequest): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  if (body.n !== undefined && body.n !== null && body.n !== 1) {
    issues.push({ path: 'body.n', message: 'only 1 choice is supported' });
  }
  // `top_logprobs: 0` asks for none, as clients send it with `logprobs: false`.
  const topLogprobs = body.top_logprobs ?? 0;
  if (body.logprobs === true || topLogprobs !== 0) {
    issues.push({
      path: body.logprobs === true ? 'body.logprobs' : 'body.top_logprobs',
      message: 'is not supported',
    });
  }
  const modalities = Array.isArray(body.modalities) ? body.modalities : [];
  if ((body.audio !== undefined && body.audio !== null) || modalities.includes('audio')) {
    issues.push({ path: 'body.audio', message: 'audio output is not supported' });
  }
  const format = body.response_format as { type?: unknown } | undefined | null;
  if (format && format.type !== 'text') {
    issues.push({ path: 'body.response_format', message: 'only type "text" is supported' });
  }
  // The model is offered one tool per name: a second function of a name would be dropped.
  const seen = new Set<string>();
  for (const [index, declared] of (body.tools ?? []).entries()) {
    const name = declared.function.name;
    if (seen.has(name)) {
      issues.push({
        path: `body.tools.${index}.function.name`,
        message: 'names a function declared before it',
      });
    }
    seen.add(name);
  }
  // A forced function must be one the request declares (the agent's own tools are not the
  // client's to name); otherwise the model's call could only break the reply.
  const choice = body.tool_choice;
  if (choice && typeof choice === 'object') {
    const declared = (body.tools ?? []).some((declared) => declared.function.name === choice.function.name);
    if (!declared) {
      issues.push({ path: 'body.tool_choice', message: 'must name a function declared in tools' });
    }
  }
  return issues;
}

function textOf(content: OpenAIMessage['content'], path: string, { refusals = false } = {}): string {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  return content
    .map((part, p) => {
      // An assistant message a client sends back as the SDK gave it may hold the model's refusal.
      if (refusals && part.type === 'refusal' && typeof part.refusal === 'string') return part.refusal;
      if (part.type !== 'text' || typeof part.text !== 'string') {
        throw errors.badRequest(`${path}.${p} must be a text part`, [
          { path: `${path}.${p}`, message: 'must be a text part' },
        ]);
      }
      return part.text;
    })
    .join('');
}

/** An image as OpenAI takes it inline: `data:image/…;base64,` and base64 data (isPlainBase64). */
const IMAGE_DATA_URL = /^data:(image\/[\w.+-]+);base64,(.*)$/is;

/** A user part: `text`, or `image_url` with a data: or https: URL (one that parses). */
function userPart(
  part: Part,
  path: string,
): { ui: Part; model: Exclude<ModelMessage['content'], string>[number] } {
  if (part.type === 'text' && typeof part.text === 'string') {
    return { ui: { type: 'text', text: part.text }, model: { type: 'text', text: part.text } };
  }
  const url = (part.image_url as { url?: unknown } | undefined)?.url;
  const dataMatch = typeof url === 'string' && url.startsWith('data:') ? IMAGE_DATA_URL.exec(url) : undefined;
  const dataUrl = dataMatch && isPlainBase64(dataMatch[2] ?? '') ? dataMatch : undefined;
  const httpsUrl = typeof url === 'string' && /^https:/i.test(url) && URL.canParse(url);
  if (part.type === 'image_url' && typeof url === 'string' && (httpsUrl || dataUrl)) {
    const mediaType = dataUrl?.[1] ?? 'image/*';
    return {
      ui: { type: 'file', url, mediaType },
      model: { type: 'image', image: new URL(url), ...(mediaType !== 'image/*' ? { mediaType } : {}) },
    } as { ui: Part; model: Exclude<ModelMessage['content'], string>[number] };
  }
  throw errors.badRequest(
    `${path} must be a text part or an image_url part with an https: URL or a base64 data:image/… URL`,
    [
      {
        path,
        message: 'must be a text part or an image_url part with an https: URL or a base64 data:image/… URL',
      },
    ],
  );
}

interface ToolCallIn {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

function toolCallsOf(message: OpenAIMessage, path: string): ToolCallIn[] {
  if (message.tool_calls === undefined || message.tool_calls === null) return [];
  const calls = message.tool_calls as ToolCallIn[];
  const valid =
    Array.isArray(calls) &&
    calls.every(
      (call) =>
        typeof call?.id === 'string' &&
        typeof call.function?.name === 'string' &&
        typeof call.function.arguments === 'string',
    );
  if (!valid) {
    throw errors.badRequest(`${path}.tool_calls must be function calls with id, name and arguments`, [
      { path: `${path}.tool_calls`, message: 'must be function calls with id, name and arguments' },
    ]);
  }
  return calls;
}

/**
 * A tool call's `arguments`, parsed (kept as text when not JSON; blank is a call without
 * arguments, `{}`: a string input is no object, which Anthropic's API refuses). JSON inside a
 * string escapes the body's own checks, so they are made here: at most MAX_JSON_CONTAINERS
 * objects and arrays and MAX_JSON_KEY_NAMES different key names in all the request's arguments
 * (`budget`, counted before parsing), then depth and storable text (input-guard.ts), each a 400
 * naming the call.
 */
function parseArguments(text: string, path: string, budget: JsonTextLimits): unknown {
  if (text.trim() === '') return {};
  const passed = budget.add(Buffer.from(text));
  if (passed) {
    const message = `hold ${jsonLimitPassed(passed)} with the request's other tool calls`;
    throw errors.badRequest(`${path} ${message}`, [{ path, message }]);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return text;
  }
  const issue = findUnstorableInput(value, path);
  if (issue) throw errors.badRequest(`${issue.path} ${issue.message}`, [issue]);
  return value;
}

/**
 * The client's messages as the model sees them (system and developer messages stay where the
 * client put them, after the agent's own context) and as they would be stored (user and
 * assistant turns only: tool results are the client's business).
 */
export function translateMessages(messages: OpenAIMessage[]): {
  modelMessages: ModelMessage[];
  stored: IncomingMessage[];
} {
  const modelMessages: ModelMessage[] = [];
  const stored: IncomingMessage[] = [];
  const toolNames = new Map<string, string>();
  const budget = new JsonTextLimits(JSON_TEXT_LIMITS);
  // The calls of the last assistant message that no tool message has answered yet: OpenAI and
  // the AI SDK take a tool call only when its result follows before any other message.
  let unanswered: { at: number; ids: Set<string> } | undefined;
  messages.forEach((message, m) => {
    const path = `body.messages.${m}.content`;
    if (message.role !== 'tool') {
      if (unanswered && unanswered.ids.size > 0) throw unansweredToolCalls(unanswered.at, unanswered.ids);
      unanswered = undefined;
    }
    if (message.role === 'system' || message.role === 'developer') {
      modelMessages.push({ role: 'system', content: textOf(message.content, path) });
    } else if (message.role === 'user') {
      // Refused here, where the request's own index and field are known (the stored list the
      // conversation machinery checks has neither).
      if (typeof message.content !== 'string' && (message.content ?? []).length === 0) {
        const refusal = 'must be a string or a non-empty array of content parts';
        throw errors.badRequest(`${path} ${refusal}`, [{ path, message: refusal }]);
      }
      if (typeof message.content === 'string') {
        modelMessages.push({ role: 'user', content: message.content });
        stored.push({ role: 'user', parts: [{ type: 'text', text: message.content }] });
      } else {
        const parts = (message.content ?? []).map((part, p) => userPart(part, `${path}.${p}`));
        modelMessages.push({ role: 'user', content: parts.map((part) => part.model) as never });
        stored.push({ role: 'user', parts: parts.map((part) => part.ui) });
      }
    } else if (message.role === 'assistant') {
      // The SDKs' own shape of a refused answer: no content, the text in `refusal`.
      const refusal = (message as { refusal?: unknown }).refusal;
      const text =
        textOf(message.content, path, { refusals: true }) || (typeof refusal === 'string' ? refusal : '');
      const calls = toolCallsOf(message, `body.messages.${m}`);
      const inputs = calls.map((call, c) =>
        parseArguments(
          call.function.arguments,
          `body.messages.${m}.tool_calls.${c}.function.arguments`,
          budget,
        ),
      );
      for (const call of calls) toolNames.set(call.id, call.function.name);
      unanswered = { at: m, ids: new Set(calls.map((call) => call.id)) };
      modelMessages.push({
        role: 'assistant',
        content: [
          ...(text ? [{ type: 'text' as const, text }] : []),
          ...calls.map((call, c) => ({
            type: 'tool-call' as const,
            toolCallId: call.id,
            toolName: call.function.name,
            input: inputs[c],
          })),
        ],
      });
      stored.push({
        role: 'assistant',
        parts: [
          ...(text ? [{ type: 'text', text }] : []),
          ...calls.map((call, c) => ({
            type: `tool-${call.function.name}`,
            toolCallId: call.id,
            input: inputs[c],
            state: 'input-available',
          })),
        ],
      });
    } else {
      const id = message.tool_call_id;
      // Only right after its call (and the call's sibling results), once: providers refuse a
      // tool message anywhere else, which would reach the client as a 502 that SDKs retry.
      if (typeof id !== 'string' || !unanswered?.ids.has(id)) {
        const refusal = 'must name a tool call of the assistant message right before it, not answered yet';
        throw errors.badRequest(`body.messages.${m}.tool_call_id ${refusal}`, [
          { path: `body.messages.${m}.tool_call_id`, message: refusal },
        ]);
      }
      unanswered.ids.delete(id);
      modelMessages.push({
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId: id,
            toolName: toolNames.get(id)!,
            output: { type: 'text', value: textOf(message.content, path) },
          },
        ],
      });
    }
  });
  if (unanswered && unanswered.ids.size > 0) throw unansweredToolCalls(unanswered.at, unanswered.ids);
  return { modelMessages, stored };
}

function unansweredToolCalls(at: number, ids: Set<string>) {
  const message = `must each be answered by a tool message right after it; not answered: ${[...ids].join(', ')}`;
  return errors.badRequest(`body.messages.${at}.tool_calls ${message}`, [
    { path: `body.messages.${at}.tool_calls`, message },
  ]);
}

/**
 * Client function tools: offered to the model without `execute`, so a call ends the reply. A
 * function's `strict` goes to the provider (structured outputs: arguments held to its schema).
 * With `tool_choice: "none"` too: whether they are then sent (with that choice, for an agent
 * without tools of its own) is decided once the agent's tools are known (client-tool-offer.ts).
 */
function clientTools(body: CompletionRequest): ToolSet | undefined {
  if (!body.tools || body.tools.length === 0) return undefined;
  // No prototype: a client tool may be named `__proto__` or `toString` (valid OpenAI names).
  const set: ToolSet = Object.create(null) as ToolSet;
  for (const declared of body.tools) {
    set[declared.function.name] = tool({
      description: declared.function.description,
      inputSchema: jsonSchema((declared.function.parameters ?? { type: 'object', properties: {} }) as never),
      ...(typeof declared.function.strict === 'boolean' ? { strict: declared.function.strict } : {}),
    });
  }
  return set;
}

function callOptions(body: CompletionRequest, tools: ToolSet | undefined): CallOptions {
  const stop = body.stop === null || body.stop === undefined ? undefined : [body.stop].flat();
  const choice = body.tool_choice;
  return {
    maxOutputTokens: body.max_completion_tokens ?? body.max_tokens,
    topP: body.top_p,
    stopSequences: stop,
    seed: body.seed,
    presencePenalty: body.presence_penalty,
    frequencyPenalty: body.frequency_penalty,
    // `none` without client tools changes nothing: the agent's own tools stay callable (with
    // them it holds back the client tools only, client-tool-offer.ts).
    toolChoice:
      choice === undefined || (choice === 'none' && tools === undefined)
        ? undefined
        : typeof choice === 'string'
          ? choice
          : { type: 'tool', toolName: choice.function.name },
  };
}

/** Comparable form of a message: role, text and file URLs (tool calls are the agent's or the client's). */
function fingerprint(message: { role: string; parts: Part[] }): string {
  const text = message.parts.map((part) => (part.type === 'text' ? String(part.text) : '')).join('');
  const files = message.parts.filter((part) => part.type === 'file').map((part) => String(part.url));
  return JSON.stringify([message.role, text, files]);
}

/**
 * The prefix rule: the stored conversation must be the start of what the client sent; then the
 * rest is new and stored. Otherwise (the client edited or dropped turns) nothing is stored.
 * A stored reply the provider failed after some output (`finishReason: "error"`) that the client
 * does not hold is passed over and dropped: an OpenAI client gets such a reply as an error, and
 * most go on (or retry) without its text; holding it against them would leave the chat unstored
 * for good.
 */
export function reconcileHistory(sent: IncomingMessage[]) {
  return (stored: ConversationMessage[]): { added: IncomingMessage[]; dropped: string[] } | undefined => {
    const dropped: string[] = [];
    let at = 0;
    for (const message of stored) {
      const next = sent[at];
      if (next !== undefined && fingerprint(message) === fingerprint(next)) at++;
      else if (message.role === 'assistant' && message.finishReason === 'error') dropped.push(message.id);
      else return undefined;
    }
    return { added: sent.slice(at), dropped };
  };
}

/**
 * A conversation key names a chat per workspace, agent and user of the key (a chat is its
 * user's own, so one user's key never reaches another's chat); stored as the chat's client id,
 * a hash so any 1–128 character key fits the client id's alphabet, behind a prefix /v1/chat
 * cannot create chats with (so no other user can take it first).
 */
export function conversationClientId(userId: string, agentId: string, key: string): string {
  const digest = createHash('sha256').update(`${userId}\u0000${agentId}\u0000${key}`).digest('base64url');
  return `${CONVERSATION_CLIENT_ID_PREFIX}${digest}`;
}

/** The client id of a conversation key before it named its user: still found by its own user. */
function formerConversationClientId(agentId: string, key: string): string {
  const digest = createHash('sha256').update(`${agentId}\u0000${key}`).digest('base64url');
  return `${CONVERSATION_CLIENT_ID_PREFIX}${digest}`;
}

/** The conversation input of a Chat Completions request; throws 400 for refused parameters. */
export function conversationRequest(body: CompletionRequest, naming: ChatNaming): ConversationRequest {
  const refused = refusedParameters(body);
  if (refused.length > 0) throw errors.badRequest(`${refused[0]!.path} ${refused[0]!.message}`, refused);
  if (
    naming.conversationKey !== undefined &&
    (naming.conversationKey.length < 1 || naming.conversationKey.length > 128)
  ) {
    throw errors.badRequest('x-atrium-conversation-key must be 1–128 characters', [
      { path: 'headers.x-atrium-conversation-key', message: 'must be 1–128 characters' },
    ]);
  }
  const { modelMessages, stored } = translateMessages(body.messages);
  const tools = clientTools(body);
  const named = naming.chatId !== undefined || naming.conversationKey !== undefined;
  const key = naming.chatId === undefined ? naming.conversationKey : undefined;
  return {
    agentId: body.model,
    messages: stored,
    chatId: naming.chatId,
    clientChatId: key !== undefined ? conversationClientId(naming.userId, body.model, key) : undefined,
    conversationKey:
      key !== undefined ? { formerClientChatId: formerConversationClientId(body.model, key) } : undefined,
    projectId: body.project_id,
    stream: body.stream,
    temperature: body.temperature,
    variables: body.variables,
    // An empty `user`, which OpenAI takes, names no end user (the chat list cannot filter by "").
    systemVariables: body.system_variables ?? (body.user ? { user: { id: body.user } } : undefined),
    store: named,
    reconcileHistory: reconcileHistory(stored),
    modelMessages,
    clientTools: tools,
    callOptions: callOptions(body, tools),
  };
}

/**
 * An error about what the request named, in OpenAI's terms: an unknown agent is OpenAI's unknown
 * model, and an unknown chat or project names its field in `param` (the conversation machinery's
 * 404s name no field: `/v1/chat` has no `param`). A chat found by a conversation key names none.
 * A chat named by the header is `x-atrium-chat-id`, also when it is refused as another agent's
 * (the machinery names `/v1/chat`'s body field, `chatId`).
 */
export function asRequestError(
  error: unknown,
  body: Pick<CompletionRequest, 'model' | 'chat_id' | 'project_id'>,
  naming: Pick<ChatNaming, 'chatId'>,
): unknown {
  if (!(error instanceof ApiError)) return error;
  const chatParam = body.chat_id !== undefined ? 'chat_id' : 'x-atrium-chat-id';
  if (error.code === 'bad_request') {
    const issues = error.details.issues as ValidationIssue[] | undefined;
    if (naming.chatId === undefined || issues?.[0]?.path !== 'body.chatId') return error;
    return new ApiError(
      error.code,
      error.message,
      { ...error.details, param: chatParam },
      { cause: error.cause },
    );
  }
  if (error.code !== 'not_found') return error;
  if (error.message === 'Agent not found') return modelNotFound(body.model);
  const param =
    error.message === 'Chat not found' && naming.chatId !== undefined
      ? chatParam
      : error.message === 'Project not found' && body.project_id !== undefined
        ? 'project_id'
        : undefined;
  if (param === undefined) return error;
  return new ApiError(error.code, error.message, { ...error.details, param }, { cause: error.cause });
}

export function modelNotFound(model: string): ApiError {
  return new ApiError('not_found', `The model '${model}' does not exist or you do not have access to it`, {
    param: 'model',
    openaiCode: 'model_not_found',
  });
}

/**
 * OpenAI's finish reason. `tool_calls` tells the client to run `tool_calls` and call again, so
 * it is given only with the client's own calls, and always with them, whatever the provider
 * called the step's end (OpenAI itself says `stop` for a forced named function, as several
 * OpenAI-compatible servers do for any call), unless it was cut short (`length`,
 * `content_filter`). A reply that ends on other calls (the agent's own, or made-up names, which
 * the model is told are unavailable) has used up its steps (MAX_STEPS in reply-steps.ts) with a
 * call even on the last, which told the model to call none: a limit reached, OpenAI's `length`.
 * A model that answers on that step ends with `stop`.
 */
export function finishReasonOf(reason: string | undefined, clientToolCalls: boolean): string {
  switch (reason) {
    case 'length':
      return 'length';
    case 'tool-calls':
      return clientToolCalls ? 'tool_calls' : 'length';
    case 'content-filter':
      return 'content_filter';
    default:
      return clientToolCalls ? 'tool_calls' : 'stop';
  }
}

function usageOf(usage: TokenUsage) {
  return {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.inputTokens + usage.outputTokens,
  };
}

interface ToolPart {
  type: string;
  toolCallId: string;
  input: unknown;
  state?: string;
}

/** `chat.completion` of a JSON reply; only the client's own tool calls are shown. */
export function completionObject(
  conversation: Pick<Conversation, 'messageId' | 'agent'>,
  outcome: Extract<ConversationOutcome, { ok: true }>,
  clientToolNames: Set<string>,
  created: number,
) {
  const calls = (outcome.parts as ToolPart[])
    .filter((part) => part.type.startsWith('tool-') && clientToolNames.has(part.type.slice(5)))
    .map((part) => ({
      id: part.toolCallId,
      type: 'function' as const,
      function: { name: part.type.slice(5), arguments: JSON.stringify(part.input ?? {}) },
    }));
  return {
    id: `chatcmpl-${conversation.messageId}`,
    object: 'chat.completion' as const,
    created,
    model: conversation.agent.id,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant' as const,
          content: outcome.text === '' && calls.length > 0 ? null : outcome.text,
          ...(calls.length > 0 ? { tool_calls: calls } : {}),
        },
        finish_reason: finishReasonOf(outcome.finishReason, calls.length > 0),
      },
    ],
    usage: usageOf(outcome.usage),
  };
}

/** Field names the conversation machinery reports as `/chat` spells them. */
const SHARED_FIELDS: Record<string, string> = { chatId: 'chat_id', projectId: 'project_id', id: 'chat_id' };

/** OpenAI's `error` object for an Atrium error (spec/openai-compatible.md, Errors). */
export function openAIError(error: ApiError) {
  const type =
    error.status === 402
      ? 'insufficient_quota'
      : error.status === 429
        ? 'rate_limit_error'
        : error.status >= 500
          ? 'api_error'
          : 'invalid_request_error';
  const issues = error.details.issues as ValidationIssue[] | undefined;
  const path = issues?.[0]?.path.replace(/^(body|headers|params|query)\./, '');
  const param =
    typeof error.details.param === 'string'
      ? error.details.param
      : path === undefined
        ? null
        : (SHARED_FIELDS[path] ?? path);
  const code = typeof error.details.openaiCode === 'string' ? error.details.openaiCode : error.code;
  return { error: { message: error.message, type, param, code } };
}

/**
 * The reply's UI message chunks, as they are pushed, as `chat.completion.chunk` event-stream
 * text for `target`: role first, text
 * as `delta.content` (text arriving in one turn of the event loop in one chunk), the client's
 * tool calls as `delta.tool_calls`, the finish reason, the usage chunk when asked for,
 * `[DONE]`. A failure becomes one `error` event and the stream ends; a stream that breaks is
 * reported to `onStreamError` and ends without `[DONE]`.
 */
export function completionChunks(
  target: TextTarget,
  conversation: Pick<Conversation, 'messageId' | 'agent' | 'done'>,
  options: { clientToolNames: Set<string>; includeUsage: boolean; created: number },
  onStreamError: (error: unknown) => void,
): ChunkSink<UIMessageChunk<ChatMessageMetadata>> {
  const base = {
    id: `chatcmpl-${conversation.messageId}`,
    object: 'chat.completion.chunk',
    created: options.created,
    model: conversation.agent.id,
  };
  const event = (choices: unknown[], extra: Record<string, unknown> = {}) =>
    `data: ${JSON.stringify({ ...base, choices, ...extra })}\n\n`;
  const delta = (value: Record<string, unknown>, finishReason: string | null = null) =>
    event([{ index: 0, delta: value, finish_reason: finishReason }]);
  // Every content chunk is this text around the content's JSON: written once.
  const [contentHead, contentTail] = delta({ content: '\u0000' }).split('"\\u0000"');
  const content = (_key: string, text: string) => `${contentHead}${JSON.stringify(text)}${contentTail}`;
  let toolIndex = 0;
  let failed = false;
  let errorText: string | undefined;
  let finish: { reason: string; usage?: TokenUsage } | undefined;
  let started = false;
  return eventText<UIMessageChunk<ChatMessageMetadata>>(
    target,
    (chunk, out) => {
      if (!started) {
        started = true;
        out.event(delta({ role: 'assistant', content: '' }));
      }
      if (failed) return;
      if (chunk.type === 'text-delta' && chunk.delta) out.delta('content', chunk.delta, content);
      else if (chunk.type === 'tool-input-available' && options.clientToolNames.has(chunk.toolName)) {
        out.event(
          delta({
            tool_calls: [
              {
                index: toolIndex++,
                id: chunk.toolCallId,
                type: 'function',
                function: { name: chunk.toolName, arguments: JSON.stringify(chunk.input ?? {}) },
              },
            ],
          }),
        );
      } else if (chunk.type === 'finish') {
        const metadata = chunk.messageMetadata as ChatMessageMetadata | undefined;
        finish = { reason: finishReasonOf(metadata?.finishReason, toolIndex > 0), usage: metadata?.usage };
      } else if (chunk.type === 'error') {
        failed = true;
        errorText = chunk.errorText;
      }
    },
    async (out) => {
      if (!started) out.event(delta({ role: 'assistant', content: '' }));
      if (failed || !finish) {
        // The stream has ended, so the outcome is settled: its error has Atrium's status and code.
        const outcome = await conversation.done;
        // A reply stored as interrupted (shutdown) ended well for the store, not for the client.
        const error = outcome.ok
          ? new ApiError('service_unavailable', errorText ?? 'The reply ended early')
          : outcome.error;
        out.event(`data: ${JSON.stringify(openAIError(error))}\n\n`);
        return;
      }
      out.event(delta({}, finish.reason));
      if (options.includeUsage) {
        out.event(event([], { usage: usageOf(finish.usage ?? { inputTokens: 0, outputTokens: 0 }) }));
      }
      out.event('data: [DONE]\n\n');
    },
    onStreamError,
  );
}
