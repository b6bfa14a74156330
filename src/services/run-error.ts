import { ERROR_STATUS, type ErrorCode } from '../errors.js';

/** Why a run failed, as a run read back shows it: the code and message its request was answered. */
export interface RunError {
  code: ErrorCode;
  message: string;
}

/**
 * A failed run's `agent_runs.error`: `code: message`, both the `ApiError` the failure was answered
 * with (upstream-failure.ts and the like: the service's own words, never the provider's error
 * text, which may name keys and hosts, nor a stack).
 */
export function storedRunError(error: RunError): string {
  return `${error.code}: ${error.message}`;
}

/**
 * A stored error as a run shows it (`null` for a completed run). A sub-agent's run stored its
 * message alone before the code was kept with it (and a process of that version still does during
 * a rolling deploy, so no migration rewrites them): its code is the one its message goes with
 * (`subRunFailure` in chat-tools.ts), the provider's failure for any other.
 */
export function runErrorView(stored: string | null): RunError | null {
  if (stored === null) return null;
  const colon = stored.indexOf(': ');
  const code = colon > 0 ? stored.slice(0, colon) : '';
  if (Object.hasOwn(ERROR_STATUS, code)) {
    return { code: code as ErrorCode, message: stored.slice(colon + 2) };
  }
  return { code: messageOnlyCode(stored), message: stored };
}

function messageOnlyCode(message: string): ErrorCode {
  if (/^The model provider did not answer within \d+ ms$/.test(message)) return 'upstream_timeout';
  if (message === 'The server shut down while this run was being generated') return 'service_unavailable';
  if (message === 'The lead reply was stopped before this run was done') return 'conflict';
  return 'upstream_error';
}
