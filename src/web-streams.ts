/** How a relay turns what it reads from its source into what it passes on. */
export interface RelayHandlers<In, Out> {
  /** Each chunk read; passed on unchanged when not given. */
  chunk?: (value: In, controller: ReadableStreamDefaultController<Out>) => void;
  /** The source ended; the relay closes when not given. */
  end?: (controller: ReadableStreamDefaultController<Out>) => void;
  /**
   * Reading the source failed. The handler decides how the relay ends (a last chunk, close or
   * error): a broken source must not throw into whoever reads the relay.
   */
  broken: (error: unknown, controller: ReadableStreamDefaultController<Out>) => void;
  /** Cancel the source when the relay is cancelled (a client went away). */
  cancelSource?: boolean;
}

/**
 * A web stream that reads `source` one chunk per pull (so back-pressure is kept) and hands each
 * chunk, the end and a failure to `handlers`.
 */
export function relayStream<In, Out = In>(
  source: ReadableStream<In>,
  handlers: RelayHandlers<In, Out>,
): ReadableStream<Out> {
  const reader = source.getReader();
  const { chunk, end, broken } = handlers;
  return new ReadableStream<Out>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          if (end) end(controller);
          else controller.close();
        } else if (chunk) {
          chunk(value, controller);
        } else {
          controller.enqueue(value as unknown as Out);
        }
      } catch (error) {
        broken(error, controller);
      }
    },
    cancel: handlers.cancelSource ? (reason) => reader.cancel(reason) : undefined,
  });
}
