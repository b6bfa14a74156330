/**
 * Lets a repeated event through at most once per `intervalMs`, saying how many were held back
 * since the last one: a failure met by every request (a store that is down) is logged, but not
 * once per request.
 */
export function atMostEvery(intervalMs: number, now: () => number = Date.now) {
  let lastAt = -Infinity;
  let heldBack = 0;
  return (write: (heldBack: number) => void): void => {
    const at = now();
    if (at - lastAt < intervalMs) {
      heldBack += 1;
      return;
    }
    write(heldBack);
    lastAt = at;
    heldBack = 0;
  };
}
