/** Offset paging shared by the listings (agents, skills): one page of `limit` rows after `offset`. */
export interface Page {
  limit: number;
  offset: number;
}

/** Values above the maximum are clamped (spec §4), not refused. */
export function clampLimit(limit: number | undefined, fallback: number, max: number): number {
  return Math.min(limit ?? fallback, max);
}
