import type { Db } from '../db/database.js';
import { errors } from '../errors.js';
import type { Principal } from './access.js';

/** `GET /v1/me`: the calling key, its user, organization and (for a workspace key) workspace. */
export async function describeCaller(db: Db, principal: Principal) {
  const row = await db
    .selectFrom('api_keys')
    .innerJoin('users', 'users.id', 'api_keys.user_id')
    .innerJoin('organizations', 'organizations.id', 'api_keys.organization_id')
    .leftJoin('workspaces', 'workspaces.id', 'api_keys.workspace_id')
    .select([
      'api_keys.id as keyId',
      'api_keys.name as keyName',
      'api_keys.expires_at as expiresAt',
      'users.id as userId',
      'users.name as userName',
      'users.email as userEmail',
      'organizations.id as organizationId',
      'organizations.name as organizationName',
      'workspaces.id as workspaceId',
      'workspaces.name as workspaceName',
    ])
    .where('api_keys.id', '=', principal.keyId)
    .executeTakeFirst();
  // The key was found a moment ago by authentication; gone now means deleted in between.
  if (!row) throw errors.notAuthenticated('Invalid API key');
  const role = principal.ownWorkspace?.role ?? null;
  return {
    key: { id: row.keyId, name: row.keyName, kind: principal.kind, expiresAt: row.expiresAt },
    user: { id: row.userId, name: row.userName, email: row.userEmail },
    organization: { id: row.organizationId, name: row.organizationName },
    workspace:
      row.workspaceId && row.workspaceName ? { id: row.workspaceId, name: row.workspaceName, role } : null,
  };
}
