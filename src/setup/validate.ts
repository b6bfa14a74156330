import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { type Static, type TSchema, Type } from 'typebox';
import {
  agentImageProblem,
  duplicateToolNames,
  hasMaskedPart,
  MASKED_HEADER_VALUE,
  toolHeaderProblem,
  toolUrlProblem,
} from '../agent-fields.js';

import { MIN_KEY_LENGTH } from '../auth/api-keys.js';
import { matchesPattern, PATTERNS, patternMessage } from '../http/schemas/patterns.js';
import {
  MAX_PROJECT_MEMORY_LENGTH,
  MAX_PROJECT_NAME_LENGTH,
  MAX_RATE_LIMIT_PER_MINUTE,
  MAX_SETUP_AMOUNT,
} from '../limits.js';
import { ECHO_MODEL_ID } from '../models/echo.js';
import { ECHO_EMBEDDING_MODEL_ID } from '../models/echo-embedding.js';
import { explainUnions, isWrongShape } from '../validation-unions.js';
import { readSetupYaml } from './read-yaml.js';

/** A tool credential written as reads of the agent mask it (agent-fields.ts). */
const MASKED_CREDENTIAL =
  'holds "***" where a read of the agent masks a credential: write the credential itself (the setup file is not a read to send back)';

/**
 * Whether a file takes `name` as a project's name (ProjectName, and no white space at either
 * end): an export warns of a stored name it would not.
 */
export function isSetupProjectName(name: string): boolean {
  const length = [...name].length;
  return (
    length >= 1 &&
    length <= MAX_PROJECT_NAME_LENGTH &&
    matchesPattern('oneLineName', name) &&
    name === name.trim()
  );
}

/** A project name the API would have trimmed (ProjectName). */
const PROJECT_NAME_UNTRIMMED = 'must not begin or end with white space (the API trims project names)';

/** A model of the built-in providers, served by id without a definition in the file. */
const BUILT_IN_CHAT_MODEL = /^(openai|anthropic)\/\S+$/;

/** Providers built in from the environment (OPENAI_API_KEY, ANTHROPIC_API_KEY). */
export const BUILT_IN_PROVIDERS = ['openai', 'anthropic'] as const;

/**
 * No `/`, and not `.` or `..`: workspace and project ids are segments of storage paths
 * (`projects/{workspaceId}/{projectId}/`), where a workspace `acme/eu` would share the prefix of
 * workspace `acme`'s project `eu`, and ids are segments of the API's URL paths.
 */
const ID_PATTERN = '^(?!\\.\\.?$)[A-Za-z0-9_.:-]+$';
const Id = Type.String({ minLength: 1, maxLength: 200, pattern: ID_PATTERN });
const Text = (maxLength: number) => Type.String({ maxLength });
/**
 * An optional setting: left out, apply keeps what is stored; `null` removes it (back to unset
 * or the default). A small file that only adds a key must not wipe limits it does not mention.
 */
const Clearable = <T extends TSchema>(schema: T) => Type.Optional(Type.Union([schema, Type.Null()]));

/**
 * A key's name or an agent's title: the API's rule (1–100 characters on one line, one that
 * shows), so that what a file declares can be read, listed and sent back over the API.
 */
/** Characters of a key name or agent title, as the API allows. */
export const MAX_ONE_LINE_NAME = 100;
const OneLineName = Type.String({
  minLength: 1,
  maxLength: MAX_ONE_LINE_NAME,
  pattern: PATTERNS.oneLineName.pattern,
});
/**
 * An organization's, workspace's or user's name (no API route names them): the rule of every
 * name, one line with a character that shows, so that none is an empty or broken line in a list.
 */
const Name = Type.String({ minLength: 1, maxLength: 200, pattern: PATTERNS.oneLineName.pattern });
/**
 * A project's name, as POST /v1/projects takes it (projectName in services/projects.ts). White
 * space at either end, which the API trims, is a problem of its own (referenceProblems): apply
 * stores names as written and matches them so.
 */
