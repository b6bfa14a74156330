import { sql } from 'kysely';
import { retryOnConflict } from '../conflict-retry.js';
import { type Db, dialectOf, type Executor } from '../database.js';
import { selectInChunks } from '../in-chunks.js';
import { type JsonField, jsonArray } from '../json-page.js';
import { preparedSelect } from '../prepared.js';
import type { SkillTable } from '../schema.js';
import { caseInsensitiveSortKey, idInCodePointOrder } from '../sort-key.js';

/** A skill's fields; the name's sort key is the repository's to derive, never passed in. */
export type SkillRow = Omit<SkillTable, 'name_sort_key'>;

/** Which of `names` the workspace already has a skill for (exact, case-sensitive match). */
export async function findTakenSkillNames(
  db: Executor,
  workspaceId: string,
  names: string[],
): Promise<Set<string>> {
  const rows = await selectInChunks(names, (chunk) =>
    db
      .selectFrom('skills')
      .select('name')
      .where('workspace_id', '=', workspaceId)
      .where('name', 'in', chunk)
      .execute(),
  );
  return new Set(rows.map((row) => row.name));
}

/**
 * The folder each of `ids` keeps its files in now (`storage_path`), for the skills that have a
 * row (any workspace): no reader reaches any other version of a skill.
 */
export async function findSkillStoragePaths(db: Executor, ids: string[]): Promise<Map<string, string>> {
  const rows = await selectInChunks(ids, (chunk) =>
    db.selectFrom('skills').select(['id', 'storage_path']).where('id', 'in', chunk).execute(),
  );
  return new Map(rows.map((row) => [row.id, row.storage_path]));
}

/**
 * Which of `ids` a replace upload holds now or held until less than `sinceMs` before `now`
 * (holdSkillsForReplace): a folder such an upload is writing may not be complete yet.
 */
export async function findSkillsHeldSince(db: Executor, ids: string[], since: string): Promise<Set<string>> {
  const rows = await selectInChunks(ids, (chunk) =>
    db
      .selectFrom('skill_replacements')
      .select('skill_id')
      .where('skill_id', 'in', chunk)
      .where('expires_at', '>', since)
      .execute(),
  );
  return new Set(rows.map((row) => row.skill_id));
}

/**
 * Inserts the skills in one transaction. A name taken meanwhile (a concurrent upload) is not
 * an error: that row is left out, and the ids of the rows really inserted are returned.
 * Replaced skills (`mode: replace`) keep their id and row, which is switched to the new
 * version's header and folder (`storage_path`, the version folder that replace wrote), each only while
 * the replace upload `holder` still holds it (holdSkillsForReplace): its hold is moved on to
 * `holdUntil` in the same transaction (on PostgreSQL, its row stays locked until commit), so no
 * other replace commits the skill at the same time. One no longer held is left as it is and
 * returned in `notHeld`. `previous` has, for each replaced skill committed, the folder its row
 * named until this commit: no reader is sent there any more, and the caller removes it.
 *
 * Each insert locks its (workspace, name) index entry until commit, so two uploads that share
 * names would deadlock on PostgreSQL if they inserted them in different orders: rows go in
 * sorted by name, one order for every request, and a transaction the database still ends for a
 * deadlock or serialization failure is run again.
 */
export async function insertSkills(
  db: Db,
  rows: SkillRow[],
  replaced: SkillRow[] = [],
  hold?: { holder: string; holdUntil: string },
): Promise<{ inserted: Set<string>; notHeld: Set<string>; previous: Map<string, string> }> {
  if (rows.length === 0 && replaced.length === 0) {
    return { inserted: new Set(), notHeld: new Set(), previous: new Map() };
  }
  const ordered = [...rows].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const orderedReplaced = [...replaced].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return retryOnConflict(() =>
    db.transaction().execute(async (trx) => {
      const inserted = new Set<string>();
      const notHeld = new Set<string>();
      const previous = new Map<string, string>();
      // Replaced (`mode: replace`): same id and name, the new header and folder; a skill deleted
      // meanwhile is not brought back.
      for (const row of orderedReplaced) {
        if (hold) {
          const held = await trx
            .updateTable('skill_replacements')
            .set({ expires_at: hold.holdUntil })
            .where('skill_id', '=', row.id)
            .where('holder', '=', hold.holder)
            .executeTakeFirst();
          if (Number(held.numUpdatedRows) === 0) {
            notHeld.add(row.id);
            continue;
          }
        }
        // Read under the hold, so it is the folder this commit leaves (another replace may
        // have moved the row on between this upload's first look and its hold).
        const before = await trx
          .selectFrom('skills')
          .select('storage_path')
          .where('id', '=', row.id)
          .executeTakeFirst();
        if (!before) continue;
        const result = await trx
          .updateTable('skills')
          .set({
            description: row.description,
            visibility: row.visibility,
            metadata: row.metadata,
            storage_path: row.storage_path,
            updated_at: row.updated_at,
          })
          .where('id', '=', row.id)
          .executeTakeFirst();
        if (Number(result.numUpdatedRows) > 0) {
          inserted.add(row.id);
          if (before.storage_path !== row.storage_path) previous.set(row.id, before.storage_path);
        }
      }
      for (const row of ordered) {
        const result = await trx
          .insertInto('skills')
          .values({ ...row, name_sort_key: caseInsensitiveSortKey(row.name) })
          .onConflict((oc) => oc.columns(['workspace_id', 'name']).doNothing())
          .returning('id')
          .executeTakeFirst();
        if (result) inserted.add(result.id);
      }
      return { inserted, notHeld, previous };
    }),
  );
}

