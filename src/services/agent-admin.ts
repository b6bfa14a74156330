import {
  agentImageProblem,
  duplicateToolNames,
  hasMaskedPart,
  MASKED_HEADER_VALUE,
  queryPairs,
  toolHeaderProblem,
  toolUrlProblem,
} from '../agent-fields.js';
import type { Db } from '../db/database.js';
import {
  type AgentRow,
  findLiveAgent,
  findLiveAgentByTitle,
  insertAgent,
  liveAgentIdsIn,
  updateAgent,
} from '../db/repositories/agents.js';
import { enabledModelIds } from '../db/repositories/models.js';
import { withWorkspaceLocked } from '../db/repositories/tenancy.js';
import type { Visibility } from '../db/schema.js';
import { errors } from '../errors.js';
import { matchesPattern, PATTERNS } from '../http/schemas/patterns.js';
import { type Clock, isoNow, newId } from '../ids.js';
import { MAX_MCP_URL_LENGTH } from '../limits.js';
import type { ModelRegistry } from '../models/registry.js';
import { privateAddressProblem } from '../models/tools/mcp-address.js';
import type { Config } from '../config.js';
import {
  accessAgentWorkspace,
  isManager,
  type Principal,
  requireManager,
  type WorkspaceAccess,
} from './access.js';
import { agentView } from './agents.js';

export interface AgentAdminDeps {
  db: Db;
  clock: Clock;
  models: ModelRegistry;
  config: Pick<Config, 'mcpAllowPrivateNetwork'>;
}

export interface McpTool {
  type: 'mcp';
  name: string;
  url: string;
  headers?: Record<string, string>;
}

/** The fields of an agent as the setup file and the API take them; `null` clears (PATCH). */
export interface AgentFields {
  title?: string;
  description?: string | null;
  image?: string | null;
  category?: string | null;
  visibility?: Visibility | null;
  model?: string | null;
  instructions?: string | null;
  tools?: McpTool[] | null;
  orchestration?: { agents: string[] } | null;
}

/**
 * The tool's url as read: many MCP servers take their credential in the URL (`?api_key=…`,
 * `user:secret@host`, `token@host`), so each query value is shown as `"***"`, and so is the whole
 * userinfo: `***:***@` with a password, `***@` without. The user name is no safer than the
 * password: GitHub's documented form puts the token there (`https://ghp_…:x-oauth-basic@host`),
 * others a fixed word beside it (`https://oauth2:TOKEN@host`), and which is which cannot be told.
 * The scheme, host, path, parameter names and fragment are shown, and so are empty values and
 * parameters without one (nothing secret). The query is rewritten pair by pair on `URL#search`
 * rather than re-serialized by URLSearchParams, which would respell names (`a%20b` as `a+b`) and
 * give `flag` an `=`: what is shown must be what the reader recognizes and sends back. A url with
 * nothing to hide is shown exactly as stored.
 */
function maskedToolUrl(url: string): string {
  // Both write paths refuse a url that does not parse; should one be stored anyway, hide it all.
  if (!URL.canParse(url)) return MASKED_HEADER_VALUE;
  const parsed = new URL(url);
  const pairs = queryPairs(parsed);
  const hidesValue = pairs.some((pair) => pair.value);
  const hasUserinfo = parsed.username !== '' || parsed.password !== '';
  if (!hasUserinfo && !hidesValue) return url;
  if (hasUserinfo) {
    parsed.username = MASKED_HEADER_VALUE;
    if (parsed.password !== '') parsed.password = MASKED_HEADER_VALUE;
  }
  if (hidesValue) {
    parsed.search = pairs
      .map(({ spelled, name, value }) => (value ? `${name}=${MASKED_HEADER_VALUE}` : spelled))
      .join('&');
  }
  return parsed.href;
}

function storedTools(row: AgentRow): McpTool[] {
  return JSON.parse(row.tools) as McpTool[];
}

export function agentDetailView(row: AgentRow, runsOn: string) {
  return {
    ...agentView(row, runsOn),
    instructions: row.instructions,
    tools: storedTools(row).map((tool) => ({
      ...tool,
      url: maskedToolUrl(tool.url),
      ...(tool.headers && {
        headers: Object.fromEntries(Object.keys(tool.headers).map((name) => [name, MASKED_HEADER_VALUE])),
      }),
    })),
    orchestration: row.orchestration ? (JSON.parse(row.orchestration) as { agents: string[] }) : null,
    managedBy: row.managed_by,
  };
}

