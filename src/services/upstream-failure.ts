import {
  APICallError,
  InvalidMessageRoleError,
  InvalidPromptError,
  MissingToolResultsError,
  RetryError,
} from 'ai';
import { ApiError } from '../errors.js';

/**
 * Provider failures → 502 `upstream_error`; a timeout → 504 `upstream_timeout`; a prompt the AI
 * SDK refuses before calling the provider → 400 `bad_request` (the request's messages are at
 * fault; requests are checked for these before anything is stored, this is the safety net).
 */
export function upstreamFailure(error: unknown, timedOut: boolean, timeoutMs: number): ApiError {
  if (error instanceof ApiError) return error;
  if (
    InvalidPromptError.isInstance(error) ||
    MissingToolResultsError.isInstance(error) ||
    InvalidMessageRoleError.isInstance(error)
  ) {
    return new ApiError(
      'bad_request',
      `The messages cannot be sent to the model: ${error.message}`,
      { issues: [{ path: 'body.messages', message: error.message }] },
      { cause: error },
    );
  }
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
  return new ApiError('upstream_error', 'The model provider failed', {}, { cause: loggableCause(error) });
}

/**
 * A provider's stream failure as the OpenAI-style and Anthropic parsers hand it on: the error
 * event's object as it came (`{ message, type }`), also for a connection that broke mid-stream
 * (stream-guard.ts turns it into such an event: "The provider stream broke: …"). The log writes a
 * thrown value that is not an Error as its type alone, which told a reset from the provider's
 * overload from anything else by nothing: as an Error, its message is written, as an
 * `APICallError`'s is (the provider's words, none of the conversation), and its other fields not.
 */
export class ProviderStreamError extends Error {
  override readonly name = 'ProviderStreamError';
}

function loggableCause(error: unknown): unknown {
  if (error instanceof Error || typeof error !== 'object' || error === null) return error;
  const message = (error as { message?: unknown }).message;
  return new ProviderStreamError(
    typeof message === 'string' && message !== ''
      ? message
      : 'The provider sent an error event without a message',
  );
}
