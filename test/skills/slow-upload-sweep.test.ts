import { readdirSync, utimesSync } from 'node:fs';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { skillUploadRoot, sweepStaleUploads } from '../../src/http/skill-upload-spool.js';
import { LEFTOVER_GRACE_MS } from '../../src/leftovers.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { SKILL_KEYS, SKILLS_SETUP } from '../skills/fixtures.js';
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
    const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
      const request = http.request(
        `${base}/v1/workspace/wsp_skills/skills/bulk-upload`,
        { method: 'POST', headers: { 'x-service-api-key': SKILL_KEYS.owner, 'content-type': contentType } },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () =>
            resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString() }),
          );
        },
      );
      request.on('error', reject);
      request.write(body.subarray(0, cut));
      const waitForSpool = async () => {
        for (let i = 0; i < 200; i++) {
          const dirs = (() => {
            try {
              return readdirSync(root).filter((name) => name.startsWith('req-'));
            } catch {
              return [];
            }
          })();
          if (dirs.length > 0 && readdirSync(`${root}/${dirs[0]}`).length > 0) return `${root}/${dirs[0]}`;
          await new Promise((r) => setTimeout(r, 10));
        }
        throw new Error('no spool directory');
      };
      void waitForSpool().then(async (spool) => {
        const started = new Date(Date.now() - 61 * 60 * 1000);
        utimesSync(spool, started, started);
        await sweepStaleUploads(root, LEFTOVER_GRACE_MS, new Date());
        request.end(body.subarray(cut));
      }, reject);
    });
    const { status, text } = await answer;
    expect(status, text).toBe(200);
    expect(JSON.parse(text).data.created.map((c: { name: string }) => c.name)).toEqual(['slow']);
  });
});
