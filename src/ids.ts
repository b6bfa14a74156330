import { randomBytes } from 'node:crypto';

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

/** An opaque id with a type prefix and 120 random bits, e.g. `prj_3q2Vx…`. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBytes(15).toString('base64url')}`;
}

/** Timestamps are ISO 8601 UTC with milliseconds; stored as that same text in both databases. */
export type Clock = () => Date;
export const systemClock: Clock = () => new Date();
export const isoNow = (clock: Clock): string => clock().toISOString();
