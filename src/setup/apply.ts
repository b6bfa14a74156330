import type { Kysely, Transaction } from 'kysely';
import { generateApiKey, hashApiKey, keyPrefix } from '../auth/api-keys.js';
import { lockAllTenants, lockWorkspace } from '../db/repositories/tenancy.js';
import type { Database } from '../db/schema.js';
import { caseInsensitiveSortKey } from '../db/sort-key.js';
import { type IdPrefix, newId } from '../ids.js';
import { PROJECT_DEFAULTS } from '../services/projects.js';
import { type ApplyReport, idsByName, type ObjectKind } from './apply-report.js';
import {
  ApiManagedObjectsError,
  DuplicateAgentTitlesError,
  MovedObjectError,
  TakenIdentityError,
  findApiManagedObjects,
  findDuplicateAgentTitles,
  matchableByName,
} from './ownership.js';
import type { ApiKeySetup, SetupFile, WorkspaceSetup } from './validate.js';

type Trx = Transaction<Database>;
type Table = keyof Database;
type Row = Record<string, unknown>;

interface Context {
  trx: Trx;
  now: string;
  report: ApplyReport;
}

function sameValue(a: unknown, b: unknown): boolean {
  const unset = (value: unknown) => value === null || value === undefined;
  // Before the numbers: Number(null) is 0, so a limit of 0 could not be cleared.
  if (unset(a) || unset(b)) return unset(a) && unset(b);
  if (typeof a === 'number' || typeof b === 'number') return Number(a) === Number(b);
  return String(a) === String(b);
}

/**
 * A setting the file may leave out, set, or clear: left out (`undefined`) keeps the stored value
 * (the insert default for a new row); `null` puts back `cleared` (NULL, or the column's default).
 */
function setting<T, C>(given: T | null | undefined, cleared: C): T | C | undefined {
  if (given === undefined) return undefined;
  return given === null ? cleared : given;
}

/**
 * Finds a row by its fixed id, else by its natural key within its scope; inserts it when absent,
 * updates only the columns that differ, and leaves it untouched otherwise (so a second apply of
 * the same file writes nothing and keeps every `updated_at`). A value `undefined` is a column
 * the file does not set: kept as stored, or `defaults` on insert.
 */
/** The stored row an object of the file names: by id when it gives one, else by its match columns. */
async function findExisting(
  ctx: Context,
  spec: { table: Table; id?: string; match: Row },
): Promise<Row | undefined> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- dynamic table name, as in upsert
  let query = (ctx.trx as Kysely<any>).selectFrom(spec.table).selectAll();
  if (spec.id) query = query.where('id', '=', spec.id);
  else {
    for (const [column, value] of Object.entries(spec.match)) query = query.where(column, '=', value);
    if (spec.table === 'agents' || spec.table === 'api_keys') {
      query = matchableByName(query, spec.table, ctx.now);
    }
  }
  return (await query.executeTakeFirst()) as Row | undefined;
}

