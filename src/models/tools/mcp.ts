import { createMCPClient, type ListToolsResult } from '@ai-sdk/mcp';
import type { ToolSet } from 'ai';
import { z } from 'zod';
import { type McpReach, privateAddressProblem, publicOnlyFetch } from './mcp-address.js';
import { type McpCallBound, withCallTimeLimit } from './mcp-call-limit.js';
import {
  type LateAnswerWaits,
  MAX_MCP_RESPONSE_BYTES,
  mcpTransportFetch,
  sessionEnding,
} from './mcp-fetch.js';
import { withCutResults } from './mcp-output.js';
import type { ToolWarning } from './warnings.js';
import { networkErrorCode } from '../../network-errors.js';
import { percentDecoded, toolHeaderProblem } from '../../agent-fields.js';

export interface McpToolSpec {
  type: 'mcp';
  name: string;
  url: string;
  headers?: Record<string, string>;
}

export interface ConnectedTools {
  tools: ToolSet;
  warnings: ToolWarning[];
  close(): Promise<void>;
}

type McpClient = Awaited<ReturnType<typeof createMCPClient>>;

/** A `tools/list` page, each tool left unchecked: one bad tool must not hide the others. */
const ToolListPage = z.looseObject({ tools: z.array(z.unknown()), nextCursor: z.string().optional() });
/** What @ai-sdk/mcp requires of one tool (its ToolSchema): an object schema as `inputSchema`. */
const UsableTool = z.looseObject({
  name: z.string(),
  title: z.string().optional(),
  description: z.string().optional(),
  inputSchema: z.looseObject({ type: z.literal('object'), properties: z.looseObject({}).optional() }),
});
type ListedTool = ListToolsResult['tools'][number];

/**
 * The client's JSON-RPC request. Not in its public types: `listTools` validates the whole list
 * with one schema, so a single tool with a bad `inputSchema` lost every tool of its server.
 * test/chat/chat-tools.test.ts fails if an upgrade removes it.
 */
type McpRequest = (args: {
  request: { method: string; params?: Record<string, unknown> };
  resultSchema: typeof ToolListPage;
  options?: { signal?: AbortSignal };
}) => Promise<z.infer<typeof ToolListPage>>;

/**
 * How much of one server's tool listing is read, in all (each response is bounded on its own:
 * MAX_MCP_RESPONSE_BYTES). Far past what a real server lists (tens of tools, at most a few
 * hundred KiB, mostly in one page; a provider takes about a hundred tools in one request), and
 * small enough that a hostile or broken server cannot make a reply read, hold and send to the
 * model 100 pages of 4 MiB each while it connects.
 */
export const MCP_LISTING_LIMITS = {
  /** Pages of `tools/list`. */
  pages: 100,
  /** Usable tools kept. */
  tools: 1_000,
  /** The listed tools' JSON, pages summed: two responses of the largest size (8 MiB). */
  bytes: 2 * MAX_MCP_RESPONSE_BYTES,
} as const;
/** Tools skipped one by one with a warning each; past it, one warning counts the rest. */
const MAX_TOOL_WARNINGS = 10;

/** The warning for a listing read no further: the server lists more than Atrium reads. */
function listingCut(server: string, reason: string, kept: number): ToolWarning {
  return {
    tool: server,
    code: 'mcp_too_many_tools',
    message: `MCP server lists ${reason}, more than Atrium reads; its first ${kept} usable tools are offered`,
  };
}

/**
 * Every page of the server's tools, within MCP_LISTING_LIMITS: the usable ones, and a warning for
 * each other one (at most MAX_TOOL_WARNINGS, then one for the rest), and one when the listing was
 * cut at a limit. A server that pages in circles would otherwise be listed until the connect
 * timeout, and lose every tool.
 */
