/**
 * A setup-file value refused by a pattern is told what it must be, in the API's words
 * (src/http/schemas/patterns.ts), never the regular expression.
 */
import { describe, expect, it } from 'vitest';
import { oneWorkspaceFile, setupProblems } from './setup-files.js';

describe('pattern messages of the setup file', () => {
  it('says what a colour, a tool name and a key variable must be', () => {
    const found = setupProblems(
      oneWorkspaceFile(
        `        projects:
          - { name: P, color: blue }
        agents:
          - { title: Helper, tools: [{ type: mcp, name: "has space", url: "https://mcp.test/" }] }`,
        `providers:
  - { id: local, type: openai-compatible, baseURL: "http://localhost:1/v1", apiKeyEnv: "1BAD" }`,
      ),
    );
    expect(found).toEqual(
      expect.arrayContaining([
        {
          path: 'providers[0].apiKeyEnv',
          message: expect.stringMatching(/^must be an environment variable name/),
        },
        {
          path: 'organizations[0].workspaces[0].projects[0].color',
          message: 'must be a color written #RRGGBB',
        },
        {
          path: 'organizations[0].workspaces[0].agents[0].tools[0].name',
          message: 'must hold only letters, digits, "_" and "-"',
        },
      ]),
    );
    expect(JSON.stringify(found)).not.toMatch(/must match pattern|\^|\$/);
  });
});