async function upsert(
  ctx: Context,
  spec: {
    table: Table;
    label: string;
    prefix: IdPrefix | null;
    id?: string;
    match: Row;
    values: (existing: Row | undefined) => Row;
    /** Insert values of the columns the file leaves out. */
    defaults?: Row;
    timestamps?: 'both' | 'created' | 'none';
  },
): Promise<string> {
  // Kysely's types cannot follow a table name chosen at run time; the columns are checked by the callers' specs.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- dynamic table name, see above
  const trx = ctx.trx as Kysely<any>;
  const existing = await findExisting(ctx, spec);
  const values = Object.fromEntries(
    Object.entries(spec.values(existing)).filter(([, value]) => value !== undefined),
  );
  const timestamps = spec.timestamps ?? 'both';

  if (!existing) {
    const id = spec.id ?? (spec.prefix ? newId(spec.prefix) : undefined);
    const row: Row = { ...spec.defaults, ...spec.match, ...values };
    if (id) row.id = id;
    if (timestamps !== 'none') row.created_at = ctx.now;
    if (timestamps === 'both') row.updated_at = ctx.now;
    await trx.insertInto(spec.table).values(row).execute();
    ctx.report.created.push(spec.label);
    return String(row.id ?? '');
  }

  // An object found stays in its tenancy: the file may change it, not move it. Found by id, or
  // by a name not scoped to one tenant (a user's email is unique across organizations).
  for (const column of ['organization_id', 'workspace_id']) {
    const wanted = { ...spec.match, ...values }[column];
    if (wanted !== undefined && column in existing && !sameValue(existing[column], wanted)) {
      throw new MovedObjectError(
        `${spec.label} (${String(existing.id)}) from ${column.replace('_id', '')} ${String(existing[column])} to ${String(wanted)}`,
        spec.id ? 'id' : Object.keys(spec.match).join(' and '),
      );
    }
  }
  const changes: Row = {};
  for (const [column, value] of Object.entries({ ...spec.match, ...values })) {
    if (!sameValue(existing[column], value)) changes[column] = value;
  }
  if (Object.keys(changes).length > 0) {
    if (timestamps === 'both') changes.updated_at = ctx.now;
    let update = trx.updateTable(spec.table).set(changes);
    if (existing.id !== undefined) update = update.where('id', '=', existing.id);
    else for (const [column, value] of Object.entries(spec.match)) update = update.where(column, '=', value);
    await update.execute();
    ctx.report.updated.push(spec.label);
  }
  return String(existing.id ?? '');
}

/**
 * A workspace's rows of `table` the file no longer lists (its list is the whole list): deleted,
 * and their `column` values returned.
 */
async function pruneUnlisted(
  ctx: Context,
  table: 'workspace_models' | 'workspace_members',
  column: 'model_id' | 'user_id',
  workspaceId: string,
  listed: Set<string>,
): Promise<string[]> {
  // Kysely cannot follow a column chosen at run time; both tables have the column they are given.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- dynamic table and column, see above
  const trx = ctx.trx as Kysely<any>;
  const current = await trx
    .selectFrom(table)
    .select(column)
    .where('workspace_id', '=', workspaceId)
    .execute();
  const unlisted = current.map((row) => String(row[column])).filter((value) => !listed.has(value));
  if (unlisted.length > 0) {
    await trx
      .deleteFrom(table)
      .where('workspace_id', '=', workspaceId)
      .where(column, 'in', unlisted)
      .execute();
  }
  return unlisted;
}

/**
 * The workspace default model: the file's, else the stored one while the workspace still
 * enables it, else the first model the file enables (a default must be an enabled model).
 */
function defaultModelOf(workspace: WorkspaceSetup, existing: Row | undefined): string | null | undefined {
  if (workspace.defaultModel !== undefined) return workspace.defaultModel;
  if (existing && !workspace.models) return undefined;
  const stored = existing?.default_model as string | null | undefined;
  if (stored && workspace.models?.includes(stored)) return undefined;
  return workspace.models?.[0] ?? null;
}

function record(
  ctx: Context,
  kind: ObjectKind,
  name: string,
  id: string,
  scope: { organization?: string; workspace?: string } = {},
) {
  ctx.report.objects.push({ kind, id, name, ...scope });
}

async function applyKey(
  ctx: Context,
  key: ApiKeySetup,
  scope: { kind: 'workspace' | 'organization'; organizationId: string; workspaceId: string | null },
  userIds: Map<string, string>,
) {
  const userId = userIds.get(key.user) ?? userIds.get(key.user.toLowerCase())!;
  const match: Row =
    scope.kind === 'workspace'
      ? { kind: 'workspace', workspace_id: scope.workspaceId, name: key.name }
      : { kind: 'organization', organization_id: scope.organizationId, name: key.name };
  if (key.key !== undefined) await refuseTakenKey(ctx, key, match);
  let plaintext: string | undefined;
  const id = await upsert(ctx, {
    table: 'api_keys',
    label: `${scope.kind} key ${key.name}`,
    prefix: 'key',
    id: key.id,
    match,
    timestamps: 'created',
    values: (existing) => {
      // A generated key is never rotated by a re-apply; a plaintext key in the file is authoritative.
      const wanted = key.key ?? (existing ? undefined : generateApiKey(scope.kind));
      const hash = wanted ? hashApiKey(wanted) : (existing?.key_hash as string);
      const rekeyed = wanted !== undefined && hash !== existing?.key_hash;
      if (rekeyed) plaintext = wanted;
      return {
        organization_id: scope.organizationId,
        workspace_id: scope.workspaceId,
        user_id: userId,
        key_hash: hash,
        key_prefix: wanted ? keyPrefix(wanted) : existing?.key_prefix,
        expires_at: setting(key.expiresAt && new Date(key.expiresAt).toISOString(), null),
        // A new secret is a new key: a revoked key given a new plaintext (the way to replace a
        // leaked one) works again, as the key printed for it says.
        ...(rekeyed && existing ? { revoked_at: null } : {}),
        managed_by: 'setup',
      };
    },
    defaults: { expires_at: null, revoked_at: null, last_used_at: null },
  });
  if (plaintext) ctx.report.keys[key.name] = plaintext;
  record(ctx, 'apiKey', key.name, id, {
    organization: scope.organizationId,
    ...(scope.workspaceId !== null && { workspace: scope.workspaceId }),
  });
}

