/** Plaintext fixture keys (≥ 32 characters), named by what they may do. */
export const KEYS = {
  mainOwner: 'atr_ws_fixture_main_owner_000000000000000000',
  mainMember: 'atr_ws_fixture_main_member_00000000000000000',
  mainExpired: 'atr_ws_fixture_main_expired_0000000000000000',
  mainRevoked: 'atr_ws_fixture_main_revoked_0000000000000000',
  otherWorkspace: 'atr_ws_fixture_other_ws_00000000000000000000',
  globexWorkspace: 'atr_ws_fixture_globex_ws_0000000000000000000',
  acmeOrg: 'atr_org_fixture_acme_000000000000000000000000',
  globexOrg: 'atr_org_fixture_globex_0000000000000000000000',
} as const;

/**
 * Two organizations: Acme (workspaces wsp_main and wsp_other) and Globex (wsp_globex), with
 * agents of every visibility, a deleted agent and an archived project.
 */
export const TENANCY_SETUP = `
organizations:
  - id: org_acme
    name: Acme
    users:
      - { id: usr_olivia, name: Olivia, email: olivia@acme.test }
      - { id: usr_max, name: Max, email: max@acme.test }
    apiKeys:
      - { name: acme-org, user: usr_olivia, key: "${KEYS.acmeOrg}" }
    workspaces:
      - id: wsp_main
        name: Main
        models: [atrium/echo]
        defaultModel: atrium/echo
        members:
          - { user: usr_olivia, role: owner }
          - { user: usr_max, role: member }
        apiKeys:
          - { name: main-owner, user: usr_olivia, key: "${KEYS.mainOwner}" }
          - { name: main-member, user: usr_max, key: "${KEYS.mainMember}" }
          - { name: main-expired, user: usr_olivia, key: "${KEYS.mainExpired}", expiresAt: "2020-01-01T00:00:00Z" }
          - { name: main-revoked, user: usr_olivia, key: "${KEYS.mainRevoked}" }
        agents:
          - { id: agt_zeta, title: zeta, visibility: workspace }
          - { id: agt_alpha, title: Alpha, description: First, image: https://example.test/a.png, category: support, visibility: organization, model: atrium/echo }
          - { id: agt_beta, title: beta, visibility: workspace }
          - { id: agt_secret, title: Secret, visibility: private }
          - { id: agt_old, title: Old, visibility: workspace, deleted: true }
        projects:
          - { id: prj_docs, name: Docs, instructions: "Cite file names." }
          - { id: prj_2019, name: Archive 2019, archived: true }
      - id: wsp_other
        name: Other
        members:
          - { user: usr_olivia, role: owner }
        apiKeys:
          - { name: other-owner, user: usr_olivia, key: "${KEYS.otherWorkspace}" }
        agents:
          - { id: agt_other, title: Other agent, visibility: workspace }
        projects:
          - { id: prj_other, name: Other project }
  - id: org_globex
    name: Globex
    users:
      - { id: usr_gina, name: Gina, email: gina@globex.test }
    apiKeys:
      - { name: globex-org, user: usr_gina, key: "${KEYS.globexOrg}" }
    workspaces:
      - id: wsp_globex
        name: Globex Main
        members:
          - { user: usr_gina, role: owner }
        apiKeys:
          - { name: globex-owner, user: usr_gina, key: "${KEYS.globexWorkspace}" }
        agents:
          - { id: agt_globex, title: Globex agent, visibility: workspace }
        projects:
          - { id: prj_globex, name: Globex project }
`;
