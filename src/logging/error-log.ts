/**
 * How an error is written to the log. Errors of the AI SDK carry the whole exchange with the
 * provider as enumerable properties (`requestBodyValues`: system prompt, project instructions,
 * memory, file text, the user's messages; `responseBody`, `value`, `text`, `prompt`…), and
 * pino's standard serializer copies every one of them. This serializer writes only what
 * identifies a failure: its type, a message that holds no conversation content, the HTTP
 * status, where it went (origin and path, no query), the model name and the provider's
 * request id, then the same for its causes.
 */

export interface LoggedError {
  [key: string]: unknown;
  type: string;
  message: string;
  /** Frames under the safe message; empty when the thrown value had none. */
  stack: string;
  code?: string | number;
  statusCode?: number;
  /** The provider endpoint, origin and path only. */
  url?: string;
  /** The provider's model name, the one field of the request body that is written. */
  model?: string;
  /** The provider's own id of the failed request (`x-request-id`, `request-id`…). */
  providerRequestId?: string;
  isRetryable?: boolean;
  cause?: LoggedError;
  /** The failures a retry gave up on (RetryError), last one first. */
  lastError?: LoggedError;
}

const MAX_MESSAGE_LENGTH = 300;
const MAX_CAUSE_DEPTH = 4;

/**
 * AI SDK errors whose message holds no content of the exchange. The others (TypeValidationError
 * "Value: …", JSONParseError "Text: …", InvalidResponseDataError, InvalidPromptError,
 * MessageConversionError, NoObjectGeneratedError, tool input errors…) quote the prompt or the
 * provider's answer, so only their type is written.
 */
const AI_ERRORS_WITH_SAFE_MESSAGES = new Set([
  'AI_APICallError',
  'AI_EmptyResponseBodyError',
  'AI_LoadAPIKeyError',
  'AI_LoadSettingError',
  'AI_NoSuchModelError',
  'AI_NoSuchProviderError',
  'AI_NoContentGeneratedError',
  'AI_NoOutputGeneratedError',
  'AI_UnsupportedFunctionalityError',
  'AI_MCPClientError',
]);

const PROVIDER_REQUEST_ID_HEADERS = ['x-request-id', 'request-id', 'x-amzn-requestid', 'cf-ray'];

type ErrorLike = Error & Record<string, unknown>;

function isAiSdkError(error: ErrorLike): boolean {
  return typeof error.name === 'string' && error.name.startsWith('AI_');
}

function truncate(text: string): string {
  return text.length > MAX_MESSAGE_LENGTH ? `${text.slice(0, MAX_MESSAGE_LENGTH)}…` : text;
}

function safeMessage(error: ErrorLike): string {
  if (error.name === 'AI_RetryError') {
    // Its message repeats the last error's, which is written (safely) as lastError.
    return `Retry gave up (${String(error.reason ?? 'unknown reason')})`;
  }
  if (isAiSdkError(error) && !AI_ERRORS_WITH_SAFE_MESSAGES.has(error.name)) {
    return '(message not logged: it may quote the conversation or the provider response)';
  }
  return truncate(String(error.message ?? ''));
}

/** The stack's frames under the safe message (its first line repeats the original message). */
function safeStack(error: ErrorLike, type: string, message: string): string {
  if (typeof error.stack !== 'string') return '';
  const frames = error.stack.split('\n').filter((line) => /^\s+at /.test(line));
  return [`${type}: ${message}`, ...frames].join('\n');
}

function endpoint(url: unknown): string | undefined {
  if (typeof url !== 'string') return undefined;
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname}`;
  } catch {
    return undefined;
  }
}

function providerRequestId(headers: unknown): string | undefined {
  if (!headers || typeof headers !== 'object') return undefined;
  const byName = headers as Record<string, unknown>;
  for (const name of PROVIDER_REQUEST_ID_HEADERS) {
    const value = byName[name];
    if (typeof value === 'string' && value) return value.slice(0, 200);
  }
  return undefined;
}

function modelName(body: unknown): string | undefined {
  const model = (body as { model?: unknown } | null | undefined)?.model;
  return typeof model === 'string' ? model.slice(0, 200) : undefined;
}

function serialize(value: unknown, depth: number): LoggedError {
  if (!(value instanceof Error)) {
    // A thrown non-error: its type only, since its text could be anything.
    return { type: typeof value, message: '(a thrown value that is not an Error)', stack: '' };
  }
  const error = value as ErrorLike;
  const type = error.name || error.constructor?.name || 'Error';
  const message = safeMessage(error);
  const logged: LoggedError = { type, message, stack: safeStack(error, type, message) };
  if (typeof error.code === 'string' || typeof error.code === 'number') logged.code = error.code;
  if (typeof error.statusCode === 'number') logged.statusCode = error.statusCode;
  if (type === 'AI_APICallError') {
    const url = endpoint(error.url);
    if (url) logged.url = url;
    const model = modelName(error.requestBodyValues);
    if (model) logged.model = model;
    const requestId = providerRequestId(error.responseHeaders);
    if (requestId) logged.providerRequestId = requestId;
    if (typeof error.isRetryable === 'boolean') logged.isRetryable = error.isRetryable;
  }
  if (depth < MAX_CAUSE_DEPTH) {
    if (type === 'AI_RetryError' && error.lastError !== undefined) {
      logged.lastError = serialize(error.lastError, depth + 1);
    }
    if (error.cause !== undefined && error.cause !== null) logged.cause = serialize(error.cause, depth + 1);
  }
  return logged;
}

/** pino serializer for `err` (and `error`): see the module comment. */
export function serializeErrorForLog(error: unknown): LoggedError {
  return serialize(error, 0);
}
