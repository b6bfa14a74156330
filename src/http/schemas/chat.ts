import { Type } from 'typebox';
import { headerDoc } from './headers.js';
import { UsageField } from './usage.js';
import { PATTERNS } from './patterns.js';
import { MAX_ID_LENGTH, MAX_TEMPLATE_VARIABLES } from '../../limits.js';

const Part = Type.Object(
  {
    type: Type.String({
      minLength: 1,
      description:
        '`text` (needs `text`), `file` (needs `url`, `mediaType`), or any other UI part type (stored, not sent to the model)',
    }),
  },
  { additionalProperties: true },
);

export const ChatMessage = Type.Object(
  {
    id: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Generated when absent' })),
    role: Type.Union([Type.Literal('user'), Type.Literal('assistant'), Type.Literal('system')]),
    parts: Type.Array(Part, {
      maxItems: 1000,
      description:
        'At least one part; an assistant message with none, or only `step-start`, `source-document` and `data-warnings` parts (what a client holds of a reply that failed or was stopped before its first token), is ignored',
    }),
  },
  { additionalProperties: true },
);

export const TemplateVariables = Type.Record(
  Type.String(),
  Type.Union([Type.String(), Type.Number(), Type.Boolean()]),
  {
    maxProperties: MAX_TEMPLATE_VARIABLES,
    description: `Values for \`{{name}}\` placeholders in the agent instructions; at most ${MAX_TEMPLATE_VARIABLES}`,
  },
);

export const SystemVariables = Type.Object(
  {
    user: Type.Optional(
      Type.Object(
        {
          // The chat list's `user` filter takes 1 to this many characters (/v1/openai's `user` at
          // most this many): an empty or longer end user would be stored on chats no filter can find.
          id: Type.Optional(
            Type.String({
              minLength: 1,
              maxLength: MAX_ID_LENGTH,
              description: "The end user: the chat's `user`, the chat list's `user` filter",
            }),
          ),
          name: Type.Optional(Type.String()),
          email: Type.Optional(Type.String()),
        },
        { additionalProperties: false, description: 'Acting user for `{{user.*}}`; else the key owner' },
      ),
    ),
  },
  { additionalProperties: false },
);

export const Temperature = Type.Number({
  minimum: 0,
  maximum: 2,
  description: 'Default 0.7',
  examples: [0.7],
});
const IdField = (description: string) => Type.String({ minLength: 1, maxLength: 200, description });

export const ChatBody = Type.Object(
  {
    messages: Type.Array(ChatMessage, { minItems: 1, description: 'At least one message with role `user`' }),
    agentId: IdField('Agent to run'),
    chatId: Type.Optional(IdField('Chat to continue; omitted: a new chat')),
    projectId: Type.Optional(IdField('Project whose instructions, memory and files join the context')),
    stream: Type.Optional(Type.Boolean({ description: 'Default false' })),
    temperature: Type.Optional(Temperature),
    model: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: 'Falls back to the workspace default when not enabled',
      }),
    ),
    variables: Type.Optional(TemplateVariables),
    systemVariables: Type.Optional(SystemVariables),
    id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 128,
        pattern: PATTERNS.token.pattern,
        description:
          "The client's own chat id (`useChat` sends it): without `chatId`, continues the chat it names (by id or `clientId`), else creates a chat with this `clientId`. `oak_` begins the client ids of `/v1/openai` conversation keys: a new chat's `id` may not (400)",
      }),
    ),
    trigger: Type.Optional(
      Type.Union([Type.Literal('submit-message'), Type.Literal('regenerate-message')], {
        description:
          '`regenerate-message` replaces `messageId` (default: the last assistant message) and everything after it with the new reply. In a chat whose last reply was never stored (it ends with a user message), a `messageId` naming no stored message, or none, replaces nothing: the new reply answers the last user turn',
      }),
    ),
    messageId: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description:
          "With `regenerate-message`: the assistant message to replace; unknown → 404, except in a chat whose last reply was never stored (the id of that reply's `start` chunk, as `useChat` sends it). With `submit-message` (`useChat`'s edit, `sendMessage({ text, messageId })`): a stored user message that the request carries anew; it and every message after it are replaced by the request's version. 409 for either while a reply of the chat runs",
      }),
    ),
  },
  {
    // Other fields AI SDK clients may add are ignored.
    additionalProperties: true,
    // The demo workspace's agent (src/cli/demo.ts), so Swagger UI's pre-filled body succeeds.
    examples: [
      {
        agentId: 'agt_demo_assistant',
        messages: [{ role: 'user', parts: [{ type: 'text', text: 'Hello' }] }],
      },
    ],
  },
);

export const ToolWarning = Type.Object({
  tool: Type.String(),
  code: Type.String({ examples: ['mcp_unreachable'] }),
  message: Type.String(),
});

export const Source = Type.Object(
  {
    n: Type.Integer({ minimum: 1, description: 'The number the reply cites it by: `[n]`' }),
    fileId: Type.String(),
    path: Type.String({ description: "The file's path in the project" }),
    pages: Type.Union([Type.Array(Type.Integer()), Type.Null()], { description: 'PDF pages, when known' }),
    heading: Type.Union([Type.String(), Type.Null()], {
      description: 'Heading path of the excerpt (e.g. "Install › Linux"), sheet and rows of a spreadsheet',
    }),
  },
  { description: 'A passage of a project file the model was given' },
);

export const Sources = Type.Array(Source, {
  description:
    'Present only when the model was given passages of project files (excerpts, or whole files in a small project), in `[n]` order',
});

export const ChatResult = Type.Object({
  text: Type.String(),
  messageId: Type.String(),
  chatId: Type.String(),
  usage: UsageField,
  warnings: Type.Optional(
    Type.Array(ToolWarning, { description: 'Present only when a tool could not be set up' }),
  ),
  sources: Type.Optional(Sources),
});

/** 200 of POST /chat: JSON, or the UI message stream when `stream: true`. */
const CHAT_ID_HEADER = {
  'x-chat-id': headerDoc('With `stream: true`: the id of the chat (new or continued)'),
};

/** What the AI SDK sends with a UI message stream (its `UI_MESSAGE_STREAM_HEADERS`). */
const uiMessageStreamHeader = (description: string) => ({ ...headerDoc(description), const: 'v1' });

export const ChatOkResponse = {
  description: 'The reply: JSON, or with `stream: true` an AI SDK UI message stream (v1)',
  headers: {
    ...CHAT_ID_HEADER,
    'x-vercel-ai-ui-message-stream': uiMessageStreamHeader(
      'With `stream: true`: `v1`, the body is an AI SDK UI message stream',
    ),
  },
  content: {
    'application/json': { schema: ChatResult },
    'text/event-stream': {
      schema: Type.String({
        description:
          'Server-sent events `data: <UI message chunk JSON>`: start (messageId, messageMetadata.chatId), one source-document per passage of a project file given to the model (sourceId `<fileId>#<n>`), text-start, text-delta, text-end, finish, … then `data: [DONE]`',
      }),
    },
  },
};

/** 200 of GET /chat/{chatId}/stream: the replayed reply. */
export const ResumeOkResponse = {
  description: 'The reply being generated, from its `start` chunk, as an AI SDK UI message stream (v1)',
  headers: {
    'x-chat-id': headerDoc('The id of the chat'),
    'x-vercel-ai-ui-message-stream': uiMessageStreamHeader('`v1`: the body is an AI SDK UI message stream'),
  },
  content: {
    'text/event-stream': {
      schema: Type.String({
        description: 'Server-sent events `data: <UI message chunk JSON>`, then `data: [DONE]`',
      }),
    },
  },
};
