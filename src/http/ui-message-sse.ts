import type { ServerResponse } from 'node:http';
import { UI_MESSAGE_STREAM_HEADERS, type UIMessageChunk } from 'ai';
import { TextBuilder } from '../text-builder.js';
import type { Beat, StreamHeartbeat } from './stream-heartbeat.js';

/**
 * The AI SDK's UI message stream headers, but for `connection: keep-alive`: Node answers the
 * connection header itself, by what the client asked. With the SDK's value a client that sent
 * `Connection: close` had its connection kept after the stream (RFC 9112, 9.6: it is closed).
 */
export const UI_STREAM_HEADERS: Record<string, string> = Object.fromEntries(
  Object.entries(UI_MESSAGE_STREAM_HEADERS).filter(([name]) => name.toLowerCase() !== 'connection'),
);

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

/** Where event-stream text goes as it is made. */
export interface TextTarget {
  text(piece: string): void;
  /** The text is complete (or broke off): nothing follows. */
  close(): void;
  /**
   * Resolves once the reader takes text again, when it has stopped taking it (a client that
   * stopped reading); undefined while it takes text. Not given: text is always taken.
   */
  untilReading?(): Promise<void> | undefined;
}

/**
 * What a reply's chunks are pushed to, in order, by the code reading them: each chunk, then
 * `end` or `fail`. Pushed rather than read from a web stream, so a token costs no stream hop
 * between the provider and the socket (issue 16).
 */
export interface ChunkSink<T> {
  chunk(value: T): void;
  end(): void;
  /** The chunks broke off (the reply's stream itself failed, not the provider). */
  fail(error: unknown): void;
}

/**
 * Turns the values pushed to it into event-stream text for `target` with `write`, adding
 * `end`'s text after the last. A failure (`fail`, or `write` or `end` throwing) is reported to
 * `onStreamError` and the text ends without `end`'s, so clients can tell it from a finished
 * stream; the text itself never errors, because it is also kept for resuming, which must end
 * cleanly. While `target` is not taking text (`untilReading`), the text made waits, its deltas
 * joined: a reply that runs on for a client that stopped reading holds about its own text, not
 * an event per token.
 */
