import { createRequire } from 'node:module';
import type { LanguageModelV3 } from '@ai-sdk/provider';
import {
  cancelResponseBody,
  fetchWithValidatedRedirects,
  getRuntimeEnvironmentUserAgent,
  readResponseWithSizeLimit,
  withUserAgentSuffix,
} from '@ai-sdk/provider-utils';
import { DownloadError, type Experimental_DownloadFunction as DownloadFunction, type ModelMessage } from 'ai';
import { mapConcurrently } from '../concurrency.js';
import { withBodyCancelledOnAbort } from '../abort-cancels-body.js';
import { ApiError, errors } from '../errors.js';
import type { ConversationMessage } from './chat-messages.js';
import { networkErrorCode } from '../network-errors.js';
import { timeoutSignal } from '../timeout-signal.js';

/**
 * The most one file part's URL may bring when Atrium downloads it for a model that cannot read
 * URLs itself (the AI SDK's default is 2 GiB, held in memory). Providers take less: OpenAI
 * 20 MB per image, 32 MB per PDF.
 */
export const MAX_FILE_DOWNLOAD_BYTES = 32 * 1024 * 1024;
/** The most the files of one request may bring in all: what one reply holds in memory. */
export const MAX_REQUEST_DOWNLOAD_BYTES = 64 * 1024 * 1024;
/** Downloads of one request running at once. */
const DOWNLOADS_AT_ONCE = 4;

type Downloaded = { data: Uint8Array; mediaType: string | undefined };

/**
 * Fetches one file (defaultFileDownloader unless the app is given another): failures are the AI
 * SDK's DownloadError, as `whyNot` reads them.
 */
export type FileDownloader = (url: URL, abortSignal: AbortSignal) => Promise<Downloaded>;

const AI_SDK_VERSION = (createRequire(import.meta.url)('ai/package.json') as { version: string }).version;

/**
 * The AI SDK's download (`createDownload` of 'ai'), with the same checks, size limit, errors and
 * user agent, and one change: the abort cancels the body itself, which closes the connection to a
 * server that stopped part way through a file (abort-cancels-body.ts), rather than relying on
 * Node's fetch to pass it on. Each hop goes through the SDK's `fetchWithValidatedRedirects`: http
 * or https only, no HTTPS to HTTP, no `localhost` or `*.internal` name, no private, loopback or
 * link-local literal, at most 10 redirects. Its own fetch also refuses, when connecting, a name
 * that resolves to such an address; a `fetch` given here replaces that fetch (and that check),
 * for tests, which reach a local server that the SDK's would refuse.
 */
export function createFileDownloader(
  options: { maxBytes?: number; fetch?: typeof globalThis.fetch } = {},
): FileDownloader {
  const { maxBytes = MAX_FILE_DOWNLOAD_BYTES, fetch } = options;
  return async (url, abortSignal) => {
    const urlText = url.href;
    try {
      const headers = withUserAgentSuffix({}, `ai-sdk/${AI_SDK_VERSION}`, getRuntimeEnvironmentUserAgent());
      const response = withBodyCancelledOnAbort(
        await fetchWithValidatedRedirects({ url: urlText, headers, abortSignal, fetch }),
        abortSignal,
      );
      if (!response.ok) {
        await cancelResponseBody(response);
        throw new DownloadError({
          url: urlText,
          statusCode: response.status,
          statusText: response.statusText,
        });
      }
      const data = await readResponseWithSizeLimit({ response, url: urlText, maxBytes });
      return { data, mediaType: response.headers.get('content-type') ?? undefined };
    } catch (error) {
      if (DownloadError.isInstance(error)) throw error;
      throw new DownloadError({ url: urlText, cause: error });
    }
  };
}

export const defaultFileDownloader: FileDownloader = createFileDownloader();

/**
 * The download, failing once `signal` aborts, whatever the downloader does: one given to the app
 * (deps.fileDownloader) may not look at the signal. The default one does, and its abort closes
 * the connection too (createFileDownloader).
 */
