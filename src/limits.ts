/**
 * Limits stated once: route schemas, services, router options and error messages read them
 * from here, so a documented number cannot drift from the enforced one.
 */

const MB = 1024 * 1024;

/**
 * MCP `initialize` requests a process keeps open at once after the connect timeout, each for up
 * to ATRIUM_UPSTREAM_TIMEOUT_MS, to end the session a late answer opens (LateAnswerWaits in
 * mcp-fetch.ts); the `DELETE` ending that session counts as well, until it settles. Past it, a
 * request is closed at the timeout.
 */
export const MAX_LATE_MCP_INITIALIZE_WAITS = 256;

/** Longest id (agent, project, chat, key, workspace, user) a route accepts. */
export const MAX_ID_LENGTH = 200;

/** Longest path parameter the router passes on; longer ones are a 400 (the router's limit). */
export const MAX_PATH_PARAM_LENGTH = 1000;

/** A project's name, counted after trimming. */
export const MAX_PROJECT_NAME_LENGTH = 200;

/**
 * A project's memory, in characters (management.md: `PATCH` takes at most 100,000): it goes to
 * the model in every project chat, so the setup file and the `remember` tool stop here too.
 */
export const MAX_PROJECT_MEMORY_LENGTH = 100_000;

/**
 * The setup file's workspace limits and model prices: token counts and USD amounts up to the
 * largest whole number JavaScript counts exactly (the service adds them up as numbers), which
 * also keeps `.inf` and `1e400` out; a larger `monthlyTokens` failed on PostgreSQL's `bigint`
 * at the database (exit 1) instead of being refused with the file's other mistakes (exit 2).
 */
export const MAX_SETUP_AMOUNT = Number.MAX_SAFE_INTEGER;

/** `rateLimitPerMinute`: the largest value of the `integer` column it is stored in. */
export const MAX_RATE_LIMIT_PER_MINUTE = 2_147_483_647;

/** One project file, and so one signed upload (decisions.md "Project files"). */
export const MAX_FILE_BYTES = 50 * MB;

/** All files of one project together. */
export const MAX_PROJECT_BYTES = 500 * MB;

/** Files in one project. */
export const MAX_PROJECT_FILES = 500;

/** `n` bytes in whole megabytes, for messages ("50 MB"). */
export function megabytes(bytes: number): string {
  return `${Math.round(bytes / MB)} MB`;
}

/**
 * Objects and arrays in one JSON body. Far above any real request (a `useChat` body resends the
 * whole conversation, a few per part); a 16 MB chat body of empty objects (5 million) kept a
 * process busy for seconds parsing and checking it, then again on every later turn of its chat.
 */
export const MAX_JSON_CONTAINERS = 100_000;

/**
 * Different key names in one JSON body (a name used in many objects counts once). What parsing
 * costs is new names, not keys: V8 made a million keys of a few names (records of a tool output)
 * in 0.1–0.5 s, a million different ones in 1.6 s as one object and 5–10 s as 10,000 objects of
 * 100 (12 MB, within a chat body), growing faster than the count. 100,000 took 0.1–0.5 s.
 */
export const MAX_JSON_KEY_NAMES = 100_000;

/**
 * Template variables in one request (`variables` of /v1/chat, runs and /v1/openai): far above
 * what instructions use; a 12 MB `variables` of a million names held a process for 12 s.
 */
export const MAX_TEMPLATE_VARIABLES = 1000;

/** An MCP tool's url as stored by the agents API (the setup file sets no limit: it is the operator's). */
export const MAX_MCP_URL_LENGTH = 2000;

/**
 * An MCP tool's url as the agents API takes it: a url as read is longer than the one stored
 * (`a=1` reads `a=***`), and a read-modify-write sends it back, so the body takes up to this and
 * MAX_MCP_URL_LENGTH holds for the url stored once the mask is resolved. A stored url of 2000
 * characters reads at most about 3,400 (`=1&` per three characters reads `=***&`), well under it.
 */
export const MAX_MCP_URL_AS_READ_LENGTH = 8000;
