import { sql } from 'kysely';
import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { claimNextFile, isSqliteDb, readIndexedText } from '../../src/db/repositories/knowledge.js';
import { createExtractorPool, extractFile } from '../../src/knowledge/extract/index.js';
import { INTERNAL_FAILURE, waitForIndexIdle } from '../../src/knowledge/indexer.js';
import { searchProject } from '../../src/knowledge/search.js';
import type { Extraction } from '../../src/knowledge/types.js';
import { systemClock } from '../../src/ids.js';
import { deleteProjectFile, projectStoragePrefix } from '../../src/services/project-files.js';
import { updateProjectFileContent } from '../../src/db/repositories/project-files.js';
import { rebuildProjectIndex } from '../../src/services/knowledge.js';
import type { ObjectStore } from '../../src/storage/object-store.js';
import { createTestApp, engineName } from '../helpers/app.js';
import { TENANCY_SETUP } from '../helpers/fixtures.js';
import { CRASH_MESSAGE } from './crashing-worker.js';
import { MEDIA, markdownFile, sampleFiles, slowPdfFile, SLOW_FILE_TIMEOUT_MS, textFile } from './files.js';
import { putAndSync, startTestIndexer, type TestApp } from './helpers.js';

let t: TestApp;
const WS = 'wsp_main';
const PROJECT = 'prj_docs';
const stops: Array<() => Promise<void>> = [];
/** The service log's lines (its serializers applied), for indexers given `t.app.log`. */
const logLines: Array<Record<string, unknown>> = [];
const logStream = new Writable({
  write(chunk: Buffer, _encoding, callback) {
    for (const line of chunk.toString('utf8').split('\n')) if (line) logLines.push(JSON.parse(line));
    callback();
  },
});

beforeAll(async () => {
  t = await createTestApp({ setup: TENANCY_SETUP, logStream, env: { LOG_LEVEL: 'info' } });
});
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
  // Each test starts from an empty project.
  await t.env.database.db.deleteFrom('project_files').execute();
  await t.store.deletePrefix(projectStoragePrefix(WS, PROJECT));
});
afterAll(() => t.close());

const db = () => t.env.database.db;
const indexer = (options: Parameters<typeof startTestIndexer>[1] = {}) => {
  const started = startTestIndexer(t, options);
  stops.push(() => started.stop());
  return started;
};
const statuses = async () =>
  Object.fromEntries(
    (
      await db()
        .selectFrom('project_files')
        .select(['path', 'index_status', 'index_error'])
        .where('project_id', '=', PROJECT)
        .execute()
    ).map((row) => [row.path, { status: row.index_status, error: row.index_error }]),
  );
const chunkCount = async (fileId?: string) => {
  let query = db()
    .selectFrom('knowledge_chunks')
    .select((eb) => eb.fn.countAll<number>().as('n'));
  if (fileId) query = query.where('file_id', '=', fileId);
  return Number((await query.executeTakeFirstOrThrow()).n);
};
const search = (query: string, limit = 10) => searchProject(db(), { projectId: PROJECT, query, limit });
const fileId = async (path: string) =>
  (await db().selectFrom('project_files').select('id').where('path', '=', path).executeTakeFirstOrThrow()).id;

/** An extractor held until released: lets a test look at the index while a file is indexed. */
function gatedExtractor() {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let entered!: () => void;
  const started = new Promise<void>((resolve) => (entered = resolve));
  const extract = async (input: { bytes: Uint8Array }): Promise<Extraction> => {
    entered();
    await gate;
    return {
      status: 'ok',
      format: 'text',
      sections: [{ text: Buffer.from(input.bytes).toString('utf8'), heading: null, pages: null }],
    };
  };
  return { extract, release, started };
}

