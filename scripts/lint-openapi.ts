/**
 * Lints the OpenAPI document the app serves (not a copy kept by hand) with Redocly's
 * recommended rules: builds the app on a throwaway data directory, dumps `/v1/openapi.json`
 * to a temp file and runs `redocly lint` on it. Runs offline (telemetry and update checks off).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { migrateToLatest, openDatabase } from '../src/db/database.js';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const dir = mkdtempSync(path.join(tmpdir(), 'atrium-openapi-'));
let status = 1;
try {
  const config = loadConfig({
    ATRIUM_DATA_DIR: dir,
    LOG_LEVEL: 'silent',
    ATRIUM_SIGNING_SECRET: 'openapi-lint-signing-secret-of-32-bytes',
  });
  const database = await openDatabase(config.database);
  await migrateToLatest(database.db, database.schema);
  const app = await buildApp({ config, db: database.db });
  const res = await app.inject({ method: 'GET', url: '/v1/openapi.json' });
  await app.close();
  await database.close();
  if (res.statusCode !== 200) throw new Error(`GET /v1/openapi.json answered ${res.statusCode}`);
  const file = path.join(dir, 'openapi.json');
  writeFileSync(file, JSON.stringify(res.json(), null, 2));
  const redocly = path.join(root, 'node_modules', '.bin', 'redocly');
  const result = spawnSync(
    redocly,
    ['lint', file, '--config', path.join(root, 'redocly.yaml'), '--format', 'stylish'],
    {
      stdio: 'inherit',
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    },
  );
  status = result.status ?? 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exit(status);
