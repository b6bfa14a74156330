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

  // The API's rule for key names and agent titles (1–100 characters on one line, one that shows):
  // before, a file could give them a newline, ESC or 200 characters, which no API client could send.
  it('holds key names and agent titles to the API’s rule, naming the value that breaks it', () => {
    const ONE_LINE_NAME =
      'must show a character and be one line: no control characters (newlines, tabs) or line separators (U+2028, U+2029)';
    const text = `
organizations:
  - id: org_a
    name: A
    users:
      - { id: usr_a, name: Ann, email: ann@a.test }
    apiKeys:
      - { name: "org\\tkey", user: usr_a }
      - { name: "caf\\u0065\\u0301 key", user: usr_a }
    workspaces:
      - id: wsp_a
        name: A
        apiKeys:
          - { name: "\\u3164", user: usr_a }
          - { name: "${'k'.repeat(101)}", user: usr_a }
          - { name: "${'k'.repeat(100)}", user: usr_a }
        agents:
          - { title: "Line\\nbreak" }
          - { title: "Line\\u2028separator" }
          - { title: "\\u0301\\u2800" }
          - { title: "\\u001b[31mred" }
          - { title: "R\\u00e9sum\\u0065\\u0301" }
          - { title: "${'t'.repeat(101)}" }
`;
    expect(setupProblems(text)).toEqual([
      { path: 'organizations[0].apiKeys[0].name', message: ONE_LINE_NAME },
      { path: 'organizations[0].workspaces[0].apiKeys[0].name', message: ONE_LINE_NAME },
      {
        path: 'organizations[0].workspaces[0].apiKeys[1].name',
        message: 'must NOT have more than 100 characters',
      },
      ...[0, 1, 2, 3].map((a) => ({
        path: `organizations[0].workspaces[0].agents[${a}].title`,
        message: ONE_LINE_NAME,
      })),
      {
        path: 'organizations[0].workspaces[0].agents[5].title',
        message: 'must NOT have more than 100 characters',
      },
    ]);
  });
});
