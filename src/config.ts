import path from 'node:path';
import pg from 'pg';
import { readOrCreateSecretFile } from './secret-file.js';

/** The whole runtime configuration, read once from the environment at start and passed down. */
export interface Config {
  port: number;
  host: string;
  dataDir: string;
  database: DatabaseConfig;
  storage: StorageConfig;
  publicUrl: string | undefined;
  signingSecret: string;
  apiKeyHeader: string;
  providers: {
    openaiApiKey?: string;
    anthropicApiKey?: string;
    openaiBaseUrl?: string;
    /** The environment as read at start, for providers that name their key with `apiKeyEnv`. */
    env: Readonly<Record<string, string | undefined>>;
  };
  /** Per-key requests per minute when the workspace sets none; 0 turns the limit off. */
  defaultRateLimitPerMinute: number;
  /** How long a model provider may take before the request fails with 504. */
  upstreamTimeoutMs: number;
  /** The largest non-streamed provider response read (ATRIUM_MAX_PROVIDER_RESPONSE_BYTES); larger: 502. */
  maxProviderResponseBytes: number;
  /** What one page of a chat's messages holds at most of stored parts (ATRIUM_MESSAGE_PAGE_BYTES). */
  messagePageBytes: number;
  logLevel: string;
  jsonBodyLimitBytes: number;
  /** How long a client may take to send its request; see README "Timeouts". */
  http: HttpTimeouts;
  /** How often leftovers of a crash (temp uploads, spools, orphan skill files) are swept; 0: only at start. */
  sweepIntervalMs: number;
  /** Redis shared by the processes (REDIS_URL); unset: the database coordinates them. */
  redis: { url: string; keyPrefix: string } | undefined;
  /** `POST /chat` carries file parts as data: URLs, so it takes more than other JSON bodies. */
  chatBodyLimitBytes: number;
  /** Replies generated at once by this process; beyond it 503 with Retry-After. */
  maxConcurrentReplies: number;
  /** Origins allowed to call the API from a browser; `*` for any; empty: none. */
  /**
   * Whether agents made over the API may use MCP servers on private, loopback or link-local
   * addresses (src/models/tools/mcp-address.ts); setup-file agents always may.
   */
  mcpAllowPrivateNetwork: boolean;
  corsOrigins: string[];
  /** The background indexer of project files (docs/knowledge.md "Settings"). */
  indexing: IndexingConfig;
  /** What was set to no effect, in words naming the settings (never their values): `atrium serve` logs each. */
  warnings: string[];
}

export interface IndexingConfig {
  /** Extraction of one file may take this long, then the attempt fails. */
  timeoutMs: number;
  /** Files indexed at once by one process. */
  concurrency: number;
  /** How often a process looks for work other processes' syncs marked. */
  pollMs: number;
  /** Attempts before a file ends `failed`. */
  maxAttempts: number;
  /** Wait before the first retry; doubled on each further one. */
  retryMs: number;
  /** A claim lapses this long after its last renewal (a process that died holds none past it). */
  leaseMs: number;
}

export interface HttpTimeouts {
  /** The request line and headers must arrive within this (Node's headersTimeout); else 408. */
  headersTimeoutMs: number;
  /** A body's base allowance, and the longest pause allowed between its bytes. */
  bodyTimeoutMs: number;
  /** Each byte received extends the body's deadline by 1/rate seconds (Apache mod_reqtimeout's MinRate). */
  bodyMinBytesPerSecond: number;
  /** An idle connection between two requests is closed after this. */
  keepAliveTimeoutMs: number;
  /** A connection with no traffic either way (e.g. a client that stops reading) is closed after this. */
  idleTimeoutMs: number;
  /** A streamed answer silent this long gets an event-stream comment (http/stream-heartbeat.ts); 0: never. */
  streamHeartbeatMs: number;
}

export type DatabaseConfig =
  | { kind: 'sqlite'; file: string }
  | {
      kind: 'postgres';
      url: string;
      schema?: string;
      /**
       * How long opening a connection, or waiting for a free pooled one, may take before the
       * statement fails with 503 (ATRIUM_DB_CONNECT_TIMEOUT_MS); default
       * DEFAULT_DB_CONNECT_TIMEOUT_MS.
       */
      connectTimeoutMs?: number;
    };

