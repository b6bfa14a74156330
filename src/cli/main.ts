import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { generateApiKey, hashApiKey, keyPrefix } from '../auth/api-keys.js';
import { type Config, ConfigError, loadConfig, loadSettings } from '../config.js';
import { type DatabaseHandle, migrateToLatest, openDatabase } from '../db/database.js';
import { findApiKeyInfo, revokeApiKey } from '../db/repositories/api-keys.js';
import { findUser, findWorkspace, findWorkspaceWithRole } from '../db/repositories/tenancy.js';
import { matchesPattern } from '../http/schemas/patterns.js';
import { newId } from '../ids.js';
import { startServer } from '../server.js';
import {
  insertOrganizationKeyIfNameFree,
  insertWorkspaceKeyIfNameFree,
  keyExpiry,
} from '../services/api-key-admin.js';
import { applySetup } from '../setup/apply.js';
import { exportText, exportWarnings, exportWorkspace } from '../setup/export.js';
import {
  ApiManagedObjectsError,
  DuplicateAgentTitlesError,
  MovedObjectError,
  TakenIdentityError,
} from '../setup/ownership.js';
import { decodeSetupFile } from '../setup/file-encoding.js';
import { parseSetupText } from '../setup/validate.js';
import { createDemo, demoInstructions, demoKeyHint, hasAnyOrganization } from './demo.js';

export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

const USAGE = `Usage: atrium <command>

  serve                                   migrate if needed, then serve the API
  migrate                                 apply pending migrations and exit
  apply FILE [--json] [--adopt]           apply a setup file (YAML or JSON), idempotently;
                                          --adopt takes over objects managed through the API
  export --workspace ID                   print the workspace's API-managed agents and projects
                                          as setup-file YAML
  keys create --workspace ID --user ID [--name N] [--expires-at TIME] [--json]
  keys create --organization ID --user ID [--name N] [--expires-at TIME] [--json]
  keys revoke KEY_ID                      revoke a key
  demo                                    create the demo workspace on an empty database`;

/**
 * Every error the command prints: each line of it on stderr starts with `atrium: ` (README, "The
 * `atrium` command and the setup file"), so a script or a log search tells the command's own errors from anything
 * else on the terminal.
 */
function printError(...lines: string[]): void {
  for (const line of lines) console.error(`atrium: ${line}`);
}

/**
 * A runtime failure's message on one line: a Node error can say nothing in `message` (the
 * AggregateError of a host name whose every address refused) or run over several lines.
 */
export function failureMessage(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const inner = error instanceof AggregateError ? error.errors.map((e) => failureMessage(e)) : [];
  const text =
    error.message || inner.filter(Boolean).join('; ') || (error as { code?: string }).code || error.name;
  return text.replace(/\s*\n\s*/g, ' ');
}

class UsageError extends Error {}
/** A well-formed command naming something that is not there: exit 2, without the usage text. */
class BadArgument extends Error {}

/**
 * Runs `fn` on the configured database, migrated to the latest schema first unless told not to.
 * Only `serve` signs URLs: the commands that use this never read or make the signing secret.
 */
async function withDatabase<T>(
  fn: (database: DatabaseHandle) => Promise<T>,
  { migrateFirst = true } = {},
): Promise<T> {
  const config = loadSettings();
  const database = await openDatabase(config.database);
  try {
    if (migrateFirst) await migrateToLatest(database.db);
    return await fn(database);
  } finally {
    await database.close();
  }
}

async function serve(): Promise<number> {
  const config = loadConfig();
  try {
    await startServer(config, {
      onListening: (address) => {
        console.log(`Atrium listening on ${address} (docs: ${docsBase(config, address)}/docs)`);
      },
      // A new user's first `npm start` on the embedded database gets a working key at once; a
      // later start says how to make another. Not when a signal came before the server listened.
      onServing:
        config.database.kind === 'sqlite'
          ? (address, stopping) => printDemo(config, address, stopping)
          : undefined,
    });
  } catch (error) {
    const hint = listenFailureHint(error, config.port);
    if (!hint) throw error;
    printError(failureMessage(error), hint);
    return EXIT.failure;
  }
  return new Promise<number>(() => {}); // serves until a signal ends the process
}

