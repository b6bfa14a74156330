import type { Db } from '../db/database.js';
import { applySetup } from '../setup/apply.js';
import type { SetupFile } from '../setup/validate.js';

const DEMO_WORKSPACE_ID = 'wsp_demo';
const DEMO_OWNER_ID = 'usr_demo_owner';

/** The demo tenant that `atrium demo` (and `npm start` on an empty database) creates. */
export const DEMO_SETUP: SetupFile = {
  organizations: [
    {
      id: 'org_demo',
      name: 'Demo Organization',
      users: [{ id: DEMO_OWNER_ID, name: 'Demo Owner', email: 'owner@demo.atrium.local' }],
      workspaces: [
        {
          id: DEMO_WORKSPACE_ID,
          name: 'Demo Workspace',
          models: ['atrium/echo'],
          defaultModel: 'atrium/echo',
          members: [{ user: DEMO_OWNER_ID, role: 'owner' }],
          apiKeys: [{ name: 'demo-owner', user: DEMO_OWNER_ID }],
          agents: [
            {
              id: 'agt_demo_assistant',
              title: 'Assistant',
              description: 'A general assistant (runs on the offline atrium/echo development model)',
              category: 'general',
              visibility: 'workspace',
              instructions: 'You are a helpful assistant for {{user.name}}.',
            },
            {
              id: 'agt_demo_writer',
              title: 'Writer',
              description: 'Drafts and edits text',
              category: 'writing',
              visibility: 'organization',
              instructions: 'You help write clear, short prose.',
            },
          ],
        },
      ],
    },
  ],
};

export async function hasAnyOrganization(db: Db): Promise<boolean> {
  const row = await db.selectFrom('organizations').select('id').limit(1).executeTakeFirst();
  return row !== undefined;
}

/** `signal`: see applySetup (aborted before the commit, no demo is made). */
export async function createDemo(db: Db, now: Date, signal?: AbortSignal) {
  const report = await applySetup(db, DEMO_SETUP, { now, signal });
  return { key: report.keys['demo-owner'], workspaceId: DEMO_WORKSPACE_ID, agentId: 'agt_demo_assistant' };
}

/**
 * A later start prints no key (the first one was shown once and is stored hashed): when the
 * demo workspace's owner is still there, say how to make a new key for it.
 */
export async function demoKeyHint(db: Db, dataDir?: string): Promise<string | undefined> {
  const owner = await db
    .selectFrom('workspace_members')
    .select('user_id')
    .where('workspace_id', '=', DEMO_WORKSPACE_ID)
    .where('user_id', '=', DEMO_OWNER_ID)
    .executeTakeFirst();
  if (!owner) return undefined;
  return [
    '',
    `Demo workspace: ${DEMO_WORKSPACE_ID} (its key was shown once, at the first start). To make a new key:`,
    // No --name: a key name must be unique among live keys, and this line is printed at every
    // start; the default name (`workspace-key-` and the id's end) never collides.
    // With the server's data dir when it was given one: without it, the command would open (and
    // create) ./data, where the demo workspace is not.
    `  ${dataDir ? `ATRIUM_DATA_DIR=${shellQuoted(dataDir)} ` : ''}./bin/atrium keys create --workspace ${DEMO_WORKSPACE_ID} --user ${DEMO_OWNER_ID}`,
    '',
  ].join('\n');
}

export function demoInstructions(baseUrl: string, key: string, headerName: string): string {
  return [
    '',
    'Atrium demo workspace created (models: atrium/echo, the offline development model).',
    `  workspace: wsp_demo`,
    `  API key (shown once, keep it): ${key}`,
    '',
    'Try it:',
    `  curl -s ${baseUrl}/v1/workspace/wsp_demo/agents -H '${headerName}: ${key}'`,
    `  curl -s ${baseUrl}/v1/chat -H '${headerName}: ${key}' -H 'content-type: application/json' \\`,
    `    -d '{"agentId":"agt_demo_assistant","messages":[{"role":"user","parts":[{"type":"text","text":"Hello"}]}]}'`,
    '',
  ].join('\n');
}

/** `text` as one shell word: as is when plain, else in single quotes. */
function shellQuoted(text: string): string {
  return /^[\w./:@%+=,-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\\''")}'`;
}