async function listUsableTools(
  client: McpClient,
  server: string,
  signal: AbortSignal | undefined,
): Promise<{ tools: ListedTool[]; warnings: ToolWarning[] }> {
  const request = (client as unknown as { request: McpRequest }).request.bind(client);
  const tools: ListedTool[] = [];
  const warnings: ToolWarning[] = [];
  /** Invalid tools warned of one by one (at most MAX_TOOL_WARNINGS), and the rest, counted. */
  let warned = 0;
  let unwarned = 0;
  let cut: ToolWarning | undefined;
  /** Names of the tools offered, and of those skipped as invalid with their warning (if one was given). */
  const names = new Set<string>();
  const invalid = new Map<string, ToolWarning | undefined>();
  const cursors = new Set<string>();
  let cursor: string | undefined;
  let pages = 0;
  let bytes = 0;
  listing: do {
    // Whether the page listed anything but tools seen before: an empty page, or one of invalid
    // tools only (nameless ones too), is no sign of a server paging in circles.
    let repeatsOnly = true;
    const page = await request({
      request: { method: 'tools/list', params: cursor === undefined ? undefined : { cursor } },
      resultSchema: ToolListPage,
      // A stop aborts the page's request, which closes its connection.
      options: { signal },
    });
    bytes += Buffer.byteLength(JSON.stringify(page.tools));
    if (bytes > MCP_LISTING_LIMITS.bytes) {
      cut = listingCut(server, `more than ${MCP_LISTING_LIMITS.bytes} bytes of tools`, tools.length);
      break;
    }
    for (const listed of page.tools) {
      // A tool listed again (a server that pages badly) counts once: the first valid listing of
      // its name is offered, even after invalid ones (whose warning it takes back).
      const listedName = (listed as { name?: unknown })?.name;
      const named = typeof listedName === 'string' ? listedName : undefined;
      if (named !== undefined && names.has(named)) continue;
      const checked = UsableTool.safeParse(listed);
      if (named !== undefined && invalid.has(named) && !checked.success) continue;
      repeatsOnly = false;
      if (checked.success) {
        if (tools.length === MCP_LISTING_LIMITS.tools) {
          cut = listingCut(server, `more than ${MCP_LISTING_LIMITS.tools} tools`, tools.length);
          break listing;
        }
        tools.push(checked.data as ListedTool);
        if (named === undefined) continue;
        names.add(named);
        if (invalid.has(named)) {
          const warning = invalid.get(named);
          if (warning) {
            warnings.splice(warnings.indexOf(warning), 1);
            warned--;
          } else unwarned--;
          invalid.delete(named);
        }
        continue;
      }
      let warning: ToolWarning | undefined;
      if (warned === MAX_TOOL_WARNINGS) unwarned++;
      else {
        warned++;
        const issue = checked.error.issues[0];
        warning = {
          tool: named !== undefined ? toolName(server, named) : server,
          code: 'mcp_invalid_tool',
          message:
            `MCP tool skipped: ${issue ? `${issue.path.join('.') || 'the tool'} ${issue.message}` : 'not a valid tool'}`.slice(
              0,
              200,
            ),
        };
        warnings.push(warning);
      }
      if (named !== undefined) invalid.set(named, warning);
    }
    cursor = page.nextCursor;
    // A server that pages in circles (a cursor seen before, a page of tools all seen before) is
    // listed no further: what it listed so far is offered. Any other page, empty or of invalid
    // tools only, is read on from (the page limit bounds a server that sends such pages forever).
    if (cursor !== undefined && cursors.has(cursor)) break;
    if (cursor !== undefined) cursors.add(cursor);
    if (page.tools.length > 0 && repeatsOnly) break;
    if (++pages >= MCP_LISTING_LIMITS.pages && cursor !== undefined) {
      cut = listingCut(server, `more than ${MCP_LISTING_LIMITS.pages} pages of tools`, tools.length);
      break;
    }
  } while (cursor !== undefined);
  if (unwarned > 0) {
    warnings.push({
      tool: server,
      code: 'mcp_invalid_tool',
      message: `MCP tools skipped: ${unwarned} more not valid`,
    });
  }
  if (cut) warnings.push(cut);
  return { tools, warnings };
}

class SetupTimeout extends Error {}

/** A connect given up because the reply was stopped (McpConnectOptions.signal): no warning. */
class SetupStopped extends Error {}

/** A server the agent may not reach (mcp-address.ts): refused before any request. */
class NotPublic extends Error {}

/**
 * A header of the server's settings that HTTP cannot carry (toolHeaderProblem), stored before the
 * agents API and the setup file refused it: fetch would refuse the request before sending it.
 */
class UnsendableHeader extends Error {
  constructor(
    readonly header: string,
    readonly problem: string,
  ) {
    super('unsendable MCP header');
  }
}

/** The first header of the server's settings that HTTP cannot carry; its value is never named. */
function checkHeaders(spec: McpToolSpec): void {
  for (const [name, value] of Object.entries(spec.headers ?? {})) {
    const problem = typeof value === 'string' ? toolHeaderProblem(name, value) : null;
    if (problem) throw new UnsendableHeader(name, problem);
  }
}