/**
 * The demo's lines, or why it was not made. The server is up and stays up: a demo it could not
 * make (another start making it at the same moment held the database) costs the newcomer's key
 * line, not the service. A shutdown waits for this (server.ts), so its lines come before "stopped".
 */
async function printDemo(config: Config, address: string, stopping: AbortSignal): Promise<void> {
  try {
    const lines = await demoLines(config, docsBase(config, address), stopping);
    if (lines) console.log(lines);
  } catch (error) {
    printError(`the demo workspace was not made: ${failureMessage(error)}`);
  }
}

/** The URL the start's lines name: a browser on this machine finds 127.0.0.1 as `localhost`. */
function docsBase(config: Config, address: string): string {
  return config.publicUrl ?? address.replace('://127.0.0.1', '://localhost');
}

/**
 * The demo's key when this start made the demo, else how to make a key for it. Made only once the
 * server listens: made before, a start whose port was taken exited without printing the key, and
 * every later start said it "was shown once". (Rolling the demo back after a failed listen was the
 * other way, but a process starting meanwhile could find the demo and say its key was shown
 * before it went.) Two starts at once stay apart as before: createDemo is one transaction on
 * fixed ids, so one makes the demo and its key; the other says it made none (a locked SQLite
 * file) and serves on, or finds the demo complete, makes no key and prints how to make one.
 */
async function demoLines(config: Config, base: string, stopping: AbortSignal): Promise<string | undefined> {
  const database = await openDatabase(config.database);
  try {
    if (!(await hasAnyOrganization(database.db))) {
      // A process told to stop makes no demo: its key would be shown for a server going away, or
      // cut off by the exit and never seen. One committed before the signal is still shown.
      const demo = await createDemo(database.db, new Date(), stopping).catch((error: unknown) => {
        if (stopping.aborted && error === stopping.reason) return undefined;
        throw error;
      });
      if (demo?.key) return demoInstructions(base, demo.key, config.apiKeyHeader);
    }
    if (stopping.aborted) return undefined;
    return await demoKeyHint(database.db, process.env.ATRIUM_DATA_DIR ? config.dataDir : undefined);
  } finally {
    await database.close();
  }
}

/** What to do when the port cannot be had: a newcomer's second `npm start` meets the first one. */
export function listenFailureHint(error: unknown, port: number): string | undefined {
  // Not checked to be free: the hint only has to name a port other than the one refused.
  const next = port < 65535 ? port + 1 : port - 1;
  const onPort = (other: number) => `PORT=${other} npm start, or PORT=${other} ./bin/atrium serve`;
  switch ((error as { code?: string }).code) {
    case 'EADDRINUSE':
      return `another process is listening on port ${port}: stop it, or start on another port (${onPort(next)})`;
    case 'EACCES':
      // Below 1024 the usual cause is the privileged ports; from 1024 up it is something else
      // (a reserved range, a security policy), which another port may avoid all the same.
      return port < 1024
        ? `this user may not listen on port ${port}: pick one from 1024 up (${onPort(3001)})`
        : `the system refused port ${port} to this user: start on another port (${onPort(next)})`;
    default:
      return undefined;
  }
}

async function migrate(): Promise<number> {
  // Not migrated by withDatabase first: what this run applied is what it reports.
  const applied = await withDatabase((database) => migrateToLatest(database.db), { migrateFirst: false });
  console.log(applied.length > 0 ? `Applied migrations: ${applied.join(', ')}` : 'Database is up to date');
  return EXIT.ok;
}