export type StorageConfig =
  | { kind: 'fs'; root: string }
  | {
      kind: 's3';
      endpoint?: string;
      region: string;
      bucket: string;
      accessKeyId?: string;
      secretAccessKey?: string;
      forcePathStyle: boolean;
      /**
       * How long a request to S3 may go without a byte either way (connected, waiting for the
       * answer, or mid-body) before it fails with 503, not retried (ATRIUM_S3_IDLE_TIMEOUT_MS);
       * default DEFAULT_S3_IDLE_TIMEOUT_MS.
       */
      idleTimeoutMs?: number;
    };

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

/**
 * A whole number written in decimal digits, white space around them allowed (as around a flag);
 * unset, empty or blank: the default. Not read with Number(), which takes `0x50` (80), `1e3` and
 * reads a blank value as 0: `PORT=" "` listened on any port and a blank rate limit turned it off.
 */
function integer(env: Env, name: string, fallback: number, min = 0, max = Infinity): number {
  const raw = env[name];
  const digits = raw?.trim();
  if (digits === undefined || digits === '') return fallback;
  const value = /^[0-9]+$/.test(digits) ? Number(digits) : NaN;
  if (!Number.isInteger(value) || value < min || value > max) {
    const range = max === Infinity ? `≥ ${min}` : `from ${min} to ${max}`;
    throw new ConfigError(`${name} must be an integer ${range}, got "${raw}"`);
  }
  return value;
}

/** The longest a Node timer waits: one set longer fires after 1 ms instead (TimeoutOverflowWarning). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A duration in milliseconds that a timer can wait. */
function milliseconds(env: Env, name: string, fallback: number, min = 0): number {
  return integer(env, name, fallback, min, MAX_TIMER_MS);
}

/**
 * Whether PostgreSQL's client can read the URL, read by its own parser (which takes a space in a
 * password, or no host). One it cannot read (a bad port, an unclosed `[`) failed at the first
 * connection as "Invalid URL", exit 1, as if the database were down. The URL is not repeated in
 * the message: it may hold a password.
 */
function readsAsUrl(url: string): boolean {
  try {
    new pg.Client({ connectionString: url });
    return true;
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_INVALID_URL') return false;
    throw error;
  }
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function logLevel(env: Env): string {
  const level = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(level)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${level}"`);
  }
  return level;
}

/** `true`/`1` or `false`/`0` (unset or empty: false). */
function flag(env: Env, name: string): boolean {
  // Case-insensitive: `False`/`TRUE` (Ansible, Python, Helm) mean what they say.
  const value = env[name]?.trim().toLowerCase();
  if (value === undefined || value === '' || value === 'false' || value === '0') return false;
  if (value === 'true' || value === '1') return true;
  throw new ConfigError(`${name} must be "true" or "false", got "${env[name]}"`);
}

/**
 * The shortest signing secret that is not warned about, in bytes: RFC 2104 discourages HMAC keys
 * shorter than the hash's output (32 bytes for SHA-256). A shorter one is still taken (scripts
 * and test setups set short ones; refusing them would stop those starts), and `atrium serve`
 * warns about it. Only an empty one is refused: with it anyone could sign URLs for any tenant.
 */
export const MIN_SIGNING_SECRET_BYTES = 32;

/**
 * The HMAC secret for signed URLs: from the environment, else generated once and kept in the
 * data dir so that URLs stay valid across restarts.
 */
function signingSecret(env: Env, dataDir: string): string {
  if (env.ATRIUM_SIGNING_SECRET) return env.ATRIUM_SIGNING_SECRET;
  const file = path.join(dataDir, 'signing-secret');
  const secret = readOrCreateSecretFile(file);
  if (secret === '') {
    // Left empty by a crash between creating and writing it (an older version's, or one on a
    // file system without hard links), or by hand.
    throw new ConfigError(
      `${file} holds no signing secret (it is empty): delete it to have a new one generated (URLs signed before stop working), or set ATRIUM_SIGNING_SECRET`,
    );
  }
  return secret;
}

