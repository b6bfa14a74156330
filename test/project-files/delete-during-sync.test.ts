import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { createObjectStore } from '../../src/storage/index.js';
import type { ObjectInfo, ObjectStore } from '../../src/storage/object-store.js';
import { filesApi, injectable } from './helpers.js';

type Gate = { opened: Promise<void>; open: () => void; reached: () => void };

/**
 * The fs store, whose `list` can be held open after it has listed everything: a sync then sits
 * between reading storage and reading the records, for as long as the test wants. A `head` of
 * one key can be held too: a sync looks at a new object so while it holds the project's lock.
 */
class GatedListStore {
  private gate: Gate | undefined;
  private headGate: (Gate & { key: string }) | undefined;

  constructor(readonly inner: ObjectStore) {}

  /** The next `list` stops after its last object; resolves once it got there. */
  holdNextList(): { reached: Promise<void>; release: () => void } {
    let open!: () => void;
    let reached!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    const reachedPromise = new Promise<void>((resolve) => (reached = resolve));
    this.gate = { opened, open, reached };
    return { reached: reachedPromise, release: open };
  }

  /** The next `head` of `key` waits until released; resolves once it got there. */
  holdHead(key: string): { reached: Promise<void>; release: () => void } {
    const hold = this.holdNextList();
    this.headGate = { ...this.gate!, key };
    this.gate = undefined;
    return hold;
  }

  store(): ObjectStore {
    const inner = this.inner;
    return new Proxy(inner, {
      get: (target, property, receiver) => {
        if (property === 'list') return (prefix: string) => this.gatedList(prefix);
        if (property === 'head') return (key: string, listed?: ObjectInfo) => this.gatedHead(key, listed);
        const value = Reflect.get(target, property, receiver) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  }

  private async gatedHead(key: string, listed?: ObjectInfo) {
    const gate = this.headGate;
    if (gate?.key === key) {
      this.headGate = undefined;
      gate.reached();
      await gate.opened;
    }
    return this.inner.head(key, listed);
  }

  private async *gatedList(prefix: string): AsyncIterable<ObjectInfo> {
    const gate = this.gate;
    this.gate = undefined;
    yield* this.inner.list(prefix);
    if (gate) {
      gate.reached();
      await gate.opened;
    }
  }
}

let t: Awaited<ReturnType<typeof createTestApp>>;
let gated: GatedListStore;
beforeAll(async () => {
  t = await createTestApp({
    setup: TENANCY_SETUP,
    store: (config) => {
      gated = new GatedListStore(createObjectStore(config));
      return gated.store();
    },
  });
});
afterAll(() => t?.close());

async function newProject(name: string): Promise<string> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/v1/projects',
    headers: { 'x-service-api-key': KEYS.mainOwner },
    payload: { name },
  });
  return res.json().data.project.id;
}

const putObject = (projectId: string, filePath: string, content: string) =>
  gated.inner.put(`projects/wsp_main/${projectId}/${filePath}`, Readable.from([Buffer.from(content)]), {
    contentType: 'text/plain',
  });

type FileView = { id: string; path: string };
const files = async (projectId: string): Promise<FileView[]> =>
  (await filesApi(t.app, projectId).list()).json().data.files;