/** The model the agent runs on: its own when the workspace enables it, else the fallback. */
async function runsOnModel(deps: AgentAdminDeps, access: WorkspaceAccess, row: AgentRow) {
  const fallback = access.defaultModel ?? deps.models.builtInDefaultModelId();
  if (!row.model || row.model === fallback) return fallback;
  return (await enabledModelIds(deps.db, access.workspaceId, [row.model])).has(row.model)
    ? row.model
    : fallback;
}

/** The agent, when the caller may see it: members only listed agents; owners and admins all. */
async function visibleAgent(deps: AgentAdminDeps, principal: Principal, agentId: string) {
  const access = await accessAgentWorkspace(deps.db, principal, agentId);
  const row = await findLiveAgent(deps.db, agentId);
  if (!row || (row.visibility === 'private' && !isManager(access))) throw errors.notFound('Agent');
  return { access, row };
}

export async function getAgentDetail(deps: AgentAdminDeps, principal: Principal, agentId: string) {
  const { access, row } = await visibleAgent(deps, principal, agentId);
  return agentDetailView(row, await runsOnModel(deps, access, row));
}

async function checkModel(deps: AgentAdminDeps, access: WorkspaceAccess, model: string) {
  const fallback = access.defaultModel ?? deps.models.builtInDefaultModelId();
  if (model === fallback || (await enabledModelIds(deps.db, access.workspaceId, [model])).has(model)) return;
  throw errors.badRequest(`Model "${model}" is not enabled in this workspace`, [
    {
      path: 'body.model',
      message: 'must be a model enabled in the workspace (GET /v1/workspace/{id}/models)',
    },
  ]);
}

async function checkOrchestration(
  deps: AgentAdminDeps,
  workspaceId: string,
  selfId: string,
  agents: string[],
) {
  const live = await liveAgentIdsIn(deps.db, workspaceId, agents);
  agents.forEach((id, i) => {
    const problem =
      id === selfId
        ? 'an agent cannot lead itself'
        : live.has(id)
          ? undefined
          : `unknown agent "${id}" (must be an agent of the same workspace)`;
    if (problem) {
      throw errors.badRequest(`body.orchestration.agents.${i} ${problem}`, [
        { path: `body.orchestration.agents.${i}`, message: problem },
      ]);
    }
  });
}

async function checkTitle(deps: AgentAdminDeps, workspaceId: string, title: string, exceptId?: string) {
  if (await findLiveAgentByTitle(deps.db, workspaceId, title, exceptId)) {
    throw errors.conflict(`An agent titled "${title}" already exists in this workspace`, { field: 'title' });
  }
}

/** The image and tool names, by the rules the setup file holds them to (src/agent-fields.ts). */
function checkAgentFields(fields: Pick<AgentFields, 'image' | 'tools'>): void {
  const imageProblem = typeof fields.image === 'string' ? agentImageProblem(fields.image) : null;
  if (imageProblem) {
    throw errors.badRequest(`body.image ${imageProblem}`, [{ path: 'body.image', message: imageProblem }]);
  }
  const [duplicate] = duplicateToolNames(fields.tools ?? [], (t) => `body.tools.${t}`);
  if (duplicate) throw errors.badRequest(`${duplicate.path} ${duplicate.message}`, [duplicate]);
}

/**
 * An MCP server named by a private, loopback or link-local address is refused at once (400), unless
 * the operator allows such servers: connecting would refuse it anyway (src/models/tools/mcp-address.ts;
 * a name that resolves to such an address is refused when connecting, as a warning).
 */
function checkToolAddresses(deps: AgentAdminDeps, tools: McpTool[] | null | undefined): void {
  tools?.forEach((tool, t) => {
    const path = `body.tools.${t}.url`;
    // Any other scheme was reported as a private address, which it is not.
    const urlProblem = toolUrlProblem(tool.url);
    if (urlProblem) throw errors.badRequest(`${path} ${urlProblem}`, [{ path, message: urlProblem }]);
    if (deps.config.mcpAllowPrivateNetwork) return;
    const problem = privateAddressProblem(tool.url);
    if (!problem) return;
    const message = `${problem}: an agent made over the API may use only public MCP servers (the operator can allow private ones with ATRIUM_MCP_ALLOW_PRIVATE_NETWORK)`;
    throw errors.badRequest(`${path} ${message}`, [{ path, message }]);
  });
}

