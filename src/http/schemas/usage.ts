import { Type } from 'typebox';
import { envelope } from './common.js';
import { PATTERNS } from './patterns.js';

/** The tokens and cost of one reply (`usage` of the chat JSON reply and of a run). */
export const UsageField = Type.Object(
  {
    inputTokens: Type.Integer(),
    outputTokens: Type.Integer(),
    costUsd: Type.Number({ description: 'From the model’s price per million tokens' }),
  },
  { description: 'Tokens and cost of this reply, sub-agent calls included' },
);

const Totals = {
  inputTokens: Type.Integer(),
  outputTokens: Type.Integer(),
  costUsd: Type.Number(),
  requests: Type.Integer({
    description:
      'Model replies: chat turns and agent runs (stored or only charged), and sub-agent runs under their own agent and model',
  }),
};

export const UsageQuery = Type.Object({
  month: Type.Optional(
    Type.String({
      pattern: PATTERNS.month.pattern,
      description: 'YYYY-MM (UTC); default the current month',
    }),
  ),
});

export const UsageReportResponse = envelope(
  Type.Object({
    month: Type.String(),
    ...Totals,
    limits: Type.Object({
      monthlyTokens: Type.Union([Type.Integer(), Type.Null()]),
      monthlyCostUsd: Type.Union([Type.Number(), Type.Null()]),
    }),
    byAgent: Type.Array(Type.Object({ agentId: Type.String(), ...Totals })),
    byModel: Type.Array(Type.Object({ model: Type.String(), ...Totals })),
    byDay: Type.Array(Type.Object({ date: Type.String({ description: 'YYYY-MM-DD (UTC)' }), ...Totals })),
  }),
  'Token and cost usage of the month, by day, agent and model',
);

export const ModelListResponse = envelope(
  Type.Object({
    models: Type.Array(
      Type.Object({
        id: Type.String(),
        kind: Type.Union([Type.Literal('chat'), Type.Literal('embedding')]),
        provider: Type.String(),
        default: Type.Boolean(),
        pricing: Type.Object({ inputPerMTok: Type.Number(), outputPerMTok: Type.Number() }),
      }),
    ),
  }),
  'The models enabled in the workspace',
);