describe(`a delete that lands while a sync is under way (${engineName})`, () => {
  it('a file deleted after the sync listed storage is not registered again', async () => {
    const projectId = await newProject('Deleted mid-sync');
    const api = filesApi(t.app, projectId);
    await putObject(projectId, 'gone.txt', 'soon deleted');
    await putObject(projectId, 'kept.txt', 'stays');
    expect((await api.sync()).statusCode).toBe(200);
    const gone = (await files(projectId)).find((file) => file.path === 'gone.txt')!;

    const hold = gated.holdNextList();
    const slowSync = api.sync();
    await hold.reached;
    expect((await api.remove(gone.id)).statusCode).toBe(200);
    hold.release();
    const synced = await slowSync;

    expect(synced.statusCode).toBe(200);
    expect(synced.json().data).toEqual({ added: 0, removed: 0, updated: 0 });
    expect((await files(projectId)).map((file) => file.path)).toEqual(['kept.txt']);
  });

  it('a file another sync registered and a delete removed while this sync listed stays deleted', async () => {
    const projectId = await newProject('Registered and deleted mid-sync');
    const api = filesApi(t.app, projectId);
    await putObject(projectId, 'brief.txt', 'short-lived');

    const hold = gated.holdNextList();
    const slowSync = api.sync();
    await hold.reached;
    expect((await api.sync()).json().data).toEqual({ added: 1, removed: 0, updated: 0 });
    const [registered] = await files(projectId);
    expect((await api.remove(registered!.id)).statusCode).toBe(200);
    hold.release();

    expect((await slowSync).json().data).toEqual({ added: 0, removed: 0, updated: 0 });
    expect(await files(projectId)).toEqual([]);
  });

  it('an object uploaded after the sync listed storage is left to the next sync', async () => {
    const projectId = await newProject('Uploaded mid-sync');
    const api = filesApi(t.app, projectId);
    await putObject(projectId, 'first.txt', 'one');

    const hold = gated.holdNextList();
    const slowSync = api.sync();
    await hold.reached;
    await putObject(projectId, 'late.txt', 'two');
    hold.release();
    expect((await slowSync).json().data).toEqual({ added: 1, removed: 0, updated: 0 });
    expect((await api.sync()).json().data).toEqual({ added: 1, removed: 0, updated: 0 });
    expect((await files(projectId)).map((file) => file.path).sort()).toEqual(['first.txt', 'late.txt']);
  });
});

describe(`a sync that listed storage before a replacement another sync recorded (${engineName})`, () => {
  it('does not put the record back to the version storage no longer holds', async () => {
    const projectId = await newProject('Replaced mid-sync');
    const api = filesApi(t.app, projectId);
    await putObject(projectId, 'doc.txt', 'version one');
    expect((await api.sync()).json().data).toEqual({ added: 1, removed: 0, updated: 0 });

    // A slow sync lists storage (version one) and waits; meanwhile the file is replaced and a
    // second sync records the new version.
    const hold = gated.holdNextList();
    const slowSync = api.sync();
    await hold.reached;
    const v2 = await putObject(projectId, 'doc.txt', 'version two, longer');
    expect((await api.sync()).json().data).toEqual({ added: 0, removed: 0, updated: 1 });
    hold.release();
    expect((await slowSync).statusCode).toBe(200);

    // The record still describes what storage holds: version two.
    const [file] = (await api.list()).json().data.files;
    expect(file.sizeBytes).toBe(v2.size);
    const { downloadUrl } = (await api.download(file.id)).json().data;
    const got = await t.app.inject({ method: 'GET', url: injectable(downloadUrl) });
    expect(got.statusCode).toBe(200);
    expect(got.body).toBe('version two, longer');
    // Nothing changed in storage since: a further sync changes nothing.
    expect((await api.sync()).json().data).toEqual({ added: 0, removed: 0, updated: 0 });
  });
});

describe(`a project deleted while a sync of it holds its lock (${engineName})`, () => {
  it('waits for the sync, then deletes the project: no deadlock, no 500', async () => {
    const projectId = await newProject('Deleted while syncing');
    const api = filesApi(t.app, projectId);
    await putObject(projectId, 'a.txt', 'one');
    await putObject(projectId, 'b.txt', 'two');
    expect((await api.sync()).json().data).toEqual({ added: 2, removed: 0, updated: 0 });
    // A new object: the next sync looks at it (a HEAD) while it holds the project's lock and has
    // written the other files' records (PostgreSQL deadlocked a delete taking the files first).
    await putObject(projectId, 'new.txt', 'three');
    const hold = gated.holdHead(`projects/wsp_main/${projectId}/new.txt`);
    const syncing = api.sync();
    await hold.reached;
    const deleting = t.app.inject({
      method: 'DELETE',
      url: `/v1/projects/${projectId}`,
      headers: { 'x-service-api-key': KEYS.mainOwner },
    });
    // Long enough for the delete to reach the lock it waits on.
    await new Promise((resolve) => setTimeout(resolve, 300));
    hold.release();
    const [synced, deleted] = await Promise.all([syncing, deleting]);
    expect(deleted.statusCode, deleted.body).toBe(200);
    expect(synced.statusCode, synced.body).toBe(200);
    expect((await api.list()).statusCode).toBe(404);
  });
});
