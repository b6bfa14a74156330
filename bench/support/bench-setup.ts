import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type Config, loadConfig } from '../../src/config.js';
import type { SetupFile, WorkspaceSetup } from '../../src/setup/validate.js';

/**
 * The setup file every chat benchmark applies: one workspace with one key, one priced model on a
 * fake OpenAI-compatible upstream at `baseURL`, no rate limit, and the benchmark's agents and
 * projects.
 */
export function benchSetup(options: {
  baseURL: string;
  key: string;
  agents: WorkspaceSetup['agents'];
  projects?: WorkspaceSetup['projects'];
}): SetupFile {
  return {
    providers: [
      {
        id: 'fake',
        type: 'openai-compatible',
        baseURL: options.baseURL,
        apiKey: 'sk-bench-000000000000000000000000000000',
      },
    ],
    models: [
      {
        id: 'fake-small',
        provider: 'fake',
        model: 'small-1',
        pricing: { inputPerMTok: 1, outputPerMTok: 2 },
      },
    ],
    organizations: [
      benchOrganization(options.key, {
        models: ['fake-small'],
        defaultModel: 'fake-small',
        agents: options.agents,
        ...(options.projects ? { projects: options.projects } : {}),
      }),
    ],
  };
}

/**
 * The organization every benchmark uses: one user, owner of workspace `wsp_bench`, which holds
 * the benchmark's key and no rate limit; `workspace` adds to the workspace or overrides it.
 */
export function benchOrganization(
  key: string,
  workspace: Partial<WorkspaceSetup>,
): NonNullable<SetupFile['organizations']>[number] {
  return {
    id: 'org_bench',
    name: 'Bench',
    users: [{ id: 'usr_bench', name: 'Bench', email: 'bench@bench.test' }],
    workspaces: [
      {
        id: 'wsp_bench',
        name: 'Bench',
        limits: { rateLimitPerMinute: 0 },
        members: [{ user: 'usr_bench', role: 'owner' }],
        apiKeys: [{ name: 'bench', user: 'usr_bench', key }],
        ...workspace,
      },
    ],
  };
}

/** The p-th percentile of ascending samples (NaN when there are none). */
export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

/** "load average 1.2 0.9 0.7 on 2 CPUs": printed beside figures, since the machine may be shared. */
export function loadAverage(): string {
  return `load average ${os
    .loadavg()
    .map((n) => n.toFixed(1))
    .join(' ')} on ${os.cpus().length} CPUs`;
}

/** Times `count` calls of `once` in a row, in milliseconds. */
export async function timeEach(count: number, once: () => Promise<void>): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await once();
    samples.push(performance.now() - started);
  }
  return samples;
}

/**
 * Times `calls` calls of each of `runs` in five interleaved rounds, so drift (GC, CPU frequency,
 * other load on the machine) hits every side alike; `afterRound` runs between rounds. Returns
 * each run's samples in ascending order.
 */
export async function interleavedRounds(
  calls: number,
  runs: Array<() => Promise<void>>,
  afterRound: () => void = () => {},
): Promise<number[][]> {
  const samples = runs.map((): number[] => []);
  for (let round = 0; round < 5; round++) {
    for (const [i, run] of runs.entries()) samples[i]!.push(...(await timeEach(calls / 5, run)));
    afterRound();
  }
  return samples.map((sorted) => sorted.sort((a, b) => a - b));
}

/** A fresh data directory under the system's temp dir, and the config of a quiet app on it. */
export function benchDataDir(prefix: string): { dataDir: string; config: Config } {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), `atrium-bench-${prefix}-`));
  const config = loadConfig({
    ATRIUM_DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    ATRIUM_SIGNING_SECRET: 'bench-signing-secret-of-at-least-32-bytes',
  });
  return { dataDir, config };
}
