import { generateApiKey, hashApiKey, keyPrefix } from '../auth/api-keys.js';
import type { Db } from '../db/database.js';
import { liveAgentIdsIn, memberVisibleAgentIdsIn } from '../db/repositories/agents.js';
import {
  type ApiKeyInfoRow,
  findApiKeyInfo,
  findLiveOrganizationKeyByName,
  findLiveWorkspaceKeyByName,
  insertApiKey,
  listWorkspaceApiKeys,
  type NewApiKey,
  revokeApiKey,
} from '../db/repositories/api-keys.js';
import {
  findOrganizationRoles,
  findWorkspaceWithRole,
  withOrganizationLocked,
  withWorkspaceLocked,
} from '../db/repositories/tenancy.js';
import type { Role } from '../db/schema.js';
import { errors } from '../errors.js';
import { type Clock, newId } from '../ids.js';
import {
  accessWorkspaceIfAllowed,
  isManager,
  type Principal,
  requireManager,
  type WorkspaceAccess,
} from './access.js';

export interface KeyAdminDeps {
  db: Db;
  clock: Clock;
}

export const KEY_LIMITS = {
  sessionDefaultSeconds: 3600,
} as const;

/**
 * The latest expiry of a key made at `now` (management.md: at most a year away): the same UTC
 * date and time a year later, or February 28 for a key made on February 29, which the next
 * year has not. A fixed 366 days let keys made outside a leap year live a day longer.
 */
export function latestKeyExpiry(now: Date): number {
  const latest = new Date(now.getTime());
  latest.setUTCFullYear(now.getUTCFullYear() + 1);
  // setUTCFullYear moves February 29 on to March 1: step back to the year's last February day.
  if (latest.getUTCMonth() !== now.getUTCMonth()) latest.setUTCDate(0);
  return latest.getTime();
}

export function keyInfoView(row: ApiKeyInfoRow) {
  return {
    id: row.id,
    name: row.name,
    userId: row.user_id,
    prefix: row.key_prefix,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    lastUsedAt: row.last_used_at,
    revokedAt: row.revoked_at,
    managedBy: row.managed_by,
  };
}

async function requireMember(db: Db, workspaceId: string, userId: string, path: string): Promise<Role> {
  const found = await findWorkspaceWithRole(db, workspaceId, userId);
  if (!found?.role) {
    throw errors.badRequest(`${path} is not a member of this workspace`, [
      { path, message: 'must be the id of a member of the workspace' },
    ]);
  }
  return found.role;
}

const RANK: Record<Role, number> = { member: 0, admin: 1, owner: 2 };

/** The schemas' `date-time` (RFC 3339 section 5.6): a date, a time and an offset. */
const RFC_3339_DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;

/**
 * Whether `text` is an RFC 3339 date and time that names a real moment: the API's schema checks
 * this already, the CLI's `--expires-at` not, and Date.parse alone takes more (a date without a
 * time, one in the machine's time zone, February 30 as March 2).
 */
function isDateTime(text: string): boolean {
  const parts = RFC_3339_DATE_TIME.exec(text);
  if (!parts) return false;
  const [year, month, day, hour, minute, second, offsetHours = 0, offsetMinutes = 0] = parts
    .slice(1)
    .map((part) => (part === undefined ? undefined : Number(part)));
  const daysInMonth = new Date(Date.UTC(year!, month!, 0)).getUTCDate();
  return (
    month! >= 1 &&
    month! <= 12 &&
    day! >= 1 &&
    day! <= daysInMonth &&
    hour! <= 23 &&
    minute! <= 59 &&
    second! <= 60 &&
    offsetHours <= 23 &&
    offsetMinutes <= 59
  );
}

/**
 * A new key's expiry (`undefined`: none): in the future and at most a year away, as an ISO time;
 * else a 400 naming `field` (the API's `body.expiresAt`, the CLI's `--expires-at`).
 */
export function keyExpiry(expiresAt: string | undefined, now: Date, field = 'body.expiresAt'): string | null {
  if (expiresAt === undefined) return null;
  if (!isDateTime(expiresAt)) {
    throw errors.badRequest(
      `${field} must be a date and time with a time zone, such as 2027-01-31T00:00:00Z`,
      [{ path: field, message: 'must be an RFC 3339 date and time with a time zone' }],
    );
  }
  const at = Date.parse(expiresAt);
  // RFC 3339 allows a leap second (`23:59:60`), which Date cannot read.
  if (Number.isNaN(at)) {
    throw errors.badRequest(`${field} must be a date and time with seconds up to 59`, [
      { path: field, message: 'must be a date and time with seconds up to 59 (no leap second)' },
    ]);
  }
  if (at <= now.getTime() || at > latestKeyExpiry(now)) {
    throw errors.badRequest(`${field} must be in the future and at most a year away`, [
      { path: field, message: 'must be in the future and at most a year away' },
    ]);
  }
  return new Date(at).toISOString();
}

