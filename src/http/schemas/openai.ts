import { type TSchema, Type } from 'typebox';
import { SystemVariables, TemplateVariables, Temperature } from './chat.js';
import { PATTERNS } from './patterns.js';

/** OpenAI's error body, used on `/v1/openai` only (spec/openai-compatible.md). */
export const OpenAIErrorBody = Type.Object(
  {
    error: Type.Object({
      message: Type.String(),
      type: Type.String({
        description:
          '`invalid_request_error` (4xx), `insufficient_quota` (402), `rate_limit_error` (429), `api_error` (5xx)',
      }),
      param: Type.Union([Type.String(), Type.Null()]),
      code: Type.String({ description: "Atrium's error code (`model_not_found` for an unknown agent)" }),
    }),
  },
  { $id: 'OpenAIError', title: 'OpenAIError' },
);

const OpenAIErrorRef = (description: string) => Type.Unsafe({ $ref: 'OpenAIError#', description });

export function openAIErrorResponses(...statuses: number[]) {
  const descriptions: Record<number, string> = {
    400: 'Validation failed or a refused parameter (`bad_request`)',
    401: 'Missing or invalid key',
    402: 'Usage limit or spend cap reached; `x-should-retry: false`',
    404: 'Unknown or invisible agent (`model_not_found`, `param: "model"`), chat (`param: "chat_id"` or `"x-atrium-chat-id"`) or project (`param: "project_id"`)',
    405: 'Known path, wrong method',
    408: 'The body arrived too slowly (`request_timeout`)',
    409: 'The reply was stopped before it was done, or a reply of the named chat is still being generated (`conflict`); `x-should-retry: false`',
    413: 'Body over its byte limit',
    415: 'Wrong request content type',
    429: 'Per-key rate limit; `Retry-After`',
    500: 'Unexpected failure',
    502: 'The model provider failed; `x-should-retry: false` when it refused the request itself (a 4xx other than 408, 409, 429)',
    503: 'Storage or the database did not answer, or (chat completions) too many replies in progress; `Retry-After`',
    504: 'The model provider did not answer in time',
  };
  const responses: Record<number, TSchema> = {};
  for (const status of statuses) responses[status] = OpenAIErrorRef(descriptions[status] ?? 'Error');
  return responses;
}

export const OpenAIModel = Type.Object(
  {
    id: Type.String({ description: 'The agent id' }),
    object: Type.Literal('model'),
    created: Type.Integer({ description: 'Unix seconds' }),
    owned_by: Type.Literal('atrium'),
    name: Type.String({ description: 'The agent title' }),
    description: Type.Union([Type.String(), Type.Null()]),
  },
  { description: 'The agent as an OpenAI model' },
);

export const OpenAIModelList = Type.Object(
  {
    object: Type.Literal('list'),
    data: Type.Array(OpenAIModel),
  },
  { description: 'The agents as OpenAI models' },
);

export const OpenAIModelParams = Type.Object({
  model: Type.String({
    minLength: 1,
    maxLength: 1000,
    description: 'An agent id',
    examples: ['agt_demo_assistant'],
  }),
});

const Message = Type.Object(
  {
    role: Type.Union(['system', 'developer', 'user', 'assistant', 'tool'].map((role) => Type.Literal(role))),
    content: Type.Optional(
      Type.Union([
        Type.String(),
        Type.Null(),
        Type.Array(Type.Object({ type: Type.String() }, { additionalProperties: true }), { maxItems: 1000 }),
      ]),
    ),
  },
  { additionalProperties: true },
);

const FunctionTool = Type.Object(
  {
    type: Type.Literal('function'),
    function: Type.Object(
      {
        name: Type.String({ pattern: PATTERNS.functionName.pattern }),
        description: Type.Optional(Type.String()),
        parameters: Type.Optional(Type.Object({}, { additionalProperties: true })),
        strict: Type.Optional(
          Type.Union([Type.Boolean(), Type.Null()], {
            description: 'Passed to the provider: arguments held to `parameters` (structured outputs)',
          }),
        ),
      },
      { additionalProperties: true },
    ),
  },
  { additionalProperties: true },
);

