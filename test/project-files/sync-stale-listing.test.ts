import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, engineName } from '../helpers/app.js';
import { KEYS, TENANCY_SETUP } from '../helpers/fixtures.js';
import { createObjectStore } from '../../src/storage/index.js';
import type { ObjectInfo, ObjectStore } from '../../src/storage/object-store.js';
import { filesApi, injectable } from '../project-files/helpers.js';

/** The fs store, whose next `list` can be held open after it has listed everything. */
class GatedListStore {
  private gate: { opened: Promise<void>; open: () => void; reached: () => void } | undefined;
  constructor(readonly inner: ObjectStore) {}
  holdNextList(): { reached: Promise<void>; release: () => void } {
    let open!: () => void;
    let reached!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    const reachedPromise = new Promise<void>((resolve) => (reached = resolve));
    this.gate = { opened, open, reached };
    return { reached: reachedPromise, release: open };
  }
  store(): ObjectStore {
    const inner = this.inner;
    return new Proxy(inner, {
      get: (target, property, receiver) => {
        if (property !== 'list') {
          const value = Reflect.get(target, property, receiver) as unknown;
          return typeof value === 'function' ? value.bind(target) : value;
        }
        return (prefix: string) => this.gatedList(prefix);
      },
    });
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

describe(`a sync that listed storage before a replacement another sync registered (${engineName})`, () => {
  it('does not put the record back to the version storage no longer holds', async () => {
    const created = await t.app.inject({
      method: 'POST',
      url: '/v1/projects',
      headers: { 'x-service-api-key': KEYS.mainOwner },
      payload: { name: 'Replaced mid-sync' },
    });
    const projectId = created.json().data.project.id as string;
    const api = filesApi(t.app, projectId);
    const key = `projects/wsp_main/${projectId}/doc.txt`;
    const put = (content: string) =>
      gated.inner.put(key, Readable.from([Buffer.from(content)]), { contentType: 'text/plain' });

    await put('version one');
    expect((await api.sync()).json().data).toEqual({ added: 1, removed: 0, updated: 0 });

    // A slow sync lists storage (version one) and waits; meanwhile the file is replaced and a
    // second sync registers the new version.
    const hold = gated.holdNextList();
    const slowSync = api.sync();
    await hold.reached;
    const v2 = await put('version two, longer');
    expect((await api.sync()).json().data).toEqual({ added: 0, removed: 0, updated: 1 });
    hold.release();
    expect((await slowSync).statusCode).toBe(200);

    // The record must still describe what storage holds: version two.
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
