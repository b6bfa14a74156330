/**
 * Rules for an agent's fields that the agents API (src/services/agent-admin.ts) and the setup file
 * (src/setup/validate.ts) both hold: one function each, so the two never accept different agents.
 */

/** What reads show for a secret: a header value (an authorization header), a url's password or query value. */
export const MASKED_HEADER_VALUE = '***';

/** The query's `name=value` pairs as the URL spells them (split as URLSearchParams splits them). */
export function queryPairs(url: URL): Array<{ spelled: string; name: string; value: string | undefined }> {
  return url.search
    .slice(1)
    .split('&')
    .map((spelled) => {
      const eq = spelled.indexOf('=');
      return eq === -1
        ? { spelled, name: spelled, value: undefined }
        : { spelled, name: spelled.slice(0, eq), value: spelled.slice(eq + 1) };
    });
}

/**
 * Whether a url sent to us holds `"***"` where a read puts it (`maskedToolUrl`, services/agent-admin.ts): a url as read. Either half
 * of the userinfo counts alone (`***:pw`, `alice:***`), so that half a mask beside a real value
 * is refused rather than stored as a literal credential. URL parsing keeps percent-escapes as
 * spelled, so a literal `***` sent as `%2A%2A%2A` is no mask and is stored.
 */
export function hasMaskedPart(url: string): boolean {
  const parsed = new URL(url);
  return (
    parsed.username === MASKED_HEADER_VALUE ||
    parsed.password === MASKED_HEADER_VALUE ||
    queryPairs(parsed).some((pair) => pair.value === MASKED_HEADER_VALUE)
  );
}

export const AGENT_IMAGE_RULE =
  'must be an https or http URL, or a data:image/… URL (no other scheme, such as javascript:)';

/** The scheme itself, so that a browser reading the string finds the same one (no leading space). */
const ALLOWED_IMAGE_START = /^(https?:\/\/|data:image\/[a-z0-9.+-]+[;,])/i;

/**
 * Why `image` cannot be an agent's image, or null when it can. A UI puts it in an `src` or `href`,
 * where a `javascript:` or `vbscript:` URL would run: only web URLs and inline images are taken, and
 * `""` (no image, what an agent without one shows).
 */
export function agentImageProblem(image: string): string | null {
  if (image === '') return null;
  if (!ALLOWED_IMAGE_START.test(image) || !URL.canParse(image)) return AGENT_IMAGE_RULE;
  return null;
}

export const TOOL_URL_RULE = 'must be an http or https URL (a streamable-HTTP MCP server)';

export const TOOL_URL_USER_NAME_RULE =
  'has a user name holding ":" once percent-decoded, which Basic authentication cannot send (its first ":" ends the user name): put the credential in an Authorization header instead';

/** The url parser leaves userinfo's escapes encoded; a stray `%` is kept as it is. */
export function percentDecoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * Why `url` cannot be an MCP tool's server, or null when it can: a streamable-HTTP MCP server has
 * an http(s) URL, and any other scheme (ftp, ws, data, mailto) could never connect. Its userinfo is
 * sent as `Authorization: Basic` (src/models/tools/mcp.ts), which splits user name from password
 * at the first colon (RFC 7617): a user name holding one (`a%3Ab`) would reach the server cut in
 * two. Whether its address may be private is the agents API's own check (the setup file is the
 * operator's).
 */
export function toolUrlProblem(url: string): string | null {
  if (!URL.canParse(url)) return TOOL_URL_RULE;
  const { protocol, username } = new URL(url);
  if (protocol !== 'http:' && protocol !== 'https:') return TOOL_URL_RULE;
  return percentDecoded(username).includes(':') ? TOOL_URL_USER_NAME_RULE : null;
}

/**
 * Each of an agent's tools needs its own name (it names the tool's functions to the model): one
 * problem per repeated name, at the later occurrence, naming the first. `toolPath(i)` spells the
 * path of tool `i`: `body.tools.2` in the API (as its schema validation spells paths),
 * `…tools[2]` in the setup file (as its own problems are spelled).
 */
export function duplicateToolNames(
  tools: readonly { name?: string }[],
  toolPath: (index: number) => string,
): Array<{ path: string; message: string }> {
  const firstAt = new Map<string, number>();
  const problems: Array<{ path: string; message: string }> = [];
  tools.forEach((tool, i) => {
    // A setup file's tool may have no name: its shape problems say so.
    if (tool.name === undefined) return;
    const first = firstAt.get(tool.name);
    if (first === undefined) firstAt.set(tool.name, i);
    else {
      problems.push({
        path: `${toolPath(i)}.name`,
        message: `is "${tool.name}", the name of ${toolPath(first)}: each tool of an agent needs its own name`,
      });
    }
  });
  return problems;
}

export const TOOL_HEADER_NAME_RULE =
  "is not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)";
export const TOOL_HEADER_VALUE_RULE =
  'holds a character an HTTP header value cannot carry (a line break, NUL or other control character, or one past U+00FF)';
export const TOOL_HEADER_FRAMING_RULE =
  'is set by the HTTP connection itself (Content-Length, Transfer-Encoding, Keep-Alive, Upgrade, Expect, a Connection other than close or keep-alive)';

/** RFC 9110's `token`: what a header name is made of. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Leading and trailing whitespace, which fetch drops from a value before it checks it. */
const SURROUNDING_WHITESPACE = /^[\t\n\r ]+|[\t\n\r ]+$/g;
/** A value's characters as Node's fetch (undici) sends them: tab, visible ASCII and space, Latin-1. */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/** Headers of the connection's own framing, which Node's fetch refuses to take from a caller. */
const FRAMING_HEADERS = new Set(['content-length', 'transfer-encoding', 'keep-alive', 'upgrade', 'expect']);

/**
 * Why the header `name: value` cannot be sent to an MCP tool's server, or null when it can: a
 * name that is no HTTP token, a value with a character HTTP cannot carry (a line break in a pasted
 * token, a character past U+00FF), or a header of the connection's framing. Node's fetch refuses
 * each before sending anything, so such a server could never be called. The value is a secret:
 * no message quotes it.
 */
export function toolHeaderProblem(name: string, value: string): string | null {
  if (!HEADER_NAME.test(name)) return TOOL_HEADER_NAME_RULE;
  const sent = value.replace(SURROUNDING_WHITESPACE, '');
  if (!HEADER_VALUE.test(sent)) return TOOL_HEADER_VALUE_RULE;
  const lower = name.toLowerCase();
  const framing =
    FRAMING_HEADERS.has(lower) ||
    (lower === 'connection' && !['close', 'keep-alive'].includes(sent.toLowerCase()));
  return framing ? TOOL_HEADER_FRAMING_RULE : null;
}