export async function createWorkspaceApiKey(
  deps: KeyAdminDeps,
  access: WorkspaceAccess,
  input: { name: string; userId?: string; expiresAt?: string | null },
) {
  requireManager(access);
  const now = deps.clock();
  const userId = input.userId ?? access.principal.userId;
  const role = await requireMember(deps.db, access.workspaceId, userId, 'body.userId');
  // A key acts with its user's role: an admin minting an owner's key would act as the owner.
  if (RANK[role] > RANK[access.role!]) {
    throw errors.unauthorized(`An ${access.role} cannot create a key for a user who is ${role} here`);
  }
  const expiresAt = keyExpiry(input.expiresAt ?? undefined, now);
  const key = generateApiKey('workspace');
  const row: ApiKeyInfoRow = {
    id: newId('key'),
    name: input.name,
    kind: 'workspace',
    organization_id: access.organizationId,
    workspace_id: access.workspaceId,
    user_id: userId,
    key_prefix: keyPrefix(key),
    created_at: now.toISOString(),
    expires_at: expiresAt,
    last_used_at: null,
    revoked_at: null,
    managed_by: 'api',
  };
  const inserted = await insertWorkspaceKeyIfNameFree(deps.db, {
    id: row.id,
    name: row.name,
    kind: 'workspace',
    organizationId: row.organization_id,
    workspaceId: access.workspaceId,
    userId,
    keyHash: hashApiKey(key),
    keyPrefix: row.key_prefix,
    expiresAt,
    createdAt: row.created_at,
    managedBy: 'api',
  });
  if (!inserted) {
    throw errors.conflict(`A key named "${input.name}" already exists in this workspace`, { field: 'name' });
  }
  return { apiKey: keyInfoView(row), key };
}

/**
 * Inserts a workspace key unless a live key of the workspace has its name at the key's creation
 * time (false then). The check and the insert run under the workspace's lock, so of requests
 * racing for one name one key is made.
 */
export function insertWorkspaceKeyIfNameFree(
  db: Db,
  key: NewApiKey & { workspaceId: string },
): Promise<boolean> {
  return withWorkspaceLocked(db, key.workspaceId, async (trx) => {
    if (await findLiveWorkspaceKeyByName(trx, key.workspaceId, key.name, key.createdAt)) return false;
    await insertApiKey(trx, key);
    return true;
  });
}

/**
 * insertWorkspaceKeyIfNameFree for an organization key: a setup file names organization keys
 * by name within their organization, so two live ones of a name could not be told apart.
 */
export function insertOrganizationKeyIfNameFree(db: Db, key: NewApiKey): Promise<boolean> {
  return withOrganizationLocked(db, key.organizationId, async (trx) => {
    if (await findLiveOrganizationKeyByName(trx, key.organizationId, key.name, key.createdAt)) return false;
    await insertApiKey(trx, key);
    return true;
  });
}

/** Owners and admins see every key of the workspace; a member sees the keys of its own user. */
export async function listApiKeys(db: Db, access: WorkspaceAccess) {
  const rows = await listWorkspaceApiKeys(
    db,
    access.workspaceId,
    isManager(access) ? undefined : access.principal.userId,
  );
  return rows.map(keyInfoView);
}

/**
 * Revokes a key: anyone their own keys; owners and admins the workspace keys of users who rank
 * at most as high as they do there (as for creating one: an admin cannot lock the owner out);
 * an organization key the organization keys of users it outranks nowhere (see
 * mayRevokeOrganizationKey). Revocation is a row update that every process
 * reads on the next request (the key cache, src/auth/key-cache.ts, is emptied by it on every
 * process), so it holds everywhere at once. A key the
 * caller cannot see is missing (404); revoking twice answers the same.
 */
