import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { ConfigError } from './errors.js';

/**
 * The whole configuration, parsed once from the environment at the entry
 * point (server or CLI) and passed down as typed options. Nothing below the
 * entry point reads `process.env`.
 */

const int = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);
const optionalUrl = z
  .string()
  .trim()
  .transform((s) => (s === '' ? undefined : s))
  .pipe(z.url().optional())
  .optional();
const optionalString = z
  .string()
  .trim()
  .transform((s) => (s === '' ? undefined : s))
  .optional();
/** A size DuckDB takes for a memory setting, such as `512MB` or `2GiB` (no percentage: DuckDB aborts the process on some). */
const SIZE = String.raw`\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)`;
const duckdbSize = z
  .string()
  .trim()
  .regex(new RegExp(`^${SIZE}$`, 'i'), { message: 'must be a size such as 512MB or 2GiB' });
const bool = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no', ''])
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');

const attributeList = (def: string) =>
  z
    .string()
    .default(def)
    .transform((v) =>
      v
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x !== ''),
    )
    .pipe(z.array(z.string().max(256)).min(1, { message: 'must name at least one attribute' }));

export const ConfigSchema = z.object({
  PORT: int(4000).pipe(z.number().max(65535)),
  HOST: z.string().min(1).default('0.0.0.0'),
  DATA_DIR: z.string().min(1).default('./data'),
  INGEST_MAX_BODY_BYTES: int(10 * 1024 * 1024, 1),
  FLUSH_INTERVAL_MS: int(1000, 1),
  /** DuckDB's row group (8,192 rows): an insert of whole row groups skips DuckDB's own log. */
  FLUSH_MAX_ROWS: int(8192, 1),
  /** The largest insert in bytes of rows: the store's memory for one insert grows with it. 8,192 rows of 1 KB spans take ~18 MB. */
  FLUSH_MAX_BYTES: int(24 * 1024 * 1024, 1024),
  /**
   * The insert's rows while more than one insert of FLUSH_MAX_ROWS (or FLUSH_MAX_BYTES) waits: four row groups,
   * which DuckDB writes to its file once rather than through its own log and a checkpoint.
   */
  FLUSH_BACKLOG_MAX_ROWS: int(32_768, 1),
  /** The largest such insert in bytes: the memory a backlog costs grows with it. */
  FLUSH_BACKLOG_MAX_BYTES: int(96 * 1024 * 1024, 1024),
  /**
   * While rows arrive at FLUSH_GATHER_MIN_RATE per second or more, a flush waits up to this long for a backlog insert's
   * worth (DuckDB's row groups written once, ~0.65x of the CPU per row of 5,000-row inserts); reports then trail the
   * write log by up to this long. 0: every FLUSH_INTERVAL_MS.
   */
  FLUSH_GATHER_MS: int(5000, 0),
  FLUSH_GATHER_MIN_RATE: int(2000, 0),
  FLUSH_TIMEOUT_MS: int(30_000, 1),
  DRAIN_GRACE_MS: int(5000),
  DRAIN_TIMEOUT_MS: int(30_000),
  INGEST_DURABILITY: z.enum(['fsync', 'memory']).default('fsync'),
  BUFFER_MAX_BYTES: int(1024 * 1024 * 1024, 1),
  DISK_RESERVE_BYTES: int(128 * 1024 * 1024, 0),
  BODY_MIN_BYTES_PER_SEC: int(64 * 1024, 0),
  MAX_CONCURRENT_BODIES: int(4, 1),
  /** Threads of the embedded DuckDB span store. One leaves the other cores to the request path (and costs ~20% less CPU per row than two). */
  DUCKDB_THREADS: int(1, 1),
  /** DuckDB's memory_limit, e.g. `512MB` (default: 1GiB in the server, 256MiB in a CLI command, 128MiB in reprice). */
  DUCKDB_MEMORY_LIMIT: duckdbSize.optional(),
  /**
   * Memory DuckDB keeps for its blocks once touched, never returned to the system (default 256MiB in the server, none in a
   * CLI command; `0` for none): each insert's new blocks then reuse pages instead of faulting in fresh ones.
   */
  DUCKDB_BLOCK_ALLOCATOR_MEMORY: z
    .string()
    .trim()
    .regex(new RegExp(`^(0|${SIZE})$`, 'i'), { message: 'must be a size such as 256MiB, or 0 for none' })
    .optional(),
  /** Days a span row is kept unless its org says otherwise (0: forever); the daily cost rollups are kept past it. */
  RETENTION_DAYS: int(400, 0),
  /** Days a span keeps its texts (input, output, tool catalog, sources, safety metadata) unless its org says otherwise (0: as long as the row). */
  TEXT_RETENTION_DAYS: int(30, 0),
  /** How often the retention pass runs (it also runs a minute after start). */
  RETENTION_INTERVAL_MS: int(3_600_000, 1000),
  /** How often budgets are checked against this month's spend (also after every flush). */
  BUDGET_CHECK_MS: int(5000, 100),
  /** A customer's or model's cost today is a spend anomaly at this many times its 14-day median (0: no anomaly alerts)... */
  ANOMALY_FACTOR: int(3, 0),
  /** ...and this many USD above it (an exact decimal), so a cent against a tenth of a cent is no anomaly. */
  ANOMALY_MIN_USD: z
    .string()
    .trim()
    .regex(/^\d{1,12}(\.\d{1,18})?$/, { message: 'must be a decimal amount of USD such as 1 or 0.5' })
    .default('1'),
  /** Timeout of one budget alert webhook post (then retried with backoff). */
  WEBHOOK_TIMEOUT_MS: int(10_000, 100),
  /** How long /readyz waits for each dependency (checked in parallel) before naming it as not answering. */
  READY_CHECK_TIMEOUT_MS: int(2000, 1),
  HEADERS_TIMEOUT_MS: int(10_000, 1),
  REQUEST_TIMEOUT_MS: int(60_000, 1),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LOG_PRETTY: bool(false),
  /** /metrics on a listener of its own, never the ingest port; 0 picks a free port. */
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(9464),
  /** Loopback by default; any other address needs METRICS_TOKEN (or METRICS_TOKEN_FILE). */
  METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  /** A bearer token /metrics then requires (`Authorization: Bearer <token>`), at least 16 characters. */
  METRICS_TOKEN: z.string().trim().min(16, { message: 'must be at least 16 characters' }).optional(),
  METRICS_TOKEN_FILE: optionalString,
  /** Customer ids as metric labels (per-customer budget series); off: those series carry the budget's id only. */
  METRICS_CUSTOMER_LABELS: bool(false),
  /** Failed authentications (wrong key or token) a client address may make per minute, every listener together; 0: no limit. */
  AUTH_FAILURE_LIMIT: int(30, 0),
  /** Express's `trust proxy`: the proxies whose X-Forwarded-For names the client (e.g. `loopback` or `10.0.0.0/8`); unset: none. */
  TRUST_PROXY: optionalString,
  /** Host names (without port) the console answers to; loopback names and a CONSOLE_HOST address are always in. */
  CONSOLE_ALLOWED_HOSTS: z
    .string()
    .default('')
    .transform((v) =>
      v
        .split(',')
        .map((x) => x.trim().toLowerCase())
        .filter((x) => x !== ''),
    ),
  /** The key that seals webhook signing secrets at rest: 32 bytes as base64 or hex (or SECRETS_KEY_FILE). */
  SECRETS_KEY: optionalString,
  SECRETS_KEY_FILE: optionalString,
  /** The read-only cost console's own listener (e.g. 4001); off when unset. 0 picks a free port. */
  CONSOLE_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /** Loopback by default: the console is for people on this machine or behind a proxy that adds TLS. */
  CONSOLE_HOST: z.string().min(1).default('127.0.0.1'),
  CLICKHOUSE_URL: optionalUrl,
  DATABASE_URL: optionalUrl,
  /** Passwords as they are (any characters, no URL encoding): each replaces the one in its URL. */
  CLICKHOUSE_PASSWORD: z.string().optional(),
  DATABASE_PASSWORD: z.string().optional(),
  /** PostgreSQL's statement_timeout on the server's connections (0: none). */
  DATABASE_STATEMENT_TIMEOUT_MS: int(3000, 0),
  /** PostgreSQL's lock_timeout: a call waiting longer for a table or row lock (a migration, VACUUM FULL) gets 503 (0: none). */
  DATABASE_LOCK_TIMEOUT_MS: int(1000, 0),
  /** PostgreSQL's idle_in_transaction_session_timeout (0: none). */
  DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS: int(10_000, 0),
  /** How long the server waits for any PostgreSQL answer before dropping the connection: a frozen or partitioned server (0: none). */
  DATABASE_QUERY_TIMEOUT_MS: int(4000, 0),
  /** How long an accepted batch's answer waits for its quota count; past it the answer goes and the count follows (0: never waits). */
  QUOTA_COUNT_WAIT_MS: int(100, 0),
  REDIS_URL: optionalUrl,
  /** Prefix of every Redis key, so several deployments (or test runs) can share one Redis. */
  REDIS_KEY_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,64}$/)
    .default('trace-ingest'),
  PRICE_CATALOG_FILE: optionalString,
  /** OTLP span or resource attributes read, in order, for a trace's customer id and session id. */
  OTLP_CUSTOMER_ATTRIBUTES: attributeList('enduser.id,user.id'),
  OTLP_SESSION_ATTRIBUTES: attributeList('session.id,gen_ai.conversation.id'),
  /** OTLP/gRPC (TraceService/Export) on its own listener, on HOST (4317 by convention); off when unset. 0 picks a free port. */
  OTLP_GRPC_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /** Calls one OTLP/gRPC connection may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); a client queues the rest. */
  OTLP_GRPC_MAX_STREAMS: int(32, 1),
  TRACE_INGEST_INIT_ORG: optionalString,
  TRACE_INGEST_INIT_API_KEY: optionalString,
});

