import { Type } from 'typebox';
import { MAX_ID_LENGTH } from '../../limits.js';
import { Sources, SystemVariables, Temperature, TemplateVariables, ToolWarning } from './chat.js';
import { envelope, Timestamp } from './common.js';
import { ERROR_CODES } from './error-body.js';
import type { ErrorCode } from '../../errors.js';
import { UsageField } from './usage.js';
import { PATTERNS } from './patterns.js';

export const AgentRunParams = Type.Object({
  agentId: Type.String({ minLength: 1, maxLength: MAX_ID_LENGTH, examples: ['agt_demo_assistant'] }),
});

export const AgentRunBody = Type.Object(
  {
    message: Type.String({
      minLength: 1,
      maxLength: 100_000,
      pattern: PATTERNS.notBlank.pattern,
      description: 'Required, not blank',
    }),
    chatId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    projectId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    variables: Type.Optional(TemplateVariables),
    systemVariables: Type.Optional(SystemVariables),
    temperature: Type.Optional(Temperature),
    model: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  },
  { additionalProperties: true, examples: [{ message: 'Summarise what you can do in one sentence' }] },
);

export const AgentRun = Type.Object({
  id: Type.String(),
  status: Type.Union([Type.Literal('completed'), Type.Literal('failed')]),
  agentId: Type.String(),
  agentName: Type.String(),
  agentResponse: Type.String(),
  error: Type.Union(
    [
      Type.Object({
        code: Type.Unsafe<ErrorCode>({ type: 'string', enum: ERROR_CODES }),
        message: Type.String(),
      }),
      Type.Null(),
    ],
    {
      description:
        'Why the run failed: `null` when it completed; for a `failed` run the `code` and `message` its request was answered (`upstream_error`, `upstream_timeout`, …), never the provider’s own error text',
    },
  ),
  chatId: Type.String(),
  input: Type.String(),
  executionTime: Type.Integer({ description: 'Milliseconds' }),
  createdAt: Timestamp,
  completedAt: Timestamp,
  usage: UsageField,
  warnings: Type.Optional(
    Type.Array(ToolWarning, { description: 'Present only when a tool could not be set up' }),
  ),
  sources: Type.Optional(Sources),
});

export const AgentRunResponse = envelope(AgentRun, 'The finished run: its output, usage and steps');
