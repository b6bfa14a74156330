import type { ToolSet } from 'ai';

/** How long each MCP `tools/call` may take, and what runs around it. */
export interface McpCallBound {
  /** The most one call may take (the MCP client's retries included). */
  timeoutMs: number;
  /**
   * Runs each call: a reply pauses its provider idle timeout around it (chat-idle-timeout.ts), so
   * a call within its bound is not taken for the provider's silence.
   */
  around?: <T>(call: () => Promise<T>) => Promise<T>;
}

function callTimeoutMessage(timeoutMs: number): string {
  return `The MCP tool call took longer than ${timeoutMs} ms, the most Atrium waits for one call; it was cancelled`;
}

type Execute = NonNullable<ToolSet[string]['execute']>;

/**
 * One call bounded by `timeoutMs`. Past it the call's request is aborted (the transport cancels
 * its HTTP request, the connection is closed) and the call fails with a tool error the model
 * reads, whatever the client does with the abort. The reply's own signal still aborts it too.
 */
async function callWithin(
  execute: Execute,
  input: unknown,
  options: Parameters<Execute>[1],
  timeoutMs: number,
): Promise<unknown> {
  const timeLimit = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new Error(callTimeoutMessage(timeoutMs));
      timeLimit.abort(error);
      reject(error);
    }, timeoutMs);
  });
  const abortSignal = options.abortSignal
    ? AbortSignal.any([options.abortSignal, timeLimit.signal])
    : timeLimit.signal;
  const call = (async () => execute(input as never, { ...options, abortSignal }))();
  try {
    return await Promise.race([call, timedOut]);
  } finally {
    clearTimeout(timer);
    // Lost the race: it fails once the abort has reached it, and nobody waits for it any more.
    call.catch(() => {});
  }
}

/**
 * The tools with each call bounded (callWithin). An MCP server that takes a call and never
 * answers it, or stops sending mid-answer, would otherwise hold the reply until the provider's
 * idle timeout, which then failed the whole reply as the provider's fault (504).
 */
export function withCallTimeLimit(tools: ToolSet, bound: McpCallBound): ToolSet {
  const run = bound.around ?? (<T>(call: () => Promise<T>) => call());
  // No prototype, as the MCP client's own set: a tool may be named `__proto__`.
  const limited: ToolSet = Object.create(null) as ToolSet;
  for (const [name, tool] of Object.entries(tools)) {
    const execute = tool.execute;
    limited[name] = !execute
      ? tool
      : {
          ...tool,
          execute: (input: unknown, options: Parameters<Execute>[1]) =>
            run(() => callWithin(execute, input, options, bound.timeoutMs)),
        };
  }
  return limited;
}
