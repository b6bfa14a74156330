import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateToLatest } from '../../src/db/database.js';
import { createTestApp, engineName, migrateTestDatabaseTo } from '../helpers/app.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';

/**
 * Agents stored before the image rule (agent-fields.ts, agentImageProblem) may hold an image a
 * UI would run, such as a `javascript:` URL: 030-agent-unsafe-images clears each to `""` and
 * leaves every image the rule takes as it was.
 */
let t: Awaited<ReturnType<typeof createTestApp>>;
beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP });
});
afterAll(() => t.close());

const images: Record<string, [before: string, after: string]> = {
  agt_img_script: ['javascript:alert(document.cookie)', ''],
  agt_img_script_upper: ['JavaScript:alert(1)', ''],
  agt_img_vbscript: ['vbscript:msgbox(1)', ''],
  agt_img_spaced: [' https://example.com/a.png', ''],
  agt_img_not_url: ['https://', ''],
  agt_img_html: ['data:text/html,<script>alert(1)</script>', ''],
  agt_img_https: ['https://example.com/a.png', 'https://example.com/a.png'],
  agt_img_http: ['http://example.com/a.png', 'http://example.com/a.png'],
  agt_img_inline: ['data:image/png;base64,iVBORw0KGgo=', 'data:image/png;base64,iVBORw0KGgo='],
  agt_img_none: ['', ''],
};

describe(`clearing agents' unsafe images (${engineName})`, () => {
  it('clears every image the rule refuses and keeps the rest', async () => {
    await migrateTestDatabaseTo(t.env, '029-knowledge-fts-exact-statistics');
    const db = t.env.database.db;
    const now = new Date().toISOString();
    for (const [id, [image]] of Object.entries(images)) {
      await sql`insert into agents (id, workspace_id, title, title_sort_key, image, visibility, created_at, updated_at, managed_by)
        values (${id}, 'wsp_other', ${id}, ${id}, ${image}, 'workspace', ${now}, ${now}, 'api')`.execute(db);
    }
    await migrateToLatest(db, t.env.database.schema);
    const { rows } = await sql<{ id: string; image: string }>`
      select id, image from agents where id like 'agt_img_%'`.execute(db);
    const stored = Object.fromEntries(rows.map((row) => [row.id, row.image]));
    expect(stored).toEqual(Object.fromEntries(Object.entries(images).map(([id, [, after]]) => [id, after])));
  });
});