/**
 * A plaintext key names one key: one that another stored key has (the key renamed in the file,
 * say) would fail on the unique hash. The message names the other key, never the plaintext.
 */
async function refuseTakenKey(ctx: Context, key: ApiKeySetup, match: Row): Promise<void> {
  const holder = await ctx.trx
    .selectFrom('api_keys')
    .selectAll()
    .where('key_hash', '=', hashApiKey(key.key!))
    .executeTakeFirst();
  if (!holder) return;
  // The key the apply writes (as upsert finds it) may hold its own plaintext.
  const target = await findExisting(ctx, { table: 'api_keys', id: key.id, match });
  if (holder.id === target?.id) return;
  // Renaming by id works within the key's own workspace or organization only (no moves).
  const sameScope = Object.entries(match).every(
    ([column, value]) => column === 'name' || (holder as Row)[column] === value,
  );
  throw new TakenIdentityError(
    `The setup file gives key ${key.name} the plaintext key that key ${holder.name} (${holder.id}) has.`,
    sameScope
      ? `A plaintext key names one key: name key ${holder.id} by its id to rename it, or give this one another key.`
      : 'A plaintext key names one key: give this one another key.',
  );
}

async function applyAll(ctx: Context, setup: SetupFile) {
  for (const provider of setup.providers ?? []) {
    await upsert(ctx, {
      table: 'providers',
      label: `provider ${provider.id}`,
      prefix: null,
      id: provider.id,
      match: {},
      values: () => ({
        type: provider.type,
        base_url: setting(provider.baseURL, null),
        api_key: setting(provider.apiKey, null),
        api_key_env: setting(provider.apiKeyEnv, null),
      }),
      defaults: { base_url: null, api_key: null, api_key_env: null },
    });
  }
  for (const model of setup.models ?? []) {
    await upsert(ctx, {
      table: 'models',
      label: `model ${model.id}`,
      prefix: null,
      id: model.id,
      match: {},
      values: () => ({
        provider_id: model.provider,
        provider_model: model.model,
        // Part of what the model is, not a setting: left out, the entry is a chat model.
        kind: model.kind ?? 'chat',
        // `pricing: null` makes the model free again, as does a null price.
        input_per_mtok: model.pricing === null ? 0 : setting(model.pricing?.inputPerMTok, 0),
        output_per_mtok: model.pricing === null ? 0 : setting(model.pricing?.outputPerMTok, 0),
      }),
      defaults: { input_per_mtok: 0, output_per_mtok: 0, kind: 'chat' },
    });
  }

  for (const org of setup.organizations ?? []) {
    const organizationId = await upsert(ctx, {
      table: 'organizations',
      label: `organization ${org.name}`,
      prefix: 'org',
      id: org.id,
      match: org.id ? {} : { name: org.name },
      values: () => ({ name: org.name }),
    });
    record(ctx, 'organization', org.name, organizationId);

    const userIds = new Map<string, string>();
    for (const user of org.users ?? []) {
      const email = user.email.toLowerCase();
      // Emails are unique across organizations: a user given an id takes no other user's.
      if (user.id) {
        const holder = await ctx.trx
          .selectFrom('users')
          .select('id')
          .where('email', '=', email)
          .where('id', '!=', user.id)
          .executeTakeFirst();
        if (holder) {
          throw new TakenIdentityError(
            `The setup file gives user ${user.id} the email ${email}, which user ${holder.id} has.`,
            `An email names one user: name that user by id ${holder.id}, or give this one another email.`,
          );
        }
      }
      const userId = await upsert(ctx, {
        table: 'users',
        label: `user ${email}`,
        prefix: 'usr',
        id: user.id,
        match: user.id ? {} : { email },
        values: () => ({ organization_id: organizationId, name: user.name, email }),
      });
      userIds.set(email, userId);
      if (user.id) userIds.set(user.id, userId);
      record(ctx, 'user', email, userId, { organization: organizationId });
    }
    for (const key of org.apiKeys ?? []) {
      await applyKey(ctx, key, { kind: 'organization', organizationId, workspaceId: null }, userIds);
    }

    for (const workspace of org.workspaces ?? []) {
      const workspaceId = await upsert(ctx, {
        table: 'workspaces',
        label: `workspace ${workspace.name}`,
        prefix: 'wsp',
        id: workspace.id,
        match: workspace.id ? {} : { organization_id: organizationId, name: workspace.name },
        values: (existing) => {
          // `limits: null` removes every limit; a limit left out keeps its stored value.
          const limit = (name: keyof NonNullable<typeof workspace.limits>) =>
            workspace.limits === null ? null : setting(workspace.limits?.[name], null);
          return {
            organization_id: organizationId,
            name: workspace.name,
            default_model: defaultModelOf(workspace, existing),
            embedding_model: setting(workspace.embeddingModel, null),
            monthly_tokens: limit('monthlyTokens'),
            monthly_cost_usd: limit('monthlyCostUsd'),
            chat_spend_cap_usd: limit('chatSpendCapUsd'),
            rate_limit_per_minute: limit('rateLimitPerMinute'),
          };
        },
        defaults: {
          embedding_model: null,
          monthly_tokens: null,
          monthly_cost_usd: null,
          chat_spend_cap_usd: null,
          rate_limit_per_minute: null,
        },
      });
      record(ctx, 'workspace', workspace.name, workspaceId, { organization: organizationId });
      // Held to the end, past the check of duplicate titles below: an agent or key the API makes
      // in this workspace meanwhile waits for this apply, so the check sees every agent there.
      await lockWorkspace(ctx.trx, workspaceId);

      if (workspace.models) {
        const wanted = new Set(workspace.models);
        const stale = await pruneUnlisted(ctx, 'workspace_models', 'model_id', workspaceId, wanted);
        if (stale.length > 0) ctx.report.updated.push(`workspace ${workspace.name} models`);
        for (const modelId of wanted) {
          await upsert(ctx, {
            table: 'workspace_models',
            label: `workspace ${workspace.name} model ${modelId}`,
            prefix: null,
            match: { workspace_id: workspaceId, model_id: modelId },
            values: () => ({}),
            timestamps: 'none',
          });
        }
      }

      if (workspace.members) {
        // The list is the workspace's members, as `models` is its models: a user it no longer
        // names leaves the workspace (their workspace keys stop working on the next request).
        const listed = new Set(
          workspace.members.map(
            (member) => userIds.get(member.user) ?? userIds.get(member.user.toLowerCase())!,
          ),
        );
        const gone = await pruneUnlisted(ctx, 'workspace_members', 'user_id', workspaceId, listed);
        for (const userId of gone) ctx.report.updated.push(`member ${userId} left ${workspace.name}`);
      }
      for (const member of workspace.members ?? []) {
        const userId = userIds.get(member.user) ?? userIds.get(member.user.toLowerCase())!;
        await upsert(ctx, {
          table: 'workspace_members',
          label: `member ${member.user} of ${workspace.name}`,
          prefix: null,
          match: { workspace_id: workspaceId, user_id: userId },
          values: () => ({ role: member.role }),
          timestamps: 'created',
        });
      }
      for (const key of workspace.apiKeys ?? []) {
        await applyKey(ctx, key, { kind: 'workspace', organizationId, workspaceId }, userIds);
      }

      for (const agent of workspace.agents ?? []) {
        const agentId = await upsert(ctx, {
          table: 'agents',
          label: `agent ${agent.title}`,
          prefix: 'agt',
          id: agent.id,
          match: agent.id ? {} : { workspace_id: workspaceId, title: agent.title },
          values: (existing) => ({
            workspace_id: workspaceId,
            title: agent.title,
            // Written here, not by the agents repository: this generic upsert bypasses it.
            title_sort_key: caseInsensitiveSortKey(agent.title),
            description: setting(agent.description, ''),
            image: setting(agent.image, ''),
            category: setting(agent.category, ''),
            visibility: setting(agent.visibility, 'workspace'),
            model: setting(agent.model, null),
            instructions: setting(agent.instructions, ''),
            tools: setting(agent.tools && JSON.stringify(agent.tools), '[]'),
            orchestration: setting(agent.orchestration && JSON.stringify(agent.orchestration), null),
            // `deleted: false` restores a deleted agent; left out, the agent stays as it is.
            deleted_at:
              agent.deleted === undefined
                ? undefined
                : agent.deleted
                  ? ((existing?.deleted_at as string | null) ?? ctx.now)
                  : null,
            managed_by: 'setup',
          }),
          defaults: {
            description: '',
            image: '',
            category: '',
            visibility: 'workspace',
            model: null,
            instructions: '',
            tools: '[]',
            orchestration: null,
            deleted_at: null,
          },
        });
        record(ctx, 'agent', agent.title, agentId, { organization: organizationId, workspace: workspaceId });
      }

      for (const project of workspace.projects ?? []) {
        const projectId = await upsert(ctx, {
          table: 'projects',
          label: `project ${project.name}`,
          prefix: 'prj',
          id: project.id,
          match: project.id ? {} : { workspace_id: workspaceId, name: project.name },
          values: () => ({
            workspace_id: workspaceId,
            name: project.name,
            description: setting(project.description, PROJECT_DEFAULTS.description),
            instructions: setting(project.instructions, PROJECT_DEFAULTS.instructions),
            color: setting(project.color, PROJECT_DEFAULTS.color),
            icon: setting(project.icon, PROJECT_DEFAULTS.icon),
            // Memory grows through the `remember` tool; the file sets it only when it names it.
            memory: setting(project.memory, ''),
            archived: project.archived === undefined ? undefined : project.archived ? 1 : 0,
            managed_by: 'setup',
          }),
          defaults: { ...PROJECT_DEFAULTS, memory: '', archived: 0 },
        });
        record(ctx, 'project', project.name, projectId, {
          organization: organizationId,
          workspace: workspaceId,
        });
      }
    }
  }
}

