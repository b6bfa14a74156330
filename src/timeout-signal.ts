/** A signal that aborts after a time, or with its parent; `clear` ends its timer. */
export interface TimeoutSignal {
  signal: AbortSignal;
  clear: () => void;
}

/**
 * What `AbortSignal.any([parent, AbortSignal.timeout(timeoutMs)])` means, but kept alive by its
 * own timer: on Node 20 the combined signal holds its sources only weakly, and
 * `AbortSignal.timeout`'s timer holds its signal weakly too, so after a garbage collection the
 * timeout was gone and the combined signal never aborted (an embedding call to a provider that
 * never answered waited for ever, its workspace's lease renewed all the while). Here the timer
 * and the parent's listener hold the controller. The abort's reason is a `TimeoutError`
 * DOMException, as `AbortSignal.timeout`'s; the timer does not keep the process alive.
 */
export function timeoutSignal(timeoutMs: number, parent?: AbortSignal): TimeoutSignal {
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')),
    timeoutMs,
  );
  timer.unref();
  const onParentAbort = () => controller.abort(parent?.reason);
  if (parent?.aborted) onParentAbort();
  else parent?.addEventListener('abort', onParentAbort, { once: true });
  return {
    signal: controller.signal,
    clear: () => {
      clearTimeout(timer);
      parent?.removeEventListener('abort', onParentAbort);
    },
  };
}