export type RawConfig = z.infer<typeof ConfigSchema>;

export interface Config extends RawConfig {
  /** DATA_DIR resolved to an absolute path. */
  dataDir: string;
  /** METRICS_TOKEN, or the content of METRICS_TOKEN_FILE. */
  metricsToken: string | undefined;
  /** SECRETS_KEY, or the content of SECRETS_KEY_FILE (the keys, newest first, one a line). */
  secretsKey: string | undefined;
  sqliteFile: string;
  duckdbFile: string;
  walDir: string;
  adminSocket: string;
}

/**
 * The URL with this password, percent-encoded whole (`%` too), which the stores' URL parsers decode
 * back: a password with `@ : / # %` cannot break the URL.
 */
function withPassword(url: string | undefined, password: string | undefined): string | undefined {
  if (url === undefined || password === undefined) return url;
  const u = new URL(url);
  u.password = encodeURIComponent(password);
  return u.toString();
}

/** Parse the environment; throws ConfigError naming every bad variable. */
export function loadConfig(env: Record<string, string | undefined>, cwd = process.cwd()): Config {
  const picked: Record<string, string> = {};
  for (const key of Object.keys(ConfigSchema.shape)) {
    const v = env[key];
    if (v !== undefined && v !== '') picked[key] = v;
  }
  const r = ConfigSchema.safeParse(picked);
  if (!r.success) {
    const lines = r.error.issues.map((i) => {
      const name = String(i.path[0] ?? '?');
      // Never echo values of variables that can hold credentials.
      const secret = /URL|KEY|TOKEN|PASSWORD/.test(name);
      const shown = secret || picked[name] === undefined ? '' : ` (got ${JSON.stringify(picked[name])})`;
      return `${name}: ${i.message}${shown}`;
    });
    throw new ConfigError(`invalid configuration: ${lines.join('; ')}`);
  }
  const c = r.data;
  const dataDir = path.resolve(cwd, c.DATA_DIR);
  const metricsToken = c.METRICS_TOKEN ?? fromFile('METRICS_TOKEN_FILE', c.METRICS_TOKEN_FILE, cwd);
  if (metricsToken !== undefined && metricsToken.length < 16)
    throw new ConfigError('invalid configuration: METRICS_TOKEN_FILE: the token must be at least 16 characters');
  if (!isLoopback(c.METRICS_HOST) && metricsToken === undefined)
    throw new ConfigError(
      `invalid configuration: METRICS_HOST ${c.METRICS_HOST} serves /metrics beyond this machine: set METRICS_TOKEN_FILE (or METRICS_TOKEN) ` +
        'to a token Prometheus sends as a bearer token, or keep METRICS_HOST on loopback',
    );
  return {
    ...c,
    CLICKHOUSE_URL: withPassword(c.CLICKHOUSE_URL, c.CLICKHOUSE_PASSWORD),
    DATABASE_URL: withPassword(c.DATABASE_URL, c.DATABASE_PASSWORD),
    dataDir,
    metricsToken,
    secretsKey: c.SECRETS_KEY ?? fromFile('SECRETS_KEY_FILE', c.SECRETS_KEY_FILE, cwd),
    sqliteFile: path.join(dataDir, 'trace-ingest.sqlite'),
    duckdbFile: path.join(dataDir, 'spans.duckdb'),
    walDir: path.join(dataDir, 'wal'),
    adminSocket: path.join(dataDir, 'admin.sock'),
  };
}

/** A secret kept in a file (a Docker or Kubernetes secret); its content without surrounding white space. */
function fromFile(name: string, file: string | undefined, cwd: string): string | undefined {
  if (file === undefined) return undefined;
  try {
    const text = fs.readFileSync(path.resolve(cwd, file), 'utf8').trim();
    if (text === '') throw new ConfigError(`invalid configuration: ${name}: ${file} is empty`);
    return text;
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    throw new ConfigError(`invalid configuration: ${name}: cannot read ${file} (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
}

/** An address that only this machine reaches. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}
