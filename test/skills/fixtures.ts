import http from 'node:http';
import type { WorkspaceAccess } from '../../src/services/access.js';

/** Keys (plaintext, ≥ 32 characters) and the setup fixture of the skills tests. */
export const SKILL_KEYS = {
  owner: 'atr_ws_skills_owner_0000000000000000000000000',
  admin: 'atr_ws_skills_admin_0000000000000000000000000',
  member: 'atr_ws_skills_member_000000000000000000000000',
  other: 'atr_ws_skills_other_ws_0000000000000000000000',
  org: 'atr_org_skills_acme_00000000000000000000000000',
} as const;

/** The workspace of SKILLS_SETUP's owner key, as the route resolves it (for calls to the service). */
export const SKILLS_OWNER: WorkspaceAccess = {
  principal: {
    keyId: 'key_owner',
    kind: 'workspace',
    organizationId: 'org_acme',
    workspaceId: 'wsp_skills',
    userId: 'usr_owner',
    rateLimitPerMinute: null,
    ownWorkspace: null,
    agentIds: null,
  },
  workspaceId: 'wsp_skills',
  organizationId: 'org_acme',
  role: 'owner',
  defaultModel: null,
};

export const SKILLS_SETUP = `
organizations:
  - id: org_acme
    name: Acme
    users:
      - { id: usr_owner, name: Olivia, email: olivia@acme.test }
      - { id: usr_admin, name: Ada, email: ada@acme.test }
      - { id: usr_member, name: Max, email: max@acme.test }
    apiKeys:
      - { name: acme-org, user: usr_owner, key: "${SKILL_KEYS.org}" }
    workspaces:
      - id: wsp_skills
        name: Skills
        members:
          - { user: usr_owner, role: owner }
          - { user: usr_admin, role: admin }
          - { user: usr_member, role: member }
        apiKeys:
          - { name: owner, user: usr_owner, key: "${SKILL_KEYS.owner}" }
          - { name: admin, user: usr_admin, key: "${SKILL_KEYS.admin}" }
          - { name: member, user: usr_member, key: "${SKILL_KEYS.member}" }
      - id: wsp_other
        name: Other
        members:
          - { user: usr_owner, role: owner }
        apiKeys:
          - { name: other, user: usr_owner, key: "${SKILL_KEYS.other}" }
`;

/**
 * A bulk upload over a real connection, for what `inject` cannot do (a body that arrives over
 * time): the request to write the body to, and the answer once the response has ended.
 */
export function bulkUploadRequest(url: string, contentType: string, key: string = SKILL_KEYS.owner) {
  let request!: http.ClientRequest;
  const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
    request = http.request(
      url,
      { method: 'POST', headers: { 'x-service-api-key': key, 'content-type': contentType } },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString() }),
        );
      },
    );
    request.on('error', reject);
  });
  return { request, answer };
}
