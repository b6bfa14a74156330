import type { Db } from '../../src/db/database.js';
import { storeIndexOutcome } from '../../src/db/repositories/knowledge.js';
import type { ExtractFormat } from '../../src/knowledge/types.js';
import { createObjectStore } from '../../src/storage/index.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { chatSetup } from '../chat/fixtures.js';
import { createTestApp } from '../helpers/app.js';
import type { FakeUpstream } from '../helpers/fake-upstream.js';

/**
 * Test helpers for "each turn": files indexed straight through the knowledge repository (the
 * indexer's own last step), so a test controls exactly which chunks a project has.
 */

export interface IndexedFileInput {
  workspaceId: string;
  projectId: string;
  path: string;
  mimeType?: string;
  text: string;
  /**
   * Chunks; default: the text cut into pieces of at most `chunkChars`. Offsets, when given (as
   * chunking makes them), are kept; else each chunk follows the one before.
   */
  chunks?: Array<{
    text: string;
    heading?: string | null;
    pages?: number[] | null;
    start?: number;
    end?: number;
  }>;
  chunkChars?: number;
  /** The extraction's format; default `markdown`. */
  format?: ExtractFormat;
}

let counter = 0;

function fileRow(input: {
  workspaceId: string;
  projectId: string;
  path: string;
  mimeType: string;
  size: number;
}) {
  const now = new Date().toISOString();
  counter += 1;
  return {
    id: `fil_t${counter}_${input.path.replace(/\W/g, '_')}`.slice(0, 120),
    workspace_id: input.workspaceId,
    project_id: input.projectId,
    name: input.path.split('/').at(-1)!,
    path: input.path,
    mime_type: input.mimeType,
    size_bytes: input.size,
    etag: `etag-${counter}`,
    type: 'uploaded',
    created_at: now,
    updated_at: now,
    synced_at: now,
  };
}

function cut(text: string, size: number): string[] {
  const pieces: string[] = [];
  for (let i = 0; i < text.length; i += size) pieces.push(text.slice(i, i + size));
  return pieces.length > 0 ? pieces : [''];
}

const PROCESS = 'test-indexer';

/** Registers a file and stores its text and chunks as the indexer would; returns its id. */
export async function addIndexedFile(db: Db, input: IndexedFileInput): Promise<string> {
  const row = fileRow({
    ...input,
    mimeType: input.mimeType ?? 'text/markdown',
    size: Buffer.byteLength(input.text),
  });
  const lease = new Date(Date.now() + 3_600_000).toISOString();
  await db
    .insertInto('project_files')
    .values({
      ...row,
      index_status: 'indexing',
      index_claimed_by: PROCESS,
      index_lease_until: lease,
      index_attempts: 1,
    })
    .execute();
  let offset = 0;
  const given: NonNullable<IndexedFileInput['chunks']> =
    input.chunks ?? cut(input.text, input.chunkChars ?? 1_500).map((text) => ({ text }));
  const chunks = given.map((chunk, ordinal) => {
    const start = chunk.start ?? offset;
    offset = chunk.end ?? start + chunk.text.length;
    return {
      ordinal,
      text: chunk.text,
      heading: chunk.heading ?? null,
      pages: chunk.pages ?? null,
      start,
      end: offset,
    };
  });
  const stored = await storeIndexOutcome(
    db,
    { ...row, index_attempts: 1 },
    PROCESS,
    { status: 'indexed', format: input.format ?? 'markdown', text: input.text, chunks },
    new Date().toISOString(),
  );
  if (!stored) throw new Error(`indexing ${input.path} was dropped`);
  return row.id;
}

/** Registers a file the indexer has not reached (or cannot read): listed by name only. */
export async function addUnindexedFile(
  db: Db,
  input: {
    workspaceId: string;
    projectId: string;
    path: string;
    mimeType: string;
    status: 'pending' | 'unsupported' | 'failed';
  },
): Promise<string> {
  // Far in the future: a running indexer leaves the file alone during the test.
  const row = fileRow({ ...input, size: 10 });
  await db
    .insertInto('project_files')
    .values({ ...row, index_status: input.status, index_retry_at: '9999-01-01T00:00:00.000Z' })
    .execute();
  return row.id;
}

const WORDS = (
  'amber basin cedar delta ember fjord garnet harbor island juniper kestrel lagoon meadow nectar ' +
  'orchard pebble quarry ridge saffron tundra umber valley willow yarrow zephyr copper lantern ' +
  'marble canyon thistle beacon glacier prairie summit timber violet walnut coral dune'
).split(' ');

/** Deterministic filler prose of about `chars` characters (seeded), sharing no rare words. */
export function filler(seed: number, chars: number): string {
  let state = seed * 7919 + 17;
  const words: string[] = [];
  let length = 0;
  while (length < chars) {
    state = (state * 1103515245 + 12345) % 2147483648;
    const word = WORDS[state % WORDS.length]!;
    words.push(word);
    length += word.length + 1;
  }
  return words.join(' ').slice(0, chars);
}

/** An object store that records reads (`get`, `head`, `readAll`, `list`) and fails them while `forbidden`. */
export function watchedStore(inner: ObjectStore) {
  const reads: string[] = [];
  let forbidden = false;
  const guard = (what: string) => {
    reads.push(what);
    if (forbidden) throw new Error(`object storage read during a turn: ${what}`);
  };
  const watched: Partial<ObjectStore> = {
    get: (key, range) => {
      guard(`get ${key}`);
      return inner.get(key, range);
    },
    head: (key) => {
      guard(`head ${key}`);
      return inner.head(key);
    },
    readAll: (key, maxBytes) => {
      guard(`readAll ${key}`);
      return inner.readAll(key, maxBytes);
    },
    list: (prefix) => {
      guard(`list ${prefix}`);
      return inner.list(prefix);
    },
  };
  const store = new Proxy(inner, {
    get(target, property) {
      if (property in watched) return watched[property as keyof ObjectStore];
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return {
    store,
    reads,
    /** While on, every read fails (and is recorded). */
    forbid(on: boolean) {
      forbidden = on;
      if (on) reads.length = 0;
    },
  };
}

/** A listening chat app on `upstream` whose object store counts reads (`watch`): turns read none. */
export async function startWatchedChatApp(upstream: FakeUpstream) {
  let watch!: ReturnType<typeof watchedStore>;
  const t = await createTestApp({
    setup: chatSetup(upstream),
    store: (config) => {
      watch = watchedStore(createObjectStore(config, {}));
      return watch.store;
    },
  });
  const baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
  return { t, watch, baseUrl };
}
