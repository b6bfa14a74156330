/**
 * The setup file's reference checks (unknown agents, models, providers and users, tool URLs,
 * duplicates) on a file that failed its shape check: a value that failed it is reported once, by
 * the shape check, and a part too malformed to follow costs none of the other parts' problems.
 */
import { describe, expect, it } from 'vitest';
import { oneWorkspaceFile, setupProblems } from './setup-files.js';

const WORKSPACE_PATH = 'organizations[0].workspaces[0]';
const AGENT_PATH = `${WORKSPACE_PATH}.agents[0]`;

/** A reference problem of the file's own, far from the malformed part: it must always be reported. */
const UNKNOWN_MODEL = {
  path: `${WORKSPACE_PATH}.models[0]`,
  message: 'unknown model "nope" (define it under models)',
};

/** The problems of a file whose workspace enables the unknown model `nope` and holds `workspace`. */
function problemsBeside(workspace: string, top = '') {
  return setupProblems(oneWorkspaceFile(`        models: [nope]\n${workspace}`, top));
}

const agent = (fields: string) => `        agents:\n          - { title: Helper, ${fields} }`;

describe('reference checks of a setup file of the wrong shape', () => {
  it('does not check a value that failed its shape check again (one problem per value)', () => {
    // Before, each also got a reference problem: a URL or an agent that was not one.
    for (const [workspace, path, message] of [
      [agent('tools: [{ type: mcp, name: a, url: 5 }]'), `${AGENT_PATH}.tools[0].url`, 'must be string'],
      [agent('tools: [x]'), `${AGENT_PATH}.tools[0]`, 'must be object'],
      [
        agent('tools: [{ type: mcp, name: a, url: "not a url" }]'),
        `${AGENT_PATH}.tools[0].url`,
        'must match format "uri"',
      ],
      [agent('orchestration: { agents: [5] }'), `${AGENT_PATH}.orchestration.agents[0]`, 'must be string'],
      [agent('model: ""'), `${AGENT_PATH}.model`, 'must NOT have fewer than 1 characters'],
      ['        members: [{ user: 5, role: owner }]', `${WORKSPACE_PATH}.members[0].user`, 'must be string'],
    ] as const) {
      expect(problemsBeside(workspace), workspace).toEqual([{ path, message }, UNKNOWN_MODEL]);
    }
  });

  it('skips a part too malformed to follow and still reports the rest of the file', () => {
    // Before, a part the checks could not read (a list that is a string, a missing field) threw,
    // and the whole file's reference problems were dropped.
    for (const [workspace, top, expected] of [
      [
        agent('orchestration: { agents: x }'),
        '',
        [{ path: `${AGENT_PATH}.orchestration.agents`, message: 'must be array' }],
      ],
      [
        agent('orchestration: {}'),
        '',
        [{ path: `${AGENT_PATH}.orchestration.agents`, message: 'is required' }],
      ],
      [
        agent('tools: [{ type: mcp }, { type: mcp }]'),
        '',
        [0, 1].flatMap((t) => [
          { path: `${AGENT_PATH}.tools[${t}].name`, message: 'is required' },
          { path: `${AGENT_PATH}.tools[${t}].url`, message: 'is required' },
        ]),
      ],
      [
        '        members: [{ role: owner }]\n        apiKeys: [{ name: k }]',
        '',
        [
          { path: `${WORKSPACE_PATH}.members[0].user`, message: 'is required' },
          { path: `${WORKSPACE_PATH}.apiKeys[0].user`, message: 'is required' },
        ],
      ],
      [
        '',
        'providers:\n  - { type: openai }\nmodels:\n  - { id: m, model: x }\n  - { provider: openai }',
        [
          { path: 'providers[0].id', message: 'is required' },
          { path: 'models[0].provider', message: 'is required' },
          { path: 'models[1].id', message: 'is required' },
          { path: 'models[1].model', message: 'is required' },
        ],
      ],
      [
        '',
        'models: x\nproviders: [5]',
        [
          { path: 'providers[0]', message: 'must be object' },
          { path: 'models', message: 'must be array' },
        ],
      ],
    ] as const) {
      expect(problemsBeside(workspace, top), `${top}\n${workspace}`).toEqual([...expected, UNKNOWN_MODEL]);
    }
  });

  it('checks the users of an organization whose users lack an email or a name', () => {
    const text = `
organizations:
  - id: org_a
    users: [{ id: usr_a, name: A }, { name: B, email: 5 }]
    apiKeys: [{ name: k, user: usr_ghost }]
    workspaces:
      - { name: W, members: [{ user: usr_a, role: owner }] }
      - { members: [{ user: usr_a, role: owner }] }
`;
    expect(setupProblems(text)).toEqual([
      { path: 'organizations[0].name', message: 'is required' },
      { path: 'organizations[0].users[0].email', message: 'is required' },
      { path: 'organizations[0].users[1].email', message: 'must be string' },
      { path: 'organizations[0].workspaces[1].name', message: 'is required' },
      {
        path: 'organizations[0].apiKeys[0].user',
        message: 'unknown user "usr_ghost" (not among organizations[0].users)',
      },
    ]);
  });

  it('reports a model whose kind is none of the choices once, at its kind, wherever it is named', () => {
    // Before, the kind the shape check refused was dropped, the model read as a chat model, and
    // the workspace's embeddingModel got a second problem: "model "e" is a chat model".
    const top = 'models:\n  - { id: e, provider: openai, model: x, kind: vector }';
    for (const workspace of ['        embeddingModel: e', agent('model: e')]) {
      expect(problemsBeside(workspace, top), workspace).toEqual([
        { path: 'models[0].kind', message: 'must be "chat" or "embedding"' },
        UNKNOWN_MODEL,
      ]);
    }
  });
});

