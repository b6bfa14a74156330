import type { Db } from '../db/database.js';
import { applySetup } from '../setup/apply.js';
import type { SetupFile } from '../setup/validate.js';

/** The demo tenant that `atrium demo` (and `npm start` on an empty database) creates. */
export const DEMO_SETUP: SetupFile = {
  organizations: [
    {
      id: 'org_demo',
      name: 'Demo Organization',
      users: [{ id: 'usr_demo_owner', name: 'Demo Owner', email: 'owner@demo.atrium.local' }],
      workspaces: [
        {
          id: 'wsp_demo',
          name: 'Demo Workspace',
          models: ['atrium/echo'],
          defaultModel: 'atrium/echo',
          members: [{ user: 'usr_demo_owner', role: 'owner' }],
          apiKeys: [{ name: 'demo-owner', user: 'usr_demo_owner' }],
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

export async function createDemo(db: Db, now: Date) {
  const report = await applySetup(db, DEMO_SETUP, { now });
  return { key: report.keys['demo-owner'], workspaceId: 'wsp_demo', agentId: 'agt_demo_assistant' };
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
