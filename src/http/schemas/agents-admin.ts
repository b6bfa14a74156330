import { type TSchema, type TString, Type } from 'typebox';
import { Agent } from './agents.js';
import { envelope } from './common.js';
import { PATTERNS } from './patterns.js';
import { MAX_MCP_URL_AS_READ_LENGTH, MAX_MCP_URL_LENGTH } from '../../limits.js';

const VisibilityField = Type.Union([
  Type.Literal('workspace'),
  Type.Literal('organization'),
  Type.Literal('private'),
]);

const MCP_URL_RULES =
  'The streamable-HTTP MCP server, an http or https URL (any other scheme is a 400). Must be public: a private, loopback or link-local address is a 400 (and a name resolving to one an `mcp_not_allowed` warning), unless the operator sets ATRIUM_MCP_ALLOW_PRIVATE_NETWORK=true. When read, its userinfo is shown as "***:***" (with a password) or "***" (a user name alone), and each query value as "***" (an empty value or a parameter without one as stored). A user name holding ":" once percent-decoded (a%3Ab) cannot be sent as Basic authentication and is a 400';

/** The tool's url as a body takes it: a url as read, longer than the stored one, is taken back. */
const McpToolUrl = Type.String({
  format: 'uri',
  maxLength: MAX_MCP_URL_AS_READ_LENGTH,
  description: `${MCP_URL_RULES}; sent back so under the same tool name, it keeps the stored url, and a url holding "***" that is no stored tool's of that name as read is a 400. At most ${MAX_MCP_URL_AS_READ_LENGTH} characters as sent (a url as read is longer than the one stored) and ${MAX_MCP_URL_LENGTH} as stored, once a url as read is resolved to the stored one (a 400 at the url past either)`,
});

/** The tool's url as read: masked, so longer than stored; a setup-file url has no limit. */
const McpToolUrlAsRead = Type.String({ format: 'uri', description: MCP_URL_RULES });

function mcpTool(url: TString) {
  return Type.Object(
    {
      type: Type.Literal('mcp'),
      name: Type.String({
        minLength: 1,
        maxLength: 64,
        pattern: PATTERNS.token.pattern,
        description: "Unique among the agent's tools (a repeated name is a 400 at the later one)",
      }),
      url,
      headers: Type.Optional(
        Type.Record(Type.String({ maxLength: 200 }), Type.String({ maxLength: 8000 }), {
          maxProperties: 20,
          description:
            'Sent to the MCP server; values are shown as "***" when read. A header HTTP cannot send is a 400 at `body.tools.N.headers.<name>`: a name that is no HTTP token, a value holding a line break, NUL or other control character or a character past U+00FF, or a header of the connection itself (Content-Length, Transfer-Encoding, Keep-Alive, Upgrade, Expect, a Connection other than close or keep-alive)',
        }),
      ),
    },
    { additionalProperties: false },
  );
}

const Orchestration = Type.Object(
  {
    agents: Type.Array(Type.String({ minLength: 1, maxLength: 200 }), {
      maxItems: 20,
      description: 'Agents of the same workspace this agent may call as tools',
    }),
  },
  { additionalProperties: false },
);

/** The fields of an agent with their bounds; `nullable` adds `null` (clear) for PATCH. */
function agentFields(nullable: boolean) {
  const opt = <T extends TSchema>(schema: T) =>
    Type.Optional(nullable ? Type.Union([schema, Type.Null()]) : schema);
  return {
    description: opt(Type.String({ maxLength: 2000 })),
    image: opt(
      Type.String({
        maxLength: 2000,
        description:
          'An https or http URL, or a data:image/… URL (any other scheme, such as javascript:, is a 400); "" for none',
      }),
    ),
    category: opt(Type.String({ maxLength: 200 })),
    visibility: opt(VisibilityField),
    model: opt(
      Type.String({ minLength: 1, maxLength: 200, description: 'Must be enabled in the workspace' }),
    ),
    instructions: opt(Type.String({ maxLength: 40_000 })),
    tools: opt(Type.Array(mcpTool(McpToolUrl), { maxItems: 20 })),
    orchestration: opt(Orchestration),
  };
}

const TITLE_RULE =
  '1–100 characters on one line (a control character or a line separator is a 400), at least one of which shows (not only spaces, marks or invisible characters)';

const Title = Type.String({
  minLength: 1,
  maxLength: 100,
  pattern: PATTERNS.oneLineName.pattern,
  description: TITLE_RULE,
});

/**
 * Without the pattern: the service checks a changed title against it, and keeps one sent back as
 * stored (a title stored before the rule must not make a read-modify-write a 400).
 */
const PatchTitle = Type.String({
  minLength: 1,
  maxLength: 100,
  description: `${TITLE_RULE}; the agent's title sent back unchanged is kept as it is`,
});

export const CreateAgentBody = Type.Object({ title: Title, ...agentFields(false) });

export const PatchAgentBody = Type.Object(
  { title: Type.Optional(PatchTitle), ...agentFields(true) },
  { description: 'JSON merge patch: absent fields stay, null clears an optional field' },
);

export const AgentParams = Type.Object({
  agentId: Type.String({ minLength: 1, maxLength: 200, examples: ['agt_demo_assistant'] }),
});

export const ManagedByField = Type.Union([Type.Literal('setup'), Type.Literal('api')], {
  description: 'Who manages it: the setup file (API writes → 409 managed_by_setup) or the API',
});

export const AgentDetail = Type.Object(
  {
    ...Agent.properties,
    instructions: Type.String(),
    tools: Type.Array(mcpTool(McpToolUrlAsRead)),
    orchestration: Type.Union([Orchestration, Type.Null()]),
    managedBy: ManagedByField,
  },
  { $id: 'AgentDetail', title: 'AgentDetail' },
);

const AgentDetailRef = Type.Unsafe({ $ref: 'AgentDetail#' });

export const AgentDetailResponse = envelope(
  Type.Object({ agent: AgentDetailRef }),
  'The agent, with its instructions and tools',
);
export const DeletedResponse = envelope(Type.Object({ deleted: Type.Literal(true) }), 'Deleted');
