/** The logger the outage log writes to (pino's or Fastify's). */
export interface OutageLogger {
  warn(details: Record<string, unknown>, message: string): void;
  info(details: Record<string, unknown>, message: string): void;
}

/** The events of a Redis connection the outage log follows (ioredis's `Redis`). */
export interface WatchedConnection {
  on(event: 'error', listener: (error: unknown) => void): unknown;
  on(event: 'ready', listener: () => void): unknown;
}

export const REDIS_OUTAGE_LOG_INTERVAL_MS = 30_000;

/**
 * One log of Redis being down for all of a process's connections to it. ioredis reports every
 * failed reconnect attempt of every connection (every 50 ms at first, then every 2 s each): the
 * first failure is logged, then at most one line per interval with how many failures it stands
 * for, and one when a connection is ready again. The outage is never silent, and never a flood.
 */
export function createRedisOutageLog(
  log: OutageLogger,
  now: () => number,
  intervalMs = REDIS_OUTAGE_LOG_INTERVAL_MS,
) {
  let downSince: number | undefined;
  let loggedAt = 0;
  let failures = 0;
  const failed = (error: unknown) => {
    const at = now();
    if (downSince === undefined) {
      downSince = at;
      loggedAt = at;
      failures = 0;
      log.warn(
        { err: error },
        `Redis connection failed; retrying, logged again at most every ${intervalMs / 1000} s while it stays down`,
      );
      return;
    }
    failures += 1;
    if (at - loggedAt < intervalMs) return;
    log.warn({ err: error, failures, downForMs: at - downSince }, 'Redis still unreachable');
    loggedAt = at;
    failures = 0;
  };
  const ready = () => {
    if (downSince === undefined) return;
    log.info({ downForMs: now() - downSince }, 'Redis connection restored');
    downSince = undefined;
  };
  return {
    failed,
    ready,
    /** Follows a connection's failures and recovery (each connection of the process). */
    watch(connection: WatchedConnection) {
      connection.on('error', failed);
      connection.on('ready', ready);
    },
  };
}