/** A header HTTP cannot send is refused (400): its server could never be called (toolHeaderProblem). */
function checkToolHeaders(tools: McpTool[] | null | undefined): void {
  tools?.forEach((tool, t) => {
    for (const [name, value] of Object.entries(tool.headers ?? {})) {
      const problem = toolHeaderProblem(name, value);
      if (!problem) continue;
      const path = `body.tools.${t}.headers.${name}`;
      throw errors.badRequest(`${path} ${problem}`, [{ path, message: problem }]);
    }
  });
}

/**
 * A tool sent back with its url as read (maskedToolUrl) keeps the stored url of the tool of that
 * name, so a read-modify-write does not overwrite the secret with the mask. A masked url that is
 * no stored tool's of that name, at another host or with a value changed, would hand the secret
 * to a server its sender chose (400); a new agent has nothing stored for the mask to stand for.
 * The url so resolved is the one held to the stored length (checkStoredUrlLength).
 */
function keepStoredToolUrls(incoming: McpTool[], stored: McpTool[]): McpTool[] {
  return incoming.map((tool, t) => {
    const same = stored.find((s) => s.name === tool.name && maskedToolUrl(s.url) === tool.url);
    const url = same ? same.url : unmaskedUrl(tool.url, t);
    checkStoredUrlLength(url, t);
    return { ...tool, url };
  });
}

/** A url that no stored one stands behind: refused when it holds the mask, else taken as sent. */
function unmaskedUrl(url: string, t: number): string {
  if (!hasMaskedPart(url)) return url;
  const path = `body.tools.${t}.url`;
  const problem = `has "${MASKED_HEADER_VALUE}" where the url as read hides a secret, which keeps the stored url only for a tool of the same name whose url reads so: send the full url`;
  throw errors.badRequest(`${path} ${problem}`, [{ path, message: problem }]);
}

/**
 * The schema takes a url up to MAX_MCP_URL_AS_READ_LENGTH, since a url as read is longer than the
 * one it stands for; the limit of what is stored holds here, once the mask is resolved.
 */
function checkStoredUrlLength(url: string, t: number): void {
  if (url.length <= MAX_MCP_URL_LENGTH) return;
  const path = `body.tools.${t}.url`;
  const problem = `is longer than the ${MAX_MCP_URL_LENGTH} characters stored for a tool url (its masked parts counted as stored): send a shorter url`;
  throw errors.badRequest(`${path} ${problem}`, [{ path, message: problem }]);
}

/**
 * Tools sent back as read (`"***"` for each header value) keep the stored values of those
 * headers, so a read-modify-write does not overwrite secrets with the mask. Only for the same
 * tool at the same URL: a masked value sent with another URL would send a secret its sender
 * cannot read to a server of their choosing, and one with nothing stored means nothing (400).
 */
function mergeToolHeaders(incoming: McpTool[], stored: McpTool[]): McpTool[] {
  return incoming.map((tool, t) => {
    if (!tool.headers) return tool;
    const same = stored.find((s) => s.name === tool.name && s.url === tool.url);
    const headers = Object.fromEntries(
      Object.entries(tool.headers).map(([name, value]) => {
        if (value !== MASKED_HEADER_VALUE) return [name, value];
        const kept = same?.headers?.[name];
        if (kept === undefined) {
          const path = `body.tools.${t}.headers.${name}`;
          const problem = `is "${MASKED_HEADER_VALUE}", which keeps a stored value only for the same tool name and url: send the value`;
          throw errors.badRequest(`${path} ${problem}`, [{ path, message: problem }]);
        }
        return [name, kept];
      }),
    );
    return { ...tool, headers };
  });
}

