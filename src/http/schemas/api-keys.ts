import { Type } from 'typebox';
import { ManagedByField } from './agents-admin.js';
import { envelope, Timestamp } from './common.js';
import { PATTERNS } from './patterns.js';

const Nullable = <T extends ReturnType<typeof Type.String>>(schema: T) => Type.Union([schema, Type.Null()]);

export const ApiKeyInfo = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    userId: Type.String(),
    prefix: Type.String({ description: 'The first characters of the key, to tell keys apart' }),
    createdAt: Timestamp,
    expiresAt: Nullable(Timestamp),
    lastUsedAt: Nullable(Timestamp),
    revokedAt: Nullable(Timestamp),
    managedBy: ManagedByField,
  },
  { $id: 'ApiKeyInfo', title: 'ApiKeyInfo' },
);

const ApiKeyInfoRef = Type.Unsafe({ $ref: 'ApiKeyInfo#' });

export const CreateApiKeyBody = Type.Object({
  name: Type.String({
    minLength: 1,
    maxLength: 100,
    pattern: PATTERNS.oneLineName.pattern,
    description: '1–100 characters on one line, at least one of which shows',
    examples: ['ci'],
  }),
  userId: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 200,
      description: 'A member of the workspace; default the caller’s user',
    }),
  ),
  expiresAt: Type.Optional(
    Type.Union(
      [
        Type.String({
          format: 'date-time',
          description:
            'In the future, at most a year away (the same UTC date and time next year; February 28 for a key made on February 29)',
        }),
        Type.Null(),
      ],
      { description: '`null` or absent: the key does not expire (what `keyInfo` lists for such a key)' },
    ),
  ),
});

export const CreateApiKeyResponse = envelope(
  Type.Object({
    apiKey: ApiKeyInfoRef,
    key: Type.String({ description: 'The plaintext key (`atr_ws_…`), shown in this response only' }),
  }),
  'The new key; its secret is shown this once',
);

export const ApiKeyListResponse = envelope(
  Type.Object({ apiKeys: Type.Array(ApiKeyInfoRef) }),
  'The workspace’s API keys (never their secrets)',
);

export const ApiKeyParams = Type.Object({ keyId: Type.String({ minLength: 1, maxLength: 200 }) });

export const RevokedResponse = envelope(Type.Object({ revoked: Type.Literal(true) }), 'The key is revoked');

export const CreateSessionTokenBody = Type.Object({
  userId: Type.String({
    minLength: 1,
    maxLength: 200,
    description: 'A member of the workspace',
    examples: ['usr_demo_owner'],
  }),
  agentIds: Type.Optional(
    Type.Array(Type.String({ minLength: 1, maxLength: 200 }), {
      minItems: 1,
      maxItems: 100,
      description:
        'Limit the token to these agents of the workspace (not private ones: the token acts as a member)',
    }),
  ),
  expiresInSeconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 86_400, default: 3600 })),
});

export const SessionTokenResponse = envelope(
  Type.Object({
    token: Type.String({ description: '`atr_st_…`, sent like a key' }),
    expiresAt: Timestamp,
  }),
  'The session token; shown this once',
);
