import type { Db } from './db/database.js';
import { skillUploadRoot, sweepStaleUploads } from './http/skill-upload-spool.js';
import type { Clock } from './ids.js';
import { sweepOrphanProjectObjects } from './services/project-admin.js';
import { sweepOrphanSkillObjects } from './services/skills.js';
import type { ObjectStore, StoreLog } from './storage/object-store.js';

/**
 * How long a leftover must have gone unwritten before it is removed: a younger one may belong to
 * a request still running on another process sharing the storage. An upload may take longer
 * than this on a slow link, but writes at least every body timeout (body-deadline.ts), so its
 * temp file or spool part never looks this old.
 */
export const LEFTOVER_GRACE_MS = 60 * 60 * 1000;

export interface LeftoverDeps {
  db: Db;
  store: ObjectStore;
  clock: Clock;
  dataDir: string;
  /** Where a leftover that could not be removed is reported (it is tried again next time). */
  log: StoreLog;
}

export interface SweptLeftovers {
  /** Upload temp files of the fs store. */
  tempFiles: number;
  /** Spool directories of skill uploads. */
  skillSpools: number;
  /** Stored files of skills that have no record. */
  orphanSkills: number;
  /** Folders of projects that no longer exist (uploads through URLs handed out before the delete). */
  orphanProjects: number;
}

/** Removes what a crashed process left behind, when older than the grace. */
export async function sweepLeftovers(
  deps: LeftoverDeps,
  graceMs = LEFTOVER_GRACE_MS,
): Promise<SweptLeftovers> {
  const now = deps.clock();
  const [tempFiles, skillSpools] = await Promise.all([
    deps.store.sweepStaleTemp(graceMs, now),
    sweepStaleUploads(skillUploadRoot(deps.dataDir), graceMs, now),
  ]);
  const orphanSkills = await sweepOrphanSkillObjects(deps.db, deps.store, now, deps.log, graceMs);
  const orphanProjects = await sweepOrphanProjectObjects(deps.db, deps.store, now, graceMs, deps.log);
  return { tempFiles, skillSpools, orphanSkills, orphanProjects };
}

export interface PeriodicTask {
  /** No run starts after this; resolves once a run in progress has finished. */
  stop(): Promise<void>;
}

/**
 * Runs `task` now and then every `intervalMs` (0: only now), one run at a time: a slow run
 * delays the next instead of overlapping it. A run that fails goes to `onError` and the next
 * runs on time. The timer does not keep the process alive.
 */
export function runPeriodically(
  task: () => Promise<void>,
  intervalMs: number,
  onError: (error: unknown) => void,
): PeriodicTask {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const runOnce = () => {
    running = task()
      .catch(onError)
      .finally(() => {
        if (!stopped && intervalMs > 0) timer = setTimeout(runOnce, intervalMs).unref();
      });
  };
  runOnce();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