/** The fields of a listed skill, in the response's order (`Skill` in src/http/schemas/skills.ts). */
const SKILL_FIELDS: Record<string, JsonField> = {
  id: 'value',
  name: 'value',
  description: 'value',
  visibility: 'value',
  ownerUserId: 'value',
  storagePath: 'value',
  metadata: 'json',
  createdAt: 'value',
  updatedAt: 'value',
};

/**
 * Skills a caller may see in the workspace: shared ones (`workspace`, `organization`) and the
 * private ones of `privateOf`, the caller's user; every skill when `privateOf` is null (an owner
 * or admin: `privateSkillsSeenBy` in src/services/skills.ts); by name (case-insensitive: `caseInsensitiveSortKey`), then id, so
 * pages are stable, read in that order from the listing index. One page as the listing's JSON
 * array, with how many there are in all.
 */
export async function listVisibleSkillsJson(
  db: Db,
  workspaceId: string,
  privateOf: string | null,
  limit: number,
  offset: number,
): Promise<{ page: string; total: number }> {
  const [row] = await visibleSkillsPage(db, { workspaceId, privateOf, limit, offset });
  return { page: row!.page, total: Number(row!.total) };
}

interface VisibleSkillsPage {
  workspaceId: string;
  privateOf: string | null;
  limit: number;
  offset: number;
}

const visibleSkillsPage = preparedSelect(
  (db, { workspaceId, privateOf, limit, offset }: VisibleSkillsPage) => {
    const workspaceSkills = db.selectFrom('skills').where('workspace_id', '=', workspaceId);
    const base =
      privateOf === null
        ? workspaceSkills
        : workspaceSkills.where((eb) =>
            eb.or([
              eb('visibility', 'in', ['workspace', 'organization']),
              eb('owner_user_id', '=', privateOf),
            ]),
          );
    const rows = base
      .select([
        'id',
        'name',
        'description',
        'visibility',
        'owner_user_id as ownerUserId',
        // skillStoragePath (src/services/skill-storage.ts): the skill's folder, not the version
        // folder `storage_path` may name.
        sql<string>`'skills/' || ${sql.ref('workspace_id')} || '/' || ${sql.ref('id')} || '/'`.as(
          'storagePath',
        ),
        'metadata',
        'created_at as createdAt',
        'updated_at as updatedAt',
      ])
      .orderBy('name_sort_key')
      .orderBy(idInCodePointOrder(db))
      .limit(limit)
      .offset(offset);
    const total = base.select((eb) => eb.fn.countAll<number>().as('total'));
    return db.selectNoFrom([jsonArray(dialectOf(db), rows, SKILL_FIELDS).as('page'), total.as('total')]);
  },
);

/** Every skill row of a workspace (tests and maintenance). */
export function listWorkspaceSkills(db: Db, workspaceId: string) {
  return db
    .selectFrom('skills')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .orderBy('name')
    .execute();
}

/** The workspace's skills with these names, by name (for `mode: replace`). */
export async function findSkillsByName(db: Executor, workspaceId: string, names: string[]) {
  const rows = await selectInChunks(names, (chunk) =>
    db
      .selectFrom('skills')
      .select(['id', 'name', 'created_at', 'owner_user_id'])
      .where('workspace_id', '=', workspaceId)
      .where('name', 'in', chunk)
      .execute(),
  );
  const found = new Map<string, Pick<SkillTable, 'id' | 'created_at' | 'owner_user_id'>>();
  for (const { name, ...row } of rows) found.set(name, row);
  return found;
}

/**
 * Takes `skillIds` for one replace upload (`holder`) until `expiresAt`: each one no other replace
 * holds, or whose holder's time ran out before `now`. Returns the ids taken. One statement per
 * skill, in id order, so two uploads never wait on each other crosswise.
 */
export async function holdSkillsForReplace(
  db: Db,
  skillIds: string[],
  holder: string,
  now: string,
  expiresAt: string,
): Promise<Set<string>> {
  const held = new Set<string>();
  await db.deleteFrom('skill_replacements').where('expires_at', '<', now).execute();
  for (const skillId of [...skillIds].sort()) {
    const row = await db
      .insertInto('skill_replacements')
      .values({ skill_id: skillId, holder, expires_at: expiresAt })
      .onConflict((oc) =>
        oc
          .column('skill_id')
          .doUpdateSet({ holder, expires_at: expiresAt })
          .where('skill_replacements.expires_at', '<', now),
      )
      .returning('skill_id')
      .executeTakeFirst();
    if (row) held.add(skillId);
  }
  return held;
}

/**
 * Moves on the hold of one replace upload (holdSkillsForReplace) to `expiresAt`: the ids it
 * still holds (one missing lapsed and was taken over, or cleared away, meanwhile).
 */
export async function renewSkillsForReplace(db: Db, holder: string, expiresAt: string): Promise<Set<string>> {
  const rows = await db
    .updateTable('skill_replacements')
    .set({ expires_at: expiresAt })
    .where('holder', '=', holder)
    .returning('skill_id')
    .execute();
  return new Set(rows.map((row) => row.skill_id));
}

/** Frees what one replace upload holds (holdSkillsForReplace). */
export async function releaseSkillsForReplace(db: Db, holder: string): Promise<void> {
  await db.deleteFrom('skill_replacements').where('holder', '=', holder).execute();
}
