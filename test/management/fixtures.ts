import type { FastifyInstance } from 'fastify';

/** Plaintext fixture keys (≥ 32 characters) of the management tests, named by what they may do. */
export const MKEYS = {
  owner: 'atr_ws_mgmt_main_owner_0000000000000000000000',
  admin: 'atr_ws_mgmt_main_admin_0000000000000000000000',
  member: 'atr_ws_mgmt_main_member_000000000000000000000',
  otherWorkspace: 'atr_ws_mgmt_other_owner_000000000000000000000',
  acmeOrg: 'atr_org_mgmt_acme_olivia_00000000000000000000',
  acmeOrgMember: 'atr_org_mgmt_acme_max_0000000000000000000000',
  globexWorkspace: 'atr_ws_mgmt_globex_owner_00000000000000000000',
  globexOrg: 'atr_org_mgmt_globex_00000000000000000000000000',
} as const;

/**
 * Acme (workspaces wsp_main, wsp_other) with an owner, an admin and a member, and Globex as
 * another tenant. The setup file declares agt_file and prj_file: those are managed by `setup`.
 */
export const MANAGEMENT_SETUP = `
providers:
  - { id: local, type: openai-compatible, baseURL: "http://127.0.0.1:9/v1" }
models:
  - { id: local/small, provider: local, model: small, pricing: { inputPerMTok: 1, outputPerMTok: 2 } }
  - { id: local/large, provider: local, model: large, pricing: { inputPerMTok: 10, outputPerMTok: 30 } }
organizations:
  - id: org_acme
    name: Acme
    users:
      - { id: usr_olivia, name: Olivia, email: olivia@acme.test }
      - { id: usr_adam, name: Adam, email: adam@acme.test }
      - { id: usr_max, name: Max, email: max@acme.test }
      - { id: usr_nora, name: Nora, email: nora@acme.test }
    apiKeys:
      - { name: acme-org, user: usr_olivia, key: "${MKEYS.acmeOrg}" }
      - { name: acme-org-max, user: usr_max, key: "${MKEYS.acmeOrgMember}" }
    workspaces:
      - id: wsp_main
        name: Main
        models: [atrium/echo, local/small]
        defaultModel: atrium/echo
        limits: { monthlyTokens: 1000000 }
        members:
          - { user: usr_olivia, role: owner }
          - { user: usr_adam, role: admin }
          - { user: usr_max, role: member }
        apiKeys:
          - { id: key_main_owner, name: main-owner, user: usr_olivia, key: "${MKEYS.owner}" }
          - { id: key_main_admin, name: main-admin, user: usr_adam, key: "${MKEYS.admin}" }
          - { id: key_main_member, name: main-member, user: usr_max, key: "${MKEYS.member}" }
        agents:
          - { id: agt_file, title: From file, visibility: workspace, instructions: "Declared in the file." }
          - { id: agt_listed, title: Listed, visibility: workspace }
          - { id: agt_private, title: Private, visibility: private }
        projects:
          - { id: prj_file, name: File project, instructions: "From the file." }
      - id: wsp_other
        name: Other
        members:
          - { user: usr_olivia, role: owner }
        apiKeys:
          - { name: other-owner, user: usr_olivia, key: "${MKEYS.otherWorkspace}" }
        agents:
          - { id: agt_other, title: Other agent, visibility: workspace }
  - id: org_globex
    name: Globex
    users:
      - { id: usr_gina, name: Gina, email: gina@globex.test }
    apiKeys:
      - { name: globex-org, user: usr_gina, key: "${MKEYS.globexOrg}" }
    workspaces:
      - id: wsp_globex
        name: Globex Main
        members:
          - { user: usr_gina, role: owner }
        apiKeys:
          - { name: globex-owner, user: usr_gina, key: "${MKEYS.globexWorkspace}" }
        agents:
          - { id: agt_globex, title: Globex agent, visibility: workspace }
`;

/**
 * `inject` as a key's holder calls: `x-service-api-key` (and any other headers), a JSON body
 * when one is given. `app` is read at call time (the app is built in `beforeAll`).
 */
export function keyedCaller(app: () => FastifyInstance) {
  return (
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    url: string,
    key: string,
    payload?: unknown,
    extra: Record<string, string> = {},
  ) =>
    app().inject({
      method,
      url,
      headers: { 'x-service-api-key': key, ...extra },
      ...(payload !== undefined && { payload: payload as object }),
    });
}
