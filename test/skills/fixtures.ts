/** Keys (plaintext, ≥ 32 characters) and the setup fixture of the skills tests. */
export const SKILL_KEYS = {
  owner: 'atr_ws_skills_owner_0000000000000000000000000',
  admin: 'atr_ws_skills_admin_0000000000000000000000000',
  member: 'atr_ws_skills_member_000000000000000000000000',
  other: 'atr_ws_skills_other_ws_0000000000000000000000',
  org: 'atr_org_skills_acme_00000000000000000000000000',
} as const;

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
