import { parseSetupText } from '../../src/setup/validate.js';

/**
 * A setup file of one organization (`org_a`) with one workspace (`wsp_a`) holding `workspace`
 * (YAML lines already indented as the workspace's fields), after `top` (top-level entries).
 */
export function oneWorkspaceFile(workspace: string, top = ''): string {
  return `
${top}
organizations:
  - id: org_a
    name: A
    workspaces:
      - id: wsp_a
        name: A
${workspace}
`;
}

/** The problems the setup file's checks find in `text` (none when it is valid). */
export function setupProblems(text: string) {
  const result = parseSetupText(text, 'setup.yaml');
  return result.ok ? [] : result.problems;
}
