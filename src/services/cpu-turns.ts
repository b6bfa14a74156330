/**
 * Issue 16: the heavy sections of a reply that no running stream waits for (setting a new reply
 * up, storing a finished one) take turns, one per turn of the event loop, after its pending
 * network reads. A burst of new replies then delays other new replies, not the tokens of the
 * replies already streaming: without turns, every section queued in one turn of the loop runs
 * before any token is written (their promise chains interleave and drain together).
 */
const waiting: Array<() => void> = [];
let scheduled = false;

function next(): void {
  scheduled = false;
  waiting.shift()?.();
  schedule();
}

function schedule(): void {
  if (scheduled || waiting.length === 0) return;
  scheduled = true;
  // An immediate queued here runs in the next turn of the loop, after its network callbacks.
  setImmediate(next);
}

/** Resolves when it is this section's turn: the code after it runs with no other section. */
export function cpuTurn(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    schedule();
  });
}