async function apply(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    options: { json: { type: 'boolean' }, adopt: { type: 'boolean' } },
    allowPositionals: true,
  });
  const [file] = positionals;
  if (!file || positionals.length > 1) throw new UsageError('apply needs exactly one FILE');
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (error) {
    printError(`${file}: cannot read: ${(error as Error).message}`);
    return EXIT.usage;
  }
  const decoded = decodeSetupFile(bytes, file);
  const parsed = decoded.ok ? parseSetupText(decoded.text, file) : decoded;
  if (!parsed.ok) {
    printError(
      `${file} is invalid; nothing was applied:`,
      ...parsed.problems.map((problem) => `${file}: ${problem.path}: ${problem.message}`),
    );
    return EXIT.usage;
  }
  let report: Awaited<ReturnType<typeof applySetup>>;
  try {
    report = await withDatabase((database) =>
      applySetup(database.db, parsed.setup, { now: new Date(), adopt: values.adopt ?? false }),
    );
  } catch (error) {
    if (error instanceof MovedObjectError) {
      printError(
        `${file}: nothing was applied: ${error.message}`,
        error.foundBy === 'id'
          ? 'An id names one object wherever it lives: check the id, or leave it out.'
          : 'An email names one user wherever it lives: check the email, or set the user up in its own organization.',
      );
      return EXIT.usage;
    }
    if (error instanceof TakenIdentityError) {
      printError(`${file}: nothing was applied: ${error.message}`, error.hint);
      return EXIT.usage;
    }
    if (error instanceof DuplicateAgentTitlesError) {
      printError(
        `${file}: nothing was applied: agents would share a title in a workspace:`,
        ...error.titles.map((title) => `  ${title}`),
      );
      return EXIT.usage;
    }
    if (!(error instanceof ApiManagedObjectsError)) throw error;
    printError(
      `${file}: nothing was applied: these objects are managed through the API:`,
      ...error.objects.map((object) => `  ${object}`),
      'Run again with --adopt to make the file their manager (API writes to them then answer 409).',
    );
    return EXIT.usage;
  }
  if (values.json) {
    console.log(JSON.stringify({ keys: report.keys, ids: report.ids, objects: report.objects }));
    return EXIT.ok;
  }
  if (report.created.length === 0 && report.updated.length === 0) console.log(`${file}: nothing to change`);
  for (const line of report.created) console.log(`created ${line}`);
  for (const line of report.updated) console.log(`updated ${line}`);
  for (const [name, key] of Object.entries(report.keys)) console.log(`key ${name}: ${key}`);
  return EXIT.ok;
}

async function exportCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    options: { workspace: { type: 'string' } },
    allowPositionals: true,
  });
  if (!values.workspace || positionals.length > 0) throw new UsageError('export needs --workspace ID');
  const workspaceId = values.workspace;
  const setup = await withDatabase((database) => exportWorkspace(database.db, workspaceId));
  if (!setup) throw new BadArgument(`No workspace ${workspaceId}`);
  // Not trimmed: the last text's trailing newlines may end the document. console.log adds the final one.
  console.log(exportText(setup, workspaceId).replace(/\n$/, ''));
  printError(...exportWarnings(setup).map((warning) => `warning: ${warning}`));
  return EXIT.ok;
}