describe('reference checks: one problem for one mistake', () => {
  const file = (workspace: string, top = '') =>
    oneWorkspaceFile(workspace, top).replace(
      '    workspaces:',
      '    users: [{ id: usr_a, name: A, email: a@a.test }]\n    workspaces:',
    );

  it('reports a defaultModel no model defines as unknown, not also as "not one of the workspace models"', () => {
    expect(setupProblems(file('        models: [atrium/echo]\n        defaultModel: ghost'))).toEqual([
      { path: `${WORKSPACE_PATH}.defaultModel`, message: 'unknown model "ghost" (define it under models)' },
    ]);
    // An embedding model as the default: that it is one, once.
    expect(
      setupProblems(file('        models: [atrium/echo]\n        defaultModel: atrium/echo-embedding')),
    ).toEqual([
      {
        path: `${WORKSPACE_PATH}.defaultModel`,
        message:
          'model "atrium/echo-embedding" is an embedding model (name it as embeddingModel, not as a chat model)',
      },
    ]);
    // A defined chat model the workspace does not enable is still that problem.
    expect(setupProblems(file('        models: [atrium/echo]\n        defaultModel: openai/gpt-4o'))).toEqual(
      [{ path: `${WORKSPACE_PATH}.defaultModel`, message: 'must be one of the workspace models' }],
    );
  });

  it('reports a workspace key whose user is unknown as unknown, not also as "not a member"', () => {
    const members = '        members: [{ user: usr_a, role: owner }]\n';
    expect(setupProblems(file(`${members}        apiKeys: [{ name: k, user: usr_ghost }]`))).toEqual([
      {
        path: `${WORKSPACE_PATH}.apiKeys[0].user`,
        message: 'unknown user "usr_ghost" (not among organizations[0].users)',
      },
    ]);
    // A user of the organization who is no member is still that problem.
    expect(setupProblems(file('        members: []\n        apiKeys: [{ name: k, user: usr_a }]'))).toEqual([
      {
        path: `${WORKSPACE_PATH}.apiKeys[0].user`,
        message: `"usr_a" is not a member of this workspace (a workspace key's user must be)`,
      },
    ]);
  });
});