function untilAborted<T>(download: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    download.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** A URL as it may appear in an answer or a log line: no query (it may hold a signature). */
function shownUrl(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

/**
 * Why a download failed, from known fields only: the SDK's own messages quote the whole URL,
 * query (a signed URL's signature) included.
 */
function whyNot(error: unknown, timedOut: boolean, timeoutMs: number): string {
  if (timedOut) return `no answer within ${timeoutMs} ms`;
  if (DownloadError.isInstance(error)) {
    if (error.statusCode !== undefined) return `HTTP ${error.statusCode}`;
    if (/exceed/i.test(error.message)) return `larger than ${MAX_FILE_DOWNLOAD_BYTES} bytes`;
    if (/private|internal|localhost|loopback|not allowed|protocol/i.test(error.message)) {
      return 'the address is not allowed';
    }
  }
  const code = networkErrorCode(error);
  return code ? `unreachable (${code})` : 'unreachable';
}

/** Whether the model reads this URL itself (the AI SDK's rule, from the provider's `supportedUrls`). */
function readsUrlItself(supportedUrls: Record<string, RegExp[]>, url: URL, mediaType: string): boolean {
  const type = mediaType.toLowerCase();
  return Object.entries(supportedUrls).some(([key, patterns]) => {
    const pattern = key.toLowerCase();
    const prefix = pattern === '*' || pattern === '*/*' ? '' : pattern.replace(/\*/, '');
    const matches = prefix === '' || prefix.endsWith('/') ? type.startsWith(prefix) : type === prefix;
    return matches && patterns.some((regex) => regex.test(url.href));
  });
}

/**
 * The http(s) URLs of the file parts the model is given as files (images, PDFs) in user
 * messages: the only ones the AI SDK downloads (chat-messages.ts, toModelPart), by href.
 */
function fileUrls(messages: ConversationMessage[]): Map<string, { url: URL; mediaType: string }> {
  const found = new Map<string, { url: URL; mediaType: string }>();
  for (const message of messages) {
    if (message.role !== 'user') continue;
    for (const part of message.parts) {
      if (part.type !== 'file' || typeof part.url !== 'string' || typeof part.mediaType !== 'string')
        continue;
      if (!part.mediaType.startsWith('image/') && part.mediaType !== 'application/pdf') continue;
      if (!/^https?:/i.test(part.url) || !URL.canParse(part.url)) continue;
      const url = new URL(part.url);
      found.set(url.href, { url, mediaType: part.mediaType });
    }
  }
  return found;
}

export interface PrefetchedFiles {
  /** For the model call: the files from memory, any other fetched then. */
  download: DownloadFunction;
  /** Stored messages' files that could not be fetched (by href): given to the model as a note. */
  unavailable: Set<string>;
}

/**
 * Downloads, before the user's turn is stored, the files of the conversation that the model
 * cannot read from their URL: each distinct URL once, DOWNLOADS_AT_ONCE at a time, within the
 * upstream timeout, at most MAX_REQUEST_DOWNLOAD_BYTES in all. A file of the request's new
 * messages that cannot be fetched is the client's 400, with nothing stored (not a failed model
 * call, and not a stored turn that every later turn would fail on again). A stored message's
 * file that no longer answers (an expired signed URL) is left out of what the model sees, named
 * in a note (`unavailable`), so the chat goes on.
 */
export async function prefetchFiles(options: {
  model: LanguageModelV3;
  conversation: ConversationMessage[];
  added: ConversationMessage[];
  timeoutMs: number;
  downloader?: FileDownloader;
  /**
   * The reply's abort (a stop while it is set up): the downloads under way are given up, none is
   * started, and no file is refused for it. The files left out are unavailable, never fetched:
   * the reply calls no model.
   */
  stop?: AbortSignal;
}): Promise<PrefetchedFiles> {
  const downloader = options.downloader ?? defaultFileDownloader;
  const supportedUrls = await options.model.supportedUrls;
  const fresh = new Set(fileUrls(options.added).keys());
  const wanted = [...fileUrls([...options.conversation, ...options.added]).values()].filter(
    ({ url, mediaType }) => !readsUrlItself(supportedUrls, url, mediaType),
  );
  const fetched = new Map<string, Downloaded>();
  const unavailable = new Set<string>();
  const { stop } = options;
  const within = timeoutSignal(options.timeoutMs, stop);
  const deadline = within.signal;
  let total = 0;
  const fetchOne = async ({ url }: { url: URL }) => {
    const isNew = fresh.has(url.href);
    let file: Downloaded;
    try {
      stop?.throwIfAborted();
      file = await untilAborted(downloader(url, deadline), deadline);
    } catch (error) {
      if (stop?.aborted) {
        unavailable.add(url.href);
        return;
      }
      const reason = whyNot(error, deadline.aborted && !stop?.aborted, options.timeoutMs);
      if (!isNew) {
        unavailable.add(url.href);
        return;
      }
      throw errors.badRequest(`A file part's URL could not be downloaded (${shownUrl(url)}: ${reason})`, [
        { path: 'body.messages', message: `${shownUrl(url)} could not be downloaded: ${reason}` },
      ]);
    }
    if (total + file.data.byteLength > MAX_REQUEST_DOWNLOAD_BYTES) {
      if (!isNew) {
        // Older files past the budget are left out, as if unreachable: the chat goes on.
        unavailable.add(url.href);
        return;
      }
      throw errors.badRequest(
        `The files Atrium downloads for the model come to more than ${MAX_REQUEST_DOWNLOAD_BYTES} bytes with this request's`,
      );
    }
    total += file.data.byteLength;
    fetched.set(url.href, file);
  };
  try {
    // The request's own files first: they have the budget before the chat's older ones.
    await mapConcurrently(
      wanted.filter(({ url }) => fresh.has(url.href)),
      DOWNLOADS_AT_ONCE,
      fetchOne,
    );
    await mapConcurrently(
      wanted.filter(({ url }) => !fresh.has(url.href)),
      DOWNLOADS_AT_ONCE,
      fetchOne,
    );
  } finally {
    within.clear();
  }
  const download: DownloadFunction = (requested) =>
    Promise.all(
      requested.map(async ({ url, isUrlSupportedByModel }) => {
        if (isUrlSupportedByModel || unavailable.has(url.href)) return null;
        const early = fetched.get(url.href);
        if (early) return early;
        // Not prefetched: a stored message read again after the MCP servers answered.
        const signal = AbortSignal.timeout(options.timeoutMs);
        try {
          return await untilAborted(downloader(url, signal), signal);
        } catch (error) {
          throw new ApiError(
            'upstream_error',
            `A file of this chat could not be downloaded (${shownUrl(url)}: ${whyNot(error, signal.aborted, options.timeoutMs)})`,
            { url: shownUrl(url) },
          );
        }
      }),
    );
  return { download, unavailable };
}

/** The note a file that could not be fetched becomes in what the model sees. */
export function unavailableFileNote(name: string, mediaType: string): string {
  return `<attachment name="${name}" type="${mediaType}" unavailable="could not be downloaded" />`;
}

/**
 * Model messages (a /v1/openai request's, built by the client) with the files in `unavailable`
 * (hrefs) as notes: what toModelUIMessages does for a chat's own messages.
 */
export function withUnavailableAsNotes(
  messages: ModelMessage[],
  unavailable: ReadonlySet<string>,
): ModelMessage[] {
  if (unavailable.size === 0) return messages;
  return messages.map((message) => {
    if (message.role !== 'user' || typeof message.content === 'string') return message;
    return {
      ...message,
      content: message.content.map((part) => {
        if (part.type !== 'image' && part.type !== 'file') return part;
        const data = part.type === 'image' ? part.image : part.data;
        const href =
          data instanceof URL
            ? data.href
            : typeof data === 'string' && URL.canParse(data)
              ? new URL(data).href
              : undefined;
        if (href === undefined || !unavailable.has(href)) return part;
        const mediaType = part.mediaType ?? (part.type === 'image' ? 'image/*' : 'application/octet-stream');
        return { type: 'text' as const, text: unavailableFileNote('attachment', mediaType) };
      }),
    };
  });
}