function httpTimeouts(env: Env, upstreamTimeoutMs: number): HttpTimeouts {
  // A silent connection's limit. A non-streamed reply pauses it while it works
  // (http/idle-timeout-pause.ts); never shorter than the upstream timeout all the same, so that a
  // request waiting on a provider some other way is not cut before it could answer 504.
  const idleTimeoutMs = milliseconds(
    env,
    'ATRIUM_IDLE_TIMEOUT_MS',
    Math.min(MAX_TIMER_MS, Math.max(600_000, upstreamTimeoutMs + 60_000)),
    1,
  );
  if (idleTimeoutMs <= upstreamTimeoutMs) {
    throw new ConfigError(
      env.ATRIUM_IDLE_TIMEOUT_MS
        ? `ATRIUM_IDLE_TIMEOUT_MS (${idleTimeoutMs}) must be longer than ATRIUM_UPSTREAM_TIMEOUT_MS (${upstreamTimeoutMs})`
        : // Only the default is in the way: name the setting the operator gave.
          `ATRIUM_UPSTREAM_TIMEOUT_MS must be below ${MAX_TIMER_MS} (the idle timeout, by default 60 s longer, must be longer), got "${upstreamTimeoutMs}"`,
    );
  }
  return {
    headersTimeoutMs: milliseconds(env, 'ATRIUM_HEADERS_TIMEOUT_MS', 10_000, 1),
    bodyTimeoutMs: milliseconds(env, 'ATRIUM_BODY_TIMEOUT_MS', 20_000, 1),
    bodyMinBytesPerSecond: integer(env, 'ATRIUM_BODY_MIN_BYTES_PER_SECOND', 8192, 1),
    keepAliveTimeoutMs: milliseconds(env, 'ATRIUM_KEEP_ALIVE_TIMEOUT_MS', 72_000, 1),
    idleTimeoutMs,
    streamHeartbeatMs: milliseconds(env, 'ATRIUM_STREAM_HEARTBEAT_MS', 15_000),
  };
}

/**
 * Where clients reach this server (signed URLs, the OpenAPI `servers`): an http(s) origin, a path
 * prefix allowed (behind a proxy), kept without trailing slashes. Not echoed when refused: a URL
 * may carry a password.
 */
function publicUrl(env: Env): string | undefined {
  const raw = env.ATRIUM_PUBLIC_URL?.replace(/\/+$/, '');
  if (!raw) return undefined;
  const url = URL.canParse(raw) ? new URL(raw) : undefined;
  if (
    !url ||
    (url.protocol !== 'http:' && url.protocol !== 'https:') ||
    url.username ||
    url.password ||
    url.search ||
    url.hash
  ) {
    throw new ConfigError(
      'ATRIUM_PUBLIC_URL must be an http:// or https:// URL (such as https://atrium.example.com), without credentials, query or fragment',
    );
  }
  // origin + path: an empty `?` or `#` (no search, no hash) would stay in href and end up in signed URLs.
  return `${url.origin}${url.pathname}`.replace(/\/+$/, '');
}

/**
 * `ATRIUM_STORAGE=s3`. Each of these used to start and then fail every storage request (an
 * endpoint without a scheme: "Invalid URL"; a bucket written as `s3://atrium`), or, a key id
 * given without its secret (or the other way round), quietly sign with whatever credentials the
 * SDK's default chain found (another identity, or none).
 */
function s3Storage(env: Env, idleTimeoutMs: number): StorageConfig {
  if (!env.S3_BUCKET) throw new ConfigError('ATRIUM_STORAGE=s3 needs S3_BUCKET');
  // AWS and its compatibles take lower-case letters, digits, `.` and `-`; older AWS buckets
  // also upper case and `_`. Never a `/`, `:` or space (a URL, or a bucket and a folder).
  if (!/^[A-Za-z0-9._-]+$/.test(env.S3_BUCKET)) {
    throw new ConfigError(
      `S3_BUCKET must be a bucket name (letters, digits, ".", "-" and "_", such as atrium), got "${env.S3_BUCKET}"`,
    );
  }
  const endpoint = env.S3_ENDPOINT?.trim() || undefined;
  if (endpoint !== undefined) {
    const url = URL.canParse(endpoint) ? new URL(endpoint) : undefined;
    if (
      !url ||
      (url.protocol !== 'http:' && url.protocol !== 'https:') ||
      url.username ||
      url.password ||
      url.search ||
      url.hash
    ) {
      // Not echoed: it may carry a password.
      throw new ConfigError(
        'S3_ENDPOINT must be an http:// or https:// URL (such as http://127.0.0.1:9000), without credentials, query or fragment',
      );
    }
  }
  // The AWS SDK's own rule (a host name label): it is part of AWS's host names, and signed into
  // every request. Another value (a space, "_", a URL) started and then failed every request.
  const region = env.S3_REGION?.trim() || 'us-east-1';
  if (!/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/.test(region)) {
    throw new ConfigError(
      `S3_REGION must be a region name (letters, digits and "-", such as us-east-1, or auto for R2), got "${env.S3_REGION}"`,
    );
  }
  const accessKeyId = env.S3_ACCESS_KEY_ID || undefined;
  const secretAccessKey = env.S3_SECRET_ACCESS_KEY || undefined;
  if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) {
    throw new ConfigError(
      "S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY must be set together (or neither, for the AWS SDK's default credentials)",
    );
  }
  return {
    kind: 's3',
    endpoint,
    region,
    bucket: env.S3_BUCKET,
    accessKeyId,
    secretAccessKey,
    forcePathStyle: flag(env, 'S3_FORCE_PATH_STYLE'),
    idleTimeoutMs,
  };
}

