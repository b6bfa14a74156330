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
  return new ApiError('upstream_error', 'The model provider failed', {}, { cause: error });
}
