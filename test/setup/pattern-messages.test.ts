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

// Organization, workspace and user names had only `minLength: 1`: a file could create a workspace
// named "   " or "\u200b", an empty line in every list. Project names had no more and now follow
// POST /v1/projects (one that shows, one line, 1–200), with no white space at either end, which
// the API trims away and apply would store.
describe('names of organizations, workspaces, users and projects', () => {
  const ONE_LINE_NAME =
    'must show a character and be one line: no control characters (newlines, tabs) or line separators (U+2028, U+2029)';
  const fileNaming = (name: string) => `
organizations:
  - id: org_a
    name: ${name}
    users:
      - { id: usr_a, name: ${name}, email: ann@a.test }
    workspaces:
      - id: wsp_a
        name: ${name}
        projects:
          - { name: ${name} }
`;
  const paths = [
    'organizations[0].name',
    'organizations[0].users[0].name',
    'organizations[0].workspaces[0].name',
    'organizations[0].workspaces[0].projects[0].name',
  ];

  it.each([
    ['blank', '"   "'],
    ['a zero-width space', '"\\u200b"'],
    ['a Hangul filler', '"\\u3164"'],
    ['a mark alone', '"\\u0301"'],
    ['a tab inside', '"Acme\\tCorp"'],
    ['a newline inside', '"Acme\\nCorp"'],
    ['a line separator inside', '"Acme\\u2028Corp"'],
    ['an escape sequence', '"\\u001b[31mAcme"'],
  ])('refuses a name that is %s wherever it names one', (_label, name) => {
    expect(setupProblems(fileNaming(name))).toEqual(paths.map((path) => ({ path, message: ONE_LINE_NAME })));
  });

  it('takes the names that show a character on one line, as the API does', () => {
    for (const name of [
      'Acme',
      '"👩\\u200d💻 notes"',
      '"\\u0645\\u06cc\\u200c\\u062e\\u0648\\u0627\\u0647\\u0645"',
      '"Re\\u0301sume\\u0301"',
    ]) {
      expect(setupProblems(fileNaming(name)), name).toEqual([]);
    }
  });

  it('holds project names to the API’s 200 characters, and refuses white space at either end', () => {
    const text = oneWorkspaceFile(`        projects:
          - { name: "${'p'.repeat(200)}" }
          - { name: "${'p'.repeat(201)}" }
          - { name: " Docs" }
          - { name: "Docs\\u00a0" }
          - { name: "Notes" }`);
    expect(setupProblems(text)).toEqual([
      {
        path: 'organizations[0].workspaces[0].projects[1].name',
        message: 'must NOT have more than 200 characters',
      },
      ...[2, 3].map((p) => ({
        path: `organizations[0].workspaces[0].projects[${p}].name`,
        message: 'must not begin or end with white space (the API trims project names)',
      })),
    ]);
  });
});