export async function createAgent(
  deps: AgentAdminDeps,
  access: WorkspaceAccess,
  input: AgentFields & { title: string },
) {
  requireManager(access);
  checkAgentFields(input);
  checkToolAddresses(deps, input.tools);
  checkToolHeaders(input.tools);
  // Nothing is stored yet: a url or header value as read (masked) is refused.
  const tools = input.tools && mergeToolHeaders(keepStoredToolUrls(input.tools, []), []);
  const id = newId('agt');
  const now = isoNow(deps.clock);
  const row: AgentRow = {
    id,
    workspace_id: access.workspaceId,
    title: input.title,
    description: input.description ?? '',
    image: input.image ?? '',
    category: input.category ?? '',
    visibility: input.visibility ?? 'workspace',
    model: input.model ?? null,
    instructions: input.instructions ?? '',
    tools: JSON.stringify(tools ?? []),
    orchestration: input.orchestration ? JSON.stringify(input.orchestration) : null,
    deleted_at: null,
    created_at: now,
    updated_at: now,
    managed_by: 'api',
  };
  // Checked and written under the workspace's lock: of requests racing for one title, one creates it.
  await withWorkspaceLocked(deps.db, access.workspaceId, async (trx) => {
    const inTrx = { ...deps, db: trx };
    await checkTitle(inTrx, access.workspaceId, input.title);
    if (input.model) await checkModel(inTrx, access, input.model);
    if (input.orchestration)
      await checkOrchestration(inTrx, access.workspaceId, id, input.orchestration.agents);
    await insertAgent(trx, row);
  });
  return agentDetailView(row, await runsOnModel(deps, access, row));
}

/** PATCH and DELETE: an owner or admin, on an agent the setup file does not manage. */
async function writableAgent(deps: AgentAdminDeps, principal: Principal, agentId: string) {
  const found = await visibleAgent(deps, principal, agentId);
  requireManager(found.access);
  if (found.row.managed_by === 'setup') throw errors.managedBySetup('This agent');
  return found;
}

/**
 * A PATCH's title meets the rule a new agent's does (the create schema's pattern), unless it is the
 * stored title sent back: one stored before the rule (with a tab, say) is kept, so that a client
 * that reads an agent and writes it back with another field changed is not refused.
 */
function checkChangedTitle(title: string | undefined, stored: string): void {
  if (title === undefined || title === stored || matchesPattern('oneLineName', title)) return;
  const { message } = PATTERNS.oneLineName;
  throw errors.badRequest(`body.title ${message}`, [{ path: 'body.title', message }]);
}

export async function patchAgent(
  deps: AgentAdminDeps,
  principal: Principal,
  agentId: string,
  patch: AgentFields,
) {
  const { access, row } = await writableAgent(deps, principal, agentId);
  checkChangedTitle(patch.title, row.title);
  checkAgentFields(patch);
  const changes: Partial<AgentRow> = {};
  if (patch.title !== undefined && patch.title !== row.title) changes.title = patch.title;
  if (patch.description !== undefined) changes.description = patch.description ?? '';
  if (patch.image !== undefined) changes.image = patch.image ?? '';
  if (patch.category !== undefined) changes.category = patch.category ?? '';
  if (patch.visibility !== undefined) changes.visibility = patch.visibility ?? 'workspace';
  if (patch.instructions !== undefined) changes.instructions = patch.instructions ?? '';
  if (patch.model !== undefined) {
    if (patch.model !== null && patch.model !== row.model) await checkModel(deps, access, patch.model);
    changes.model = patch.model;
  }
  if (patch.tools !== undefined) {
    checkToolAddresses(deps, patch.tools);
    checkToolHeaders(patch.tools);
    const stored = storedTools(row);
    // Urls first: the headers' merge compares the stored url with the one sent, un-masked.
    changes.tools = JSON.stringify(
      patch.tools ? mergeToolHeaders(keepStoredToolUrls(patch.tools, stored), stored) : [],
    );
  }
  if (patch.orchestration !== undefined) {
    if (patch.orchestration)
      await checkOrchestration(deps, access.workspaceId, row.id, patch.orchestration.agents);
    changes.orchestration = patch.orchestration ? JSON.stringify(patch.orchestration) : null;
  }
  changes.updated_at = isoNow(deps.clock);
  const { title } = changes;
  if (title === undefined) await updateAgent(deps.db, row.id, changes);
  else {
    // As in createAgent: the new title is checked and taken under the workspace's lock.
    await withWorkspaceLocked(deps.db, access.workspaceId, async (trx) => {
      await checkTitle({ ...deps, db: trx }, access.workspaceId, title, row.id);
      await updateAgent(trx, row.id, changes);
    });
  }
  const updated = { ...row, ...changes };
  return agentDetailView(updated, await runsOnModel(deps, access, updated));
}

/** Soft delete: the row stays for the chats and runs that name it, hidden from every route. */
export async function deleteAgent(deps: AgentAdminDeps, principal: Principal, agentId: string) {
  const { row } = await writableAgent(deps, principal, agentId);
  const now = isoNow(deps.clock);
  await updateAgent(deps.db, row.id, { deleted_at: now, updated_at: now });
}
