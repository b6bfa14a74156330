import { randomFillSync } from 'node:crypto';

export type IdPrefix =
  | 'org'
  | 'wsp'
  | 'usr'
  | 'key'
  | 'agt'
  | 'prj'
  | 'fil'
  | 'cht'
  | 'msg'
  | 'run'
  | 'skl'
  | 'req'
  | 'rsv'
  | 'prc';

const ID_BYTES = 15;
/**
 * Random bytes drawn from the system 4 KB at a time and handed out 15 at a time: every request
 * gets an id, and a call into the system's generator per id was a visible share of a small
 * request's CPU (issue 16). Each id still uses bytes no other id used.
 */
const pool = Buffer.alloc(ID_BYTES * 273);
let poolOffset = pool.length;

/** An opaque id with a type prefix and 120 random bits, e.g. `prj_3q2Vx…`. */
export function newId(prefix: IdPrefix): string {
  if (poolOffset + ID_BYTES > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const id = pool.toString('base64url', poolOffset, poolOffset + ID_BYTES);
  poolOffset += ID_BYTES;
  return `${prefix}_${id}`;
}

/** Timestamps are ISO 8601 UTC with milliseconds; stored as that same text in both databases. */
export type Clock = () => Date;

/**
 * A timestamp in the one form a Clock's times are stored in (`Date#toISOString`). Cursors hold
 * such times, compared as text: any other text would answer some page rather than a 400.
 */
export function isStoredTimestamp(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  const time = new Date(value);
  return !Number.isNaN(time.getTime()) && time.toISOString() === value;
}
export const systemClock: Clock = () => new Date();
export const isoNow = (clock: Clock): string => clock().toISOString();
