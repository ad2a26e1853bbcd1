import type { ControlDriver } from './control-store.js';
import type { PostgresTimeouts } from './control-store-postgres.js';

/** Where the control store's database is, and how long a call to it may wait (the server's bounds; the CLI's defaults wait longer). */
export interface ControlDriverOptions {
  sqliteFile: string;
  databaseUrl?: string | undefined;
  /** Bounds on every PostgreSQL call (DATABASE_*_TIMEOUT_MS). */
  postgresTimeouts?: Partial<PostgresTimeouts> | undefined;
  /** SQLite's synchronous wait for another process's write lock; the server passes 0. */
  sqliteBusyTimeoutMs?: number | undefined;
  /** PostgreSQL connections in the pool (default 2, for a command's few calls). */
  poolSize?: number | undefined;
}

/**
 * A connection (pool) to the control store's database: PostgreSQL when
 * DATABASE_URL is set, else the SQLite file. Its `open` connects and applies
 * the control store's migrations, which cover every table kept there (keys,
 * budgets, console tokens).
 */
export async function openControlDriver(opts: ControlDriverOptions): Promise<ControlDriver> {
  if (opts.databaseUrl !== undefined) {
    const { PostgresControlDriver } = await import('./control-store-postgres.js');
    return new PostgresControlDriver(opts.databaseUrl, {
      poolSize: opts.poolSize ?? 2,
      ...(opts.postgresTimeouts === undefined ? {} : { timeouts: opts.postgresTimeouts }),
    });
  }
  const { SqliteControlDriver } = await import('./control-store-sqlite.js');
  return new SqliteControlDriver(opts.sqliteFile, opts.sqliteBusyTimeoutMs === undefined ? {} : { busyTimeoutMs: opts.sqliteBusyTimeoutMs });
}

/**
 * The driver as the parts that share it see it (the key store, budgets,
 * console tokens of one process): its owner opens and closes it once, so
 * their own start and close leave the connection as it is.
 */
export function sharedControlDriver(driver: ControlDriver): ControlDriver {
  return {
    kind: driver.kind,
    open: () => Promise.resolve(),
    close: () => Promise.resolve(),
    all: <R>(sql: string, params: readonly unknown[]) => driver.all<R>(sql, params),
    transaction: (statements) => driver.transaction(statements),
    isUniqueViolation: (e) => driver.isUniqueViolation(e),
    ...(driver.version === undefined ? {} : { version: driver.version.bind(driver) }),
  };
}
