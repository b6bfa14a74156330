import { hashApiKey, keysMatch } from '../auth/api-keys.js';
import type { Db } from '../db/database.js';
import { findApiKeyByHash, touchApiKey } from '../db/repositories/api-keys.js';
import { findAgentLocation } from '../db/repositories/agents.js';
import { findMemberRole, findWorkspace } from '../db/repositories/tenancy.js';
import type { ApiKeyKind, Role } from '../db/schema.js';
import { errors } from '../errors.js';

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
}

/** The workspace a request acts in, and the calling user's role there (null: not a member). */
export interface WorkspaceAccess {
  principal: Principal;
  workspaceId: string;
  organizationId: string;
  role: Role | null;
}

// Writing last_used_at on every request would make each read a write; a minute's precision is plenty.
const LAST_USED_PRECISION_MS = 60_000;

export async function authenticateKey(db: Db, presentedKey: string | undefined, now: Date): Promise<Principal> {
  if (!presentedKey) throw errors.notAuthenticated();
  const presentedHash = hashApiKey(presentedKey);
  const key = await findApiKeyByHash(db, presentedHash);
  if (!key || !keysMatch(key.key_hash, presentedHash)) throw errors.notAuthenticated('Invalid API key');
  if (key.revoked_at) throw errors.notAuthenticated('Invalid API key');
  if (key.expires_at && Date.parse(key.expires_at) <= now.getTime()) {
    throw errors.notAuthenticated('Invalid API key');
  }
  if (!key.last_used_at || now.getTime() - Date.parse(key.last_used_at) > LAST_USED_PRECISION_MS) {
    await touchApiKey(db, key.id, now.toISOString());
  }
  let rateLimitPerMinute: number | null = null;
  if (key.workspace_id) {
    const workspace = await findWorkspace(db, key.workspace_id);
    rateLimitPerMinute = workspace?.rate_limit_per_minute ?? null;
  }
  return {
    keyId: key.id,
    kind: key.kind,
    organizationId: key.organization_id,
    workspaceId: key.workspace_id,
    userId: key.user_id,
    rateLimitPerMinute,
  };
}

async function accessTo(db: Db, principal: Principal, workspaceId: string, organizationId: string) {
  const role = await findMemberRole(db, workspaceId, principal.userId);
  return { principal, workspaceId, organizationId, role } satisfies WorkspaceAccess;
}

/** `/workspace/{workspaceId}/…`: unknown workspace → 404; a workspace the key cannot act in → 401. */
export async function accessWorkspaceInPath(db: Db, principal: Principal, workspaceId: string) {
  const workspace = await findWorkspace(db, workspaceId);
  if (!workspace) throw errors.notFound('Workspace');
  const allowed =
    principal.kind === 'workspace'
      ? principal.workspaceId === workspace.id
      : principal.organizationId === workspace.organization_id;
  if (!allowed) throw errors.unauthorized('This API key cannot act in this workspace');
  return accessTo(db, principal, workspace.id, workspace.organization_id);
}

/**
 * Endpoints without a workspace in the path (`/projects…`): a workspace key acts in its own
 * workspace; an organization key must name one of its organization's workspaces in `x-workspace-id`.
 */
export async function accessRequestWorkspace(db: Db, principal: Principal, headerWorkspaceId?: string) {
  if (principal.kind === 'workspace') {
    const workspaceId = principal.workspaceId!;
    if (headerWorkspaceId && headerWorkspaceId !== workspaceId) {
      throw errors.unauthorized('A workspace key acts only in its own workspace');
    }
    return accessTo(db, principal, workspaceId, principal.organizationId);
  }
  if (!headerWorkspaceId) {
    throw errors.unauthorized('An organization key must name a workspace in the x-workspace-id header');
  }
  const workspace = await findWorkspace(db, headerWorkspaceId);
  if (!workspace || workspace.organization_id !== principal.organizationId) {
    throw errors.unauthorized('The x-workspace-id workspace is not in this key’s organization');
  }
  return accessTo(db, principal, workspace.id, workspace.organization_id);
}

/**
 * `/chat` and `/agents/{id}/runs`: the request acts in the agent's workspace. An agent the key
 * cannot see is reported as missing, never as forbidden, so existence does not leak.
 */
export async function accessAgentWorkspace(db: Db, principal: Principal, agentId: string) {
  const location = await findAgentLocation(db, agentId);
  const visible =
    location &&
    (principal.kind === 'workspace'
      ? location.workspaceId === principal.workspaceId
      : location.organizationId === principal.organizationId);
  if (!location || !visible) throw errors.notFound('Agent');
  return accessTo(db, principal, location.workspaceId, location.organizationId);
}