function describeFailure(spec: McpToolSpec, error: unknown, timeoutMs: number): ToolWarning {
  if (error instanceof UnsendableHeader) {
    return {
      tool: spec.name,
      code: 'mcp_invalid_header',
      message: `MCP server not called: its header "${error.header}" ${error.problem}`,
    };
  }
  if (error instanceof NotPublic || networkErrorCode(error) === 'EADDRNOTPUBLIC') {
    return {
      tool: spec.name,
      code: 'mcp_not_allowed',
      message:
        'MCP server address is not public (private, loopback or link-local); an agent made over the API may use it only when the operator sets ATRIUM_MCP_ALLOW_PRIVATE_NETWORK',
    };
  }
  if (error instanceof SetupTimeout || /timed out/i.test(String((error as Error)?.message))) {
    return {
      tool: spec.name,
      code: 'mcp_timeout',
      message: `MCP server did not answer within ${timeoutMs} ms`,
    };
  }
  const code = networkErrorCode(error);
  if (code || error instanceof TypeError) {
    return {
      tool: spec.name,
      code: 'mcp_unreachable',
      message: `MCP server is unreachable${code ? ` (${code})` : ''}`,
    };
  }
  const status = (error as { statusCode?: number })?.statusCode;
  return {
    tool: spec.name,
    code: 'mcp_error',
    message: status
      ? `MCP server answered HTTP ${status}`
      : `MCP server failed: ${String((error as Error)?.message ?? error).slice(0, 200)}`,
  };
}

/** A tool name the providers accept: `<server>_<tool>`, letters, digits, `_` and `-`, ≤ 64. */
function toolName(server: string, tool: string): string {
  return `${server}_${tool}`.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64);
}

/** How the agent's MCP servers are connected and their tools called. */
export interface McpConnectOptions {
  /** How long connecting to one server and listing its tools may take. */
  connectTimeoutMs: number;
  /** Which addresses the servers may have (mcp-address.ts); `any` when not given. */
  reach?: McpReach;
  /** How long each tool call may take (mcp-call-limit.ts). */
  calls: McpCallBound;
  /**
   * How long after a connect timeout an `initialize` answer is still waited for, in the
   * background, to end the session it opens (sessionEnding in mcp-fetch.ts); `calls.timeoutMs`
   * when not given.
   */
  lateInitializeMs?: number;
  /** How many such waits the process keeps at once (LateAnswerWaits); no limit when not given. */
  lateInitializeWaits?: LateAnswerWaits;
  /**
   * The reply's abort (a stop, a `DELETE` of its chat, a shutdown): a connect still under way is
   * given up at once, its request aborted (which closes its connection) and its client closed,
   * rather than holding the stopped reply (and the stop waiting for it) until it ends.
   */
  signal?: AbortSignal;
}

/**
 * The server's url and headers as sent: credentials in the url (`https://user:secret@host`, or
 * a token as the user name) become `Authorization: Basic`, as curl and browsers send them;
 * `fetch` refuses a url holding credentials outright, so such a tool could never connect. An
 * Authorization header the agent sets wins, and the url's credentials are then dropped.
 */
export function credentialsAsHeader(
  spec: Pick<McpToolSpec, 'url' | 'headers'>,
): Pick<McpToolSpec, 'url' | 'headers'> {
  const asStored = { url: spec.url, headers: spec.headers };
  if (!URL.canParse(spec.url)) return asStored;
  const url = new URL(spec.url);
  if (url.username === '' && url.password === '') return asStored;
  const basic = Buffer.from(
    `${percentDecoded(url.username)}:${percentDecoded(url.password)}`,
    'utf8',
  ).toString('base64');
  url.username = '';
  url.password = '';
  const hasAuthorization = Object.keys(spec.headers ?? {}).some(
    (name) => name.toLowerCase() === 'authorization',
  );
  return {
    url: url.href,
    headers: hasAuthorization ? spec.headers : { ...spec.headers, authorization: `Basic ${basic}` },
  };
}

