import type { ServerResponse } from 'node:http';
import { UI_MESSAGE_STREAM_HEADERS, type UIMessageChunk } from 'ai';
import { relayStream } from '../web-streams.js';

function drainOrClose(response: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      response.off('drain', done);
      response.off('close', done);
      resolve();
    };
    response.once('drain', done);
    response.once('close', done);
  });
}

/**
 * A UI message stream as the AI SDK's server-sent-event text: `data: <chunk JSON>\n\n` per
 * chunk, then `data: [DONE]\n\n`. A stream that breaks is reported to `onStreamError` and ends
 * without `[DONE]` (so clients can tell it from a finished one); the text stream itself never
 * errors, because it is also kept for resuming, which must end cleanly.
 */
export function toEventStreamText(
  stream: ReadableStream<UIMessageChunk<unknown>>,
  onStreamError: (error: unknown) => void,
): ReadableStream<string> {
  return relayStream<UIMessageChunk<unknown>, string>(stream, {
    chunk: (value, controller) => controller.enqueue(`data: ${JSON.stringify(value)}\n\n`),
    end(controller) {
      controller.enqueue('data: [DONE]\n\n');
      controller.close();
    },
    broken(error, controller) {
      onStreamError(error);
      controller.close();
    },
  });
}

/**
 * Writes event-stream text with the UI message stream headers, one write per piece as it
 * arrives. Unlike the SDK's `pipeUIMessageStreamToResponse` + `consumeSseStream` (four more web
 * streams per chunk), it reads the stream itself and simply goes on reading when the client has
 * gone, so the reply still completes, is stored, and stays resumable. Resolves at its end and
 * never rejects.
 */
export async function writeEventStream(
  response: ServerResponse,
  stream: ReadableStream<string>,
  headers: Record<string, string>,
  streamHeaders: Record<string, string> = UI_MESSAGE_STREAM_HEADERS,
): Promise<void> {
  response.writeHead(200, { ...headers, ...streamHeaders });
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (response.destroyed || response.writableEnded) continue;
      if (!response.write(value)) await drainOrClose(response);
    }
  } catch {
    // A replay whose source went away: the client sees the stream end without [DONE].
  } finally {
    if (!response.destroyed && !response.writableEnded) response.end();
  }
}
