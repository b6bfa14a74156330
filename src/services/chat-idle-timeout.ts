/**
 * The upstream idle timeout of one reply: the provider may stay silent at most `timeoutMs`
 * between two signs of life (`touch()`), else the reply is aborted as timed out. One timer per
 * reply, not one per chunk: when it fires it re-arms itself for the idle time left.
 */
export class IdleTimeout {
  timedOut = false;
  private timer: NodeJS.Timeout | undefined;
  private lastActivity = 0;

  constructor(
    readonly timeoutMs: number,
    private readonly onTimeout: () => void,
  ) {}

  /** A sign of life from the provider (also starts the timer on the first call). */
  readonly touch = (): void => {
    this.lastActivity = performance.now();
    this.timer ??= setTimeout(this.check, this.timeoutMs);
  };

  clear(): void {
    clearTimeout(this.timer);
  }

  private readonly check = (): void => {
    const idle = performance.now() - this.lastActivity;
    if (idle >= this.timeoutMs) {
      this.timedOut = true;
      this.onTimeout();
    } else {
      this.timer = setTimeout(this.check, this.timeoutMs - idle);
    }
  };
}
