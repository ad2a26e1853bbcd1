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
  DUCKDB_MEMORY_LIMIT: z
    .string()
    .trim()
    .regex(/^\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$/i, { message: 'must be a size such as 512MB or 2GiB' })
    .optional(),
  /** Days a span row is kept unless its org says otherwise (0: forever); the daily cost rollups are kept past it. */
  RETENTION_DAYS: int(400, 0),
  /** Days a span keeps its texts (input, output, tool catalog, sources, safety metadata) unless its org says otherwise (0: as long as the row). */
  TEXT_RETENTION_DAYS: int(30, 0),
  /** How often the retention pass runs (it also runs a minute after start). */
  RETENTION_INTERVAL_MS: int(3_600_000, 1000),
  /** How often budgets are checked against this month's spend (also after every flush). */
  BUDGET_CHECK_MS: int(5000, 100),
  /** Timeout of one budget alert webhook post (then retried with backoff). */
  WEBHOOK_TIMEOUT_MS: int(10_000, 100),
  HEADERS_TIMEOUT_MS: int(10_000, 1),
  REQUEST_TIMEOUT_MS: int(60_000, 1),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LOG_PRETTY: bool(false),
  METRICS_PORT: z.coerce.number().int().min(1).max(65535).optional(),
  /** The read-only cost console's own listener (e.g. 4001); off when unset. 0 picks a free port. */
  CONSOLE_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /** Loopback by default: the console is for people on this machine or behind a proxy that adds TLS. */
  CONSOLE_HOST: z.string().min(1).default('127.0.0.1'),
  CLICKHOUSE_URL: optionalUrl,
  DATABASE_URL: optionalUrl,
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
  TRACE_INGEST_INIT_ORG: optionalString,
  TRACE_INGEST_INIT_API_KEY: optionalString,
});

export type RawConfig = z.infer<typeof ConfigSchema>;

export interface Config extends RawConfig {
  /** DATA_DIR resolved to an absolute path. */
  dataDir: string;
  sqliteFile: string;
  duckdbFile: string;
  walDir: string;
  adminSocket: string;
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
      const secret = /URL|KEY/.test(name);
      const shown = secret || picked[name] === undefined ? '' : ` (got ${JSON.stringify(picked[name])})`;
      return `${name}: ${i.message}${shown}`;
    });
    throw new ConfigError(`invalid configuration: ${lines.join('; ')}`);
  }
  const c = r.data;
  const dataDir = path.resolve(cwd, c.DATA_DIR);
  return {
    ...c,
    dataDir,
    sqliteFile: path.join(dataDir, 'trace-ingest.sqlite'),
    duckdbFile: path.join(dataDir, 'spans.duckdb'),
    walDir: path.join(dataDir, 'wal'),
    adminSocket: path.join(dataDir, 'admin.sock'),
  };
}