async function keys(args: string[]): Promise<number> {
  const [action, ...rest] = args;
  if (action === 'revoke') {
    const [keyId] = rest;
    if (!keyId || rest.length > 1) throw new UsageError('keys revoke needs exactly one KEY_ID');
    const outcome = await withDatabase(async ({ db }) => {
      if (!(await findApiKeyInfo(db, keyId))) return 'unknown';
      return (await revokeApiKey(db, keyId, new Date().toISOString())) ? 'revoked' : 'already';
    });
    if (outcome === 'unknown') throw new BadArgument(`No key ${keyId}`);
    // Revoking twice answers the same, as on the API: the key is revoked either way.
    console.log(outcome === 'revoked' ? `Revoked ${keyId}` : `Key ${keyId} was already revoked`);
    return EXIT.ok;
  }
  if (action !== 'create') throw new UsageError('keys needs "create" or "revoke"');
  const { values } = parseArgs({
    args: rest,
    options: {
      workspace: { type: 'string' },
      organization: { type: 'string' },
      user: { type: 'string' },
      name: { type: 'string' },
      'expires-at': { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  if (!values.user || Boolean(values.workspace) === Boolean(values.organization)) {
    throw new UsageError('keys create needs --user and exactly one of --workspace or --organization');
  }
  // The API's rule for a key's name (1–100 characters on one line, one that shows), so a key made here can be
  // listed and managed like any other.
  if (
    values.name !== undefined &&
    ([...values.name].length > 100 || !matchesPattern('oneLineName', values.name))
  ) {
    throw new UsageError(
      '--name must be 1–100 characters on one line (no control characters such as newlines or tabs, no line separators), at least one of which shows (not only spaces, marks or invisible characters)',
    );
  }
  const kind = values.workspace ? 'workspace' : 'organization';
  let expiresAt: string | null;
  try {
    expiresAt = keyExpiry(values['expires-at'], new Date(), '--expires-at');
  } catch (error) {
    throw new BadArgument((error as Error).message);
  }
  return withDatabase(async ({ db }) => {
    const user = await findUser(db, values.user!);
    let organizationId: string;
    if (values.workspace) {
      const workspace = await findWorkspace(db, values.workspace);
      if (!workspace) throw new BadArgument(`No workspace ${values.workspace}`);
      organizationId = workspace.organization_id;
    } else {
      const org = await db
        .selectFrom('organizations')
        .select('id')
        .where('id', '=', values.organization!)
        .executeTakeFirst();
      if (!org) throw new BadArgument(`No organization ${values.organization}`);
      organizationId = org.id;
    }
    if (!user || user.organization_id !== organizationId) {
      throw new BadArgument(`No user ${values.user} in organization ${organizationId}`);
    }
    // A workspace key acts for a member of its workspace: one for anyone else would never work.
    if (values.workspace && !(await findWorkspaceWithRole(db, values.workspace, user.id))?.role) {
      throw new BadArgument(`User ${values.user} is not a member of workspace ${values.workspace}`);
    }
    const key = generateApiKey(kind);
    const id = newId('key');
    const row = {
      id,
      name: values.name ?? `${kind}-key-${id.slice(-6)}`,
      kind,
      organizationId,
      userId: user.id,
      keyHash: hashApiKey(key),
      keyPrefix: keyPrefix(key),
      expiresAt,
      createdAt: new Date().toISOString(),
      // Made outside any setup file: a file declaring its name takes it over (and re-keys it)
      // only with --adopt, as for a key made over the API (management.md).
      managedBy: 'api',
    } as const;
    // One live key of a name in its workspace or organization, as the API keeps workspace keys.
    if (!values.workspace) {
      if (!(await insertOrganizationKeyIfNameFree(db, { ...row, workspaceId: null }))) {
        throw new BadArgument(`A key named "${row.name}" already exists in organization ${organizationId}`);
      }
    } else if (!(await insertWorkspaceKeyIfNameFree(db, { ...row, workspaceId: values.workspace }))) {
      throw new BadArgument(`A key named "${row.name}" already exists in workspace ${values.workspace}`);
    }
    if (values.json) console.log(JSON.stringify({ id, key }));
    else console.log(`Created ${kind} key ${id} (shown once):\n${key}`);
    return EXIT.ok;
  });
}

async function demo(): Promise<number> {
  const config = loadSettings();
  return withDatabase(async ({ db }) => {
    if (await hasAnyOrganization(db)) {
      printError('The database is not empty; `atrium demo` only runs on an empty one.');
      return EXIT.usage;
    }
    const created = await createDemo(db, new Date());
    const base = config.publicUrl ?? `http://localhost:${config.port}`;
    console.log(demoInstructions(base, created.key!, config.apiKeyHeader));
    return EXIT.ok;
  });
}

/**
 * Runs one command and answers its exit code: 0, 2 for bad usage, a bad setting or an invalid
 * setup file, 1 for a runtime failure (database unreachable, port in use). Every error is printed
 * here, as `atrium: ` lines; it never rejects.
 */
export async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv;
  try {
    // These take no arguments: one given was ignored before, so `migrate --dry-run` migrated and
    // `serve --port 4000` served on PORT.
    if ((command === 'serve' || command === 'migrate' || command === 'demo') && args.length > 0) {
      throw new UsageError(`${command} takes no arguments, got "${args.join(' ')}"`);
    }
    switch (command) {
      case 'serve':
        return await serve();
      case 'migrate':
        return await migrate();
      case 'apply':
        return await apply(args);
      case 'keys':
        return await keys(args);
      case 'export':
        return await exportCommand(args);
      case 'demo':
        return await demo();
      case undefined:
      case 'help':
      case '--help':
        console.log(USAGE);
        return command ? EXIT.ok : EXIT.usage;
      default:
        throw new UsageError(`Unknown command "${command}"`);
    }
  } catch (error) {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      printError((error as Error).message);
      console.error(`\n${USAGE}`);
      return EXIT.usage;
    }
    // A bad setting or a name that is not there: the usage text would not help.
    if (error instanceof BadArgument || error instanceof ConfigError) {
      printError((error as Error).message);
      return EXIT.usage;
    }
    printError(failureMessage(error));
    return EXIT.failure;
  }
}
