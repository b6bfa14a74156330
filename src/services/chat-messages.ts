import { unavailableFileNote } from './file-downloads.js';
import type { UIMessage } from 'ai';
import { type ApiError, errors, type ValidationIssue } from '../errors.js';
import { newId } from '../ids.js';
import { showsCharacter } from '../text.js';

export type MessageRole = 'user' | 'assistant' | 'system';

/** A message as the request carries it (shape checked by the route schema). */
export interface IncomingMessage {
  id?: string;
  role: MessageRole;
  parts: Array<{ type: string; [key: string]: unknown }>;
  [key: string]: unknown;
}

/** A message of the conversation: stored ones and new ones, in order. */
export interface ConversationMessage {
  id: string;
  role: MessageRole;
  parts: Array<{ type: string; [key: string]: unknown }>;
  /** A stored reply's finish reason (`error`: the provider failed it after some output). */
  finishReason?: string | null;
}

const MEDIA_TYPE = /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*\/[A-Za-z0-9*][A-Za-z0-9!#$&^_.+*-]*(\s*;.*)?$/;
/** http(s), or a data: URL with its comma (`data:[<media type>][;base64],<data>`). */
const FILE_URL = /^(https?:|data:[^,]*,)/i;
/** A data: URL, its scheme in any case (URL schemes are case-insensitive). */
const DATA_URL = /^data:/i;

/**
 * What a streamed reply holds before the model's first token: step boundaries, and the parts the
 * service sends right after `start` (a project chat's `source-document` citations, tool set-up
 * `data-warnings`; `leadingParts` in chat.ts).
 */
const BEFORE_FIRST_TOKEN = new Set(['step-start', 'source-document', 'data-warnings']);

/**
 * Leftovers a client may send: what `useChat` holds after a reply failed (or was stopped) before
 * its first token, an assistant message with no parts, or only the parts above (the reply was not
 * stored, so the client's copy would be stored in its place, a reply with nothing of the model's).
 * It is dropped, not refused (spec/chats.md).
 */
export function dropLeftovers(messages: IncomingMessage[]): IncomingMessage[] {
  return messages.filter((message) => !isLeftover(message));
}

function isLeftover(message: IncomingMessage): boolean {
  return message.role === 'assistant' && message.parts.every((part) => BEFORE_FIRST_TOKEN.has(part.type));
}

/**
 * The rules of decisions.md the schema cannot say: text parts need `text`, file parts need a
 * `url` (http, https or data) and a `mediaType`; user and system messages need a part; at least
 * one user message; ids unique. Given the messages as sent, so a path names the request's own
 * index; leftovers (dropped, not refused) are passed over.
 */
export function validateIncomingMessages(messages: IncomingMessage[]): void {
  const issues: ValidationIssue[] = [];
  const seen = new Set<string>();
  messages.forEach((message, m) => {
    if (isLeftover(message)) return;
    if (message.id !== undefined) {
      if (seen.has(message.id))
        issues.push({ path: `body.messages.${m}.id`, message: 'duplicates an earlier message id' });
      seen.add(message.id);
    }
    if (message.parts.length === 0 && message.role !== 'assistant') {
      issues.push({ path: `body.messages.${m}.parts`, message: 'must contain at least one part' });
    }
    message.parts.forEach((part, p) => {
      const at = `body.messages.${m}.parts.${p}`;
      if (part.type === 'text') {
        if (typeof part.text !== 'string') issues.push({ path: `${at}.text`, message: 'must be a string' });
      } else if (part.type === 'file') {
        if (typeof part.url !== 'string' || !FILE_URL.test(part.url)) {
          issues.push({ path: `${at}.url`, message: 'must be an http(s) or data: URL' });
        }
        if (typeof part.mediaType !== 'string' || !MEDIA_TYPE.test(part.mediaType)) {
          issues.push({ path: `${at}.mediaType`, message: 'must be a media type such as image/png' });
        } else if (typeof part.url === 'string' && DATA_URL.test(part.url)) {
          // The AI SDK sends a data: URL's bytes under the type written in the URL, not the part's.
          const own = dataUrlMediaType(part.url);
          if (!URL.canParse(part.url)) {
            issues.push({ path: `${at}.url`, message: 'must be a valid data: URL' });
          } else if (sentAsFile(part.mediaType) && own !== '' && !sentAsFile(own)) {
            issues.push({
              path: `${at}.url`,
              message: `is a data: URL of ${own}, which cannot be given to the model as ${part.mediaType}`,
            });
          } else if (sentAsFile(part.mediaType) && !holdsDataUrlBytes(part.url)) {
            issues.push({
              path: `${at}.url`,
              message: 'is a data: URL whose base64 data is not valid base64',
            });
          }
        }
        if (part.filename !== undefined && typeof part.filename !== 'string') {
          issues.push({ path: `${at}.filename`, message: 'must be a string' });
        }
      }
    });
  });
  if (!messages.some((message) => message.role === 'user')) {
    issues.push({ path: 'body.messages', message: 'must contain at least one message with role user' });
  }
  const first = issues[0];
  if (first) throw errors.badRequest(`${first.path} ${first.message}`, issues);
}

/**
 * The refusal of a conversation in which no message holds a part the model reads (only part
 * types that are stored but not sent), named at the request's last user message.
 */
export function nothingForTheModel(messages: IncomingMessage[]): ApiError {
  const at = messages.findLastIndex((message) => message.role === 'user');
  const path = at < 0 ? 'body.messages' : `body.messages.${at}.parts`;
  const message =
    'must contain a text or file part: other part types are stored but not sent to the model, which would get no message';
  return errors.badRequest(`${path} ${message}`, [{ path, message }]);
}

export const TITLE_MAX = 100;
export const UNTITLED_CHAT = 'New chat';

/**
 * A title with nothing to see: whitespace, invisible characters (zero-width space, word joiner,
 * direction marks, variation selectors, which `trim` and `\s` leave) and blank fillers alone
 * (showsCharacter, the rule of every name). Such a title is an empty line in every list.
 */
export function isBlankTitle(text: string): boolean {
  return !showsCharacter(text);
}

/**
 * A chat's title: the first user message's text, whitespace and control characters collapsed to
 * a space, at most 100 characters, cut at a word boundary (a single word longer than that is cut
 * hard). Characters are code points, as a rename counts them: cut by UTF-16 units, a title
 * could end in half an emoji, which the database stores as U+FFFD.
 */
export function chatTitle(messages: ReadonlyArray<ConversationMessage | IncomingMessage>): string {
  const firstUser = messages.find((message) => message.role === 'user');
  const text = (firstUser?.parts ?? [])
    .filter((part) => part.type === 'text' && typeof part.text === 'string')
    .map((part) => part.text as string)
    .join(' ');
  // One code point past the limit tells a cut inside a word from one at a space.
  const title = cutAtWord(collapsedStart(text, TITLE_MAX + 1));
  // A title that shows nothing (a message of zero-width spaces, or opening with 100 of them)
  // would be an empty line in every list, and a rename refuses it: the chat is untitled instead.
  return showsCharacter(title) ? title : UNTITLED_CHAT;
}

/** `start` (at most TITLE_MAX + 1 code points) cut to TITLE_MAX at a word boundary. */
function cutAtWord(start: string): string {
  const chars = [...start];
  if (chars.length <= TITLE_MAX) return start;
  const cut = chars.slice(0, TITLE_MAX).join('');
  if (chars[TITLE_MAX] === ' ') return cut;
  const lastSpace = cut.lastIndexOf(' ');
  // Cut hard, as a single long word is, when what comes before the cut word shows nothing.
  return lastSpace > 0 && showsCharacter(cut.slice(0, lastSpace)) ? cut.slice(0, lastSpace) : cut;
}

/**
 * The first `count` code points of `text` trimmed, each run of whitespace and control characters
 * (U+0085 NEL, ESC, …, which `\s` leaves) one space: a title is one line, and a rename refuses
 * them (renamedTitleProblem in chats.ts). Only the start is read: a first message may be 16 MiB,
 * and splitting all of it into characters held the process's only thread for seconds.
 */
function collapsedStart(text: string, count: number): string {
  const spaces = /[\s\p{Cc}]+/uy;
  let start = '';
  let taken = 0;
  let at = 0;
  while (at < text.length && taken < count) {
    spaces.lastIndex = at;
    if (spaces.test(text)) {
      at = spaces.lastIndex;
      // Neither leading nor trailing: something visible comes before and after.
      if (taken > 0 && at < text.length) {
        start += ' ';
        taken += 1;
      }
      continue;
    }
    const char = String.fromCodePoint(text.codePointAt(at) as number);
    start += char;
    taken += 1;
    at += char.length;
  }
  return start;
}

/**
 * History merge (decisions.md): the stored messages first, then the request's messages whose id
 * is not stored yet. So a client may send the whole conversation (as `useChat` does) or only
 * the new turn. Returns the full conversation and the messages to store. `storedIds` are all the
 * chat's stored ids, when `stored` is only the part of the history the model sees (regenerate).
 */
export function mergeHistory(
  stored: ConversationMessage[],
  incoming: IncomingMessage[],
  storedIds: ReadonlySet<string> = new Set(stored.map((message) => message.id)),
): { conversation: ConversationMessage[]; added: ConversationMessage[] } {
  const added: ConversationMessage[] = [];
  for (const message of incoming) {
    if (message.id !== undefined && storedIds.has(message.id)) continue;
    added.push({ id: message.id ?? newId('msg'), role: message.role, parts: message.parts });
  }
  return { conversation: [...stored, ...added], added };
}

/** A media type without its parameters, in lower case (`Text/Plain; charset=x` → `text/plain`). */
function essence(mediaType: string): string {
  return (mediaType.split(';')[0] ?? '').trim().toLowerCase();
}

/** The media type a data: URL names for its bytes, without parameters; '' when it names none. */
function dataUrlMediaType(url: string): string {
  return essence(/^data:([^,]*),/i.exec(url)?.[1] ?? '');
}

/** Whether a part of this media type is given to the model as a file (images and PDFs). */
function sentAsFile(mediaType: string): boolean {
  const type = essence(mediaType);
  return type.startsWith('image/') || type === 'application/pdf';
}

/** Base64 as a data: URL carries it when nothing needs reading again. */
const PLAIN_BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * The data: URL to give the model for an image or PDF part, or undefined when it holds nothing
 * the model can take as a file. The AI SDK sends the bytes under the type the URL names, as
 * written (providers compare it case by case), and reads whatever follows the comma as base64.
 * So the URL names its own type in lower case, or the part's when it names none or a wildcard
 * (`image/*`: the providers send it as `image/jpeg`), and carries its bytes in plain base64: a
 * percent-encoded or spaced payload is read as the fetch standard reads data: URLs and encoded
 * again. A URL of another type, or whose base64 is not base64 (both stored before such parts were
 * refused), is not sent.
 */
function fileDataUrl(url: string, mediaType: string): string | undefined {
  const match = /^data:([^,]*),(.*)$/is.exec(url);
  if (!match) return undefined;
  const meta = match[1] ?? '';
  const payload = match[2] ?? '';
  const own = essence(meta);
  const type = own !== '' && !own.includes('*') ? own : essence(mediaType);
  if (!sentAsFile(type)) return undefined;
  const base64 = isBase64Meta(meta);
  if (base64 && isPlainBase64(payload)) {
    return meta === `${type};base64` ? url : `data:${type};base64,${payload}`;
  }
  // Node's decoder would make an empty or cut image of base64 that is not base64.
  const data = dataPayloadBytes(payload, base64);
  return data && `data:${type};base64,${data.toString('base64')}`;
}

/** Whether a data: URL's media type part ends in `;base64`. */
function isBase64Meta(meta: string): boolean {
  return /;\s*base64\s*$/i.test(meta);
}

/**
 * Base64 as it can go to the provider as written: the alphabet, then padding only where it
 * completes the last group (what the fetch standard's forgiving-base64 decode takes, without
 * whitespace). `a` (one character over a group) and `YQ=` are not base64.
 */
export function isPlainBase64(payload: string): boolean {
  if (!PLAIN_BASE64.test(payload)) return false;
  const padded = payload.endsWith('=');
  return padded ? payload.length % 4 === 0 : payload.length % 4 !== 1;
}

/**
 * Whether a data: URL holds bytes as the fetch standard reads them: a `;base64` one must pass its
 * forgiving-base64 decode (after percent-escapes are decoded; ASCII whitespace ignored), which
 * fails it otherwise. Plain base64, nearly every such URL, is not decoded to tell.
 */
function holdsDataUrlBytes(url: string): boolean {
  const match = /^data:([^,]*),(.*)$/is.exec(url);
  if (!match || !isBase64Meta(match[1] ?? '')) return true;
  const payload = match[2] ?? '';
  return isPlainBase64(payload) || dataPayloadBytes(payload, true) !== undefined;
}

/** A data: URL's payload as bytes (fetch standard), undefined when its base64 does not decode. */
function dataPayloadBytes(payload: string, base64: boolean): Buffer | undefined {
  const bytes = percentDecoded(payload);
  if (!base64) return bytes;
  const text = bytes.toString('latin1').replace(/[\t\n\f\r ]/g, '');
  return isPlainBase64(text) ? Buffer.from(text, 'base64') : undefined;
}

/** A data: URL's payload as bytes: percent-escapes decoded, everything else taken as UTF-8. */
function percentDecoded(text: string): Buffer {
  const input = Buffer.from(text, 'utf8');
  if (!text.includes('%')) return input;
  const out = Buffer.alloc(input.length);
  let length = 0;
  for (let i = 0; i < input.length; i++) {
    const hex = input[i] === 0x25 ? input.toString('latin1', i + 1, i + 3) : '';
    if (/^[0-9a-f]{2}$/i.test(hex)) {
      out[length++] = parseInt(hex, 16);
      i += 2;
    } else {
      out[length++] = input[i]!;
    }
  }
  return out.subarray(0, length);
}

function decodeDataUrlText(url: string): string | undefined {
  const match = /^data:([^,]*),(.*)$/is.exec(url);
  if (!match) return undefined;
  const meta = match[1] ?? '';
  const payload = match[2] ?? '';
  try {
    return meta.toLowerCase().endsWith(';base64')
      ? Buffer.from(payload, 'base64').toString('utf8')
      : decodeURIComponent(payload);
  } catch {
    return undefined;
  }
}

export function isTextLike(mediaType: string): boolean {
  const type = mediaType.toLowerCase().split(';')[0]?.trim() ?? '';
  return (
    type.startsWith('text/') ||
    /^application\/(json|ld\+json|xml|yaml|x-yaml|toml|javascript|typescript|x-sh|x-python|sql|graphql|csv|x-ndjson)$/.test(
      type,
    ) ||
    type.endsWith('+json') ||
    type.endsWith('+xml')
  );
}

type ModelPart = UIMessage['parts'][number];

/**
 * The part types the model is given (toModelPart). A turn reads only these of the stored
 * messages (chat.ts): the title, the project search, the files fetched and `/v1/openai`'s history
 * check look at no others either, and the rest (`data-*`, tools, reasoning, sources) may be
 * large.
 */
export const MODEL_PART_TYPES = ['text', 'file'] as const;

/**
 * What the model sees of one part: text as is; images and PDFs as files; text-like data: files
 * as their text; other files by name. Other part types (tool, reasoning, custom) are stored but
 * not sent to the model.
 */
function toModelPart(
  part: ConversationMessage['parts'][number],
  unavailable: ReadonlySet<string>,
): ModelPart | undefined {
  if (part.type === 'text' && typeof part.text === 'string') return { type: 'text', text: part.text };
  if (part.type !== 'file') return undefined;
  const url = String(part.url);
  const mediaType = String(part.mediaType);
  const filename = typeof part.filename === 'string' ? part.filename : undefined;
  const label = filename ?? 'attachment';
  if (!URL.canParse(url)) {
    // `https://` alone (or `data://[x,…`) passes the schema's prefix check and is no address:
    // the AI SDK would send it to the provider as if it were base64 data, or fail. Stored chats
    // may hold one (useChat resends them every turn), so it is named as a note, not refused.
    return {
      type: 'text',
      text: `<attachment name="${label}" type="${mediaType}" unavailable="not a valid URL" />`,
    };
  }
  if (unavailable.has(new URL(url).href)) {
    // A stored message's file that no longer answers: named, so the model knows it was there.
    return {
      type: 'text',
      text: unavailableFileNote(label, mediaType),
    };
  }
  if (sentAsFile(mediaType)) {
    const modelUrl = DATA_URL.test(url) ? fileDataUrl(url, mediaType) : url;
    if (modelUrl === undefined) {
      return {
        type: 'text',
        text: `<attachment name="${label}" type="${mediaType}" unavailable="its data: URL holds no ${mediaType}" />`,
      };
    }
    return { type: 'file', url: modelUrl, mediaType: essence(mediaType), ...(filename ? { filename } : {}) };
  }
  if (isTextLike(mediaType) && DATA_URL.test(url)) {
    const text = decodeDataUrlText(url);
    if (text !== undefined)
      return {
        type: 'text',
        text: `<attachment name="${label}" type="${mediaType}">\n${text}\n</attachment>`,
      };
  }
  return {
    type: 'text',
    text: `<attachment name="${label}" type="${mediaType}" url="${DATA_URL.test(url) ? 'data:…' : url}" />`,
  };
}

/**
 * The conversation as UI messages the AI SDK converts for the model; files in `unavailable`
 * (hrefs: stored files that could not be fetched, file-downloads.ts) as a note instead.
 */
export function toModelUIMessages(
  conversation: ConversationMessage[],
  unavailable: ReadonlySet<string> = new Set(),
): UIMessage[] {
  const result: UIMessage[] = [];
  for (const message of conversation) {
    const parts = message.parts
      .map((part) => toModelPart(part, unavailable))
      .filter((part): part is ModelPart => part !== undefined);
    if (parts.length === 0) continue;
    if (message.role === 'system') {
      // The AI SDK takes system messages as text only.
      const text = parts.map((part) => (part.type === 'text' ? part.text : '')).join('\n');
      result.push({ id: message.id, role: 'system', parts: [{ type: 'text', text }] });
    } else {
      result.push({ id: message.id, role: message.role, parts });
    }
  }
  return result;
}
