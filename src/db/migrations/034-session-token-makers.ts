import type { Kysely } from 'kysely';

/**
 * `api_keys.made_by_key_id`: for a session token, the key that made it. A token works only
 * while that key does (not revoked, not expired, its user still a member of the token's
 * workspace), so revoking a leaked app server key also ends the tokens it handed out. Null for
 * every other key, and for tokens made before (they end at their own expiry, at most a day).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('api_keys').addColumn('made_by_key_id', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('api_keys').dropColumn('made_by_key_id').execute();
}
