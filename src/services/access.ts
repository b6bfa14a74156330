import { hashApiKey, keysMatch } from '../auth/api-keys.js';
import type { ExactCache } from '../db/exact-cache.js';
import type { Db } from '../db/database.js';
import { findAgentLocation } from '../db/repositories/agents.js';
import { findApiKeyByHash, touchApiKey } from '../db/repositories/api-keys.js';
import { findWorkspaceWithRole } from '../db/repositories/tenancy.js';
import type { ApiKeyKind, Role } from '../db/schema.js';
import { errors } from '../errors.js';

/** The workspace a request acts in, and the calling user's role there (null: not a member). */
export interface WorkspaceAccess {
  principal: Principal;
  workspaceId: string;
  organizationId: string;
  role: Role | null;
  /** The workspace's default model id (null: none set, the offline model). */
  defaultModel: string | null;
}

/** Who is calling: resolved from the API key once per request. */
export interface Principal {
  keyId: string;
  kind: ApiKeyKind;
  organizationId: string;
  /** The key's workspace; null for organization keys. */
  workspaceId: string | null;
  userId: string;
  /** The rate limit the key's workspace sets, if any. */
  rateLimitPerMinute: number | null;
  /** For a workspace key, its own workspace, resolved with the key (no second query). */
  ownWorkspace: WorkspaceAccess | null;
  /** A session token limited to some agents: their ids; null when not limited. */
  agentIds: string[] | null;
  /**
   * The database's version when the key was checked (SQLite's data_version, PostgreSQL's
   * lease): the request's cached listings compare against it instead of reading it again
   * (src/db/exact-cache.ts).
   */
  dataVersion?: number;
  /**
   * Counts this request against a workspace's own rate limit, for an organization key once the
   * workspace it acts in is known (set by the auth hook; throws 429 past the limit).
   */
  countIn?: (workspaceId: string, limitPerMinute: number | null) => Promise<void>;
}

// Writing last_used_at on every request would make each read a write; a minute's precision is plenty.
const LAST_USED_PRECISION_MS = 60_000;

type KeyRow = NonNullable<Awaited<ReturnType<typeof findApiKeyByHash>>>;

/** A key row with its timestamps parsed once, when read, rather than on every request. */
interface CheckedKeyRow extends KeyRow {
  expiresAtMs: number | null;
  lastUsedAtMs: number | null;
  makerExpiresAtMs: number | null;
}

/** Key rows as authentication reads them, kept by an exact cache where the database allows one. */
export type KeyRowCache = ExactCache<CheckedKeyRow>;

async function loadKeyRow(db: Db, keyHash: string): Promise<CheckedKeyRow | undefined> {
  const row = await findApiKeyByHash(db, keyHash);
  if (!row) return undefined;
  return {
    ...row,
    expiresAtMs: row.expires_at ? Date.parse(row.expires_at) : null,
    lastUsedAtMs: row.last_used_at ? Date.parse(row.last_used_at) : null,
    makerExpiresAtMs: row.maker_expires_at ? Date.parse(row.maker_expires_at) : null,
  };
}

/**
 * A session token never outlives the key that made it (management.md): once that key is revoked
 * or expired, or its user is no longer a member of the token's workspace, the tokens it handed
 * out end too, so revoking a leaked app server key is enough. Tokens made before migration 034
 * name no maker.
 */
function makerStillWorks(key: CheckedKeyRow, now: Date): boolean {
  if (key.made_by_key_id === null) return true;
  return (
    key.maker_id !== null &&
    key.maker_revoked_at === null &&
    (key.makerExpiresAtMs === null || key.makerExpiresAtMs > now.getTime()) &&
    key.maker_role !== null
  );
}

export async function authenticateKey(
  db: Db,
  presentedKey: string | undefined,
  now: Date,
  cache?: KeyRowCache,
): Promise<Principal> {
  if (!presentedKey) throw errors.notAuthenticated();
  const presentedHash = hashApiKey(presentedKey);
  const load = () => loadKeyRow(db, presentedHash);
  const dataVersion = cache ? await cache.readVersion() : undefined;
  const key = cache ? await cache.get(presentedHash, load, dataVersion) : await load();
  if (!key || !keysMatch(key.key_hash, presentedHash)) throw errors.notAuthenticated('Invalid API key');
  if (key.revoked_at) throw errors.notAuthenticated('Invalid API key');
  if (key.expiresAtMs !== null && key.expiresAtMs <= now.getTime()) {
    throw errors.notAuthenticated('Invalid API key');
  }
  // A workspace key or session token acts for its user in its workspace: once the user is no
  // longer a member there (the setup file dropped them), it acts for no one.
  if (key.workspace_id && !key.workspace_role) throw errors.notAuthenticated('Invalid API key');
  if (!makerStillWorks(key, now)) throw errors.notAuthenticated('Invalid API key');
  if (key.lastUsedAtMs === null || now.getTime() - key.lastUsedAtMs > LAST_USED_PRECISION_MS) {
    await touchApiKey(db, key.id, now.toISOString());
  }
  const principal: Principal = {
    keyId: key.id,
    kind: key.kind,
    organizationId: key.organization_id,
    workspaceId: key.workspace_id,
    userId: key.user_id,
    rateLimitPerMinute: key.workspace_rate_limit ?? null,
    ownWorkspace: null,
    agentIds: key.agent_ids ? (JSON.parse(key.agent_ids) as string[]) : null,
    dataVersion,
  };
  if (key.workspace_id) {
    principal.ownWorkspace = {
      principal,
      workspaceId: key.workspace_id,
      organizationId: key.organization_id,
      // A session token acts with a member's rights, whatever its user's role (management.md).
      role: key.kind === 'session' ? 'member' : (key.workspace_role ?? null),
      defaultModel: key.workspace_default_model ?? null,
    };
  }
  return principal;
}

