import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listWorkspaceSkills } from '../../src/db/repositories/skills.js';
import type { WorkspaceAccess } from '../../src/services/access.js';
import { type BulkUploadResult, bulkUploadSkills, type SkillServiceDeps } from '../../src/services/skills.js';
import { createObjectStore } from '../../src/storage/index.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { applyFixture, createTestEnv, engineName, type TestEnv } from '../helpers/app.js';
import { waitUntil } from '../helpers/wait-until.js';
import { SKILLS_SETUP } from './fixtures.js';
import { buildZip, skillMd } from './zip-builder.js';

const WS = 'wsp_skills';
const BEING_REPLACED = 'another upload is replacing this skill right now; upload again once it has finished';

/** The owner's workspace key, as the route resolves it. */
const OWNER: WorkspaceAccess = {
  principal: {
    keyId: 'key_owner',
    kind: 'workspace',
    organizationId: 'org_acme',
    workspaceId: WS,
    userId: 'usr_owner',
    rateLimitPerMinute: null,
    ownWorkspace: null,
    agentIds: null,
  },
  workspaceId: WS,
  organizationId: 'org_acme',
  role: 'owner',
  defaultModel: null,
};

describe(`the hold of a replace upload between processes (${engineName})`, () => {
  let env: TestEnv;
  let store: ObjectStore;
  let at: number;
  const clock = () => new Date(at);
  /** Puts of keys ending so wait until the test lets them go. */
  let held: { suffix: string; reached: () => void; until: Promise<void> } | undefined;
  let parts = 0;

  /** Writes wait while `held` says so; every other call goes to the real store. */
  const waitingStore = (): ObjectStore =>
    new Proxy(store, {
      get(target, property, receiver) {
        if (property === 'put') {
          return async (...args: Parameters<ObjectStore['put']>) => {
            const wait = held;
            if (wait && args[0].endsWith(wait.suffix)) {
              held = undefined;
              wait.reached();
              await wait.until;
            }
            return target.put(...args);
          };
        }
        const value = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });

  /** An uploading process on the test's database, storage and clock. */
  const process = (options: Partial<SkillServiceDeps> = {}): SkillServiceDeps => ({
    db: env.database.db,
    store: waitingStore(),
    clock,
    ...options,
  });

  /** Holds the next put of a key ending in `suffix`: resolves once it is reached, with its release. */
  function holdNextPut(suffix: string): { reached: Promise<void>; release: () => void } {
    let reached!: () => void;
    let release!: () => void;
    const reachedPromise = new Promise<void>((resolve) => (reached = resolve));
    const until = new Promise<void>((resolve) => (release = resolve));
    held = { suffix, reached, until };
    return { reached: reachedPromise, release };
  }

  /** The `twice` skill with `files` (name → content) besides its SKILL.md. */
  async function version(
    uploader: SkillServiceDeps,
    description: string,
    files: Record<string, string>,
    mode: 'create' | 'replace' = 'replace',
  ): Promise<BulkUploadResult> {
    const zip = await buildZip([
      { name: 'twice/SKILL.md', content: skillMd('twice', description) },
      ...Object.entries(files).map(([name, content]) => ({ name: `twice/${name}`, content })),
    ]);
    const file = path.join(env.root, `part-${parts++}.zip`);
    await writeFile(file, zip);
    return bulkUploadSkills(uploader, OWNER, {
      parts: [{ filename: 'twice.zip', contentType: 'application/zip', path: file, size: zip.length }],
      visibility: 'workspace',
      mode,
    });
  }

  const skill = async () =>
    (await listWorkspaceSkills(env.database.db, WS)).find((row) => row.name === 'twice')!;
  const hold = () => env.database.db.selectFrom('skill_replacements').selectAll().executeTakeFirstOrThrow();
  async function files(): Promise<Record<string, string>> {
    const prefix = (await skill()).storage_path;
    const found: Record<string, string> = {};
    for await (const object of store.list(prefix)) {
      const body = await store.get(object.key);
      const chunks: Buffer[] = [];
      for await (const chunk of body!.body) chunks.push(chunk as Buffer);
      found[object.key.slice(prefix.length)] = Buffer.concat(chunks).toString('utf8');
    }
    return found;
  }
  const names = (skills: Array<{ name: string }> | undefined) => skills?.map((s) => s.name);

  beforeEach(async () => {
    at = Date.parse('2026-12-01T10:00:00.000Z');
    env = await createTestEnv();
    await applyFixture(env, SKILLS_SETUP);
    store = createObjectStore(env.config);
    held = undefined;
    const created = await version(process(), 'v1', { 'old.txt': 'old of v1' }, 'create');
    expect(names(created.created)).toEqual(['twice']);
  });

  afterEach(async () => {
    await env.close();
  });

  it('a killed replace holds its skill for the short hold, not for 10 minutes', async () => {
    // Its write never ends and it never renews nor releases: the process is gone.
    const write = holdNextPut('/new.txt');
    const killed = version(process(), 'v2', { 'new.txt': 'new of v2' });
    await write.reached;
    expect(await hold()).toMatchObject({ expires_at: new Date(at + 30_000).toISOString() });

    at += 29_000;
    const refused = await version(process(), 'v3', {});
    expect(refused.skipped).toEqual([{ name: 'twice', file: 'twice.zip', reason: BEING_REPLACED }]);

    at += 2_000;
    const taking = await version(process(), 'v3', {});
    expect(names(taking.updated)).toEqual(['twice']);
    expect((await skill()).description).toBe('v3');

    // (Had it come back, it would not commit over v3: see the test below.)
    write.release();
    expect((await killed).skipped).toEqual([{ name: 'twice', file: 'twice.zip', reason: BEING_REPLACED }]);
  });

  it('a healthy replace whose upload outlasts the hold renews it, and no other replace takes the skill', async () => {
    const write = holdNextPut('/new.txt');
    const owner = version(process({ replaceHoldMs: 300 }), 'v2', { 'new.txt': 'new of v2' });
    await write.reached;

    // The upload has lasted longer than the hold: its renewal moves the hold on.
    at += 1_000;
    const renewed = new Date(at + 300).toISOString();
    await waitUntil(async () => (await hold()).expires_at === renewed, 'the hold renewed');
    const refused = await version(process({ replaceHoldMs: 300 }), 'v3', {});
    expect(refused.skipped).toEqual([{ name: 'twice', file: 'twice.zip', reason: BEING_REPLACED }]);

    write.release();
    expect(names((await owner).updated)).toEqual(['twice']);
    expect((await skill()).description).toBe('v2');
    expect(await files()).toEqual({ 'SKILL.md': skillMd('twice', 'v2'), 'new.txt': 'new of v2' });
    expect(await env.database.db.selectFrom('skill_replacements').selectAll().execute()).toEqual([]);
  });

  it("a replace whose hold was taken while it wrote commits nothing over the other's version", async () => {
    const write = holdNextPut('/new.txt');
    const stalled = version(process(), 'v2', { 'new.txt': 'new of v2' });
    await write.reached;

    // It stalled (its renewals did not run) past its hold, whatever its length.
    at += 11 * 60_000;
    const taking = await version(process(), 'v3', { 'old.txt': 'old of v3' });
    expect(names(taking.updated)).toEqual(['twice']);

    write.release();
    const result = await stalled;
    expect(result.updated).toEqual([]);
    expect(result.skipped).toEqual([{ name: 'twice', file: 'twice.zip', reason: BEING_REPLACED }]);
    // v3's row stands, and its old.txt (stale for v2, listed from v1) is not removed.
    expect((await skill()).description).toBe('v3');
    expect((await files())['old.txt']).toBe('old of v3');
    // Nor does it free the hold it no longer has (v3's was released by v3 itself).
    expect(await env.database.db.selectFrom('skill_replacements').selectAll().execute()).toEqual([]);
  });

  it('a replace whose renewal finds the hold taken gives the skill up', async () => {
    const write = holdNextPut('/new.txt');
    const owner = version(process({ replaceHoldMs: 300 }), 'v2', { 'new.txt': 'new of v2' });
    await write.reached;

    // Another process whose clock is a minute on sees the hold lapsed (as after a stall).
    const otherWrite = holdNextPut('/SKILL.md');
    const other = version({ ...process(), clock: () => new Date(at + 60_000) }, 'v3', {});
    await otherWrite.reached;
    const taken = (await hold()).holder;
    // The owner's renewals find the hold another's, and leave it so.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await hold()).holder).toBe(taken);
    write.release();
    expect((await owner).skipped).toEqual([{ name: 'twice', file: 'twice.zip', reason: BEING_REPLACED }]);
    expect((await hold()).holder).toBe(taken);

    otherWrite.release();
    expect(names((await other).updated)).toEqual(['twice']);
    expect((await skill()).description).toBe('v3');
  });
});