const S3_SETTINGS = [
  'S3_ENDPOINT',
  'S3_REGION',
  'S3_BUCKET',
  'S3_ACCESS_KEY_ID',
  'S3_SECRET_ACCESS_KEY',
  'S3_FORCE_PATH_STYLE',
] as const;

/**
 * S3 settings given while ATRIUM_STORAGE was left unset: an operator who forgot it was served
 * from the data dir without a word. Not refused (a shared environment file may hold them); an
 * explicit `ATRIUM_STORAGE=fs` says the data dir is meant.
 */
function unusedS3Settings(env: Env): string[] {
  if (env.ATRIUM_STORAGE) return [];
  const set = S3_SETTINGS.filter((name) => env[name]?.trim());
  if (set.length === 0) return [];
  return [
    `${set.join(', ')} ${set.length === 1 ? 'is' : 'are'} set but ATRIUM_STORAGE is not: files are stored in the data dir (ATRIUM_STORAGE=fs). Set ATRIUM_STORAGE=s3 to store them in S3, or ATRIUM_STORAGE=fs to keep them here without this warning`,
  ];
}

/** RFC 9110 5.1: a field name is a token. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * The header a key may come in besides `Authorization: Bearer`, lower-case (as Node gives
 * request headers). A name no request can carry, or `authorization` itself (whose raw value
 * "Bearer KEY" would then be looked up as the key), used to start and refuse every such key.
 */
function apiKeyHeader(env: Env): string {
  const name = (env.ATRIUM_API_KEY_HEADER ?? '').trim() || 'x-service-api-key';
  if (!HEADER_NAME.test(name)) {
    throw new ConfigError(
      `ATRIUM_API_KEY_HEADER must be an HTTP header name (letters, digits and !#$%&'*+-.^_\`|~, such as x-service-api-key), got "${name}"`,
    );
  }
  if (name.toLowerCase() === 'authorization') {
    throw new ConfigError(
      'ATRIUM_API_KEY_HEADER cannot be Authorization, which is always read for "Bearer KEY": unset it or name another header',
    );
  }
  return name.toLowerCase();
}

/**
 * The origins browser apps may call from (spec/chats.md), each as a browser sends it in
 * `Origin` (the serialized origin: lower-case scheme and host, no default port, no path), so
 * that `https://App.example.com:443/` matches `https://app.example.com`; or `['*']` alone.
 * Compared as written, such an origin never matched; a path, a missing scheme or a pattern
 * (`https://*.example.com`) never could, so they stop the start.
 */