const ProjectName = Type.String({
  minLength: 1,
  maxLength: MAX_PROJECT_NAME_LENGTH,
  pattern: PATTERNS.oneLineName.pattern,
});

const ApiKeySpec = Type.Object(
  {
    id: Type.Optional(Id),
    name: OneLineName,
    user: Type.String({ minLength: 1, description: 'User id or email' }),
    key: Type.Optional(Type.String({ minLength: MIN_KEY_LENGTH, maxLength: 512 })),
    expiresAt: Clearable(Type.String({ format: 'date-time' })),
  },
  { additionalProperties: false },
);

const ToolSpec = Type.Object(
  {
    type: Type.Literal('mcp'),
    name: Type.String({ minLength: 1, maxLength: 64, pattern: PATTERNS.token.pattern }),
    url: Type.String({ format: 'uri' }),
    headers: Type.Optional(Type.Record(Type.String(), Type.String())),
  },
  { additionalProperties: false },
);

const AgentSpec = Type.Object(
  {
    id: Type.Optional(Id),
    title: OneLineName,
    description: Clearable(Text(2000)),
    image: Clearable(Text(2000)),
    category: Clearable(Text(200)),
    visibility: Clearable(
      Type.Union([Type.Literal('workspace'), Type.Literal('organization'), Type.Literal('private')]),
    ),
    model: Clearable(Type.String({ minLength: 1 })),
    instructions: Clearable(Text(100_000)),
    tools: Clearable(Type.Array(ToolSpec)),
    orchestration: Clearable(
      Type.Object({ agents: Type.Array(Type.String({ minLength: 1 })) }, { additionalProperties: false }),
    ),
    deleted: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

const ProjectSpec = Type.Object(
  {
    id: Type.Optional(Id),
    name: ProjectName,
    description: Clearable(Text(2000)),
    instructions: Clearable(Text(20_000)),
    color: Clearable(Type.String({ pattern: PATTERNS.color.pattern })),
    icon: Clearable(Text(64)),
    memory: Clearable(Text(MAX_PROJECT_MEMORY_LENGTH)),
    archived: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

const NonNegative = Type.Number({ minimum: 0, maximum: MAX_SETUP_AMOUNT });

const WorkspaceSpec = Type.Object(
  {
    id: Type.Optional(Id),
    name: Name,
    models: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    defaultModel: Clearable(Type.String({ minLength: 1 })),
    /** A model entry of `kind: embedding`; when set, project files also get vectors. */
    embeddingModel: Clearable(Type.String({ minLength: 1, maxLength: 200 })),
    limits: Clearable(
      Type.Object(
        {
          monthlyTokens: Clearable(Type.Integer({ minimum: 0, maximum: MAX_SETUP_AMOUNT })),
          monthlyCostUsd: Clearable(NonNegative),
          chatSpendCapUsd: Clearable(NonNegative),
          rateLimitPerMinute: Clearable(Type.Integer({ minimum: 0, maximum: MAX_RATE_LIMIT_PER_MINUTE })),
        },
        { additionalProperties: false },
      ),
    ),
    members: Type.Optional(
      Type.Array(
        Type.Object(
          {
            user: Type.String({ minLength: 1 }),
            role: Type.Union([Type.Literal('owner'), Type.Literal('admin'), Type.Literal('member')]),
          },
          { additionalProperties: false },
        ),
      ),
    ),
    apiKeys: Type.Optional(Type.Array(ApiKeySpec)),
    agents: Type.Optional(Type.Array(AgentSpec)),
    projects: Type.Optional(Type.Array(ProjectSpec)),
  },
  { additionalProperties: false },
);

const OrganizationSpec = Type.Object(
  {
    id: Type.Optional(Id),
    name: Name,
    users: Type.Optional(
      Type.Array(
        Type.Object(
          {
            id: Type.Optional(Id),
            name: Name,
            email: Type.String({ format: 'email' }),
          },
          { additionalProperties: false },
        ),
      ),
    ),
    apiKeys: Type.Optional(Type.Array(ApiKeySpec)),
    workspaces: Type.Optional(Type.Array(WorkspaceSpec)),
  },
  { additionalProperties: false },
);

export const SetupFileSchema = Type.Object(
  {
    providers: Type.Optional(
      Type.Array(
        Type.Object(
          {
            id: Id,
            type: Type.Union([
              Type.Literal('openai'),
              Type.Literal('anthropic'),
              Type.Literal('openai-compatible'),
            ]),
            baseURL: Clearable(Type.String({ format: 'uri' })),
            apiKey: Clearable(Type.String({ minLength: 1 })),
            apiKeyEnv: Clearable(Type.String({ pattern: PATTERNS.envName.pattern })),
          },
          { additionalProperties: false },
        ),
      ),
    ),
    models: Type.Optional(
      Type.Array(
        Type.Object(
          {
            id: Type.String({ minLength: 1, maxLength: 200 }),
            provider: Type.String({ minLength: 1 }),
            model: Type.String({ minLength: 1 }),
            kind: Type.Optional(Type.Union([Type.Literal('chat'), Type.Literal('embedding')])),
            pricing: Clearable(
              Type.Object(
                { inputPerMTok: Clearable(NonNegative), outputPerMTok: Clearable(NonNegative) },
                { additionalProperties: false },
              ),
            ),
          },
          { additionalProperties: false },
        ),
      ),
    ),
    organizations: Type.Optional(Type.Array(OrganizationSpec)),
  },
  { additionalProperties: false },
);

export type SetupFile = Static<typeof SetupFileSchema>;
export type WorkspaceSetup = Static<typeof WorkspaceSpec>;
export type AgentSetup = Static<typeof AgentSpec>;
export type ProjectSetup = Static<typeof ProjectSpec>;
export type ApiKeySetup = Static<typeof ApiKeySpec>;

export interface SetupProblem {
  path: string;
  message: string;
}

export type ParseResult = { ok: true; setup: SetupFile } | { ok: false; problems: SetupProblem[] };

let validateShape: ValidateFunction<SetupFile> | undefined;

/** Compiled on first use: most starts of `atrium serve` read no setup file. */
function shapeValidator(): ValidateFunction<SetupFile> {
  // `verbose`: each problem's schema and value, explained as the API's are (validation-unions.ts).
  validateShape ??= addFormats
    .default(new Ajv.default({ allErrors: true, verbose: true, strict: false }))
    .compile<SetupFile>(SetupFileSchema);
  return validateShape;
}

/** `/organizations/0/workspaces/1/name` → `organizations[0].workspaces[1].name` */
function readablePath(pointer: string): string {
  return (
    pointer
      .split('/')
      .filter(Boolean)
      .map((segment) => (/^\d+$/.test(segment) ? `[${segment}]` : `.${segment}`))
      .join('')
      .replace(/^\./, '') || '(root)'
  );
}

function shapeProblems(issues: ErrorObject[]): SetupProblem[] {
  return issues.map((error) => {
    const params = error.params as {
      missingProperty?: string;
      additionalProperty?: string;
      pattern?: string;
    };
    let path = readablePath(error.instancePath);
    let message =
      params.pattern === ID_PATTERN
        ? 'must be letters, digits and _ . : - only (no "/"), and not "." or ".."'
        : (patternMessage(params.pattern) ?? error.message ?? 'is invalid');
    if (params.missingProperty) {
      // The API's words (error-handler.ts): the path names the field, which AJV's message repeated.
      path = readablePath(`${error.instancePath}/${params.missingProperty}`);
      message = 'is required';
    }
    if (params.additionalProperty) {
      // A field name is a word, as every field of the file is: anything else is the file's text
      // (`key:"atr_…"` without its space is one unknown field), which may hold a key.
      const named = /^[A-Za-z][A-Za-z0-9]{0,39}$/.test(params.additionalProperty);
      path = readablePath(`${error.instancePath}${named ? `/${params.additionalProperty}` : ''}`);
      message = named
        ? 'is not a known field'
        : 'has a field that is not a known field (not repeated: it may hold a key)';
    }
    return { path, message };
  });
}

/**
 * The file as the reference checks read it: a value has its field's type, but any field may be
 * missing (a file of the wrong shape, whose shape problems say so) and a list may have holes.
 */
type Readable<T> = T extends readonly (infer Item)[]
  ? Readable<Item>[]
  : T extends object
    ? { [K in keyof T]?: Readable<T[K]> }
    : T;

/** `a~1b` → `a/b`: a segment of a JSON pointer, such as AJV's instancePath. */
function pointerSegments(pointer: string): string[] {
  return pointer
    .split('/')
    .slice(1)
    .map((segment) => segment.replaceAll('~1', '/').replaceAll('~0', '~'));
}

/**
 * A copy of `document` without the values of the wrong type (a string for a list, `5` for a URL,
 * a value that is none of a field's choices), which the shape check reports: the reference checks then
 * neither check them again nor throw on a part they cannot read (which lost every other part's
 * problems). `delete` leaves a hole in a list, which forEach and map skip, so the other items keep
 * their index and their path. A value of the right type that fails a rule of it (a pattern, a
 * length) stays: an id that breaks its pattern still defines what refers to it.
 */
function withoutWrongTypes(document: object, issues: ErrorObject[]): Readable<SetupFile> {
  const copy = structuredClone(document) as Record<string, unknown>;
  for (const issue of issues.filter(isWrongShape)) {
    const segments = pointerSegments(issue.instancePath);
    const last = segments.pop();
    const parent = segments.reduce<unknown>(
      (value, segment) => (value as Record<string, unknown>)?.[segment],
      copy,
    );
    if (last !== undefined && typeof parent === 'object' && parent !== null) {
      delete (parent as Record<string, unknown>)[last];
    }
  }
  return copy as Readable<SetupFile>;
}

/**
 * Checks that every reference in the file points at something the file (or Atrium) defines.
 * `refused` holds the paths the shape check reported, whose values (taken out of `setup`) are
 * not to be guessed at: a model whose `kind` was refused is of no known kind.
 */
function referenceProblems(setup: Readable<SetupFile>, refused = new Set<string>()): SetupProblem[] {
  const problems: SetupProblem[] = [];
  const seen = new Map<string, string>();
  const unique = (kind: string, value: string | undefined, path: string) => {
    if (value === undefined) return;
    const key = `${kind}:${value}`;
    const first = seen.get(key);
    if (first) problems.push({ path, message: `duplicate ${kind} "${value}" (first at ${first})` });
    else seen.set(key, path);
  };

  // A provider whose type is none of the choices is still one: its models' provider is known.
  const providerTypes = new Map<string, string | undefined>(BUILT_IN_PROVIDERS.map((id) => [id, id]));
  setup.providers?.forEach((provider, i) => {
    unique('provider id', provider.id, `providers[${i}].id`);
    if (provider.id !== undefined) providerTypes.set(provider.id, provider.type);
    if (provider.type === 'openai-compatible' && !provider.baseURL) {
      problems.push({
        path: `providers[${i}].baseURL`,
        message: 'is required for openai-compatible providers',
      });
    }
  });

  /**
   * A model whose kind the shape check refused is not checked as either kind where it is named:
   * its one problem is its kind (before, it read as a chat model, and an embeddingModel naming it
   * got a second problem).
   */
  const modelKinds = new Map<string, 'chat' | 'embedding' | 'refused'>([
    [ECHO_MODEL_ID, 'chat'],
    [ECHO_EMBEDDING_MODEL_ID, 'embedding'],
  ]);
  setup.models?.forEach((model, i) => {
    unique('model id', model.id, `models[${i}].id`);
    if (model.id !== undefined) {
      modelKinds.set(model.id, refused.has(`models[${i}].kind`) ? 'refused' : (model.kind ?? 'chat'));
    }
    if (model.provider === undefined) return;
    if (!providerTypes.has(model.provider)) {
      problems.push({ path: `models[${i}].provider`, message: `unknown provider "${model.provider}"` });
    } else if (model.kind === 'embedding' && providerTypes.get(model.provider) === 'anthropic') {
      problems.push({ path: `models[${i}].kind`, message: 'Anthropic providers offer no embedding models' });
    }
  });
  /**
   * A model a chat runs on (workspace models, defaults, agents): defined, and not an embedding
   * model; or, for `kind: 'embedding'`, one of that kind. False when it reported a problem.
   */
  const checkModel = (
    model: string | null | undefined,
    path: string,
    kind: 'chat' | 'embedding' = 'chat',
  ): boolean => {
    if (model === undefined || model === null) return true;
    // The built-in providers serve any of their models by id (`openai/gpt-4o-mini`), undefined.
    const found = modelKinds.get(model) ?? (BUILT_IN_CHAT_MODEL.test(model) ? 'chat' : undefined);
    if (!found) {
      problems.push({ path, message: `unknown model "${model}" (define it under models)` });
      return false;
    }
    if (found !== kind && found !== 'refused') {
      problems.push({
        path,
        message:
          kind === 'embedding'
            ? `model "${model}" is a chat model (an embedding model has kind: embedding)`
            : `model "${model}" is an embedding model (name it as embeddingModel, not as a chat model)`,
      });
      return false;
    }
    return true;
  };

  /**
   * Apply finds an object without an id by its name: two of one name in one scope, either of
   * them without an id, would be found as one stored object, which each apply then rewrites.
   */
  const named = new Map<string, { path: string; withoutId: boolean }>();
  const uniqueName = (kind: string, name: string | undefined, id: string | undefined, path: string) => {
    if (name === undefined) return;
    const key = `${kind}:${name}`;
    const first = named.get(key);
    if (!first) {
      named.set(key, { path, withoutId: id === undefined });
    } else if (first.withoutId || id === undefined) {
      problems.push({
        path,
        message: `duplicate ${kind} "${name}" (first at ${first.path}): give each an id, or another name`,
      });
      first.withoutId = true;
    }
  };
  // Two keys cannot share a secret; the message names the first, never the key itself.
  const plaintextKeys = new Map<string, string>();
  const uniqueKey = (key: string | undefined, path: string) => {
    if (key === undefined) return;
    const first = plaintextKeys.get(key);
    if (first) problems.push({ path, message: `is the same key as ${first}: each key must be different` });
    else plaintextKeys.set(key, path);
  };

  setup.organizations?.forEach((org, o) => {
    const orgPath = `organizations[${o}]`;
    unique('organization id', org.id, `${orgPath}.id`);
    uniqueName('organization name', org.name, org.id, `${orgPath}.name`);
    const users = new Set<string>();
    /** A user named by id or email, as one name: members and keys may name the same user either way. */
    const sameUser = new Map<string, string>();
    org.users?.forEach((user, u) => {
      const email = user.email?.toLowerCase();
      unique('user id', user.id, `${orgPath}.users[${u}].id`);
      unique('user email', email, `${orgPath}.users[${u}].email`);
      const name = user.id || email;
      for (const known of [user.id, email]) {
        if (!known || !name) continue;
        users.add(known);
        sameUser.set(known, name);
      }
    });
    const userName = (user: string) => sameUser.get(user) ?? sameUser.get(user.toLowerCase()) ?? user;
    // RFC 3339, and so the schema's `date-time`, allows a leap second (`23:59:60`), which no date
    // the service stores can hold: refused here rather than failing halfway through apply.
    const checkExpiry = (value: string | null | undefined, path: string) => {
      // Only a leap second: any other unreadable value failed the format, which says so.
      if (
        typeof value === 'string' &&
        /:60(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/.test(value) &&
        !Number.isFinite(Date.parse(value))
      ) {
        problems.push({ path, message: 'must be a date and time with seconds up to 59 (no leap second)' });
      }
    };
    /** False when it reported the user unknown. */
    const checkUser = (user: string | undefined, path: string): boolean => {
      if (user === undefined || users.has(user) || users.has(user.toLowerCase())) return true;
      problems.push({ path, message: `unknown user "${user}" (not among ${orgPath}.users)` });
      return false;
    };
    org.apiKeys?.forEach((key, k) => {
      unique('key name', key.name, `${orgPath}.apiKeys[${k}].name`);
      unique('key id', key.id, `${orgPath}.apiKeys[${k}].id`);
      checkUser(key.user, `${orgPath}.apiKeys[${k}].user`);
      checkExpiry(key.expiresAt, `${orgPath}.apiKeys[${k}].expiresAt`);
      uniqueKey(key.key, `${orgPath}.apiKeys[${k}].key`);
    });

    org.workspaces?.forEach((workspace, w) => {
      const wsPath = `${orgPath}.workspaces[${w}]`;
      unique('workspace id', workspace.id, `${wsPath}.id`);
      uniqueName(`workspace name in ${orgPath}`, workspace.name, workspace.id, `${wsPath}.name`);
      workspace.models?.forEach((model, m) => checkModel(model, `${wsPath}.models[${m}]`));
      // One problem for a default model: one no model defines is not also "not one of the models".
      const defaultModelKnown = checkModel(workspace.defaultModel, `${wsPath}.defaultModel`);
      checkModel(workspace.embeddingModel, `${wsPath}.embeddingModel`, 'embedding');
      if (
        defaultModelKnown &&
        workspace.defaultModel &&
        workspace.models &&
        !workspace.models.includes(workspace.defaultModel)
      ) {
        problems.push({ path: `${wsPath}.defaultModel`, message: 'must be one of the workspace models' });
      }
      const members = new Set<string>();
      workspace.members?.forEach((member, m) => {
        if (member.user === undefined) return;
        checkUser(member.user, `${wsPath}.members[${m}].user`);
        if (members.has(userName(member.user))) {
          problems.push({ path: `${wsPath}.members[${m}].user`, message: 'is listed twice' });
        }
        members.add(userName(member.user));
      });
      workspace.apiKeys?.forEach((key, k) => {
        unique('key name', key.name, `${wsPath}.apiKeys[${k}].name`);
        unique('key id', key.id, `${wsPath}.apiKeys[${k}].id`);
        const userKnown = checkUser(key.user, `${wsPath}.apiKeys[${k}].user`);
        checkExpiry(key.expiresAt, `${wsPath}.apiKeys[${k}].expiresAt`);
        uniqueKey(key.key, `${wsPath}.apiKeys[${k}].key`);
        // A key acts with its user's role in the workspace: a user who is none has none. An
        // unknown user is that one problem, not also "not a member".
        if (userKnown && workspace.members && key.user !== undefined && !members.has(userName(key.user))) {
          problems.push({
            path: `${wsPath}.apiKeys[${k}].user`,
            message: `"${key.user}" is not a member of this workspace (a workspace key's user must be)`,
          });
        }
      });
      const agentIds = new Set(workspace.agents?.map((agent) => agent.id).filter(Boolean));
      workspace.agents?.forEach((agent, a) => {
        const agentPath = `${wsPath}.agents[${a}]`;
        unique('agent id', agent.id, `${agentPath}.id`);
        unique(`agent title in ${wsPath}`, agent.title, `${agentPath}.title`);
        checkModel(agent.model, `${agentPath}.model`);
        // The agents API's rules (src/agent-fields.ts).
        const imageProblem = typeof agent.image === 'string' ? agentImageProblem(agent.image) : null;
        if (imageProblem) problems.push({ path: `${agentPath}.image`, message: imageProblem });
        if (Array.isArray(agent.tools)) {
          agent.tools.forEach((tool, t) => {
            const urlProblem = tool.url === undefined ? null : toolUrlProblem(tool.url);
            if (urlProblem) problems.push({ path: `${agentPath}.tools[${t}].url`, message: urlProblem });
            // A url or header pasted from a read of the agent: apply would store "***" as the secret.
            else if (tool.url !== undefined && hasMaskedPart(tool.url)) {
              problems.push({ path: `${agentPath}.tools[${t}].url`, message: MASKED_CREDENTIAL });
            }
            for (const [name, value] of Object.entries(tool.headers ?? {})) {
              const path = `${agentPath}.tools[${t}].headers.${name}`;
              // A value of another type is a shape problem, reported on its own.
              const headerProblem = typeof value === 'string' ? toolHeaderProblem(name, value) : null;
              if (headerProblem) problems.push({ path, message: headerProblem });
              else if (value === MASKED_HEADER_VALUE) problems.push({ path, message: MASKED_CREDENTIAL });
            }
          });
          problems.push(...duplicateToolNames(agent.tools, (t) => `${agentPath}.tools[${t}]`));
        }
        agent.orchestration?.agents?.forEach((id, i) => {
          if (!agentIds.has(id)) {
            problems.push({
              path: `${agentPath}.orchestration.agents[${i}]`,
              message: `unknown agent "${id}" (must be an agent id of the same workspace)`,
            });
          } else if (id === agent.id) {
            problems.push({
              path: `${agentPath}.orchestration.agents[${i}]`,
              message: 'an agent cannot lead itself',
            });
          }
        });
      });
      workspace.projects?.forEach((project, p) => {
        unique('project id', project.id, `${wsPath}.projects[${p}].id`);
        uniqueName(`project name in ${wsPath}`, project.name, project.id, `${wsPath}.projects[${p}].name`);
        if (typeof project.name === 'string' && project.name !== project.name.trim()) {
          problems.push({ path: `${wsPath}.projects[${p}].name`, message: PROJECT_NAME_UNTRIMMED });
        }
      });
    });
  });
  return problems;
}

/** Parses and validates a whole setup file; every problem is reported, nothing is applied. */
export function parseSetupText(text: string, fileName: string): ParseResult {
  const read = readSetupYaml(text, fileName);
  if (!read.ok) {
    return { ok: false, problems: read.messages.map((message) => ({ path: '(file)', message })) };
  }
  const document = read.value ?? {};
  if (typeof document !== 'object' || document === null || Array.isArray(document)) {
    return { ok: false, problems: [{ path: '(root)', message: 'must be a mapping (object)' }] };
  }
  const validate = shapeValidator();
  if (!validate(document)) {
    // Every problem at once, as operations.md asks: the cross-references too, as far as a file
    // of the wrong shape lets them be checked. A value the shape check reports is reported by it
    // alone (a URL that is no URI is not also "not an http URL"), as the API checks nothing more
    // of a body that failed its schema.
    const issues = explainUnions(validate.errors ?? []);
    const shape = shapeProblems(issues);
    const reported = new Set(shape.map((problem) => problem.path));
    return { ok: false, problems: [...shape, ...referencesBeside(document, issues, reported)] };
  }
  const problems = referenceProblems(document);
  return problems.length > 0 ? { ok: false, problems } : { ok: true, setup: document };
}

/**
 * The cross-reference problems of a file that failed its shape check, at paths the shape check
 * did not report, read on the file without its values of the wrong type. Should a value still
 * be of a shape the checks cannot follow, the shape problems stand alone: an invalid file is
 * listed (exit 2), never answered with a crash of the checks.
 */
function referencesBeside(document: object, issues: ErrorObject[], reported: Set<string>): SetupProblem[] {
  try {
    return referenceProblems(withoutWrongTypes(document, issues), reported).filter(
      (problem) => !reported.has(problem.path),
    );
  } catch {
    return [];
  }
}
