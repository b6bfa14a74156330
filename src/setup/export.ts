import type { Kysely } from 'kysely';
import { liveAgentIdsIn } from '../db/repositories/agents.js';
import type { Database } from '../db/schema.js';
import { PROJECT_DEFAULTS } from '../services/projects.js';
import { matchesPattern } from '../http/schemas/patterns.js';
import { exactYaml } from './exact-yaml.js';
import { MAX_PROJECT_NAME_LENGTH } from '../limits.js';
import {
  type AgentSetup,
  MAX_ONE_LINE_NAME,
  type ProjectSetup,
  isSetupProjectName,
  type SetupFile,
} from './validate.js';

/** Leaves out what equals the setup file's default, so the export reads like a hand-written file. */
function withoutDefaults<T extends Record<string, unknown>>(value: T, defaults: Partial<T>): T {
  return Object.fromEntries(
    Object.entries(value).filter(
      ([key, v]) => v !== undefined && v !== null && (defaults as Record<string, unknown>)[key] !== v,
    ),
  ) as T;
}

/**
 * The workspace's API-managed agents and projects (projects from before ownership was recorded
 * included) in setup-file form, with ids, so that a file holding them takes them over with
 * `atrium apply --adopt`. Project memory is left out: it grows through the `remember` tool,
 * and a file that declares it would reset it on every apply. Undefined when the workspace
 * does not exist.
 */
export async function exportWorkspace(
  db: Kysely<Database>,
  workspaceId: string,
): Promise<SetupFile | undefined> {
  const workspace = await db
    .selectFrom('workspaces')
    .innerJoin('organizations', 'organizations.id', 'workspaces.organization_id')
    .select([
      'workspaces.id',
      'workspaces.name',
      'organizations.id as orgId',
      'organizations.name as orgName',
    ])
    .where('workspaces.id', '=', workspaceId)
    .executeTakeFirst();
  if (!workspace) return undefined;
  const agents = await db
    .selectFrom('agents')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('managed_by', '=', 'api')
    .where('deleted_at', 'is', null)
    .orderBy('title')
    .orderBy('id')
    .execute();
  const projects = await db
    .selectFrom('projects')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where((eb) => eb.or([eb('managed_by', '=', 'api'), eb('managed_by', 'is', null)]))
    .orderBy('name')
    .orderBy('id')
    .execute();

  // A sub-agent deleted after it was named stays in its lead's stored list (a chat skips it, with
  // a warning); named in the file, it would be an unknown agent there, and apply would refuse it.
  const subAgents = new Map<string, string[]>();
  for (const agent of agents) {
    const orchestration = JSON.parse(agent.orchestration ?? 'null') as AgentSetup['orchestration'];
    if (orchestration) subAgents.set(agent.id, orchestration.agents);
  }
  const liveSubAgents = await liveAgentIdsIn(db, workspaceId, [...subAgents.values()].flat());

  const agentSpecs = agents.map((agent) => {
    const tools = JSON.parse(agent.tools) as AgentSetup['tools'];
    const orchestrated = subAgents.get(agent.id);
    return withoutDefaults<AgentSetup>(
      {
        id: agent.id,
        title: agent.title,
        description: agent.description,
        image: agent.image,
        category: agent.category,
        visibility: agent.visibility,
        model: agent.model ?? undefined,
        instructions: agent.instructions,
        tools: tools && tools.length > 0 ? tools : undefined,
        orchestration: orchestrated && { agents: orchestrated.filter((id) => liveSubAgents.has(id)) },
      },
      { description: '', image: '', category: '', instructions: '' },
    );
  });
  const projectSpecs = projects.map((project) =>
    withoutDefaults<ProjectSetup>(
      {
        id: project.id,
        name: project.name,
        description: project.description,
        instructions: project.instructions,
        color: project.color,
        icon: project.icon,
        archived: project.archived === 1 ? true : undefined,
      },
      PROJECT_DEFAULTS,
    ),
  );
  return {
    organizations: [
      {
        id: workspace.orgId,
        name: workspace.orgName,
        workspaces: [
          {
            id: workspace.id,
            name: workspace.name,
            ...(agentSpecs.length > 0 && { agents: agentSpecs }),
            ...(projectSpecs.length > 0 && { projects: projectSpecs }),
          },
        ],
      },
    ],
  };
}

export function exportText(setup: SetupFile, workspaceId: string): string {
  const workspace = setup.organizations?.[0]?.workspaces?.[0];
  const header = [
    `# atrium export --workspace ${workspaceId}`,
    `# ${workspace?.agents?.length ?? 0} API-managed agent(s) and ${workspace?.projects?.length ?? 0} project(s).`,
    '# Move them into the workspace entry of your setup file, then run `atrium apply --adopt FILE`',
    '# once: the file becomes their manager. Tool urls and headers are exported as stored (secrets included).',
  ];
  // Printed as it is (not trimmed): a text's trailing newlines may end the document.
  return `${header.join('\n')}\n${exactYaml(setup)}`;
}

/**
 * What `apply` would refuse in an export: an agent title or a project name stored before the
 * rules for names (a tab, more than 100 characters, only marks) is exported as stored, and the
 * operator is told to edit it, rather than meet it as a problem of the file later.
 */
export function exportWarnings(setup: SetupFile): string[] {
  const workspace = setup.organizations?.[0]?.workspaces?.[0];
  const shown = (text: string) => JSON.stringify(text.length > 60 ? `${text.slice(0, 59)}…` : text);
  const agents = (workspace?.agents ?? []).flatMap((agent) => {
    const title = agent.title ?? '';
    if ([...title].length <= MAX_ONE_LINE_NAME && matchesPattern('oneLineName', title)) return [];
    return [
      `agent ${agent.id}: its title ${shown(title)} breaks the setup file's rule for names (at most ${MAX_ONE_LINE_NAME} characters, one line, a character that shows): edit it in the file before \`atrium apply\``,
    ];
  });
  const projects = (workspace?.projects ?? []).flatMap((project) => {
    const name = project.name ?? '';
    if (isSetupProjectName(name)) return [];
    return [
      `project ${project.id}: its name ${shown(name)} breaks the setup file's rule for project names (at most ${MAX_PROJECT_NAME_LENGTH} characters, one line, a character that shows, no white space at either end): edit it in the file before \`atrium apply\``,
    ];
  });
  return [...agents, ...projects];
}
