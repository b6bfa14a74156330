import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { testDatabaseUrl } from './app.js';

async function adminQuery(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: testDatabaseUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/**
 * A PostgreSQL database of the caller's own on TEST_DATABASE_URL's server, for code that reads
 * DATABASE_URL as an operator's shell gives it (the CLI, `atrium serve`): its URL, and its drop
 * (which waits for a checkpoint: see hookTimeout in vitest.config.ts). Undefined without
 * TEST_DATABASE_URL.
 */
export async function createOwnDatabase(
  prefix: string,
): Promise<{ url: string; drop: () => Promise<void> } | undefined> {
  if (!testDatabaseUrl) return undefined;
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  await adminQuery(`CREATE DATABASE ${name}`);
  const url = new URL(testDatabaseUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}