function corsOrigins(env: Env): string[] {
  const entries = (env.ATRIUM_CORS_ORIGINS ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  if (entries.includes('*')) {
    if (entries.length > 1) {
      throw new ConfigError(
        'ATRIUM_CORS_ORIGINS must be * alone (any origin) or a list of origins, not both',
      );
    }
    return ['*'];
  }
  return [...new Set(entries.map(corsOrigin))];
}

function corsOrigin(entry: string): string {
  const trimmed = entry.replace(/\/+$/, '');
  const url = URL.canParse(trimmed) ? new URL(trimmed) : undefined;
  if (
    !url ||
    !url.host ||
    trimmed.includes('*') ||
    url.username ||
    url.password ||
    (url.pathname !== '' && url.pathname !== '/') ||
    /[?#]/.test(trimmed)
  ) {
    // A password is not repeated.
    const shown = entry.includes('@') ? 'a URL with credentials' : `"${entry}"`;
    throw new ConfigError(
      `ATRIUM_CORS_ORIGINS must be * or comma-separated origins (scheme://host[:port], such as https://app.example.com: no path, query or credentials), got ${shown}`,
    );
  }
  // http(s): `origin` lower-cases the host, drops a default port and writes a domain name in
  // punycode, as browsers do. Other schemes (capacitor://localhost, chrome-extension://…) keep
  // their port; their host is compared without case as well.
  return url.protocol === 'http:' || url.protocol === 'https:'
    ? url.origin
    : `${url.protocol}//${url.host.toLowerCase()}`;
}

/**
 * A URL ioredis reads as meant: a port it would refuse ("Invalid URL", exit 1 at start) or a
 * database that is no number (it sent `SELECT NaN` once connected, and the rejection ended the
 * process) is refused here, as every other setting is, before anything starts.
 */
function isRedisUrl(text: string): boolean {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return false;
  }
  return (
    (url.protocol === 'redis:' || url.protocol === 'rediss:') &&
    url.hostname !== '' &&
    /^(?:\/\d*)?$/.test(url.pathname)
  );
}

function redisConfig(env: Env): Config['redis'] {
  const url = env.REDIS_URL;
  if (!url) return undefined;
  if (!isRedisUrl(url)) {
    // The URL is not repeated: it may hold a password.
    throw new ConfigError(
      'REDIS_URL must be a redis:// or rediss:// URL with a host, and a database number if any (such as redis://:PASSWORD@127.0.0.1:6379/0)',
    );
  }
  // Several deployments (or test runs) may share one Redis: each keeps to its own prefix.
  return { url, keyPrefix: env.ATRIUM_REDIS_PREFIX || 'atrium:' };
}

/**
 * Replies one process generates at once by default: measured at well under 0.5 MB each
 * (BENCHMARKS.md), so the default keeps a process's streams within about 200 MB.
 */
export const DEFAULT_MAX_CONCURRENT_REPLIES = 400;

/**
 * How long a statement waits for a PostgreSQL connection by default: a server that does not
 * answer (a blackholed host, a partition) otherwise held every request for ever (pg's default).
 * Longer than a healthy connection ever takes, even to a server across a region; short enough
 * that a client told 503 and Retry-After has not given up already.
 */
export const DEFAULT_DB_CONNECT_TIMEOUT_MS = 10_000;

/**
 * How long a request to S3 may stay silent by default. S3 and MinIO answer within seconds, and
 * keep a long CompleteMultipartUpload alive with spaces; a hung endpoint held each request the
 * SDK's three attempts of 120 s (six minutes: long past any client or proxy in front). An idle
 * timeout, not a total one: a big object moving slowly is never cut.
 */
export const DEFAULT_S3_IDLE_TIMEOUT_MS = 30_000;

/** What a provider may send in one non-streamed response: far above any real reply. */
export const DEFAULT_MAX_PROVIDER_RESPONSE_BYTES = 16 * 1024 * 1024;

/**
 * A page of a chat's messages stops before this much stored parts: as much as one `POST /v1/chat`
 * body may carry. A chat grown turn by turn may hold far more than one response (or one
 * JavaScript string, about 512 MiB) can.
 */
export const DEFAULT_MESSAGE_PAGE_BYTES = 16 * 1024 * 1024;

/**
 * The configuration of `atrium serve`: {@link loadSettings} and the signing secret, which is made
 * in the data dir when neither the environment nor that dir has one.
 */
export function loadConfig(env: Env = process.env): Config {
  const settings = loadSettings(env);
  return { ...settings, signingSecret: signingSecret(env, settings.dataDir) };
}

/** The configuration without the signing secret, for commands that sign no URL. */
export type Settings = Omit<Config, 'signingSecret'>;

/**
 * The configuration, the signing secret left out: the commands that sign no URL (migrate, apply,
 * keys, export, demo) neither read nor make the data dir's secret file. Run with DATABASE_URL
 * set, they used to leave a ./data/signing-secret in whatever directory they ran in.
 */
export function loadSettings(env: Env = process.env): Settings {
  const dataDir = path.resolve(env.ATRIUM_DATA_DIR || './data');
  const databaseUrl = env.DATABASE_URL;
  // Checked without DATABASE_URL too: a bad value stops the start before it is ever needed.
  const connectTimeoutMs = milliseconds(
    env,
    'ATRIUM_DB_CONNECT_TIMEOUT_MS',
    DEFAULT_DB_CONNECT_TIMEOUT_MS,
    1,
  );
  let database: DatabaseConfig;
  if (databaseUrl) {
    if (!/^postgres(ql)?:\/\//.test(databaseUrl)) {
      throw new ConfigError('DATABASE_URL must be a postgres:// URL (unset it to use the embedded SQLite)');
    }
    if (!readsAsUrl(databaseUrl)) {
      throw new ConfigError(
        'DATABASE_URL must be a postgres:// URL (unset it to use the embedded SQLite): it could not be read as a URL',
      );
    }
    database = { kind: 'postgres', url: databaseUrl, connectTimeoutMs };
  } else {
    database = { kind: 'sqlite', file: path.join(dataDir, 'atrium.sqlite') };
  }

  const upstreamTimeoutMs = milliseconds(env, 'ATRIUM_UPSTREAM_TIMEOUT_MS', 120_000, 1);
  const storageKind = env.ATRIUM_STORAGE || 'fs';
  // Checked with fs storage too, as the database's connect timeout is without DATABASE_URL.
  const s3IdleTimeoutMs = milliseconds(env, 'ATRIUM_S3_IDLE_TIMEOUT_MS', DEFAULT_S3_IDLE_TIMEOUT_MS, 1);
  let storage: StorageConfig;
  if (storageKind === 'fs') {
    storage = { kind: 'fs', root: path.join(dataDir, 'objects') };
  } else if (storageKind === 's3') {
    storage = s3Storage(env, s3IdleTimeoutMs);
  } else {
    throw new ConfigError(`ATRIUM_STORAGE must be "fs" or "s3", got "${storageKind}"`);
  }

  return {
    port: integer(env, 'PORT', 3000, 0, 65535),
    host: env.HOST || '127.0.0.1',
    dataDir,
    database,
    storage,
    publicUrl: publicUrl(env),
    apiKeyHeader: apiKeyHeader(env),
    providers: {
      openaiApiKey: env.OPENAI_API_KEY || undefined,
      anthropicApiKey: env.ANTHROPIC_API_KEY || undefined,
      openaiBaseUrl: env.OPENAI_BASE_URL || undefined,
      env: { ...env },
    },
    defaultRateLimitPerMinute: integer(env, 'ATRIUM_RATE_LIMIT_PER_MINUTE', 600),
    upstreamTimeoutMs,
    maxProviderResponseBytes: integer(
      env,
      'ATRIUM_MAX_PROVIDER_RESPONSE_BYTES',
      DEFAULT_MAX_PROVIDER_RESPONSE_BYTES,
      1024,
    ),
    messagePageBytes: integer(
      env,
      'ATRIUM_MESSAGE_PAGE_BYTES',
      DEFAULT_MESSAGE_PAGE_BYTES,
      1024,
      256 * 1024 * 1024,
    ),
    logLevel: logLevel(env),
    jsonBodyLimitBytes: 1024 * 1024,
    http: httpTimeouts(env, upstreamTimeoutMs),
    sweepIntervalMs: milliseconds(env, 'ATRIUM_SWEEP_INTERVAL_MS', 10 * 60 * 1000),
    redis: redisConfig(env),
    chatBodyLimitBytes: 16 * 1024 * 1024,
    maxConcurrentReplies: integer(env, 'ATRIUM_MAX_CONCURRENT_REPLIES', DEFAULT_MAX_CONCURRENT_REPLIES, 1),
    mcpAllowPrivateNetwork: flag(env, 'ATRIUM_MCP_ALLOW_PRIVATE_NETWORK'),
    corsOrigins: corsOrigins(env),
    indexing: {
      timeoutMs: milliseconds(env, 'ATRIUM_INDEX_TIMEOUT_MS', 60_000, 1),
      concurrency: integer(env, 'ATRIUM_INDEX_CONCURRENCY', 1, 1),
      pollMs: milliseconds(env, 'ATRIUM_INDEX_POLL_MS', 5_000, 1),
      maxAttempts: integer(env, 'ATRIUM_INDEX_MAX_ATTEMPTS', 3, 1),
      retryMs: milliseconds(env, 'ATRIUM_INDEX_RETRY_MS', 10_000, 0),
      leaseMs: milliseconds(env, 'ATRIUM_INDEX_LEASE_MS', 60_000, 100),
    },
    warnings: unusedS3Settings(env),
  };
}