/**
 * The access of the principal to a workspace, when its key may act there (a workspace key in its
 * own workspace, an organization key in its organization's); null when it may not; undefined
 * when the workspace does not exist.
 */
async function resolveAccess(db: Db, principal: Principal, workspaceId: string) {
  if (principal.ownWorkspace) {
    if (principal.ownWorkspace.workspaceId === workspaceId) return principal.ownWorkspace;
    const exists = await findWorkspaceWithRole(db, workspaceId, principal.userId);
    return exists ? null : undefined;
  }
  const workspace = await findWorkspaceWithRole(db, workspaceId, principal.userId);
  if (!workspace) return undefined;
  if (workspace.organization_id !== principal.organizationId) return null;
  await principal.countIn?.(workspace.id, workspace.rate_limit_per_minute);
  return {
    principal,
    workspaceId: workspace.id,
    organizationId: workspace.organization_id,
    role: workspace.role ?? null,
    defaultModel: workspace.default_model,
  } satisfies WorkspaceAccess;
}

/** `/workspace/{workspaceId}/…`: unknown workspace → 404; a workspace the key cannot act in → 401. */
export async function accessWorkspaceInPath(db: Db, principal: Principal, workspaceId: string) {
  const access = await resolveAccess(db, principal, workspaceId);
  if (access === undefined) throw errors.notFound('Workspace');
  if (access === null) throw errors.unauthorized('This API key cannot act in this workspace');
  return access;
}

/**
 * Endpoints without a workspace in the path (`/projects…`): a workspace key acts in its own
 * workspace; an organization key must name one of its organization's workspaces in `x-workspace-id`.
 */
export async function accessRequestWorkspace(db: Db, principal: Principal, headerWorkspaceId?: string) {
  if (principal.ownWorkspace) {
    if (headerWorkspaceId && headerWorkspaceId !== principal.ownWorkspace.workspaceId) {
      throw errors.unauthorized('A workspace key acts only in its own workspace');
    }
    return principal.ownWorkspace;
  }
  if (!headerWorkspaceId) {
    throw errors.unauthorized('An organization key must name a workspace in the x-workspace-id header');
  }
  const access = await resolveAccess(db, principal, headerWorkspaceId);
  if (!access) throw errors.unauthorized('The x-workspace-id workspace is not in this key’s organization');
  return access;
}

/**
 * `/chat` and `/agents/{id}/runs`: the request acts in the agent's workspace. An agent the key
 * cannot see is reported as missing, never as forbidden, so existence does not leak.
 */
export async function accessAgentWorkspace(db: Db, principal: Principal, agentId: string) {
  if (principal.agentIds && !principal.agentIds.includes(agentId)) throw errors.notFound('Agent');
  const location = await findAgentLocation(db, agentId);
  if (!location) throw errors.notFound('Agent');
  const access = await resolveAccess(db, principal, location.workspaceId);
  if (!access) throw errors.notFound('Agent');
  return access;
}

/** Write routes of management.md: an owner or admin of the workspace; anyone else → 401. */
export function requireManager(access: WorkspaceAccess): WorkspaceAccess {
  if (access.role !== 'owner' && access.role !== 'admin') {
    throw errors.unauthorized('This needs an owner or admin key of the workspace');
  }
  return access;
}

/** Owners and admins: they see every live agent and key of their workspace and may change them. */
export function isManager(access: WorkspaceAccess): boolean {
  return access.role === 'owner' || access.role === 'admin';
}

/**
 * The access of the principal to a workspace when its key may act there, else null (unknown
 * workspaces included): for routes that answer 404 rather than 401 when it may not.
 */
export async function accessWorkspaceIfAllowed(db: Db, principal: Principal, workspaceId: string) {
  return (await resolveAccess(db, principal, workspaceId)) ?? null;
}