export function eventText<T>(
  target: TextTarget,
  write: (value: T, out: EventText) => void,
  end: (out: EventText) => void | Promise<void>,
  onStreamError: (error: unknown) => void,
): ChunkSink<T> {
  let text = '';
  let delta: { key: string; text: string; render: (key: string, text: string) => string } | undefined;
  /** Set once a delta has left in this turn: the turn's next deltas wait for its end. */
  let turnBusy = false;
  /** Set once `end` or a failure came: later values and turn ends add nothing. */
  let over = false;
  let closed = false;
  /** Set while the target takes no text: what is made waits for it, the open delta growing. */
  let waitingForReader = false;
  const endDelta = () => {
    if (!delta) return;
    text += delta.render(delta.key, delta.text);
    delta = undefined;
  };
  const flush = () => {
    if (closed || waitingForReader) return;
    endDelta();
    if (text === '') return;
    target.text(text);
    text = '';
    const reading = target.untilReading?.();
    if (!reading) return;
    waitingForReader = true;
    void reading.then(() => {
      waitingForReader = false;
      flush();
    });
  };
  const endTurn = () => {
    turnBusy = false;
    flush();
  };
  const close = () => {
    // The last text is written all the same: the target keeps it until its reader takes it.
    waitingForReader = false;
    flush();
    closed = true;
    target.close();
  };
  const broken = (error: unknown) => {
    if (over) return;
    over = true;
    onStreamError(error);
    close();
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
  return {
    chunk(value) {
      if (over) return;
      try {
        write(value, out);
      } catch (error) {
        broken(error);
      }
    },
    end() {
      if (over) return;
      over = true;
      void (async () => {
        try {
          await end(out);
        } catch (error) {
          onStreamError(error);
        }
        close();
      })();
    },
    fail: broken,
  };
}

const textDelta = (id: string, text: string) =>
  `data: {"type":"text-delta","id":${JSON.stringify(id)},"delta":${JSON.stringify(text)}}\n\n`;

/**
 * A UI message stream as the AI SDK's server-sent-event text: `data: <chunk JSON>\n\n` per
 * chunk (text deltas of one turn joined), then `data: [DONE]\n\n`.
 */
export function uiMessageEventText(
  target: TextTarget,
  onStreamError: (error: unknown) => void,
): ChunkSink<UIMessageChunk<unknown>> {
  return eventText<UIMessageChunk<unknown>>(
    target,
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
 * How long text waits to be added to a reply's replay (ms). A resuming client gets the text so
 * far and then the rest live: this much later than the first client at most, while each piece
 * of a model's stream (a token) no longer costs the replay a stream hop and a read (issue 16).
 */
const REPLAY_BATCH_MS = 100;

/**
 * A reply's event-stream text written to its client as it is made, one write per piece: no
 * web stream between the reply and the socket. It goes on when the client has gone (the reply
 * still completes, is stored, and stays resumable). Text made before `open` (a reply starts
 * while it is being made resumable) waits for it.
 */
export class LiveEventStream implements TextTarget {
  private replayController: ReadableStreamDefaultController<string> | undefined;
  /** Text not yet added to the replay, and the timer that adds it. */
  private forReplay = new TextBuilder();
  private replayTimer: NodeJS.Timeout | undefined;
  private waiting: string[] | undefined = [];
  private closed = false;
  /** Told of every write once the head is written, so a silent reply gets heartbeats. */
  private beat: Beat = { wrote: true };

  constructor(
    private readonly response: ServerResponse,
    private readonly heartbeat?: StreamHeartbeat,
  ) {}

  /**
   * Every piece from here on, as a stream: what `resumable-stream` reads to replay the reply to
   * a resuming client. Asked for before any text is made. Pieces made within REPLAY_BATCH_MS of
   * each other arrive as one.
   */
  replayText(): ReadableStream<string> {
    return new ReadableStream<string>({
      start: (controller) => {
        this.replayController = controller;
      },
    });
  }

  /** Writes the head and the text made so far; from here each piece is written as it comes. */
  open(headers: Record<string, string>, streamHeaders: Record<string, string> = UI_STREAM_HEADERS): void {
    this.response.writeHead(200, { ...headers, ...streamHeaders });
    if (this.heartbeat) this.beat = this.heartbeat.watch(this.response);
    const waiting = this.waiting ?? [];
    this.waiting = undefined;
    if (waiting.length > 0) this.write(waiting.join(''));
    if (this.closed) this.end();
  }

  text(piece: string): void {
    if (this.replayController) {
      this.forReplay.add(piece);
      this.replayTimer ??= setTimeout(this.addToReplay, REPLAY_BATCH_MS);
    }
    if (this.waiting) this.waiting.push(piece);
    else this.write(piece);
  }

  /**
   * Only while no replay reads the text: resuming clients get it as it is made, whoever else
   * stopped reading.
   */
  untilReading(): Promise<void> | undefined {
    const response = this.response;
    if (this.replayController || this.waiting) return undefined;
    if (response.destroyed || response.writableEnded || !response.writableNeedDrain) return undefined;
    return drainOrClose(response);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.addToReplay();
    this.toReplay((controller) => controller.close());
    if (!this.waiting) this.end();
  }

  private readonly addToReplay = (): void => {
    clearTimeout(this.replayTimer);
    this.replayTimer = undefined;
    // The replay keeps the text until the reply ends: as one string per batch, not per event.
    const text = this.forReplay.toString();
    if (text === '') return;
    this.forReplay = new TextBuilder();
    this.toReplay((controller) => controller.enqueue(text));
  };

  private toReplay(action: (controller: ReadableStreamDefaultController<string>) => void): void {
    if (!this.replayController) return;
    try {
      action(this.replayController);
    } catch {
      // The replay was cancelled: only the client reads on.
      this.replayController = undefined;
    }
  }

  private write(piece: string): void {
    this.beat.wrote = true;
    if (!this.response.destroyed && !this.response.writableEnded) this.response.write(piece);
  }

  private end(): void {
    if (!this.response.destroyed && !this.response.writableEnded) this.response.end();
  }
}

/**
 * Writes event-stream text read from a stream (a resumed reply's replay) with the UI message
 * stream headers, one write per piece as it arrives. Unlike the SDK's
 * `pipeUIMessageStreamToResponse` + `consumeSseStream` (four more web streams per chunk), it reads
 * the stream itself and goes on reading when the client has gone. Resolves at its end and never
 * rejects.
 */
export async function writeEventStream(
  response: ServerResponse,
  stream: ReadableStream<string>,
  headers: Record<string, string>,
  heartbeat?: StreamHeartbeat,
): Promise<void> {
  response.writeHead(200, { ...headers, ...UI_STREAM_HEADERS });
  const beat = heartbeat?.watch(response) ?? { wrote: true };
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      beat.wrote = true;
      if (response.destroyed || response.writableEnded) continue;
      if (!response.write(value)) await drainOrClose(response);
    }
  } catch {
    // A replay whose source went away: the client sees the stream end without [DONE].
  } finally {
    if (!response.destroyed && !response.writableEnded) response.end();
  }
}
