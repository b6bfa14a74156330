export interface LeaseRenewal {
  /** Time between renewals: a third of the lease, so two may fail before it lapses. */
  everyMs: number;
  /** Extends the lease; resolves false when it was found lost (lapsed, taken by another). */
  renew: () => Promise<boolean>;
  /** Called once, on the first renewal that finds the lease lost; renewals end there. */
  onLost?: () => void;
  /** A renewal that failed (the database unreachable); the next one tries again. */
  onError?: (error: unknown) => void;
}

/**
 * Keeps a lease in the database alive while its work is under way, until the returned function
 * is called: a lease short enough that a killed process (SIGKILL, out of memory, a lost
 * machine) holds it briefly, renewed so that a live process keeps it however long its work
 * takes. One renewal at a time; a renewal due while the last one is still waiting for its reply
 * runs as soon as that reply comes, so a slow database delays renewals but never skips one
 * (nor piles them up, nor lets an old reply land after a newer one). A renewal still in flight
 * when the work ends reports nothing. The timer does not keep the process running.
 */
export function renewWhileWorking(lease: LeaseRenewal): () => void {
  let inFlight = false;
  let due = false;
  let ended = false;
  const end = () => {
    ended = true;
    clearInterval(timer);
  };
  const run = () => {
    if (ended) return;
    if (inFlight) {
      due = true;
      return;
    }
    inFlight = true;
    due = false;
    lease
      .renew()
      .then(
        (held) => {
          if (held || ended) return;
          end();
          lease.onLost?.();
        },
        (error: unknown) => {
          if (!ended) lease.onError?.(error);
        },
      )
      .finally(() => {
        inFlight = false;
        if (due) run();
      });
  };
  const timer = setInterval(run, Math.max(10, lease.everyMs));
  timer.unref();
  return end;
}
