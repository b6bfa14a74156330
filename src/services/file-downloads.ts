import type { LanguageModelV3 } from '@ai-sdk/provider';
import { createDownload, DownloadError, type Experimental_DownloadFunction as DownloadFunction } from 'ai';
import { ApiError, errors } from '../errors.js';
import type { ConversationMessage } from './chat-messages.js';

/**
 * The most a file part's URL may bring when Atrium downloads it for a model that cannot read
 * URLs itself (the AI SDK's default is 2 GiB, held in memory). Providers take less: OpenAI
 * 20 MB per image, 32 MB per PDF.
 */
export const MAX_FILE_DOWNLOAD_BYTES = 32 * 1024 * 1024;

const download = createDownload({ maxBytes: MAX_FILE_DOWNLOAD_BYTES });

type Downloaded = { data: Uint8Array; mediaType: string | undefined };

/** A URL as it may appear in an answer or a log line: no query (it may hold a signature). */
function shownUrl(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

function whyNot(error: unknown): string {
  if (DownloadError.isInstance(error) && error.statusCode !== undefined) return `HTTP ${error.statusCode}`;
  const cause = (error as { cause?: { message?: unknown } }).cause?.message;
  const message = typeof cause === 'string' ? cause : (error as Error).message;
  return String(message ?? 'unreadable')
    .split('\n')[0]!
    .slice(0, 200);
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

/** The http(s) URLs of the file parts the model is given as files (images, PDFs). */
function fileUrls(messages: ConversationMessage[]): Array<{ url: URL; mediaType: string }> {
  const found: Array<{ url: URL; mediaType: string }> = [];
  for (const message of messages) {
    for (const part of message.parts) {
      if (part.type !== 'file' || typeof part.url !== 'string' || typeof part.mediaType !== 'string')
        continue;
      if (!part.mediaType.startsWith('image/') && part.mediaType !== 'application/pdf') continue;
      if (!/^https?:/i.test(part.url)) continue;
      const url = URL.canParse(part.url) ? new URL(part.url) : undefined;
      if (url) found.push({ url, mediaType: part.mediaType });
    }
  }
  return found;
}

/**
 * Downloads, before the user's turn is stored, the files of the request's new messages that
 * the model cannot read from their URL, so one that cannot be fetched is the client's 400 with
 * nothing stored (not a failed model call, and not a stored turn that every later turn of the
 * chat would fail on again). Returns the download function for the model call: these files
 * from memory, any other (a stored message's) fetched then, each at most
 * MAX_FILE_DOWNLOAD_BYTES.
 */
export async function prefetchFiles(
  model: LanguageModelV3,
  added: ConversationMessage[],
  abortSignal: AbortSignal,
): Promise<DownloadFunction> {
  const supportedUrls = await model.supportedUrls;
  const fetched = new Map<string, Downloaded>();
  await Promise.all(
    fileUrls(added)
      .filter(({ url, mediaType }) => !readsUrlItself(supportedUrls, url, mediaType))
      .map(async ({ url }) => {
        try {
          fetched.set(url.href, await download({ url, abortSignal }));
        } catch (error) {
          if (abortSignal.aborted) throw error;
          throw errors.badRequest(
            `A file part's URL could not be downloaded (${shownUrl(url)}: ${whyNot(error)})`,
            [{ path: 'messages.parts.url', message: `could not be downloaded: ${whyNot(error)}` }],
          );
        }
      }),
  );
  return (requested) =>
    Promise.all(
      requested.map(async ({ url, isUrlSupportedByModel }) => {
        if (isUrlSupportedByModel) return null;
        const early = fetched.get(url.href);
        if (early) return early;
        try {
          return await download({ url, abortSignal });
        } catch (error) {
          if (abortSignal.aborted) throw error;
          // A stored message's file that no longer answers (an expired signed URL, a deleted file).
          throw new ApiError(
            'upstream_error',
            `A file of this chat could not be downloaded (${shownUrl(url)}: ${whyNot(error)})`,
            { url: shownUrl(url) },
            { cause: error },
          );
        }
      }),
    );
}
