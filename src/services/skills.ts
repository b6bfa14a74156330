import { randomUUID } from 'node:crypto';
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
  findExistingSkillIds,
  findSkillsByName,
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

/** A same-name skill that `mode: 'replace'` replaces in place. */
type ReplacedSkill = Pick<SkillTable, 'id' | 'storage_path' | 'created_at' | 'owner_user_id'>;

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

/** The storage prefix of a skill's files. */
/** An upload stores all its files within seconds; an hour without a row means it died. */
const ORPHAN_GRACE_MS = 60 * 60 * 1000;

export const skillStoragePath = (workspaceId: string, skillId: string) => `skills/${workspaceId}/${skillId}/`;

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
 * Holds the skills this upload replaces, so that no other replace of one of them runs until this
 * one has removed its stale files: each lists the files its version lacks and removes them, so
 * two at once would mix both versions' files. A skill another upload is replacing right now is
 * skipped. The hold is renewed while the upload runs; a skill a renewal finds no longer held
 * (this process stalled past the hold, and another replace took it) is written no further, and
 * neither committed nor tidied (see storeSkills).
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
      storage_path: replaces?.storage_path ?? skillStoragePath(access.workspaceId, id),
      metadata: JSON.stringify(header.metadata),
      created_at: replaces?.created_at ?? now,
      updated_at: now,
    };
  });
  // A replaced skill's files that the new version no longer has, removed once its row is updated
  // (those in the way of a new file, before it is written).
  const staleFiles = await staleFilesOfReplaced(deps.store, toCreate);
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
  try {
    await Promise.all(staleFiles.beforeWrites.map((key) => deps.store.delete(key)));
    await mapConcurrently(writes, STORE_CONCURRENCY, async ({ index, file }) => {
      const { candidate, replaces } = toCreate[index]!;
      // Its hold lost: another replace writes this skill now; this one is not committed.
      if (replaces && hold.lost.has(replaces.id)) return;
      const prefix = rows[index]!.storage_path;
      // A replaced skill's prefix holds its previous files: never removed wholesale on failure.
      if (!toCreate[index]!.replaces) written.add(prefix);
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
    ({ inserted, notHeld } = await insertSkills(
      deps.db,
      rows.filter((row) => !replacedIds.has(row.id)),
      rows.filter((row) => replacedIds.has(row.id) && !hold.lost.has(row.id)),
      hold.holder === undefined ? undefined : { holder: hold.holder, holdUntil: hold.holdUntil() },
    ));
    for (const id of hold.lost) notHeld.add(id);
  } catch (error) {
    await Promise.allSettled([...written].map((prefix) => deps.store.deletePrefix(prefix)));
    throw errors.internal(error);
  }
  // Committed: what follows only tidies storage, so a failure here must not take the new skills'
  // files or turn the answer into an error. A stale file that stays is an extra file of its
  // skill; the files of a skill that lost its name to another request have no row, and the
  // leftovers sweep removes them (sweepOrphanSkillObjects).
  // A skill no longer held is left alone: its files are the other replace's to tidy.
  const tidied = staleFiles.afterCommit.filter(
    ({ skillId }) => inserted.has(skillId) && !hold.lost.has(skillId),
  );
  await Promise.allSettled(tidied.map(({ key }) => deps.store.delete(key)));
  const created: Array<BulkUploadResult['created'][number] & { replaced: boolean }> = [];
  for (const [index, row] of rows.entries()) {
    if (notHeld.has(row.id)) {
      // Its hold lapsed while this upload ran (the process stalled) and another replace took it:
      // that one's version stands, files and row.
      skipped.push({ name: row.name, file: toCreate[index]!.candidate.file, reason: REPLACED_ELSEWHERE });
    } else if (inserted.has(row.id)) {
      created.push({
        id: row.id,
        name: row.name,
        storagePath: row.storage_path,
        replaced: replacedIds.has(row.id),
      });
    } else {
      // Another request took the name between our check and our insert.
      skipped.push({
        name: row.name,
        file: toCreate[index]!.candidate.file,
        reason: 'a skill with this name already exists in the workspace',
      });
      await deps.store.deletePrefix(row.storage_path).catch(() => undefined);
    }
  }
  return created;
}

/** The stored files of the skills being replaced that their new version does not write. */
/**
 * A replaced skill's files that its new version does not have. Most are removed once the new
 * row is committed (`afterCommit`); those whose path clashes with a new file's (a file `ref`
 * that becomes the folder `ref/`, or the other way round) first (`beforeWrites`), as no store
 * can hold both.
 */
async function staleFilesOfReplaced(
  store: ObjectStore,
  toCreate: Array<ReadySkill & { replaces?: ReplacedSkill }>,
) {
  const beforeWrites: string[] = [];
  const afterCommit: Array<{ skillId: string; key: string }> = [];
  for (const { candidate, replaces } of toCreate) {
    if (!replaces) continue;
    const next = new Set(
      candidate.kind === 'zip' ? candidate.plan.files.map((file) => file.relativePath) : ['SKILL.md'],
    );
    const nextFolders = new Set([...next].flatMap(folderPaths));
    for await (const object of store.list(replaces.storage_path)) {
      const relative = object.key.slice(replaces.storage_path.length);
      if (next.has(relative)) continue;
      const clashes = nextFolders.has(relative) || folderPaths(relative).some((folder) => next.has(folder));
      if (clashes) beforeWrites.push(object.key);
      else afterCommit.push({ skillId: replaces.id, key: object.key });
    }
  }
  return { beforeWrites, afterCommit };
}

/** The folders a relative path lies in: `a/b/c.md` → `a`, `a/b`. */
function folderPaths(relativePath: string): string[] {
  const segments = relativePath.split('/');
  return segments.slice(0, -1).map((_, i) => segments.slice(0, i + 1).join('/'));
}

/**
 * Objects of skills that have no row: what a process killed between storing a skill's files
 * and inserting its row leaves behind (any other failure cleans up after itself). Only prefixes
 * untouched for `graceMs` are removed, so an upload still running on another instance keeps
 * its files. Run by the server at start and then periodically (src/leftovers.ts).
 */
export async function sweepOrphanSkillObjects(
  db: Db,
  store: ObjectStore,
  now: Date,
  log: StoreLog,
  graceMs = ORPHAN_GRACE_MS,
): Promise<number> {
  const newestWrite = new Map<string, number>();
  for await (const object of store.list('skills/')) {
    const [, workspaceId, skillId] = object.key.split('/');
    if (!workspaceId || !skillId) continue;
    const prefix = skillStoragePath(workspaceId, skillId);
    newestWrite.set(prefix, Math.max(newestWrite.get(prefix) ?? 0, object.lastModified.getTime()));
  }
  const cutoff = now.getTime() - graceMs;
  const stale = [...newestWrite].filter(([, time]) => time < cutoff).map(([prefix]) => prefix);
  const existing = await findExistingSkillIds(
    db,
    stale.map((prefix) => prefix.split('/')[2]!),
  );
  const orphans = stale.filter((prefix) => !existing.has(prefix.split('/')[2]!));
  let removed = 0;
  for (const prefix of orphans) {
    // As for projects (sweepOrphanProjectObjects): the others are still removed.
    const message = 'could not remove the files of a skill without a record; the next sweep tries again';
    if (await deletePrefixOrLog(store, prefix, log, message)) removed++;
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
