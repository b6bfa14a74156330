import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listWorkspaceSkills } from '../../src/db/repositories/skills.js';
import { systemClock } from '../../src/ids.js';
import { getSkillDetail } from '../../src/services/skill-admin.js';
import {
  type BulkUploadResult,
  bulkUploadSkills,
  type SkillServiceDeps,
  sweepOrphanSkillObjects,
} from '../../src/services/skills.js';
import { createObjectStore } from '../../src/storage/index.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { S3ObjectStore } from '../../src/storage/s3-store.js';
import { applyFixture, createTestEnv, engineName, type TestEnv } from '../helpers/app.js';
import { waitUntil } from '../helpers/wait-until.js';
import { startS3rver } from '../project-files/s3rver.js';
import { SKILLS_OWNER, SKILLS_SETUP } from './fixtures.js';
import { buildZip, skillMd } from './zip-builder.js';

const WS = 'wsp_skills';
const BEING_REPLACED = 'another upload is replacing this skill right now; upload again once it has finished';

/** The owner's workspace key, as the route resolves it. */
const OWNER = SKILLS_OWNER;

/**
 * `db`, whose first query selecting from `table` runs `after` once its rows are read, before its
 * caller gets them (another request's work landing between two of the caller's queries).
 */
function withHook<T extends object>(db: T, table: string, after: () => Promise<void>): T {
  const wrap = <U extends object>(target: U, hooked: boolean): U =>
    new Proxy(target, {
      get(object, property, receiver) {
        const value = Reflect.get(object, property, receiver) as unknown;
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          const result = (value as (...a: unknown[]) => unknown).apply(object, args);
          if (property === 'execute' && hooked) {
            return (result as Promise<unknown>).then(async (rows) => {
              await after();
              return rows;
            });
          }
          const hooks = hooked || (property === 'selectFrom' && args[0] === table);
          return result !== null && typeof result === 'object' && !(result instanceof Promise)
            ? wrap(result, hooks)
            : result;
        };
      },
    });
  return wrap(db, false);
}

/** The stores a replace's folders must work on: local files, and S3 (on s3rver). */
const STORES = ['fs', 's3'] as const;