async function connectOne(
  spec: McpToolSpec,
  options: McpConnectOptions,
): Promise<{ client: McpClient; tools: ToolSet; warnings: ToolWarning[] }> {
  const { connectTimeoutMs: timeoutMs, reach = 'any', signal } = options;
  if (signal?.aborted) throw new SetupStopped();
  if (reach === 'public' && privateAddressProblem(spec.url)) throw new NotPublic();
  checkHeaders(spec);
  const fetch = reach === 'public' ? publicOnlyFetch : globalThis.fetch;
  const session = sessionEnding(mcpTransportFetch(timeoutMs, fetch), {
    ms: options.lateInitializeMs ?? options.calls.timeoutMs,
    waits: options.lateInitializeWaits,
  });
  let client: McpClient | undefined;
  let timer: NodeJS.Timeout | undefined;
  const setup = (async () => {
    client = await createMCPClient({
      transport: {
        type: 'http',
        ...credentialsAsHeader(spec),
        redirect: 'error',
        fetch: session.fetch,
      },
      // The stop aborts `initialize` as the timeout does: its request may outlive it, for the
      // session a late answer opens to be ended (sessionEnding).
      initializationOptions: { timeout: timeoutMs, signal },
      clientName: 'atrium',
    });
    const listed = await listUsableTools(client, spec.name, signal);
    return {
      client,
      tools: withCutResults(
        withCallTimeLimit(client.toolsFromDefinitions({ tools: listed.tools }) as ToolSet, options.calls),
      ),
      warnings: listed.warnings,
    };
  })();
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new SetupTimeout()), timeoutMs);
  });
  // Whatever step the connect is at (the transport's start takes no signal): it ends at once.
  let onStop: (() => void) | undefined;
  const stopped = new Promise<never>((_, reject) => {
    onStop = () => reject(new SetupStopped());
    signal?.addEventListener('abort', onStop, { once: true });
  });
  try {
    return await Promise.race([setup, timeout, stopped]);
  } catch (error) {
    // A client made after the race was lost (its `initialize` answered just then) is closed
    // once its set-up has settled, whichever way.
    const known = client;
    void setup.catch(() => {}).then(() => (client === known ? undefined : client?.close().catch(() => {})));
    const ending = (async () => {
      await client?.close().catch(() => {});
      // A session the server opened and no close ended (the time ran out before the client was
      // made: sessionEnding) is ended here.
      await session.end();
    })();
    // A stopped reply does not wait for the server to answer the session's end (bounded on its
    // own: mcpTransportFetch), as a finished reply does not (chat.ts, replyFinisher).
    if (!signal?.aborted) await ending;
    throw signal?.aborted ? new SetupStopped() : error;
  } finally {
    clearTimeout(timer);
    if (onStop) signal?.removeEventListener('abort', onStop);
  }
}

/**
 * Connects to the agent's MCP servers (streamable HTTP) in parallel, each bounded by the
 * connect timeout; with `reach: 'public'`, only to public addresses (mcp-address.ts). A server that is down, slow or failing becomes a warning, never an error.
 * What a server answers is bounded: each response is read up to MAX_MCP_RESPONSE_BYTES
 * (mcp-fetch.ts), its tool listing within MCP_LISTING_LIMITS, each tool call within
 * `calls.timeoutMs` (mcp-call-limit.ts), each tool result kept up to MAX_MCP_TOOL_OUTPUT_CHARS
 * (mcp-output.ts).
 */
export async function connectMcpTools(
  specs: McpToolSpec[],
  options: McpConnectOptions,
): Promise<ConnectedTools> {
  const timeoutMs = options.connectTimeoutMs;
  const outcomes = await Promise.allSettled(specs.map((spec) => connectOne(spec, options)));
  const tools: ToolSet = {};
  const warnings: ToolWarning[] = [];
  const clients: McpClient[] = [];
  outcomes.forEach((outcome, i) => {
    const spec = specs[i] as McpToolSpec;
    if (outcome.status === 'rejected') {
      // A server given up on for the reply's stop did nothing wrong; the reply calls no model.
      if (!(outcome.reason instanceof SetupStopped)) {
        warnings.push(describeFailure(spec, outcome.reason, timeoutMs));
      }
      return;
    }
    clients.push(outcome.value.client);
    warnings.push(...outcome.value.warnings);
    for (const [name, tool] of Object.entries(outcome.value.tools)) {
      const offered = toolName(spec.name, name);
      // Names cut to 64 characters, or `a_b` + `c` against `a` + `b_c`, can come out as one: the
      // first server's tool keeps it, rather than the model calling a tool other than it was told.
      if (offered in tools) {
        warnings.push({
          tool: offered,
          code: 'mcp_invalid_tool',
          message:
            `MCP tool skipped: tool ${name} of server ${spec.name} is offered as ${offered}, the name of another tool`.slice(
              0,
              200,
            ),
        });
        continue;
      }
      tools[offered] = tool;
    }
  });
  return {
    tools,
    warnings,
    close: async () => {
      await Promise.allSettled(clients.map((client) => client.close()));
    },
  };
}