/**
 * Applies a validated setup file in one transaction: all of it or nothing. Objects the API
 * manages refuse the whole file (ApiManagedObjectsError) unless `adopt` makes the file their
 * manager (management.md). `signal`, aborted before the commit, rolls it all back and rejects
 * with its reason (a server told to stop while it made the demo).
 */
export async function applySetup(
  db: Kysely<Database>,
  setup: SetupFile,
  options: { now: Date; adopt?: boolean; signal?: AbortSignal },
) {
  const report: ApplyReport = { created: [], updated: [], keys: {}, objects: [] };
  await db.transaction().execute(async (trx) => {
    // Before anything is read or written: API writes of agents and keys wait for this apply.
    await lockAllTenants(trx);
    const now = options.now.toISOString();
    if (!options.adopt) {
      const apiManaged = await findApiManagedObjects(trx, setup, now);
      if (apiManaged.length > 0) throw new ApiManagedObjectsError(apiManaged);
    }
    await applyAll({ trx, now, report }, setup);
    // Titles are unique among a workspace's live agents, as the API keeps them: checked once
    // everything is in place, in the workspaces whose agents this file wrote, so the whole
    // file is rolled back.
    const duplicates = await findDuplicateAgentTitles(trx, now);
    if (duplicates.length > 0) throw new DuplicateAgentTitlesError(duplicates);
    // Last, so that a signal that came at any point before the commit leaves nothing applied.
    options.signal?.throwIfAborted();
  });
  return { ...report, ids: idsByName(report.objects) };
}
