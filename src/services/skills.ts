import { randomBytes, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import mime from 'mime-types';
import type { ZipFile } from 'yauzl';
import type { Db } from '../db/database.js';
import { jsonDataBody, jsonObjectText } from '../db/json-page.js';
import { listingCache } from '../db/listing-cache.js';
import {
  findSkillsByName,
  findSkillsHeldSince,
  findSkillStoragePaths,
  findTakenSkillNames,
  holdSkillsForReplace,
  insertSkills,
  listVisibleSkillsJson,
  releaseSkillsForReplace,
  renewSkillsForReplace,
  type SkillRow,
} from '../db/repositories/skills.js';
import type { SkillTable, Visibility } from '../db/schema.js';
import { mapConcurrently } from '../concurrency.js';
import { errors } from '../errors.js';
import { type Clock, newId } from '../ids.js';
import { renewWhileWorking } from '../lease-renewal.js';
import { isDependencyUnavailable } from '../network-errors.js';
import { deletePrefixOrLog, type ObjectStore, type StoreLog } from '../storage/object-store.js';
import { isManager, type WorkspaceAccess } from './access.js';
import type { Page } from './paging.js';
import {
  type ArchiveLimits,
  DEFAULT_ARCHIVE_LIMITS,
  decodeText,
  type PlannedZipSkill,
  type Problem,
  planArchive,
  type SkillEntry,
  skillFileStream,
  verifySkillContent,
} from './skill-archive.js';
import { ArchiveProblem } from '../zip-reader.js';
import { isProblem, parseSkillMarkdown, type SkillHeader } from './skill-markdown.js';
import { isInVersionFolder, skillStoragePath, skillVersionPath } from './skill-storage.js';

export const SKILL_PAGE = { defaultLimit: 20, maxLimit: 100 } as const;

export interface SkillUploadLimits extends ArchiveLimits {
  /** Skills one request may hold (spec §8). */
  maxSkills: number;
  /** Bytes of all file parts of one request together (spec §8). */
  maxUploadBytes: number;
}

export const SKILL_UPLOAD_LIMITS: SkillUploadLimits = {
  ...DEFAULT_ARCHIVE_LIMITS,
  maxSkills: 200,
  maxUploadBytes: 32 * 1024 * 1024,
};

/** Skills inflated and checked at once; inflation is CPU-bound, so a few. */
const VERIFY_CONCURRENCY = 4;
/** Files written to storage at once; each write waits on the disk or network. */
const STORE_CONCURRENCY = 32;

export const SKILL_VISIBILITIES = [
  'private',
  'workspace',
  'organization',
] as const satisfies readonly Visibility[];

/** A `files` part of the request, already spooled to a temporary file. */
export interface UploadedPart {
  filename: string;
  contentType: string;
  /** The temporary file holding the part's bytes. */
  path: string;
  size: number;
}

export interface SkillErrorItem {
  file: string;
  name: string | null;
  code: string;
  message: string;
}

export interface BulkUploadResult {
  created: Array<{ id: string; name: string; storagePath: string }>;
  /** With `mode: 'replace'` only. */
  updated?: Array<{ id: string; name: string; storagePath: string }>;
  skipped: Array<{ name: string; reason: string; file: string }>;
  errors: SkillErrorItem[];
  summary: { total: number; created: number; skipped: number; failed: number; updated?: number };
}

/** A same-name skill that `mode: 'replace'` replaces (same id, a new version folder). */
type ReplacedSkill = Pick<SkillTable, 'id' | 'created_at' | 'owner_user_id'>;

export interface SkillServiceDeps {
  db: Db;
  store: ObjectStore;
  clock: Clock;
  /** How long a replace upload's hold on its skills lasts unless renewed; default `SKILL_REPLACE_HOLD_MS`. */
  replaceHoldMs?: number;
}

/** Skills go in through a workspace key; sharing them needs an admin or owner (decisions.md). */
export function assertMayUploadSkills(access: WorkspaceAccess, visibility?: Visibility): void {
  if (access.principal.kind !== 'workspace') {
    throw errors.unauthorized('Skills are uploaded with a workspace API key, not an organization key');
  }
  if (visibility && visibility !== 'private' && access.role !== 'owner' && access.role !== 'admin') {
    throw errors.unauthorized(`Visibility "${visibility}" needs a workspace admin or owner`);
  }
}

/** An upload stores all its files within seconds; an hour without a row means it died. */
const ORPHAN_GRACE_MS = 60 * 60 * 1000;

/** A replace's generation: 72 random bits, in the characters of ids. */
const newGeneration = () => randomBytes(9).toString('base64url');

type Candidate =
  | { kind: 'zip'; file: string; zip: ZipFile; plan: PlannedZipSkill; fallbackName: string }
  | { kind: 'markdown'; file: string; part: UploadedPart; fallbackName: string };

interface ReadySkill {
  candidate: Candidate;
  header: SkillHeader;
}

function partKind(part: UploadedPart): 'zip' | 'markdown' | null {
  const extension = path.extname(part.filename).toLowerCase();
  if (extension === '.zip') return 'zip';
  if (extension === '.md' || extension === '.markdown') return 'markdown';
  const type = part.contentType.toLowerCase();
  if (type === 'application/zip' || type === 'application/x-zip-compressed') return 'zip';
  if (type === 'text/markdown' || type === 'text/x-markdown') return 'markdown';
  return null;
}

const stem = (filename: string) => path.basename(filename, path.extname(filename));

/**
 * Bulk skill upload (decisions.md, "Skills bulk upload"). Every archive is planned and every
 * skill fully inflated and parsed before the first object is stored; then the objects are
 * written, then all rows inserted in one transaction. When that fails, the objects written are
 * deleted, so a failed request leaves no half-written skill.
 */
export async function bulkUploadSkills(
  deps: SkillServiceDeps,
  access: WorkspaceAccess,
  input: { parts: UploadedPart[]; visibility: Visibility; mode?: 'create' | 'replace' },
  limits: SkillUploadLimits = SKILL_UPLOAD_LIMITS,
): Promise<BulkUploadResult> {
  assertMayUploadSkills(access, input.visibility);
  const usable = input.parts.filter((part) => part.size > 0);
  if (usable.length === 0) throw errors.badRequest('The upload has no non-empty `files` part');

  const failures: SkillErrorItem[] = [];
  const fail = (file: string, name: string | null, problem: Problem) =>
    failures.push({ file, name, code: problem.code, message: problem.message });
  const zips: ZipFile[] = [];
  let entries = 0;
  // Every archive's entries are held until the request ends: 33 archives of 10,000 entries
  // each (32.6 MB) grew the heap by 340 MB. Counted before an archive's entries are read.
  const admitEntries = (count: number) => {
    entries += count;
    if (entries > limits.maxRequestEntries) {
      throw errors.badRequest(
        `The archives of one upload may list at most ${limits.maxRequestEntries} entries together; nothing was stored`,
        [{ path: 'body.files', message: `more than ${limits.maxRequestEntries} archive entries` }],
      );
    }
  };
  try {
    const candidates: Candidate[] = [];
    for (const part of input.parts) {
      const file = part.filename;
      if (part.size === 0) {
        fail(file, null, { code: 'empty_file', message: 'the part is empty' });
        continue;
      }
      const kind = partKind(part);
      if (kind === 'markdown') {
        candidates.push({ kind, file, part, fallbackName: stem(file) });
      } else if (kind === 'zip') {
        try {
          const archive = await planArchive(part.path, limits, admitEntries);
          zips.push(archive.zip);
          for (const problem of archive.looseProblems) fail(file, null, problem);
          for (const plan of archive.skills) {
            const fallbackName = plan.root === '' ? stem(file) : plan.directoryName;
            candidates.push({ kind, file, zip: archive.zip, plan, fallbackName });
          }
        } catch (error) {
          if (!(error instanceof ArchiveProblem)) throw error;
          fail(file, null, error);
        }
      } else {
        fail(file, null, { code: 'unsupported_file', message: 'only .zip archives and .md files are read' });
      }
    }
    if (candidates.length > limits.maxSkills) {
      throw errors.badRequest(
        `The upload holds ${candidates.length} skills; at most ${limits.maxSkills} are accepted per request`,
        [{ path: 'body.files', message: `more than ${limits.maxSkills} skills` }],
      );
    }

    const ready = await checkCandidates(candidates, limits, fail);
    const replace = input.mode === 'replace';
    const sorted = await sortOutDuplicates(deps.db, access, ready, replace);
    const { skipped } = sorted;
    const { toCreate, hold } = await holdReplacedSkills(deps, sorted.toCreate, skipped);
    let stored: Awaited<ReturnType<typeof storeSkills>>;
    try {
      stored = await storeSkills(deps, access, input.visibility, toCreate, skipped, hold);
    } finally {
      await hold.release();
    }
    const created = stored.filter((skill) => !skill.replaced).map(({ replaced: _, ...skill }) => skill);
    const updated = stored.filter((skill) => skill.replaced).map(({ replaced: _, ...skill }) => skill);
    return {
      created,
      ...(replace && { updated }),
      skipped,
      errors: failures,
      summary: {
        total: created.length + updated.length + skipped.length + failures.length,
        created: created.length,
        skipped: skipped.length,
        failed: failures.length,
        ...(replace && { updated: updated.length }),
      },
    };
  } finally {
    for (const zip of zips) zip.close();
  }
}

/** Inflates and parses every candidate, within the request's decompressed-size budget. */
async function checkCandidates(
  candidates: Candidate[],
  limits: ArchiveLimits,
  fail: (file: string, name: string | null, problem: Problem) => void,
): Promise<ReadySkill[]> {
  // Sizes first, in request order, so the budget is spent the same way on every run.
  let budget = limits.maxRequestBytes;
  const outcomes: Array<ReadySkill | ArchiveProblem | undefined> = candidates.map((candidate) => {
    const declared = candidate.kind === 'zip' ? candidate.plan.declaredBytes : candidate.part.size;
    if (candidate.kind === 'zip' && candidate.plan.problem) {
      return new ArchiveProblem(candidate.plan.problem.code, candidate.plan.problem.message);
    }
    if (declared > limits.maxSkillBytes) {
      return new ArchiveProblem(
        'skill_too_large',
        `the skill's files come to ${declared} bytes decompressed; at most ${limits.maxSkillBytes} are accepted`,
      );
    }
    if (declared > budget) {
      return new ArchiveProblem(
        'decompressed_budget_exceeded',
        `the request's skills come to more than ${limits.maxRequestBytes} bytes decompressed`,
      );
    }
    budget -= declared;
    return undefined;
  });

  const pending = outcomes.flatMap((outcome, index) => (outcome === undefined ? [index] : []));
  await mapConcurrently(pending, VERIFY_CONCURRENCY, async (index) => {
    const candidate = candidates[index]!;
    try {
      const text =
        candidate.kind === 'zip'
          ? await verifySkillContent(candidate.zip, candidate.plan, limits)
          : await readMarkdownPart(candidate.part, limits);
      const header = parseSkillMarkdown(text, candidate.fallbackName);
      outcomes[index] = isProblem(header)
        ? new ArchiveProblem(header.code, header.message)
        : { candidate, header };
    } catch (error) {
      if (!(error instanceof ArchiveProblem)) throw error;
      outcomes[index] = error;
    }
  });

  const ready: ReadySkill[] = [];
  for (const [index, outcome] of outcomes.entries()) {
    const candidate = candidates[index]!;
    if (outcome instanceof ArchiveProblem) fail(candidate.file, candidate.fallbackName || null, outcome);
    else if (outcome) ready.push(outcome);
  }
  return ready;
}

async function readMarkdownPart(part: UploadedPart, limits: ArchiveLimits): Promise<string> {
  if (part.size > limits.maxSkillMdBytes) {
    throw new ArchiveProblem(
      'skill_md_too_large',
      `the markdown file is ${part.size} bytes; at most ${limits.maxSkillMdBytes} are read`,
    );
  }
  return decodeText(await readFile(part.path), limits);
}

async function sortOutDuplicates(db: Db, access: WorkspaceAccess, ready: ReadySkill[], replace: boolean) {
  const names = ready.map((skill) => skill.header.name);
  const taken = await findTakenSkillNames(db, access.workspaceId, names);
  const existing = replace ? await findSkillsByName(db, access.workspaceId, [...taken]) : new Map();
  const firstFile = new Map<string, string>();
  const toCreate: Array<ReadySkill & { replaces?: ReplacedSkill }> = [];
  const skipped: BulkUploadResult['skipped'] = [];
  for (const skill of ready) {
    const { name } = skill.header;
    const file = skill.candidate.file;
    const replaces = existing.get(name);
    const mayReplace =
      replaces &&
      (replaces.owner_user_id === access.principal.userId ||
        access.role === 'owner' ||
        access.role === 'admin');
    if (replaces && !firstFile.has(name) && !mayReplace) {
      skipped.push({
        name,
        file,
        reason:
          'a skill with this name belongs to another user; only they, an owner or an admin may replace it',
      });
    } else if (replaces && !firstFile.has(name)) {
      firstFile.set(name, file);
      toCreate.push({ ...skill, replaces });
    } else if (taken.has(name) && !replace) {
      skipped.push({ name, file, reason: 'a skill with this name already exists in the workspace' });
    } else if (firstFile.has(name)) {
      skipped.push({
        name,
        file,
        reason: `a skill with this name appears earlier in this upload (${firstFile.get(name)})`,
      });
    } else {
      firstFile.set(name, file);
      toCreate.push(skill);
    }
  }
  return { toCreate, skipped };
}

/**
 * How long a replace upload's hold on its skills lasts unless renewed. Kept short and renewed
 * every third of it while the upload runs: a process killed mid-upload (SIGKILL, out of memory,
 * a lost machine) keeps other replaces of its skills out this long at most, while a live one
 * keeps its skills however long its upload takes.
 */
export const SKILL_REPLACE_HOLD_MS = 30_000;

const DELETED_MEANWHILE = 'the skill was deleted while this upload replaced it; upload it again to create it';
const REPLACED_ELSEWHERE =
  'another upload is replacing this skill right now; upload again once it has finished';

/** What a replace upload holds, and how to let it go. */
interface ReplaceHold {
  /** The upload's id in `skill_replacements`; undefined when it replaces nothing. */
  holder: string | undefined;
  /** Skills whose hold lapsed and was taken over (or cleared away) while the upload ran. */
  lost: Set<string>;
  /** The hold's expiry if renewed now. */
  holdUntil(): string;
  /** Stops renewing and frees the skills (a failure to free only makes them wait for the hold to lapse). */
  release(): Promise<void>;
}

/**
 * Holds the skills this upload replaces, so that one replace of a skill runs at a time and the
 * one that comes meanwhile is told so (skipped) rather than silently undone. Files never mix
 * either way: each replace writes a folder of its own, and its commit switches the row to it
 * (storeSkills). The hold is renewed while the upload runs; a skill a renewal finds no longer
 * held (this process stalled past the hold, and another replace took it) is written no further,
 * and not committed: its commit checks the hold in the same transaction.
 */
async function holdReplacedSkills(
  deps: SkillServiceDeps,
  toCreate: Array<ReadySkill & { replaces?: ReplacedSkill }>,
  skipped: BulkUploadResult['skipped'],
): Promise<{ toCreate: typeof toCreate; hold: ReplaceHold }> {
  const holdMs = deps.replaceHoldMs ?? SKILL_REPLACE_HOLD_MS;
  const holdUntil = () => new Date(deps.clock().getTime() + holdMs).toISOString();
  const lost = new Set<string>();
  const replacedIds = toCreate.flatMap(({ replaces }) => (replaces ? [replaces.id] : []));
  if (replacedIds.length === 0) {
    return { toCreate, hold: { holder: undefined, lost, holdUntil, release: async () => {} } };
  }
  const holder = randomUUID();
  const free = () => releaseSkillsForReplace(deps.db, holder).catch(() => undefined);
  const held = await holdSkillsForReplace(
    deps.db,
    replacedIds,
    holder,
    deps.clock().toISOString(),
    holdUntil(),
  ).catch(async (error: unknown) => {
    // Skills taken before the failure are not left held until their hold expires.
    await free();
    throw error;
  });
  const stopRenewing = renewWhileWorking({
    everyMs: Math.floor(holdMs / 3),
    renew: async () => {
      const still = await renewSkillsForReplace(deps.db, holder, holdUntil());
      for (const id of held) if (!still.has(id)) lost.add(id);
      return still.size > 0;
    },
  });
  const kept = toCreate.filter((skill) => {
    if (!skill.replaces || held.has(skill.replaces.id)) return true;
    skipped.push({ name: skill.header.name, file: skill.candidate.file, reason: REPLACED_ELSEWHERE });
    return false;
  });
  const release = async () => {
    stopRenewing();
    await free();
  };
  return { toCreate: kept, hold: { holder, lost, holdUntil, release } };
}

function contentTypeOf(relativePath: string): string {
  if (relativePath.toLowerCase().endsWith('.md')) return 'text/markdown';
  return mime.lookup(relativePath) || 'application/octet-stream';
}

async function storeSkills(
  deps: SkillServiceDeps,
  access: WorkspaceAccess,
  visibility: Visibility,
  toCreate: Array<ReadySkill & { replaces?: ReplacedSkill }>,
  skipped: BulkUploadResult['skipped'],
  hold: ReplaceHold,
) {
  const now = deps.clock().toISOString();
  const rows: SkillRow[] = toCreate.map(({ header, replaces }) => {
    const id = replaces?.id ?? newId('skl');
    return {
      id,
      workspace_id: access.workspaceId,
      name: header.name,
      description: header.description,
      visibility,
      owner_user_id: replaces?.owner_user_id ?? access.principal.userId,
      // A new skill's files go in its folder itself; a replace writes a version folder of its
      // own inside it, which its commit switches the row to.
      storage_path: replaces
        ? skillVersionPath(access.workspaceId, id, newGeneration())
        : skillStoragePath(access.workspaceId, id),
      metadata: JSON.stringify(header.metadata),
      created_at: replaces?.created_at ?? now,
      updated_at: now,
    };
  });
  // Every folder this upload writes is its own (a new skill's, or a replace's new version folder):
  // nothing else reads or writes it until a commit names it.
  const written = new Set<string>();
  // Every file of every skill, written side by side: each write waits on the disk (fsync) or
  // the network, so overlapping them is what makes a 200-skill upload fast.
  const writes = toCreate.flatMap(
    ({ candidate }, index): Array<{ index: number; file: SkillEntry | null }> =>
      candidate.kind === 'zip'
        ? candidate.plan.files.map((file) => ({ index, file }))
        : [{ index, file: null }],
  );
  const replacedIds = new Set(toCreate.flatMap(({ replaces }) => (replaces ? [replaces.id] : [])));
  let inserted: Set<string>;
  let notHeld: Set<string>;
  let previous: Map<string, string>;
  try {
    await mapConcurrently(writes, STORE_CONCURRENCY, async ({ index, file }) => {
      const { candidate, replaces } = toCreate[index]!;
      // Its hold lost: another replace has the skill now; this one is not committed, so the
      // rest of its files are not worth writing.
      if (replaces && hold.lost.has(replaces.id)) return;
      const prefix = rows[index]!.storage_path;
      written.add(prefix);
      if (candidate.kind === 'zip' && file) {
        const body = (await skillFileStream(candidate.zip, candidate.plan.root, file)) as Readable;
        try {
          await deps.store.put(`${prefix}${file.relativePath}`, body, {
            contentType: contentTypeOf(file.relativePath),
            exactBytes: file.declaredSize,
          });
        } finally {
          // A failed put may leave the entry unread; an open entry stream keeps the zip open.
          body.destroy();
        }
      } else if (candidate.kind === 'markdown') {
        await deps.store.put(`${prefix}SKILL.md`, createReadStream(candidate.part.path), {
          contentType: 'text/markdown',
          exactBytes: candidate.part.size,
        });
      }
    });
    ({ inserted, notHeld, previous } = await insertSkills(
      deps.db,
      rows.filter((row) => !replacedIds.has(row.id)),
      rows.filter((row) => replacedIds.has(row.id) && !hold.lost.has(row.id)),
      hold.holder === undefined ? undefined : { holder: hold.holder, holdUntil: hold.holdUntil() },
    ));
    for (const id of hold.lost) notHeld.add(id);
  } catch (error) {
    // Only this upload's own folders: a replaced skill's row still names its previous folder,
    // whole and untouched. And only those no row names: a commit whose answer was lost (the
    // connection cut as it committed) may have gone through. When the rows cannot be read
    // either, none is removed here: the leftovers sweep removes what no row names.
    const named = await findSkillStoragePaths(
      deps.db,
      rows.map((row) => row.id),
    ).catch(() => undefined);
    const folders = new Set(named?.values());
    const unnamed = named ? [...written].filter((prefix) => !folders.has(prefix)) : [];
    await Promise.allSettled(unnamed.map((prefix) => deps.store.deletePrefix(prefix)));
    // Storage or the database not answering is a 503 to retry (docs/api.md), anything else a 500.
    throw isDependencyUnavailable(error) ? errors.dependencyUnavailable(error) : errors.internal(error);
  }
  // Committed: what follows only tidies storage, so a failure here must not take the new skills'
  // files or turn the answer into an error. What stays is not the folder any row names, and the
  // leftovers sweep removes it (sweepOrphanSkillObjects): a replaced skill's previous version,
  // the folder of a skill that lost its name to another request or its hold to another replace.
  await Promise.allSettled(
    [...previous].map(([id, prefix]) => removePreviousVersion(deps.store, access.workspaceId, id, prefix)),
  );
  const created: Array<BulkUploadResult['created'][number] & { replaced: boolean }> = [];
  for (const [index, row] of rows.entries()) {
    if (inserted.has(row.id)) {
      created.push({
        id: row.id,
        name: row.name,
        storagePath: skillStoragePath(row.workspace_id, row.id),
        replaced: replacedIds.has(row.id),
      });
      continue;
    }
    // Not committed: its folder is this upload's alone, and no row names it.
    await deps.store.deletePrefix(row.storage_path).catch(() => undefined);
    if (notHeld.has(row.id)) {
      // Its hold lapsed while this upload ran (the process stalled) and another replace took it:
      // that one's version stands, row and folder.
      skipped.push({ name: row.name, file: toCreate[index]!.candidate.file, reason: REPLACED_ELSEWHERE });
    } else if (replacedIds.has(row.id)) {
      // Held, yet no row to update: the skill was deleted while this upload wrote (a delete
      // does not wait for a replace, and a replace does not bring a deleted skill back).
      skipped.push({ name: row.name, file: toCreate[index]!.candidate.file, reason: DELETED_MEANWHILE });
    } else {
      // Another request took the name between our check and our insert.
      skipped.push({
        name: row.name,
        file: toCreate[index]!.candidate.file,
        reason: 'a skill with this name already exists in the workspace',
      });
    }
  }
  return created;
}

/**
 * Removes the version of a skill that a replace's commit left: its version folder, or, when it
 * was the skill's folder itself (a skill created and never replaced since), the files there
 * outside every version folder: the new version's folder is inside it, and any other version
 * folder there (a replace that crashed) is the sweep's to judge. Runs while the replace still
 * holds the skill, so no other replace is writing meanwhile.
 */
async function removePreviousVersion(
  store: ObjectStore,
  workspaceId: string,
  skillId: string,
  previous: string,
) {
  const root = skillStoragePath(workspaceId, skillId);
  if (previous !== root) {
    await store.deletePrefix(previous);
    return;
  }
  const stale: string[] = [];
  for await (const object of store.list(root)) {
    if (!isInVersionFolder(object.key.slice(root.length))) stale.push(object.key);
  }
  const results = await Promise.allSettled(stale.map((key) => store.delete(key)));
  const failed = results.find((result) => result.status === 'rejected');
  if (failed) throw failed.reason;
}

/** What the sweep finds of one skill's folder: its version folders and its loose files. */
interface StoredSkill {
  root: string;
  /** Each version folder (`{root}.atrium-version-{generation}/`), with its newest write. */
  versions: Map<string, number>;
  /** The files outside every version folder, with when each was written. */
  loose: Array<{ key: string; time: number }>;
  /** The newest write of all. */
  newest: number;
}

/**
 * What no skill row reaches of the skills' storage: what a process killed between storing a
 * skill's files and committing its row leaves behind (a new skill's folder, a replace's version
 * folder), and what a removal after a commit failed to remove (a replaced skill's previous
 * version, a deleted skill's folder; any other failure cleans up after itself). Of a skill with
 * no row, its whole folder `skills/{workspaceId}/{skillId}/`; of one with a row, the version
 * folders inside its folder other than the one its row names and, when that is a version
 * folder, the files outside it. Only what is untouched for `graceMs` is removed, so an upload
 * still running on another instance keeps its files, and no version folder of a skill a replace
 * holds (or held within `graceMs`: one that stalled may yet commit). Run by the server at start
 * and then periodically (src/leftovers.ts). Returns how many folders (a skill's loose files
 * counting as one) it removed.
 */
export async function sweepOrphanSkillObjects(
  db: Db,
  store: ObjectStore,
  now: Date,
  log: StoreLog,
  graceMs = ORPHAN_GRACE_MS,
): Promise<number> {
  const found = new Map<string, StoredSkill>();
  for await (const object of store.list('skills/')) {
    const [, workspaceId, skillId, first, ...rest] = object.key.split('/');
    if (!workspaceId || !skillId || first === undefined) continue;
    const root = skillStoragePath(workspaceId, skillId);
    let skill = found.get(root);
    if (!skill) found.set(root, (skill = { root, versions: new Map(), loose: [], newest: 0 }));
    const time = object.lastModified.getTime();
    skill.newest = Math.max(skill.newest, time);
    if (isInVersionFolder(first) && rest.length > 0) {
      const folder = `${root}${first}/`;
      skill.versions.set(folder, Math.max(skill.versions.get(folder) ?? 0, time));
    } else {
      skill.loose.push({ key: object.key, time });
    }
  }
  const cutoff = now.getTime() - graceMs;
  const idOf = (root: string) => root.split('/')[2]!;
  const ids = [...new Set([...found.keys()].map(idOf))];
  // The holds first: a replace that commits (and lets its hold go) after the rows are read
  // held its skill when the holds were, so its version folder, which the rows do not name yet,
  // is kept. Read the other way round, that folder would be neither named nor held.
  const held = await findSkillsHeldSince(db, ids, new Date(cutoff).toISOString());
  const current = await findSkillStoragePaths(db, ids);
  const message = 'could not remove the files of a skill without a record; the next sweep tries again';
  let removed = 0;
  for (const skill of found.values()) {
    const id = idOf(skill.root);
    const named = current.get(id);
    if (named === undefined) {
      // No row: the whole folder, once nothing in it is recent. As for projects
      // (sweepOrphanProjectObjects): a failure is logged, and the others are still removed.
      const old = skill.newest < cutoff && !held.has(id);
      if (old && (await deletePrefixOrLog(store, skill.root, log, message))) {
        removed++;
      }
      continue;
    }
    // A skill a replace holds, or held within the grace, keeps its version folders: one that
    // stalled may still commit its own.
    if (!held.has(id)) {
      for (const [folder, time] of skill.versions) {
        if (folder === named || time >= cutoff) continue;
        if (await deletePrefixOrLog(store, folder, log, message)) removed++;
      }
    }
    // The loose files are the current version while the row names the skill's folder itself;
    // otherwise a previous version that was not removed after its replace's commit.
    if (named === skill.root) continue;
    const old = skill.loose.filter(({ time }) => time < cutoff);
    if (old.length === 0) continue;
    const results = await Promise.allSettled(old.map(({ key }) => store.delete(key)));
    const failed = results.find((result) => result.status === 'rejected');
    if (failed) log.warn({ err: failed.reason, storagePrefix: skill.root }, message);
    else removed++;
  }
  return removed;
}

/**
 * Whose private skills the caller sees besides the shared ones: its user's own; null for an owner
 * or admin, who sees every skill of the workspace, as they may replace and delete any (and see
 * every chat and agent of it). The list and every route that takes a skill id follow this one rule.
 */
export function privateSkillsSeenBy(access: WorkspaceAccess): string | null {
  return isManager(access) ? null : access.principal.userId;
}

/** Whether the caller may see this skill of its workspace (privateSkillsSeenBy). */
export function maySeeSkill(
  access: WorkspaceAccess,
  skill: Pick<SkillTable, 'visibility' | 'owner_user_id'>,
): boolean {
  const privateOf = privateSkillsSeenBy(access);
  return skill.visibility !== 'private' || privateOf === null || skill.owner_user_id === privateOf;
}

/**
 * A page of the skills the caller may see: the listing's response body (its UTF-8 bytes), its `data`
 * built by the database (each skill with its front matter `metadata` as JSON); kept while no
 * skill changes (src/db/listing-cache.ts).
 */
export async function listSkills(db: Db, access: WorkspaceAccess, page: Page): Promise<Buffer> {
  const { workspaceId } = access;
  // Keyed by what the page holds, not by who asks: every owner and admin shares one page, and a
  // user whose role changes gets the page of the new role at once.
  const privateOf = privateSkillsSeenBy(access);
  return skillListings(
    db,
    JSON.stringify([workspaceId, privateOf, page.limit, page.offset]),
    async () => {
      const { page: skills, total } = await listVisibleSkillsJson(
        db,
        workspaceId,
        privateOf,
        page.limit,
        page.offset,
      );
      return jsonDataBody(
        jsonObjectText({
          skills,
          pagination: JSON.stringify({ total, limit: page.limit, offset: page.offset }),
        }),
      );
    },
    access.principal.dataVersion,
  );
}

const skillListings = listingCache(['skills']);
