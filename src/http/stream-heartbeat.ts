import type { ServerResponse } from 'node:http';

/**
 * What a heartbeat writes: an event-stream comment, which every event-stream parser skips (the
 * AI SDK's `useChat`, the `openai` SDK, browsers' EventSource). The AI SDK's own keep-alive text.
 */
export const HEARTBEAT_TEXT = ': keep-alive\n\n';

/** An event stream the heartbeat watches: its writer sets `wrote` on every write. */
export interface Beat {
  wrote: boolean;
}

interface Watched extends Beat {
  response: ServerResponse;
}

/**
 * Keeps streamed answers from going silent for longer than `periodMs` (ATRIUM_STREAM_HEARTBEAT_MS):
 * a reply may say nothing for minutes (a slow first token, a tool call and the next step), and
 * proxies and load balancers close a connection idle for about a minute (60 s by default behind
 * AWS's and nginx's), which breaks the client's stream although the reply goes on.
 *
 * One sweep every half period for all the streams of the process, rather than a timer per stream
 * reset on each write: a token then costs its writer one property store. A stream written to
 * since the last sweep is left alone; one that was not gets the comment, so none is silent for
 * a whole period. A client that is not reading (its write buffer full) gets none: the comments
 * would only pile up, and its connection should meet the idle timeout.
 */
export class StreamHeartbeat {
  private readonly streams = new Set<Watched>();
  private timer: NodeJS.Timeout | undefined;

  /** `periodMs` 0: no heartbeats. */
  constructor(private readonly periodMs: number) {}

  /** Watches a stream whose head is written, until its response closes. */
  watch(response: ServerResponse): Beat {
    const watched: Watched = { response, wrote: true };
    if (this.periodMs === 0) return watched;
    this.streams.add(watched);
    response.once('close', () => this.streams.delete(watched));
    this.timer ??= setInterval(this.sweep, Math.max(1, Math.floor(this.periodMs / 2))).unref();
    return watched;
  }

  /** Stops the sweeps (the app closes); streams still open get no more comments. */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.streams.clear();
  }

  private readonly sweep = (): void => {
    for (const stream of this.streams) {
      if (stream.wrote) stream.wrote = false;
      else if (writable(stream.response)) stream.response.write(HEARTBEAT_TEXT);
    }
    if (this.streams.size === 0) this.stop();
  };
}

function writable(response: ServerResponse): boolean {
  return !response.destroyed && !response.writableEnded && !response.writableNeedDrain;
}