describe(`indexing project files (${engineName})`, () => {
  it('takes every kind of file from pending to indexed, unsupported or failed, searchable once indexed', async () => {
    const samples = await sampleFiles();
    const sync = await putAndSync(
      t,
      WS,
      PROJECT,
      samples.map((s) => s.file),
    );
    expect(sync.added).toBe(samples.length);
    const before = await statuses();
    expect(Object.values(before).every((s) => s.status === 'pending')).toBe(true);
    const started = indexer({ maxAttempts: 2 });
    await waitForIndexIdle(db(), { projectId: PROJECT });
    await stops.pop()!();

    // The slow PDF times out on every attempt: it ends failed, with the reason, after maxAttempts.
    await putAndSync(t, WS, PROJECT, [slowPdfFile()]);
    const slow = indexer({ timeoutMs: SLOW_FILE_TIMEOUT_MS, maxAttempts: 2 });
    await waitForIndexIdle(db(), { projectId: PROJECT });
    const after = await statuses();
    for (const sample of samples) {
      const expected = { ok: 'indexed', unsupported: 'unsupported', failed: 'failed' }[sample.status];
      expect(after[sample.file.path]?.status, `${sample.file.path} ${after[sample.file.path]?.error}`).toBe(
        expected,
      );
      if (sample.status === 'failed') expect(after[sample.file.path]?.error).toBeTruthy();
      if (sample.status === 'ok') {
        const id = await fileId(sample.file.path);
        expect(await chunkCount(id), sample.file.path).toBeGreaterThan(0);
        const text = await readIndexedText(db(), { projectId: PROJECT, fileId: id });
        expect(text?.text, sample.file.path).toContain(sample.phrase);
        const hits = await search(sample.phrase!, 50);
        expect(
          hits.some((hit) => hit.path === sample.file.path),
          `${sample.file.path}: ${sample.phrase}`,
        ).toBe(true);
      }
    }
    expect(after['docs/slow.pdf']).toEqual({ status: 'failed', error: expect.stringContaining('timed out') });
    expect(slow.extractions.get('docs/slow.pdf')).toBe(2);
    expect(slow.extractions.size).toBe(1);
    // Each file was extracted once, but the corrupt PDF, tried again (maxAttempts) before it failed.
    for (const sample of samples) {
      expect(started.extractions.get(sample.file.path), sample.file.path).toBe(
        sample.status === 'failed' ? 2 : 1,
      );
    }
  }, 180_000);

  it('keeps a replaced file searchable by its old text until the new text is in, then only the new', async () => {
    await putAndSync(t, WS, PROJECT, [textFile('notes.txt', 'The launch codeword is marmalade.')]);
    indexer();
    await waitForIndexIdle(db(), { projectId: PROJECT });
    await stops.pop()!();
    expect((await search('codeword'))[0]?.text).toContain('marmalade');

    const gated = gatedExtractor();
    indexer({ extract: gated.extract });
    const sync = await putAndSync(t, WS, PROJECT, [
      textFile('notes.txt', 'The launch codeword is now gooseberry.'),
    ]);
    expect(sync.updated).toBe(1);
    await gated.started;
    // Being indexed: the old chunks answer, the new text is not there yet.
    expect((await statuses())['notes.txt']?.status).toBe('indexing');
    expect((await search('marmalade')).map((hit) => hit.path)).toEqual(['notes.txt']);
    expect(await search('gooseberry')).toEqual([]);
    gated.release();
    await waitForIndexIdle(db(), { projectId: PROJECT });
    expect(await search('marmalade')).toEqual([]);
    expect((await search('gooseberry')).map((hit) => hit.path)).toEqual(['notes.txt']);
    expect(await chunkCount()).toBe(1);
  });

  it('drops a result for a version replaced while it was extracted, and indexes the new one', async () => {
    const gated = gatedExtractor();
    const started = indexer({ extract: gated.extract });
    await putAndSync(t, WS, PROJECT, [textFile('plan.txt', 'first draft mentions rhubarb')]);
    await gated.started;
    // Replaced mid-extraction: the sync takes the claim away.
    await putAndSync(t, WS, PROJECT, [
      textFile('plan.txt', 'second draft mentions persimmon, a longer text'),
    ]);
    gated.release();
    await waitForIndexIdle(db(), { projectId: PROJECT });
    expect(await search('rhubarb')).toEqual([]);
    expect((await search('persimmon')).map((hit) => hit.path)).toEqual(['plan.txt']);
    expect(started.extractions.get('plan.txt')).toBe(2);
    expect((await statuses())['plan.txt']?.status).toBe('indexed');
  });

  it('drops a result for a media type changed while it was extracted, though another loop of the process took the file again', async () => {
    // Two loops of one process (ATRIUM_INDEX_CONCURRENCY=2). On S3 the same bytes stored again
    // with another type keep their etag (the MD5 of the bytes): sync records the new type under
    // the same etag (done here as it does there), and the second loop claims the file while the
    // first still extracts it as the old type.
    const asText = gatedExtractor();
    const asMarkdown = gatedExtractor();
    let firstResult!: () => void;
    const firstStoredOrDropped = new Promise<void>((resolve) => (firstResult = resolve));
    const started = indexer({
      concurrency: 2,
      extract: async (input, options) => {
        await (input.mediaType === MEDIA.text ? asText : asMarkdown).extract(input);
        return extractFile(input, options);
      },
      log: {
        info: (fields, message) =>
          fields.stored !== undefined || message.includes('claim lost') ? firstResult() : undefined,
        warn: () => {},
      },
    });
    const bytes = '# Tamarind\n\nThe tamarind grove is watered on Mondays.';
    await putAndSync(t, WS, PROJECT, [textFile('grove', bytes, MEDIA.text)]);
    await asText.started;
    const row = await db()
      .selectFrom('project_files')
      .selectAll()
      .where('path', '=', 'grove')
      .executeTakeFirstOrThrow();
    const now = new Date().toISOString();
    expect(
      await updateProjectFileContent(db(), row, {
        etag: row.etag,
        size_bytes: row.size_bytes,
        mime_type: MEDIA.markdown,
        object_modified_at: now,
        updated_at: now,
        synced_at: now,
      }),
    ).toBe(true);
    started.wake();
    await asMarkdown.started;
    // The first loop's result (of the old type) is stored, dropped or abandoned before the second ends.
    asText.release();
    await firstStoredOrDropped;
    asMarkdown.release();
    await waitForIndexIdle(db(), { projectId: PROJECT });
    expect(started.extractions.get('grove')).toBe(2);
    const [hit] = await search('tamarind');
    expect(hit).toMatchObject({ path: 'grove', heading: 'Tamarind' });
    expect((await readIndexedText(db(), { projectId: PROJECT, fileId: row.id }))?.format).toBe('markdown');
  });

  it('removes a deleted file from search with its record', async () => {
    await putAndSync(t, WS, PROJECT, [
      markdownFile('a.md', '# A\nalpha quince'),
      markdownFile('b.md', '# B\nbeta quince'),
    ]);
    indexer();
    await waitForIndexIdle(db(), { projectId: PROJECT });
    expect((await search('quince')).map((hit) => hit.path).sort()).toEqual(['a.md', 'b.md']);
    await deleteProjectFile(
      { db: db(), store: t.store, clock: systemClock },
      WS,
      PROJECT,
      await fileId('a.md'),
    );
    expect((await search('quince')).map((hit) => hit.path)).toEqual(['b.md']);
    // Deleted from storage behind the service's back: the next sync removes record and chunks.
    await t.store.delete(`${projectStoragePrefix(WS, PROJECT)}b.md`);
    await putAndSync(t, WS, PROJECT, []);
    expect(await search('quince')).toEqual([]);
    expect(await chunkCount()).toBe(0);
    const texts = await db().selectFrom('knowledge_texts').select('file_id').execute();
    expect(texts).toEqual([]);
  });

  it('rebuilds: every file indexed again, old chunks searchable meanwhile, no duplicates', async () => {
    await putAndSync(t, WS, PROJECT, [
      textFile('a.txt', 'apricot orchard'),
      textFile('b.txt', 'blueberry field'),
    ]);
    indexer();
    await waitForIndexIdle(db(), { projectId: PROJECT });
    await stops.pop()!();
    const result = await rebuildProjectIndex(db(), WS, PROJECT);
    expect(result.files).toBe(2);
    expect(Object.values(await statuses()).map((s) => s.status)).toEqual(['pending', 'pending']);
    expect((await search('apricot')).map((hit) => hit.path)).toEqual(['a.txt']);
    const again = indexer();
    await waitForIndexIdle(db(), { projectId: PROJECT });
    expect(again.extractions.get('a.txt')).toBe(1);
    expect(again.extractions.get('b.txt')).toBe(1);
    expect(await chunkCount()).toBe(2);
    expect(Object.values(await statuses()).map((s) => s.status)).toEqual(['indexed', 'indexed']);
  });

  it('takes over a claim whose process died once its lease lapsed; retries storage failures then fails', async () => {
    await putAndSync(t, WS, PROJECT, [textFile('orphan.txt', 'claimed by a process that died')]);
    // A process claims the file and dies: nothing renews the lease.
    const dead = await claimNextFile(db(), {
      processId: 'prc_dead',
      now: new Date().toISOString(),
      leaseUntil: new Date(Date.now() + 300).toISOString(),
    });
    expect(dead?.path).toBe('orphan.txt');
    const started = indexer({ pollMs: 50 });
    await waitForIndexIdle(db(), { projectId: PROJECT });
    expect((await statuses())['orphan.txt']?.status).toBe('indexed');
    expect(started.extractions.get('orphan.txt')).toBe(1);
    expect(await chunkCount()).toBe(1);

    // An object missing from storage: retried with backoff, then failed with the reason.
    // Deleted before the file is marked pending: the polling indexer must not index it in between.
    await t.store.delete(`${projectStoragePrefix(WS, PROJECT)}orphan.txt`);
    await sql`update project_files set index_status = 'pending', index_attempts = 0`.execute(db());
    started.wake();
    await waitForIndexIdle(db(), { projectId: PROJECT });
    expect((await statuses())['orphan.txt']).toEqual({
      status: 'failed',
      error: 'the file is not in storage',
    });
    // The chunks of the version indexed before stay until the file is gone.
    expect(await chunkCount()).toBe(1);
  });

  it('fails a file larger than a project file may be at once, without retrying or extracting it', async () => {
    await putAndSync(t, WS, PROJECT, [textFile('huge.log', 'put in storage past the upload URL')]);
    // Storage holds more than 50 MB for it (an object put behind the service's back).
    let reads = 0;
    const store: ObjectStore = Object.create(t.store, {
      readAll: {
        value: async () => {
          reads++;
          return 'too-large' as const;
        },
      },
    });
    const started = indexer({ store });
    await waitForIndexIdle(db(), { projectId: PROJECT });
    expect((await statuses())['huge.log']).toEqual({
      status: 'failed',
      error: 'the file is larger than 52428800 bytes',
    });
    expect(reads).toBe(1);
    expect(started.extractions.size).toBe(0);
    expect(await chunkCount()).toBe(0);
  });

  it('drops a NUL from a heading as from the text: the file is indexed', async () => {
    // UTF-16 Markdown: its byte-order mark makes it text, NULs and all.
    const text = '# Release\u0000notes\n\nThe wombat release ships on Tuesday.\n';
    const notes = {
      path: 'docs/notes.md',
      mediaType: MEDIA.markdown,
      bytes: Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]),
    };
    await putAndSync(t, WS, PROJECT, [notes]);
    indexer();
    await waitForIndexIdle(db(), { projectId: PROJECT });
    expect((await statuses())['docs/notes.md']).toEqual({ status: 'indexed', error: null });
    expect((await search('wombat')).map((hit) => [hit.path, hit.heading])).toEqual([
      ['docs/notes.md', 'Releasenotes'],
    ]);
  });

  it('fails a result the database refuses alone, not the files stored in the same batch', async () => {
    // A trigger stands for any refusal of one file's rows (PostgreSQL refusing a value, say).
    const refuse = isSqliteDb(db())
      ? [
          sql`create trigger refuse_poison before insert on knowledge_chunks when new.text like '%poison%'
              begin select raise(abort, 'refused by a test trigger'); end`,
        ]
      : [
          sql`create function refuse_poison() returns trigger language plpgsql as $$
              begin if new.text like '%poison%' then raise exception 'refused by a test trigger'; end if;
              return new; end $$`,
          sql`create trigger refuse_poison before insert on knowledge_chunks for each row
              execute function refuse_poison()`,
        ];
    for (const statement of refuse) await statement.execute(db());
    try {
      await putAndSync(t, WS, PROJECT, [
        textFile('docs/poison.txt', 'A poison dart frog.'),
        textFile('docs/quokka.txt', 'The quokka lives on Rottnest Island.'),
      ]);
      indexer({ maxAttempts: 1 });
      await waitForIndexIdle(db(), { projectId: PROJECT });
      const after = await statuses();
      expect(after['docs/quokka.txt']).toEqual({ status: 'indexed', error: null });
      // The database's words (here the trigger's) are not shown to clients.
      expect(after['docs/poison.txt']).toEqual({ status: 'failed', error: INTERNAL_FAILURE.final });
    } finally {
      await sql`drop trigger refuse_poison${isSqliteDb(db()) ? sql`` : sql` on knowledge_chunks`}`.execute(
        db(),
      );
      if (!isSqliteDb(db())) await sql`drop function refuse_poison()`.execute(db());
    }
  });

  it('fails an attempt whose storage read never answers after the time limit; its batch goes on', async () => {
    await putAndSync(t, WS, PROJECT, [
      textFile('docs/stuck.txt', 'This object is on a storage server that stopped answering.'),
      textFile('docs/other.txt', 'An ordinary file about platypus habitats.'),
    ]);
    // The store, except that reading `stuck.txt` hangs (an S3 endpoint that stalls mid-body).
    const store: ObjectStore = Object.create(t.store);
    store.readAll = (key, maxBytes) =>
      key.endsWith('/docs/stuck.txt') ? new Promise(() => {}) : t.store.readAll(key, maxBytes);
    indexer({ store, timeoutMs: 500, maxAttempts: 1 });
    await waitForIndexIdle(db(), { projectId: PROJECT, timeoutMs: 10_000 });
    expect(await statuses()).toMatchObject({
      'docs/other.txt': { status: 'indexed' },
      'docs/stuck.txt': { status: 'failed', error: expect.stringContaining('timed out after 500 ms') },
    });
  });

  it('shows a storage failure as an internal error, its details in the log only and no secret there', async () => {
    await putAndSync(t, WS, PROJECT, [textFile('docs/remote.txt', 'Kept on an S3 bucket.')]);
    // As the AWS SDK fails: a message naming the host, the signed request kept on the error.
    const failure = Object.assign(new Error('getaddrinfo ENOTFOUND acme-private.s3.internal.example'), {
      code: 'ENOTFOUND',
      $response: { headers: { authorization: 'AWS4-HMAC-SHA256 Credential=AKIASECRETKEY/s3' } },
    });
    const store: ObjectStore = Object.create(t.store);
    store.readAll = () => Promise.reject(failure);
    const id = await fileId('docs/remote.txt');
    const started = indexer({ store, log: t.app.log, maxAttempts: 2, retryMs: 60_000 });
    const remote = async () => (await statuses())['docs/remote.txt'];
    await expect
      .poll(remote, { timeout: 10_000 })
      .toEqual({ status: 'pending', error: INTERNAL_FAILURE.retrying });
    // The last attempt, without waiting for its backoff.
    await sql`update project_files set index_retry_at = null`.execute(db());
    started.wake();
    await waitForIndexIdle(db(), { projectId: PROJECT });
    expect(await remote()).toEqual({ status: 'failed', error: INTERNAL_FAILURE.final });

    const logged = logLines.filter((line) => line.fileId === id);
    expect(logged.map((line) => line.msg)).toEqual([
      'indexing a project file failed; will retry',
      'indexing a project file failed',
    ]);
    for (const line of logged) {
      expect(line.err).toMatchObject({ message: failure.message, code: 'ENOTFOUND' });
      expect(JSON.stringify(line)).not.toContain('AKIASECRETKEY');
    }
  });

  it('shows a crashed extraction worker in Atrium’s words, the crash (paths and frames) in the log only', async () => {
    await putAndSync(t, WS, PROJECT, [textFile('docs/crash.txt', 'Its worker dies reading it.')]);
    const crashing = createExtractorPool({ workerScript: new URL('./crashing-worker.ts', import.meta.url) });
    stops.push(() => crashing.close());
    const id = await fileId('docs/crash.txt');
    indexer({ extract: crashing.extract, log: t.app.log, maxAttempts: 1 });
    await waitForIndexIdle(db(), { projectId: PROJECT });
    expect((await statuses())['docs/crash.txt']).toEqual({
      status: 'failed',
      error: 'extraction worker crashed',
    });
    const [logged] = logLines.filter((line) => line.fileId === id);
    expect(logged).toMatchObject({
      msg: 'indexing a project file failed',
      err: { message: 'extraction worker crashed', cause: { message: CRASH_MESSAGE } },
    });
  });

  it('hands files being indexed back when stopped, for another process to take', async () => {
    const gated = gatedExtractor();
    const first = startTestIndexer(t, { extract: gated.extract });
    await putAndSync(t, WS, PROJECT, [textFile('handoff.txt', 'passed on at shutdown')]);
    await gated.started;
    const stopping = first.stop();
    const handedBack = async () =>
      db()
        .selectFrom('project_files')
        .select(['index_status', 'index_claimed_by', 'index_attempts'])
        .executeTakeFirstOrThrow();
    await expect.poll(handedBack, { timeout: 10_000 }).toEqual({
      index_status: 'pending',
      index_claimed_by: null,
      index_attempts: 0,
    });
    // The extraction that was running finishes late: its result is not stored.
    gated.release();
    await stopping;
    expect(await chunkCount()).toBe(0);
    indexer();
    await waitForIndexIdle(db(), { projectId: PROJECT });
    expect((await search('shutdown')).map((hit) => hit.path)).toEqual(['handoff.txt']);
  });
});
