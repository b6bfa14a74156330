/**
 * A setup-file value fitting none of a field's shapes (fixed choices, or a clearable field's
 * shape and `null`) is told once what it must be, in the API's words
 * (test/management/agents-admin.test.ts): one function explains both, so they cannot drift apart.
 */
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { SetupFileSchema } from '../../src/setup/validate.js';
import { explainUnions, type SchemaIssue } from '../../src/validation-unions.js';
import { oneWorkspaceFile, setupProblems } from './setup-files.js';

const WORKSPACE_PATH = 'organizations[0].workspaces[0]';

/** The problems at `path` of a file whose workspace holds `workspace` (YAML lines, indented), after `top`. */
function problemsAt(path: string, workspace: string, top = '') {
  return setupProblems(oneWorkspaceFile(workspace, top)).filter((problem) => problem.path === path);
}

describe('fields of several shapes in the setup file', () => {
  it('names every choice once for a value that is none of them, without a line per choice', () => {
    // Before: "must be equal to constant" three times, then "must match a schema in anyOf".
    for (const role of ['boss', '5']) {
      expect(
        problemsAt(`${WORKSPACE_PATH}.members[0].role`, `        members: [{ user: u, role: ${role} }]`),
        role,
      ).toEqual([
        { path: `${WORKSPACE_PATH}.members[0].role`, message: 'must be "owner", "admin" or "member"' },
      ]);
    }
    expect(problemsAt('providers[0].type', '', 'providers:\n  - { id: p, type: azure }')).toEqual([
      { path: 'providers[0].type', message: 'must be "openai", "anthropic" or "openai-compatible"' },
    ]);
    expect(
      problemsAt('models[0].kind', '', 'models:\n  - { id: m, provider: openai, model: x, kind: image }'),
    ).toEqual([{ path: 'models[0].kind', message: 'must be "chat" or "embedding"' }]);
  });

  it('names the one value a fixed field takes, once, for a value of another text or type', () => {
    // Before: "must be equal to constant", and "must be string" beside it for a number.
    const toolPath = `${WORKSPACE_PATH}.agents[0].tools[0]`;
    for (const type of ['foo', '5', 'null']) {
      expect(
        problemsAt(
          `${toolPath}.type`,
          `        agents:\n          - { title: Helper, tools: [{ type: ${type}, name: a, url: "https://a.test/" }] }`,
        ),
        type,
      ).toEqual([{ path: `${toolPath}.type`, message: 'must be "mcp"' }]);
    }
  });

  it('says a missing field is required, at its path, in the API’s words', () => {
    // Before: "must have required property 'name'" at the path that names it already.
    expect(setupProblems(oneWorkspaceFile('        projects:\n          - { color: "#112233" }'))).toEqual([
      { path: `${WORKSPACE_PATH}.projects[0].name`, message: 'is required' },
    ]);
    expect(setupProblems('providers:\n  - { type: openai }')).toEqual([
      { path: 'providers[0].id', message: 'is required' },
    ]);
  });

  it('says what a clearable field must be, choices included, beside null', () => {
    const agent = (fields: string) => `        agents:\n          - { title: Helper, ${fields} }`;
    const agentPath = `${WORKSPACE_PATH}.agents[0]`;
    for (const [fields, field, message] of [
      ['visibility: everyone', 'visibility', 'must be "workspace", "organization", "private" or null'],
      ['visibility: 5', 'visibility', 'must be "workspace", "organization", "private" or null'],
      ['tools: x', 'tools', 'must be array or null'],
      ['description: [a]', 'description', 'must be string or null'],
    ] as const) {
      expect(problemsAt(`${agentPath}.${field}`, agent(fields)), fields).toEqual([
        { path: `${agentPath}.${field}`, message },
      ]);
    }
  });

  it('reports the problem inside a value of an object or list branch, not the other branches', () => {
    const agent = (fields: string) => `        agents:\n          - { title: Helper, ${fields} }`;
    const agentPath = `${WORKSPACE_PATH}.agents[0]`;
    for (const [workspace, path, message] of [
      ['        limits: { monthlyTokens: -1 }', `${WORKSPACE_PATH}.limits.monthlyTokens`, 'must be >= 0'],
      [
        '        limits: { rateLimitPerMinute: x }',
        `${WORKSPACE_PATH}.limits.rateLimitPerMinute`,
        'must be integer or null',
      ],
      [
        agent('tools: [{ type: mcp, url: "https://a.test/" }]'),
        `${agentPath}.tools[0].name`,
        // The API's words (test/http/errors.test.ts): the path names the field already.
        'is required',
      ],
      [agent('orchestration: { agents: x }'), `${agentPath}.orchestration.agents`, 'must be array'],
    ] as const) {
      const found = setupProblems(oneWorkspaceFile(workspace));
      expect(found, workspace).toEqual([{ path, message }]);
    }
  });

  it('explains each item of a list on its own: the union of one item takes no problem of another', () => {
    // Every item of a list shares one schema path: the first item's union took in (and dropped)
    // the problems of the others, or left them as "must match a schema in anyOf".
    const roles = setupProblems(
      oneWorkspaceFile('        members: [{ user: u, role: boss }, { user: v, role: king }]'),
    ).filter((problem) => problem.path.endsWith('.role'));
    expect(roles).toEqual([
      { path: `${WORKSPACE_PATH}.members[0].role`, message: 'must be "owner", "admin" or "member"' },
      { path: `${WORKSPACE_PATH}.members[1].role`, message: 'must be "owner", "admin" or "member"' },
    ]);
  });

  it('lists the problems of a file whose agents are each malformed in their own way, never throwing', () => {
    for (const agents of [
      ['{ title: A, orchestration: 5 }', '{ title: B, orchestration: { agents: x } }'],
      ['{ title: A, tools: 5 }', '{ title: B, tools: [ null ] }'],
      ['{ title: A, description: 5 }', `{ title: B, description: "${'x'.repeat(2001)}" }`],
    ]) {
      const problems = setupProblems(
        oneWorkspaceFile(`        agents:\n${agents.map((agent) => `          - ${agent}`).join('\n')}`),
      );
      expect(problems.length, agents.join(' ')).toBeGreaterThanOrEqual(2);
      expect(problems.map((problem) => problem.path).join(' ')).toContain('agents[1]');
      expect(problems.map((problem) => problem.message)).not.toContain('must match a schema in anyOf');
    }
  });

  /** A file of `count` users, each a member of its workspace with a role that is none of the choices. */
  function badRoles(count: number): string {
    const members = Array.from({ length: count }, (_, m) => `          - { user: u${m}, role: boss }`);
    const users = Array.from(
      { length: count },
      (_, m) => `      - { id: u${m}, name: U, email: u${m}@a.test }`,
    );
    return oneWorkspaceFile(`        members:\n${members.join('\n')}`).replace(
      '    workspaces:',
      `    users:\n${users.join('\n')}\n    workspaces:`,
    );
  }

  it('explains a large file reading each issue a bounded number of times, not once per failed union', () => {
    // Work is asserted, not time: every read of an issue's paths is counted. Before, each failed
    // union searched the whole list for its own issues: about 2,600 reads per issue for these
    // 1,000 members (4,000 issues), growing with the file, where about 10 give the same answer.
    // The next test explains 20,000 such members whole, which took 9.7 s before.
    const count = 1_000;
    const validate = addFormats
      .default(new Ajv.default({ allErrors: true, strict: false }))
      .compile(SetupFileSchema);
    expect(validate(parseYaml(badRoles(count)))).toBe(false);
    let reads = 0;
    const counted = (validate.errors ?? []).map(
      (issue) =>
        new Proxy(issue, {
          get(target, property, receiver) {
            if (property === 'schemaPath' || property === 'instancePath') reads += 1;
            return Reflect.get(target, property, receiver) as unknown;
          },
        }) as SchemaIssue,
    );
    const explained = explainUnions(counted);
    expect(explained.map((issue) => [issue.instancePath, issue.message])).toEqual(
      Array.from({ length: count }, (_, m) => [
        `/organizations/0/workspaces/0/members/${m}/role`,
        'must be "owner", "admin" or "member"',
      ]),
    );
    expect(reads / counted.length).toBeLessThan(20);
  });

  it('explains every problem of a file of 20,000 members with a bad role', () => {
    // The whole check at the size that took 9.7 s to explain: each member's role once, in order.
    // No time is asserted: the test above counts the work.
    const count = 20_000;
    const problems = setupProblems(badRoles(count));
    expect(problems).toHaveLength(count);
    expect(problems[0]).toEqual({
      path: `${WORKSPACE_PATH}.members[0].role`,
      message: 'must be "owner", "admin" or "member"',
    });
    expect(problems.every((problem, m) => problem.path === `${WORKSPACE_PATH}.members[${m}].role`)).toBe(
      true,
    );
    expect(new Set(problems.map((problem) => problem.message))).toEqual(
      new Set(['must be "owner", "admin" or "member"']),
    );
  });
});
