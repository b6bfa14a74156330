/** Whether a file system failure carries one of these codes (`ENOENT`, `EEXIST`…). */
export function hasErrorCode(error: unknown, ...codes: string[]): boolean {
  return (
    typeof error === 'object' && error !== null && codes.includes((error as NodeJS.ErrnoException).code ?? '')
  );
}

/**
 * The result of `operation`, or `fallback` when it failed because the path is not there (gone,
 * or a parent is a file). Any other failure (`EMFILE`, `EACCES`, `EIO`…) is a fault and is
 * thrown: treating it as "missing" would report files as changed or lost.
 */
export async function unlessMissing<T, F>(operation: Promise<T>, fallback: F): Promise<T | F> {
  try {
    return await operation;
  } catch (error) {
    if (hasErrorCode(error, 'ENOENT', 'ENOTDIR')) return fallback;
    throw error;
  }
}
