import { createHash } from 'node:crypto';
import type { RedisClient } from './redis.js';

// Types only from redis.ts: a module that runs scripts does not load ioredis where Redis is not
// configured (app.ts imports it only then).

/** A Lua script, named by its SHA-1 digest as EVALSHA takes it. */
export interface RedisScript {
  text: string;
  sha: string;
}

export function redisScript(text: string): RedisScript {
  return { text, sha: createHash('sha1').update(text).digest('hex') };
}

/** Runs a script by its digest, sending it whole only when the server does not know it yet. */
export async function runScript(
  redis: RedisClient,
  script: RedisScript,
  keys: string[],
  args: string[],
): Promise<unknown> {
  try {
    return await redis.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (error) {
    // First use, or after a restart: send it once.
    if (!String((error as Error)?.message).startsWith('NOSCRIPT')) throw error;
    return redis.eval(script.text, keys.length, ...keys, ...args);
  }
}
