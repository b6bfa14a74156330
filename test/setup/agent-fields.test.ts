/**
 * The setup file holds an agent's image and tools to the rules the agents API holds them to
 * (test/management/agents-admin.test.ts): one function each, so the two cannot drift apart.
 */
import { describe, expect, it } from 'vitest';
import { oneWorkspaceFile, setupProblems } from './setup-files.js';

const AGENT_PATH = 'organizations[0].workspaces[0].agents[0]';

/** The problems of a file with one agent holding `fields` (YAML flow mapping entries). */
function agentProblems(fields: string) {
  return setupProblems(oneWorkspaceFile(`        agents:\n          - { title: Helper, ${fields} }`));
}

describe('agent fields of the setup file', () => {
  it('takes an https or http image, a data:image URL, or none', () => {
    for (const image of [
      'https://cdn.test/a.png',
      'http://cdn.test/a.png',
      'data:image/png;base64,iVBORw0KGgo=',
      '',
    ]) {
      expect(agentProblems(`image: "${image}"`), image).toEqual([]);
    }
    expect(agentProblems('image: null')).toEqual([]);
  });

  it('refuses an image URL of any other scheme (javascript:, vbscript:, data: not an image)', () => {
    for (const image of [
      'javascript:alert(1)',
      'JavaScript:alert(1)',
      ' javascript:alert(1)',
      'vbscript:msgbox(1)',
      'data:text/html,<script>alert(1)</script>',
      'ftp://cdn.test/a.png',
      'not a url',
    ]) {
      expect(agentProblems(`image: "${image}"`), image).toEqual([
        {
          path: `${AGENT_PATH}.image`,
          message:
            'must be an https or http URL, or a data:image/… URL (no other scheme, such as javascript:)',
        },
      ]);
    }
  });

  it('refuses two tools of one name in one agent, naming the second', () => {
    const tool = (name: string, host: string) => `{ type: mcp, name: ${name}, url: "https://${host}.test/" }`;
    expect(agentProblems(`tools: [${tool('crm', 'a')}, ${tool('docs', 'b')}]`)).toEqual([]);
    expect(agentProblems(`tools: [${tool('crm', 'a')}, ${tool('docs', 'b')}, ${tool('crm', 'c')}]`)).toEqual([
      {
        path: `${AGENT_PATH}.tools[2].name`,
        message: `is "crm", the name of ${AGENT_PATH}.tools[0]: each tool of an agent needs its own name`,
      },
    ]);
  });

  it('refuses a tool url that is not http or https, as the agents API does', () => {
    const tool = (url: string) => `tools: [{ type: mcp, name: crm, url: "${url}" }]`;
    expect(agentProblems(tool('https://mcp.test/'))).toEqual([]);
    expect(agentProblems(tool('http://mcp.test/'))).toEqual([]);
    for (const url of ['ftp://mcp.test/', 'ws://mcp.test/', 'mailto:a@b.test', 'data:,x']) {
      expect(agentProblems(tool(url)), url).toEqual([
        {
          path: `${AGENT_PATH}.tools[0].url`,
          message: 'must be an http or https URL (a streamable-HTTP MCP server)',
        },
      ]);
    }
  });

  it('refuses a tool header HTTP cannot send, as the agents API does, never quoting its value', () => {
    const tool = (headers: string) =>
      `tools: [{ type: mcp, name: crm, url: "https://mcp.test/", headers: { ${headers} } }]`;
    expect(agentProblems(tool('authorization: "Bearer caf\\u00e9", connection: close, x-empty: ""'))).toEqual(
      [],
    );
    const problem = (name: string, message: string) => [
      { path: `${AGENT_PATH}.tools[0].headers.${name}`, message },
    ];
    expect(agentProblems(tool('"x api key": v'))).toEqual(
      problem('x api key', "is not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)"),
    );
    expect(agentProblems(tool('authorization: "Bearer secret-1\\nsecret-2"'))).toEqual(
      problem(
        'authorization',
        'holds a character an HTTP header value cannot carry (a line break, NUL or other control character, or one past U+00FF)',
      ),
    );
    expect(agentProblems(tool('transfer-encoding: chunked'))).toEqual(
      problem(
        'transfer-encoding',
        'is set by the HTTP connection itself (Content-Length, Transfer-Encoding, Keep-Alive, Upgrade, Expect, a Connection other than close or keep-alive)',
      ),
    );
  });

  it('refuses a tool url whose user name holds a colon, as the agents API does', () => {
    const tool = (url: string) => `tools: [{ type: mcp, name: crm, url: "${url}" }]`;
    // A colon in the password is sent as it is: Basic authentication splits at the first one only.
    expect(agentProblems(tool('https://user:pa%3Ass:word@mcp.test/'))).toEqual([]);
    for (const url of ['https://a%3Ab:pw@mcp.test/', 'https://tok%3aen@mcp.test/']) {
      expect(agentProblems(tool(url)), url).toEqual([
        {
          path: `${AGENT_PATH}.tools[0].url`,
          message:
            'has a user name holding ":" once percent-decoded, which Basic authentication cannot send (its first ":" ends the user name): put the credential in an Authorization header instead',
        },
      ]);
    }
  });

  it('refuses a credential written as the API masks it ("***"), which would be stored as the secret', () => {
    const MASKED =
      'holds "***" where a read of the agent masks a credential: write the credential itself (the setup file is not a read to send back)';
    const tool = (fields: string) => `tools: [{ type: mcp, name: crm, ${fields} }]`;
    for (const url of ['https://***:***@mcp.test/', 'https://***@mcp.test/', 'https://mcp.test/?key=***']) {
      expect(agentProblems(tool(`url: "${url}"`)), url).toEqual([
        { path: `${AGENT_PATH}.tools[0].url`, message: MASKED },
      ]);
    }
    expect(agentProblems(tool('url: "https://mcp.test/", headers: { Authorization: "***" }'))).toEqual([
      { path: `${AGENT_PATH}.tools[0].headers.Authorization`, message: MASKED },
    ]);
    // A literal *** spelled with percent-escapes is a value like any other, as the API takes it.
    expect(agentProblems(tool('url: "https://mcp.test/?key=%2A%2A%2A"'))).toEqual([]);
  });
});
