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
 * Event-stream text being written: whole events, and text deltas that may still grow. The
 * first delta of a turn of the event loop leaves at once; the deltas that follow it in the same
 * turn leave as one event when the turn ends (or before the next other event): a fast
 * provider's burst costs the server and the client a few events and writes, not hundreds,
 * while a token arriving alone is never held back.
 */
export interface EventText {
  event(text: string): void;
  delta(key: string, text: string, render: (key: string, text: string) => string): void;
}

/**
 * Reads `source` to its end whatever the returned stream's reader does (so a reply completes
 * and is stored when its client has gone), turning each value into event-stream text with
 * `write` and adding `end`'s text after the last. A source that breaks is reported to
 * `onStreamError` and the text ends without `end` (so clients can tell it from a finished
 * stream); the text stream itself never errors, because it is also kept for resuming, which
 * must end cleanly.
 */
export function eventStreamText<T>(
  source: ReadableStream<T>,
  write: (value: T, out: EventText) => void,
  end: (out: EventText) => void | Promise<void>,
  onStreamError: (error: unknown) => void,
): ReadableStream<string> {
  const reader = source.getReader();
  return new ReadableStream<string>({
    start(controller) {
      let text = '';
      let delta: { key: string; text: string; render: (key: string, text: string) => string } | undefined;
      /** Set once a delta has left in this turn: the turn's next deltas wait for its end. */
      let turnBusy = false;
      const endDelta = () => {
        if (!delta) return;
        text += delta.render(delta.key, delta.text);
        delta = undefined;
      };
      const flush = () => {
        endDelta();
        if (text === '') return;
        controller.enqueue(text);
        text = '';
      };
      const endTurn = () => {
        turnBusy = false;
        flush();
      };
      const out: EventText = {
        event(event) {
          // Other events are rare and may be what a client waits for: they never wait.
          endDelta();
          text += event;
          flush();
        },
        delta(key, piece, render) {
          if (delta?.key === key && delta.render === render) delta.text += piece;
          else {
            endDelta();
            delta = { key, text: piece, render };
          }
          if (turnBusy) return;
          turnBusy = true;
          setImmediate(endTurn);
          flush();
        },
      };
      void (async () => {
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            write(value, out);
          }
          await end(out);
        } catch (error) {
          onStreamError(error);
        }
        flush();
        controller.close();
      })();
    },
  });
}

const textDelta = (id: string, text: string) =>
  `data: {"type":"text-delta","id":${JSON.stringify(id)},"delta":${JSON.stringify(text)}}\n\n`;

/**
 * A UI message stream as the AI SDK's server-sent-event text: `data: <chunk JSON>\n\n` per
 * chunk (text deltas of one turn joined), then `data: [DONE]\n\n`.
 */
export function toEventStreamText(
  stream: ReadableStream<UIMessageChunk<unknown>>,
  onStreamError: (error: unknown) => void,
): ReadableStream<string> {
  return eventStreamText(
    stream,
    (chunk, out) => {
      if (chunk.type === 'text-delta' && chunk.providerMetadata === undefined) {
        out.delta(chunk.id, chunk.delta, textDelta);
      } else out.event(`data: ${JSON.stringify(chunk)}\n\n`);
    },
    (out) => out.event('data: [DONE]\n\n'),
    onStreamError,
  );
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
