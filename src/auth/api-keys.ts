import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { ApiKeyKind } from '../db/schema.js';

/** Plaintext keys given in a setup file must carry at least this many characters. */
export const MIN_KEY_LENGTH = 32;

const KEY_PREFIXES: Record<ApiKeyKind, string> = {
  workspace: 'atr_ws_',
  organization: 'atr_org_',
  session: 'atr_st_',
};

/** A new key: 32 random bytes (256 bits), with a prefix that tells its kind at a glance. */
export function generateApiKey(kind: ApiKeyKind): string {
  return KEY_PREFIXES[kind] + randomBytes(32).toString('base64url');
}

/**
 * Keys carry 256 bits of entropy, so a fast hash is the right tool (as for GitHub tokens):
 * no dictionary to slow down, and it keeps authentication off the request's critical path.
 * `hash` is the one-shot form: a quarter of createHash's cost on every request (issue 16).
 */
export function hashApiKey(key: string): string {
  return hash('sha256', key, 'hex');
}

export function keysMatch(storedHash: string, presentedHash: string): boolean {
  const a = Buffer.from(storedHash, 'hex');
  const b = Buffer.from(presentedHash, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

export function keyPrefix(key: string): string {
  return key.slice(0, 12);
}
