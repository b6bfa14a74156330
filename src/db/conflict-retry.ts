/**
 * PostgreSQL ends one of two transactions that wait on each other with a deadlock (40P01), and a
 * serializable transaction that lost a race with a serialization failure (40001). Both mean "run
 * it again": nothing of the ended transaction was kept.
 */
const RETRYABLE_SQLSTATES = new Set(['40P01', '40001']);

export function isRetryableConflict(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && RETRYABLE_SQLSTATES.has(code);
}

export interface ConflictRetryOptions {
  /** Runs in all, the first included. */
  attempts?: number;
  /** Waits before a new run; the default spreads the runs of the transactions that collided. */
  pause?: (attempt: number) => Promise<void>;
}

const jitteredPause = (attempt: number) =>
  new Promise<void>((resolve) => setTimeout(resolve, Math.random() * 20 * attempt));

/**
 * Runs `transaction` (a whole transaction, never a statement inside one) again when the database
 * ended it for a deadlock or a serialization failure; any other error, or the last failure, is
 * thrown as it is.
 */
export async function retryOnConflict<T>(
  transaction: () => Promise<T>,
  { attempts = 4, pause = jitteredPause }: ConflictRetryOptions = {},
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await transaction();
    } catch (error) {
      if (attempt >= attempts || !isRetryableConflict(error)) throw error;
      await pause(attempt);
    }
  }
}
