import type { ServerResponse } from 'node:http';
import { UI_MESSAGE_STREAM_HEADERS, type UIMessageChunk } from 'ai';

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
 * Writes a UI message stream as server-sent events, the AI SDK's framing (`data: <chunk
 * JSON>\n\n`, then `data: [DONE]\n\n`, headers `UI_MESSAGE_STREAM_HEADERS`), one write per
 * chunk as it arrives. Unlike the SDK's `pipeUIMessageStreamToResponse` + `consumeSseStream`
 * (JSON → SSE → text encoder → tee, four more web streams per chunk), it reads the stream
 * itself and simply goes on reading when the client has gone, so the reply still completes and
 * is stored. Resolves when the stream has been read to its end.
 */
export async function writeUIMessageStream(
  response: ServerResponse,
  stream: ReadableStream<UIMessageChunk<unknown>>,
  headers: Record<string, string>,
  onStreamError: (error: unknown) => void,
): Promise<void> {
  response.writeHead(200, { ...headers, ...UI_MESSAGE_STREAM_HEADERS });
  const reader = stream.getReader();
  let failed = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (response.destroyed || response.writableEnded) continue;
      if (!response.write(`data: ${JSON.stringify(value)}\n\n`)) await drainOrClose(response);
    }
  } catch (error) {
    failed = true;
    onStreamError(error);
  }
  if (!response.destroyed && !response.writableEnded) {
    // A broken stream ends without [DONE], so clients can tell it from a finished one.
    response.end(failed ? undefined : 'data: [DONE]\n\n');
  }
}
