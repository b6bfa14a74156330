import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { engineName } from '../helpers/app.js';
import { type ServeCluster, startServeCluster } from '../helpers/serve-processes.js';
import { SKILL_KEYS, SKILLS_SETUP } from './fixtures.js';
import { multipartBody, skillMd } from './zip-builder.js';

const WS = 'wsp_skills';
/** Enough rounds that, before the fix, PostgreSQL deadlocked in nearly every run. */
const ROUNDS = 6;
const NAMES_PER_UPLOAD = 12;

let cluster: ServeCluster;
beforeAll(async () => {
  cluster = await startServeCluster({ processes: 2, setup: SKILLS_SETUP });
}, 150_000);
afterAll(async () => {
  await cluster?.close();
});

interface UploadBody {
  created: { name: string }[];
  skipped: { name: string; reason: string }[];
  errors: unknown[];
}

/** One bulk upload of standalone markdown skills, named in the order given. */
async function upload(baseUrl: string, names: string[]): Promise<{ status: number; body: UploadBody }> {
  const { body, contentType } = multipartBody(
    names.map((name) => ({
      name: 'files',
      filename: `${name}.md`,
      contentType: 'text/markdown',
      content: skillMd(name, `Skill ${name}`),
    })),
  );
  const response = await fetch(`${baseUrl}/v1/workspace/${WS}/skills/bulk-upload`, {
    method: 'POST',
    headers: { 'x-service-api-key': SKILL_KEYS.owner, 'content-type': contentType },
    body,
  });
  const json = (await response.json()) as { data?: UploadBody };
  return { status: response.status, body: json.data ?? (json as UploadBody) };
}

describe(`concurrent skill uploads through two atrium serve processes (${engineName})`, () => {
  it('uploads sharing names in opposite order all answer 200, each name created once and skipped elsewhere', async () => {
    const [first, second] = cluster.servers;
    const statuses: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const names = Array.from(
        { length: NAMES_PER_UPLOAD },
        (_, i) => `race-${round}-${String(i).padStart(2, '0')}`,
      );
      const reversed = [...names].reverse();
      const results = await Promise.all([
        upload(first!.url, names),
        upload(second!.url, reversed),
        upload(first!.url, reversed),
        upload(second!.url, names),
      ]);
      statuses.push(...results.map((result) => result.status));
      for (const result of results) {
        expect(result.status, JSON.stringify(result.body)).toBe(200);
        expect(result.body.errors).toEqual([]);
      }
      // Every name is created by exactly one request and reported skipped by the three others.
      for (const name of names) {
        const creators = results.filter((result) => result.body.created.some((skill) => skill.name === name));
        const skippers = results.filter((result) => result.body.skipped.some((skill) => skill.name === name));
        expect(creators, name).toHaveLength(1);
        expect(skippers, name).toHaveLength(3);
      }
    }
    expect(statuses.every((status) => status === 200)).toBe(true);

    const listed = await fetch(`${first!.url}/v1/workspace/${WS}/skills?limit=100`, {
      headers: { 'x-service-api-key': SKILL_KEYS.owner },
    });
    const list = (await listed.json()) as { data: { pagination: { total: number } } };
    expect(list.data.pagination.total).toBe(ROUNDS * NAMES_PER_UPLOAD);
  });
});
