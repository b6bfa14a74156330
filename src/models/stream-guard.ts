import type { LanguageModelV3, LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { wrapLanguageModel } from 'ai';
import { relayStream } from '../web-streams.js';
import { endBrokenBodyWith } from './node-fetch.js';

/*
 * A provider stream that breaks mid-way (connection reset, truncated body) errors the stream
 * itself, which the AI SDK passes on as a broken UI stream: no `error` chunk, no finish, no
 * persistence. Both guards below turn such a break into the provider error the SDK reports as
 * an `error` part, so the reply ends cleanly with an `error` chunk.
 */

const encoder = new TextEncoder();

function brokenStreamEvent(error: unknown): Uint8Array {
  const reason = error instanceof Error ? error.message : String(error);
  // A blank line first ends any event the break cut in half (it then fails to parse: also an error).
  return encoder.encode(
    `\n\ndata: ${JSON.stringify({ error: { message: `The provider stream broke: ${reason}`, type: 'stream_broken' } })}\n\n`,
  );
}

/**
 * `fetch` for OpenAI-style providers: an event-stream body that fails while being read ends with
 * an OpenAI error event instead (an abort still fails it, so the SDK sees the stop). A body of
 * Atrium's own fetch ends so by itself; another fetch's body is relayed through a stream that
 * does it.
 */
export const guardedFetch =
  (baseFetch: typeof fetch): typeof fetch =>
  async (input, init) => {
    const response = await baseFetch(input, init);
    const body = response.body;
    if (!body || !response.headers.get('content-type')?.includes('text/event-stream')) return response;
    const brokenEnd = (error: unknown) => (init?.signal?.aborted ? undefined : brokenStreamEvent(error));
    // A model's stream is mostly one token per network read: a relay would cost a stream hop each.
    if (endBrokenBodyWith(body, brokenEnd)) return response;
    const guarded = relayStream<Uint8Array>(body, {
      broken(error, controller) {
        const last = brokenEnd(error);
        if (last === undefined) {
          controller.error(error);
          return;
        }
        controller.enqueue(last);
        controller.close();
      },
      cancelSource: true,
    });
    return new Response(guarded, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };

function guardParts(
  stream: ReadableStream<LanguageModelV3StreamPart>,
): ReadableStream<LanguageModelV3StreamPart> {
  return relayStream(stream, {
    broken(error, controller) {
      controller.enqueue({ type: 'error', error });
      controller.close();
    },
    cancelSource: true,
  });
}

/** For providers without an OpenAI-style error event (Anthropic): guards the part stream. */
export function withStreamFailuresAsErrors(model: LanguageModelV3): LanguageModelV3 {
  return wrapLanguageModel({
    model,
    middleware: {
      specificationVersion: 'v3',
      wrapStream: async ({ doStream }) => {
        const result = await doStream();
        return { ...result, stream: guardParts(result.stream) };
      },
    },
  });
}
