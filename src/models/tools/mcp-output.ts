import type { ToolSet } from 'ai';

/**
 * The most characters an MCP tool result keeps: what is stored in the reply's tool part and sent
 * to the model, again at each later step of the reply. Later turns do not send it (the history
 * gives the model text and files only, toModelUIMessages), so a result stored whole before this
 * limit needs no cut there. About 250,000 tokens of text, room for a screenshot or two; a
 * result past it is cut (cutToolResult).
 */
export const MAX_MCP_TOOL_OUTPUT_CHARS = 1024 * 1024;

interface ContentItem {
  type: string;
  text?: string;
}

/** `text`'s first `length` characters, without half of a surrogate pair at the end. */
function head(text: string, length: number): string {
  const cut = text.slice(0, length);
  const last = cut.charCodeAt(cut.length - 1);
  return last >= 0xd800 && last <= 0xdbff ? cut.slice(0, -1) : cut;
}

function cutNotice(total: number, maxChars: number, itemsLeftOut: number): string {
  const items =
    itemsLeftOut > 0 ? ` (${itemsLeftOut} more content item${itemsLeftOut === 1 ? '' : 's'} left out)` : '';
  return `\n\n[Atrium cut this tool result: it came to ${total} characters, more than the ${maxChars} a tool result may keep; what is above is its beginning${items}. Ask the tool for less, e.g. a narrower query or one page at a time.]`;
}

/**
 * An MCP `tools/call` result cut to at most `maxChars` characters (its text and the JSON of its
 * other items), the way an experienced user expects of an agent: the beginning of the result,
 * then a notice the model reads saying it was cut and how much there was, rather than a failed
 * call. Content items are kept in order while they fit; the first text item that does not is
 * cut, an image or other item that does not is left out, and nothing after it is kept.
 * A cut result keeps only its items and `isError`: `structuredContent` (by the MCP spec, the same
 * data as the text), `_meta` and any other field are dropped, and a text item keeps only its
 * text, so nothing beside the counted text can carry the result past the limit.
 */
export function cutToolResult(result: unknown, maxChars = MAX_MCP_TOOL_OUTPUT_CHARS): unknown {
  const whole = JSON.stringify(result) ?? '';
  if (whole.length <= maxChars) return result;
  const { content, isError } = result as { content?: unknown; isError?: unknown };
  const rest = isError === undefined ? {} : { isError };
  if (!Array.isArray(content)) {
    // A result with no content list (the older `toolResult` form): its JSON, cut, as text.
    return {
      content: [{ type: 'text', text: head(whole, maxChars) + cutNotice(whole.length, maxChars, 0) }],
    };
  }
  const items = content as ContentItem[];
  const kept: ContentItem[] = [];
  let room = maxChars;
  let total = 0;
  let cutAt: number | undefined;
  for (const [index, whole] of items.entries()) {
    const item: ContentItem =
      whole.type === 'text' && typeof whole.text === 'string' ? { type: 'text', text: whole.text } : whole;
    const size = item.type === 'text' ? item.text!.length : JSON.stringify(item).length;
    total += size;
    if (cutAt !== undefined) continue;
    if (size <= room) {
      kept.push(item);
      room -= size;
      continue;
    }
    cutAt = index;
    if (item.type === 'text' && typeof item.text === 'string' && room > 0)
      kept.push({ ...item, text: head(item.text, room) });
  }
  if (cutAt === undefined) return { ...rest, content: kept };
  const leftOut = items.length - cutAt - (items[cutAt]?.type === 'text' && room > 0 ? 1 : 0);
  const notice = cutNotice(total, maxChars, leftOut);
  const last = kept.at(-1);
  if (last?.type === 'text' && typeof last.text === 'string')
    kept[kept.length - 1] = { ...last, text: last.text + notice };
  else kept.push({ type: 'text', text: notice.trimStart() });
  return { ...rest, content: kept };
}

/** An error's message cut to `maxChars`: a tool error is stored and sent to the model as well. */
function cutToolError(error: unknown, maxChars: number): unknown {
  const message = (error as Error)?.message;
  if (typeof message !== 'string' || message.length <= maxChars) return error;
  return new Error(head(message, maxChars) + cutNotice(message.length, maxChars, 0), { cause: error });
}

/** The tools with each result (and error message) cut to `maxChars` (cutToolResult). */
export function withCutResults(tools: ToolSet, maxChars = MAX_MCP_TOOL_OUTPUT_CHARS): ToolSet {
  // No prototype, as the MCP client's own set: a tool may be named `__proto__`.
  const cut: ToolSet = Object.create(null) as ToolSet;
  for (const [name, tool] of Object.entries(tools)) {
    const execute = tool.execute;
    cut[name] = !execute
      ? tool
      : {
          ...tool,
          execute: async (input: unknown, options: Parameters<typeof execute>[1]) => {
            try {
              return cutToolResult(await execute(input as never, options), maxChars);
            } catch (error) {
              throw cutToolError(error, maxChars);
            }
          },
        };
  }
  return cut;
}
