import { existsSync, readdirSync, utimesSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { skillUploadRoot, sweepStaleUploads } from '../../src/http/skill-upload-spool.js';
import { LEFTOVER_GRACE_MS } from '../../src/leftovers.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { bulkUploadRequest, SKILLS_SETUP } from '../skills/fixtures.js';
import { buildZip, multipartBody, skillMd } from '../skills/zip-builder.js';

let t: Awaited<ReturnType<typeof createTestApp>>;
let base: string;
beforeAll(async () => {
  t = await createTestApp({ setup: SKILLS_SETUP });
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(() => t?.close());

describe(`the leftovers sweep and a skill upload still arriving (${engineName})`, () => {
  it('keeps the spool of an upload the body deadline still allows (over an hour at 8 KiB/s)', async () => {
    // 32 MiB at the documented minimum rate (8 KiB/s) takes 20 s + 4,096 s ≈ 68 minutes, which the
    // body deadline allows. Here the upload pauses mid-part, its spool directory is made to look
    // 61 minutes old (a directory's time is that of its last part's creation), and the sweep runs
    // while the part is being written.
    const zip = await buildZip([{ name: 'slow/SKILL.md', content: skillMd('slow', 'streamed slowly') }]);
    const { body, contentType } = multipartBody([
      { name: 'files', filename: 'slow.zip', contentType: 'application/zip', content: zip },
    ]);
    const cut = body.length - 60;
    const root = skillUploadRoot(t.env.config.dataDir);
    const { request, answer } = bulkUploadRequest(
      `${base}/v1/workspace/wsp_skills/skills/bulk-upload`,
      contentType,
    );
    request.write(body.subarray(0, cut));
    const spool = await spoolWithAPart(root);
    const started = new Date(Date.now() - 61 * 60 * 1000);
    utimesSync(spool, started, started);
    await sweepStaleUploads(root, LEFTOVER_GRACE_MS, new Date());
    request.end(body.subarray(cut));
    const { status, text } = await answer;
    expect(status, text).toBe(200);
    expect(JSON.parse(text).data.created.map((c: { name: string }) => c.name)).toEqual(['slow']);
  });
});

/** The upload's spool directory, once its first part is being written. */
async function spoolWithAPart(root: string): Promise<string> {
  for (let i = 0; i < 200; i++) {
    const dir = (existsSync(root) ? readdirSync(root) : []).find((name) => name.startsWith('req-'));
    if (dir && readdirSync(path.join(root, dir)).length > 0) return path.join(root, dir);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('no spool directory');
}