describe.each(STORES)(
  `the hold of a replace upload between processes (${engineName}, %s storage)`,
  (kind) => {
    let env: TestEnv;
    let store: ObjectStore;
    let s3: Awaited<ReturnType<typeof startS3rver>> | undefined;
    let at: number;
    const clock = () => new Date(at);
    /** Puts of keys ending so wait until the test lets them go. */
    let held: { suffix: string; reached: () => void; until: Promise<void> } | undefined;
    let parts = 0;
    /** Keys whose put has finished, in order. */
    let stored: string[] = [];

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
              const info = await target.put(...args);
              stored.push(args[0]);
              return info;
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
    /** The skill's folder, its `storagePath` in the API whatever version it is at. */
    const root = async () => `skills/${WS}/${(await skill()).id}/`;
    /** The files of the version the row names (in the skill's folder, leaving out version folders). */
    async function files(): Promise<Record<string, string>> {
      const prefix = (await skill()).storage_path;
      const inRoot = prefix === (await root());
      const found: Record<string, string> = {};
      for await (const object of store.list(prefix)) {
        if (inRoot && object.key.slice(prefix.length).startsWith('.atrium-version-')) continue;
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
      s3 = kind === 's3' ? await startS3rver() : undefined;
      store = s3 ? new S3ObjectStore(s3.config, { clock: systemClock }) : createObjectStore(env.config);
      held = undefined;
      stored = [];
      const created = await version(process(), 'v1', { 'old.txt': 'old of v1' }, 'create');
      expect(names(created.created)).toEqual(['twice']);
    });

    afterEach(async () => {
      await env.close();
      await s3?.close();
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
      // The owner's files are written side by side: its SKILL.md must be stored before the next
      // SKILL.md put is held, or that put would be the owner's, not the other's.
      await waitUntil(
        async () => stored.some((key) => key.includes('/.atrium-version-') && key.endsWith('/SKILL.md')),
        "the owner's SKILL.md stored",
      );

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

    /** The skill as `GET /v1/skills/{id}` answers it to the owner, read through `reader`'s store. */
    const detail = async (reader: ObjectStore = store) =>
      getSkillDetail({ db: env.database.db, store: reader }, OWNER.principal, (await skill()).id);
    const sizes = (files: Record<string, string>) =>
      Object.entries(files)
        .map(([name, content]) => ({ path: name, sizeBytes: Buffer.byteLength(content) }))
        .sort((a, b) => (a.path < b.path ? -1 : 1));

    // The loser's write that was under way when it stalled lands after the winner's commit: into
    // the one shared folder, that was a file of v2 among v3's (`new.txt`), or v2's SKILL.md over
    // v3's own.
    for (const late of ['new.txt', 'SKILL.md']) {
      it(`two racing replaces, the first losing its hold: the skill has the winner's files only (late ${late})`, async () => {
        const write = holdNextPut(`/${late}`);
        const stalled = version(process(), 'v2 stalled', {
          'new.txt': 'new of v2',
          'more.txt': 'more of v2',
        });
        await write.reached;

        at += 11 * 60_000;
        const taking = await version(process(), 'v3', { 'old.txt': 'old of v3' });
        expect(names(taking.updated)).toEqual(['twice']);

        write.release();
        expect((await stalled).skipped).toEqual([
          { name: 'twice', file: 'twice.zip', reason: BEING_REPLACED },
        ]);
        const v3 = { 'SKILL.md': skillMd('twice', 'v3'), 'old.txt': 'old of v3' };
        expect((await skill()).description).toBe('v3');
        expect(await files()).toEqual(v3);
        expect((await detail()).files).toEqual(sizes(v3));
        // Nothing of v1 or of the loser is left anywhere in storage: only v3's version folder,
        // inside the skill's folder.
        const all: string[] = [];
        for await (const object of store.list(`skills/${WS}/`)) all.push(object.key);
        const prefix = (await skill()).storage_path;
        expect(prefix).toMatch(new RegExp(`^${await root()}\\.atrium-version-[\\w-]{12}/$`));
        expect(all.filter((key) => !key.startsWith(prefix))).toEqual([]);
        expect((await detail()).storagePath).toBe(await root());
      });
    }

    it('a replace whose skill is deleted while it writes skips it as deleted, not as a name taken', async () => {
      const write = holdNextPut('/new.txt');
      const replacing = version(process(), 'v2', { 'new.txt': 'new of v2' });
      await write.reached;
      // DELETE /v1/skills/{id} removes the row first (skill-admin.ts).
      await env.database.db
        .deleteFrom('skills')
        .where('id', '=', (await skill()).id)
        .execute();
      write.release();
      const result = await replacing;
      expect(result.updated ?? []).toEqual([]);
      // Before, it said "a skill with this name already exists in the workspace": none does.
      expect(result.skipped).toEqual([
        {
          name: 'twice',
          file: 'twice.zip',
          reason: 'the skill was deleted while this upload replaced it; upload it again to create it',
        },
      ]);
      expect(await listWorkspaceSkills(env.database.db, WS)).toEqual([]);
    });

    it('a reader sees the previous version whole while a replace writes, then the new one whole', async () => {
      const v1 = { 'SKILL.md': skillMd('twice', 'v1'), 'old.txt': 'old of v1' };
      stored = [];
      const write = holdNextPut('/new.txt');
      const replacing = version(process(), 'v2, a longer description', { 'new.txt': 'new of v2' });
      await write.reached;
      await waitUntil(() => stored.some((key) => key.endsWith('/SKILL.md')), "v2's SKILL.md written");
      // v2's SKILL.md is written, its new.txt not yet: the reader still gets v1, all of it.
      expect((await detail()).files).toEqual(sizes(v1));
      expect(await files()).toEqual(v1);
      write.release();
      expect(names((await replacing).updated)).toEqual(['twice']);
      const v2 = { 'SKILL.md': skillMd('twice', 'v2, a longer description'), 'new.txt': 'new of v2' };
      expect((await detail()).files).toEqual(sizes(v2));
      expect(await files()).toEqual(v2);
    });

    it('a reader whose listing began before a replace committed lists the new version, not a removed folder', async () => {
      const { storage_path: before } = await skill();
      let listing: { reached: () => void; until: Promise<void> } | undefined;
      let release!: () => void;
      const reached = new Promise<void>((resolve) => {
        listing = { reached: resolve, until: new Promise<void>((done) => (release = done)) };
      });
      // The reader's first listing waits (as on a slow S3) until the replace has committed and
      // removed the folder the reader found in the row.
      const slowLister: ObjectStore = new Proxy(store, {
        get(target, property, receiver) {
          if (property === 'list') {
            return async function* (prefix: string) {
              const wait = listing;
              if (wait && prefix === before) {
                listing = undefined;
                wait.reached();
                await wait.until;
              }
              yield* target.list(prefix);
            };
          }
          const value = Reflect.get(target, property, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      const reading = detail(slowLister);
      await reached;
      const replaced = await version(process(), 'v2, a longer description', { 'new.txt': 'new of v2' });
      expect(names(replaced.updated)).toEqual(['twice']);
      release();
      const read = await reading;
      const v2 = { 'SKILL.md': skillMd('twice', 'v2, a longer description'), 'new.txt': 'new of v2' };
      expect(read.files).toEqual(sizes(v2));
      expect(read.description).toBe('v2, a longer description');
      expect(read.storagePath).toBe(await root());
    });

    /**
     * A replace of v2 two hours on (its files look old to a sweep run then), held at its new.txt
     * once its SKILL.md and more.txt are written in its version folder: it still holds the skill.
     */
    async function replaceHeldAtNewTxt() {
      const { id } = await skill();
      at = Date.now() + 2 * 60 * 60 * 1000;
      stored = [];
      const write = holdNextPut('/new.txt');
      const replacing = version(process(), 'v2', { 'new.txt': 'new of v2', 'more.txt': 'more of v2' });
      await write.reached;
      const written = (name: string) =>
        stored.some(
          (key) => key.endsWith(`/${name}`) && key.startsWith(`skills/${WS}/${id}/.atrium-version-`),
        );
      await waitUntil(() => written('SKILL.md') && written('more.txt'), "v2's first files written");
      return { write, replacing };
    }
    const v2Files = () => ({
      'SKILL.md': skillMd('twice', 'v2'),
      'new.txt': 'new of v2',
      'more.txt': 'more of v2',
    });

    it('a replace still writing keeps its folder from the sweep, however old its files look', async () => {
      const { write, replacing } = await replaceHeldAtNewTxt();
      expect(
        await sweepOrphanSkillObjects(env.database.db, store, new Date(at), { warn: () => undefined }),
      ).toBe(0);
      write.release();
      expect(names((await replacing).updated)).toEqual(['twice']);
      expect(await files()).toEqual(v2Files());
    });

    it('a replace committing while the sweep reads the skills keeps its version folder', async () => {
      // The replace commits, removes v1 and lets its hold go right after the sweep has read
      // which folder the row names.
      const { write, replacing } = await replaceHeldAtNewTxt();
      let committed = false;
      const afterSkillsRead = async () => {
        if (committed) return;
        committed = true;
        write.release();
        expect(names((await replacing).updated)).toEqual(['twice']);
      };
      const log = { warn: () => undefined };
      expect(
        await sweepOrphanSkillObjects(
          withHook(env.database.db, 'skills', afterSkillsRead),
          store,
          new Date(at),
          log,
        ),
      ).toBe(0);
      expect(committed).toBe(true);
      expect(await files()).toEqual(v2Files());
    });

    /**
     * A sweep now removes nothing (a crashed replace's folder is new), one two hours on removes that
     * one folder: the keys left in the workspace's skills folder, sorted.
     */
    async function sweptOnceOld(): Promise<string[]> {
      const log = { warn: () => undefined };
      expect(await sweepOrphanSkillObjects(env.database.db, store, new Date(), log)).toBe(0);
      const inTwoHours = new Date(Date.now() + 2 * 60 * 60 * 1000);
      expect(await sweepOrphanSkillObjects(env.database.db, store, inTwoHours, log)).toBe(1);
      const left: string[] = [];
      for await (const object of store.list(`skills/${WS}/`)) left.push(object.key);
      return left.sort();
    }

    it('the folder of a replace that crashed before its commit is swept once old; the current one stays', async () => {
      const { id } = await skill();
      // A replace wrote its folder and the process died before its commit (no row points there).
      const crashed = `skills/${WS}/${id}/.atrium-version-crashed/`;
      await store.put(`${crashed}SKILL.md`, Readable.from([Buffer.from(skillMd('twice', 'v9'))]), {
        contentType: 'text/markdown',
      });
      expect(names((await version(process(), 'v2', { 'new.txt': 'new of v2' })).updated)).toEqual(['twice']);
      const current = (await skill()).storage_path;
      expect(current).not.toBe(crashed);
      expect(await sweptOnceOld()).toEqual([`${current}SKILL.md`, `${current}new.txt`]);
      expect(await files()).toEqual({ 'SKILL.md': skillMd('twice', 'v2'), 'new.txt': 'new of v2' });
    });

    it('a crashed replace of a never-replaced skill: its version folder is not read as the skill’s, and is swept', async () => {
      const { id, storage_path: current } = await skill();
      expect(current).toBe(await root());
      // The row names the skill's folder itself; the crashed replace's folder lies inside it.
      const crashed = `${current}.atrium-version-crashed/`;
      await store.put(`${crashed}SKILL.md`, Readable.from([Buffer.from(skillMd('twice', 'v9'))]), {
        contentType: 'text/markdown',
      });
      const v1 = { 'SKILL.md': skillMd('twice', 'v1'), 'old.txt': 'old of v1' };
      expect((await detail()).files).toEqual(sizes(v1));
      expect(await sweptOnceOld()).toEqual([`skills/${WS}/${id}/SKILL.md`, `skills/${WS}/${id}/old.txt`]);
      expect(await files()).toEqual(v1);
    });

    it('storagePath stays the skill’s folder across replaces; each version is written inside it', async () => {
      const { id } = await skill();
      const folder = `skills/${WS}/${id}/`;
      expect((await detail()).storagePath).toBe(folder);
      for (const description of ['v2', 'v3']) {
        const result = await version(process(), description, { [`${description}.txt`]: description });
        expect(result.updated).toEqual([{ id, name: 'twice', storagePath: folder }]);
        expect((await skill()).storage_path).toMatch(new RegExp(`^${folder}\\.atrium-version-[\\w-]{12}/$`));
        expect((await detail()).storagePath).toBe(folder);
        // Every object of the skill is inside its folder, and only the current version is left.
        const all: string[] = [];
        for await (const object of store.list(`skills/${WS}/`)) all.push(object.key);
        const current = (await skill()).storage_path;
        expect(all.sort()).toEqual([`${current}SKILL.md`, `${current}${description}.txt`]);
      }
    });
  },
);
