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
 * A UI message stream as the AI SDK's server-sent-event text: `data: <chunk JSON>\n\n` per
 * chunk, then `data: [DONE]\n\n`. What arrives in one turn of the event loop leaves as one
 * piece of text (one socket write, one entry of the resumable copy), and consecutive text
 * deltas of one part in it become one `text-delta` event: a fast provider's burst costs the
 * client and the server one event, not hundreds; a token arriving alone leaves at once.
 * A stream that breaks is reported to `onStreamError` and ends without `[DONE]` (so clients
 * can tell it from a finished one); the text stream itself never errors, because it is also
 * kept for resuming, which must end cleanly. It reads its source to the end whatever its
 * reader does, so the reply completes and is stored when the client has gone.
 */
export function toEventStreamText(
  stream: ReadableStream<UIMessageChunk<unknown>>,
  onStreamError: (error: unknown) => void,
): ReadableStream<string> {
  const reader = stream.getReader();
  return new ReadableStream<string>({
    start(controller) {
      let text = '';
      let delta: { id: string; text: string } | undefined;
      let flushing = false;
      const endDelta = () => {
        if (!delta) return;
        text += `data: {"type":"text-delta","id":${JSON.stringify(delta.id)},"delta":${JSON.stringify(delta.text)}}\n\n`;
        delta = undefined;
      };
      const flush = () => {
        flushing = false;
        endDelta();
        if (text === '') return;
        controller.enqueue(text);
        text = '';
      };
      const add = (chunk: UIMessageChunk<unknown>) => {
        if (chunk.type === 'text-delta' && chunk.providerMetadata === undefined) {
          if (delta?.id === chunk.id) delta.text += chunk.delta;
          else {
            endDelta();
            delta = { id: chunk.id, text: chunk.delta };
          }
        } else {
          endDelta();
          text += `data: ${JSON.stringify(chunk)}\n\n`;
        }
        if (!flushing) {
          flushing = true;
          setImmediate(flush);
        }
      };
      void (async () => {
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            add(value);
          }
          endDelta();
          text += 'data: [DONE]\n\n';
        } catch (error) {
          onStreamError(error);
        }
        flush();
        controller.close();
      })();
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
