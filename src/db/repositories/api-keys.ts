import type { Db } from '../database.js';
import { preparedSelect } from '../prepared.js';
import { idInCodePointOrder } from '../sort-key.js';
import type { ApiKeyKind, ApiKeyTable, ManagedBy } from '../schema.js';

export interface NewApiKey {
  id: string;
  name: string;
  kind: ApiKeyKind;
  organizationId: string;
  workspaceId: string | null;
  userId: string;
  keyHash: string;
  keyPrefix: string;
  expiresAt: string | null;
  createdAt: string;
  /** `setup` only for what a setup file declares (management.md); the API and the CLI make `api` keys. */
  managedBy: ManagedBy;
  /** Session tokens: the agents the token is limited to. */
  agentIds?: string[] | null;
  /** Session tokens: the key that made the token. */
  madeByKeyId?: string | null;
}

/**
 * The key with this hash, together with what a workspace key needs on every request (its
 * workspace's settings and its user's role there), in one query: authentication is on every
 * request's path.
 */
export async function findApiKeyByHash(db: Db, keyHash: string) {
  return (await keyByHash(db, { keyHash }))[0];
}

const keyByHash = preparedSelect((db, { keyHash }: { keyHash: string }) =>
  db
    .selectFrom('api_keys')
    .leftJoin('workspaces', 'workspaces.id', 'api_keys.workspace_id')
    .leftJoin('workspace_members', (join) =>
      join
        .onRef('workspace_members.workspace_id', '=', 'api_keys.workspace_id')
        .onRef('workspace_members.user_id', '=', 'api_keys.user_id'),
    )
    // A session token's maker, and its user's membership of the token's workspace.
    .leftJoin('api_keys as maker', 'maker.id', 'api_keys.made_by_key_id')
    .leftJoin('workspace_members as maker_member', (join) =>
      join
        .onRef('maker_member.workspace_id', '=', 'api_keys.workspace_id')
        .onRef('maker_member.user_id', '=', 'maker.user_id'),
    )
    .select([
      'api_keys.id',
      'api_keys.kind',
      'api_keys.organization_id',
      'api_keys.workspace_id',
      'api_keys.user_id',
      'api_keys.key_hash',
      'api_keys.expires_at',
      'api_keys.revoked_at',
      'api_keys.last_used_at',
      'api_keys.agent_ids',
      'workspaces.default_model as workspace_default_model',
      'workspaces.rate_limit_per_minute as workspace_rate_limit',
      'workspace_members.role as workspace_role',
      'api_keys.made_by_key_id',
      'maker.id as maker_id',
      'maker.revoked_at as maker_revoked_at',
      'maker.expires_at as maker_expires_at',
      'maker_member.role as maker_role',
    ])
    .where('api_keys.key_hash', '=', keyHash),
);

export async function insertApiKey(db: Db, key: NewApiKey): Promise<void> {
  await db
    .insertInto('api_keys')
    .values({
      id: key.id,
      name: key.name,
      kind: key.kind,
      organization_id: key.organizationId,
      workspace_id: key.workspaceId,
      user_id: key.userId,
      key_hash: key.keyHash,
      key_prefix: key.keyPrefix,
      expires_at: key.expiresAt,
      revoked_at: null,
      last_used_at: null,
      created_at: key.createdAt,
      managed_by: key.managedBy,
      agent_ids: key.agentIds ? JSON.stringify(key.agentIds) : null,
      made_by_key_id: key.madeByKeyId ?? null,
    })
    .execute();
}

export async function revokeApiKey(db: Db, id: string, at: string): Promise<boolean> {
  const result = await db
    .updateTable('api_keys')
    .set({ revoked_at: at })
    .where('id', '=', id)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export async function touchApiKey(db: Db, id: string, at: string): Promise<void> {
  await db.updateTable('api_keys').set({ last_used_at: at }).where('id', '=', id).execute();
}

/** The columns a key listing shows; never the hash. */
const KEY_INFO_COLUMNS = [
  'id',
  'name',
  'kind',
  'organization_id',
  'workspace_id',
  'user_id',
  'key_prefix',
  'created_at',
  'expires_at',
  'last_used_at',
  'revoked_at',
  'managed_by',
] as const;

export type ApiKeyInfoRow = Pick<ApiKeyTable, (typeof KEY_INFO_COLUMNS)[number]>;

/**
 * The workspace keys of a workspace (session tokens are not listed), optionally of one user;
 * newest first, then id in code point order (the same on both engines).
 */
export function listWorkspaceApiKeys(db: Db, workspaceId: string, userId?: string) {
  let query = db
    .selectFrom('api_keys')
    .select(KEY_INFO_COLUMNS)
    .where('workspace_id', '=', workspaceId)
    .where('kind', '=', 'workspace');
  if (userId) query = query.where('user_id', '=', userId);
  return query.orderBy('created_at', 'desc').orderBy(idInCodePointOrder(db), 'desc').execute();
}

export function findApiKeyInfo(db: Db, keyId: string) {
  return db.selectFrom('api_keys').select(KEY_INFO_COLUMNS).where('id', '=', keyId).executeTakeFirst();
}

/**
 * Live keys of that name at `now`, to refuse a second one. A revoked or expired key is an invalid
 * key (decisions.md) and no longer holds its name.
 */
function liveKeysNamed(db: Db, name: string, now: string) {
  return db
    .selectFrom('api_keys')
    .select('id')
    .where('name', '=', name)
    .where('revoked_at', 'is', null)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]));
}

/** A live workspace key of the workspace with that name at `now` (liveKeysNamed). */
export function findLiveWorkspaceKeyByName(db: Db, workspaceId: string, name: string, now: string) {
  return liveKeysNamed(db, name, now)
    .where('workspace_id', '=', workspaceId)
    .where('kind', '=', 'workspace')
    .executeTakeFirst();
}

/** A live organization key of the organization with that name at `now` (liveKeysNamed). */
export function findLiveOrganizationKeyByName(db: Db, organizationId: string, name: string, now: string) {
  return liveKeysNamed(db, name, now)
    .where('organization_id', '=', organizationId)
    .where('kind', '=', 'organization')
    .executeTakeFirst();
}