/** The request headers that name the chat a completion is stored in (docs/openai.md, Storing). */
export const CompletionHeaders = Type.Object({
  'x-atrium-chat-id': Type.Optional(
    Type.String({
      description:
        'Atrium: a stored chat to continue, its id or client id (as `chat_id`, which wins when both are sent)',
    }),
  ),
  'x-atrium-conversation-key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 128,
      description: "Atrium: the key's user's own chat with this agent under that key, created on first use",
      examples: ['support-thread-42'],
    }),
  ),
});

export const CompletionBody = Type.Object(
  {
    model: Type.String({
      minLength: 1,
      maxLength: 200,
      description: 'An agent id',
      examples: ['agt_demo_assistant'],
    }),
    messages: Type.Array(Message, {
      minItems: 1,
      maxItems: 10_000,
      examples: [[{ role: 'user', content: 'Hello' }]],
    }),
    stream: Type.Optional(Type.Boolean()),
    stream_options: Type.Optional(
      Type.Union([
        Type.Null(),
        Type.Object({ include_usage: Type.Optional(Type.Boolean()) }, { additionalProperties: true }),
      ]),
    ),
    temperature: Type.Optional(Temperature),
    top_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    max_tokens: Type.Optional(Type.Integer({ minimum: 1 })),
    max_completion_tokens: Type.Optional(Type.Integer({ minimum: 1 })),
    // An empty stop sequence means nothing, and providers refuse it.
    stop: Type.Optional(
      Type.Union([
        Type.String({ minLength: 1 }),
        Type.Array(Type.String({ minLength: 1 }), { maxItems: 4 }),
        Type.Null(),
      ]),
    ),
    seed: Type.Optional(Type.Integer()),
    presence_penalty: Type.Optional(Type.Number({ minimum: -2, maximum: 2 })),
    frequency_penalty: Type.Optional(Type.Number({ minimum: -2, maximum: 2 })),
    user: Type.Optional(Type.String({ maxLength: 200 })),
    // As OpenAI: an empty list is refused ("[] is too short"), not taken as no tools.
    tools: Type.Optional(Type.Array(FunctionTool, { minItems: 1, maxItems: 128 })),
    tool_choice: Type.Optional(
      Type.Union([
        Type.Literal('none'),
        Type.Literal('auto'),
        Type.Literal('required'),
        Type.Object(
          { type: Type.Literal('function'), function: Type.Object({ name: Type.String() }) },
          { additionalProperties: true },
        ),
      ]),
    ),
    // A type error as OpenAI's (`1` and `"true"` once slipped past the refusal of `true`);
    // `true` itself is refused as unsupported (openai-chat.ts).
    logprobs: Type.Optional(
      Type.Boolean({ description: 'Only `false`: log probabilities are not supported' }),
    ),
    chat_id: Type.Optional(
      Type.String({ minLength: 1, maxLength: 200, description: 'Atrium: a stored chat to continue' }),
    ),
    project_id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: "Atrium: a project whose context joins the agent's",
      }),
    ),
    variables: Type.Optional(TemplateVariables),
    system_variables: Type.Optional(SystemVariables),
  },
  { additionalProperties: true, description: 'Unknown fields are ignored' },
);

const Usage = Type.Object({
  prompt_tokens: Type.Integer(),
  completion_tokens: Type.Integer(),
  total_tokens: Type.Integer(),
});

const ToolCall = Type.Object({
  id: Type.String(),
  type: Type.Literal('function'),
  function: Type.Object({ name: Type.String(), arguments: Type.String() }),
});

export const Completion = Type.Object({
  id: Type.String(),
  object: Type.Literal('chat.completion'),
  created: Type.Integer(),
  model: Type.String(),
  choices: Type.Array(
    Type.Object({
      index: Type.Integer(),
      message: Type.Object({
        role: Type.Literal('assistant'),
        content: Type.Union([Type.String(), Type.Null()]),
        tool_calls: Type.Optional(Type.Array(ToolCall)),
      }),
      finish_reason: Type.String({ description: '`stop`, `length`, `tool_calls` or `content_filter`' }),
    }),
  ),
  usage: Usage,
});

export const CompletionStream = Type.String({
  description:
    '`text/event-stream` of `chat.completion.chunk` objects, then `data: [DONE]`; a failure after the stream started is one `data: {"error": {…}}` event',
});