export async function revokeKey(deps: KeyAdminDeps, principal: Principal, keyId: string) {
  const key = await findApiKeyInfo(deps.db, keyId);
  if (!key) throw errors.notFound('API key');
  const own = key.user_id === principal.userId;
  if (key.workspace_id) {
    const access = await accessWorkspaceIfAllowed(deps.db, principal, key.workspace_id);
    if (!access) throw errors.notFound('API key');
    if (!own && !isManager(access)) {
      throw errors.unauthorized('Only an owner or admin may revoke another user’s key');
    }
    if (!own) {
      const keyRole = await actingRole(deps.db, key.workspace_id, key);
      if (RANK[keyRole] > RANK[access.role!]) {
        throw errors.unauthorized(`An ${access.role} cannot revoke the key of a user who is ${keyRole} here`);
      }
    }
  } else {
    if (key.organization_id !== principal.organizationId) throw errors.notFound('API key');
    if (!own && !(await mayRevokeOrganizationKey(deps.db, principal, key.user_id))) {
      throw errors.unauthorized(
        'Another user’s organization key is revoked by an organization key of an owner or admin who ranks at least as high as that user in each of its workspaces',
      );
    }
  }
  await revokeApiKey(deps.db, key.id, deps.clock().toISOString());
}

/**
 * The role a workspace key acts with: its user's in the workspace, a member's for a session
 * token (whatever its user's role), and none for a user who left (the key no longer works),
 * ranked as a member's.
 */
async function actingRole(db: Db, workspaceId: string, key: ApiKeyInfoRow): Promise<Role> {
  if (key.kind === 'session') return 'member';
  return (await findWorkspaceWithRole(db, workspaceId, key.user_id))?.role ?? 'member';
}

export async function createSessionToken(
  deps: KeyAdminDeps,
  access: WorkspaceAccess,
  input: { userId: string; agentIds?: string[]; expiresInSeconds?: number },
) {
  requireManager(access);
  await requireMember(deps.db, access.workspaceId, input.userId, 'body.userId');
  if (input.agentIds) {
    const agentIds = [...new Set(input.agentIds)];
    const live = await liveAgentIdsIn(deps.db, access.workspaceId, agentIds);
    const missing = input.agentIds.findIndex((id) => !live.has(id));
    if (missing >= 0) {
      throw errors.badRequest(`body.agentIds.${missing} is not an agent of this workspace`, [
        { path: `body.agentIds.${missing}`, message: 'must be the id of an agent of the workspace' },
      ]);
    }
    // The token acts as a member, to whom a private agent is 404: it could never reach one.
    const listed = await memberVisibleAgentIdsIn(deps.db, access.workspaceId, agentIds);
    const hidden = input.agentIds.findIndex((id) => !listed.has(id));
    if (hidden >= 0) {
      const message =
        'is a private agent, which a session token cannot reach (it acts as a member, whatever the user’s role)';
      throw errors.badRequest(`body.agentIds.${hidden} ${message}`, [
        { path: `body.agentIds.${hidden}`, message },
      ]);
    }
  }
  const now = deps.clock();
  const asked = now.getTime() + (input.expiresInSeconds ?? KEY_LIMITS.sessionDefaultSeconds) * 1000;
  // The token never outlives the key that makes it (access.ts): its expiry says so.
  const makerExpiry = (await findApiKeyInfo(deps.db, access.principal.keyId))?.expires_at;
  const expiresAt = new Date(makerExpiry ? Math.min(asked, Date.parse(makerExpiry)) : asked).toISOString();
  const token = generateApiKey('session');
  await insertApiKey(deps.db, {
    id: newId('key'),
    name: 'session token',
    kind: 'session',
    organizationId: access.organizationId,
    workspaceId: access.workspaceId,
    userId: input.userId,
    keyHash: hashApiKey(token),
    keyPrefix: keyPrefix(token),
    expiresAt,
    createdAt: now.toISOString(),
    managedBy: 'api',
    agentIds: input.agentIds ? [...new Set(input.agentIds)] : null,
    madeByKeyId: access.principal.keyId,
  });
  return { token, expiresAt };
}

/**
 * Whether an organization key may revoke another user's organization key: its user must be an
 * owner or admin somewhere in the organization, and rank at least as high as the key's user in
 * every workspace that user belongs to. A member's organization key cannot lock the owner out,
 * nor an admin's.
 */
async function mayRevokeOrganizationKey(db: Db, principal: Principal, keyUserId: string): Promise<boolean> {
  if (principal.kind !== 'organization') return false;
  const rows = await findOrganizationRoles(db, principal.organizationId, [principal.userId, keyUserId]);
  const callerRoles = new Map<string, Role>();
  for (const row of rows) if (row.user_id === principal.userId) callerRoles.set(row.workspace_id, row.role);
  if (![...callerRoles.values()].some((role) => RANK[role] >= RANK.admin)) return false;
  return rows
    .filter((row) => row.user_id === keyUserId)
    .every((row) => {
      const callerRole = callerRoles.get(row.workspace_id);
      return callerRole !== undefined && RANK[callerRole] >= RANK[row.role];
    });
}
