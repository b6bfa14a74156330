/**
 * The upstream idle timeout of one reply: the provider may stay silent at most `timeoutMs`
 * between two signs of life (`touch()`), else the reply is aborted as timed out. One timer per
 * reply, not one per chunk: when it fires it re-arms itself for the idle time left.
 */
export class IdleTimeout {
  timedOut = false;
  private timer: NodeJS.Timeout | undefined;
  private lastActivity = 0;
  /** Work the reply waits for that is not the provider's (see `pausedDuring`). */
  private pauses = 0;

  constructor(
    readonly timeoutMs: number,
    private readonly onTimeout: () => void,
  ) {}

  /** A sign of life from the provider (also starts the timer on the first call). */
  readonly touch = (): void => {
    this.lastActivity = performance.now();
    this.timer ??= setTimeout(this.check, this.timeoutMs);
  };

  /**
   * Runs `work` with the timeout paused: while the reply waits for something with a time bound
   * of its own (an MCP tool call), the provider is not asked anything, so its silence is no sign
   * of a stall. The provider gets its whole idle time again once the work has ended.
   */
  readonly pausedDuring = async <T>(work: () => Promise<T>): Promise<T> => {
    this.pauses++;
    try {
      return await work();
    } finally {
      this.pauses--;
      this.touch();
    }
  };

  clear(): void {
    clearTimeout(this.timer);
  }

  private readonly check = (): void => {
    const idle = performance.now() - this.lastActivity;
    if (this.pauses > 0) {
      this.timer = setTimeout(this.check, this.timeoutMs);
    } else if (idle >= this.timeoutMs) {
      this.timedOut = true;
      this.onTimeout();
    } else {
      this.timer = setTimeout(this.check, this.timeoutMs - idle);
    }
  };
}
