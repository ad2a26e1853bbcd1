import type { Retention } from '@trace-ingest/shared/lifecycle';
import type { ClickHouseLogger } from './clickhouse.js';
import { DuckDbSpanStore } from './duckdb.js';
import { SqliteControlStore } from './control-store-sqlite.js';
import type { ControlStore } from './control-store-types.js';
import type { PostgresTimeouts } from './control-store-postgres.js';
import type { SpanStore } from './span-store.js';

/** Which stores a process uses, picked by configuration. */
export interface StoreOptions {
  sqliteFile: string;
  duckdbFile: string;
  databaseUrl?: string | undefined;
  clickhouseUrl?: string | undefined;
  /** Bounds one request to a remote span store. */
  requestTimeoutMs?: number;
  duckdbThreads?: number | undefined;
  duckdbMemoryLimit?: string | undefined;
  duckdbBlockAllocatorMemory?: string | undefined;
  /** Bounds on every PostgreSQL call (DATABASE_*_TIMEOUT_MS). */
  postgresTimeouts?: Partial<PostgresTimeouts> | undefined;
  /** SQLite's wait for another process's write lock (see SqliteControlOptions); the server passes 0. */
  sqliteBusyTimeoutMs?: number | undefined;
  /** Where a store reports what it did on its own, such as migrations applied at start. */
  logger?: ClickHouseLogger | undefined;
  /** Each org's retention as it stands (the server's), written with ClickHouse rows for its TTLs. */
  retentionOf?: ((orgId: string) => Retention | undefined) | undefined;
  /** Only reads: DuckDB attaches its file read-only and migrates nothing. */
  readOnly?: boolean | undefined;
}

export async function createControlStore(opts: StoreOptions): Promise<ControlStore> {
  if (opts.databaseUrl !== undefined) {
    const { PostgresControlStore } = await import('./control-store-postgres.js');
    return new PostgresControlStore(opts.databaseUrl, opts.postgresTimeouts === undefined ? {} : { timeouts: opts.postgresTimeouts });
  }
  return new SqliteControlStore(opts.sqliteFile, { busyTimeoutMs: opts.sqliteBusyTimeoutMs });
}

export async function createSpanStore(opts: StoreOptions): Promise<SpanStore> {
  if (opts.clickhouseUrl !== undefined) {
    const { ClickHouseSpanStore } = await import('./clickhouse.js');
    return new ClickHouseSpanStore({
      url: opts.clickhouseUrl,
      ...(opts.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: opts.requestTimeoutMs }),
      ...(opts.logger === undefined ? {} : { logger: opts.logger }),
      retentionOf: opts.retentionOf,
    });
  }
  return new DuckDbSpanStore({
    file: opts.duckdbFile,
    threads: opts.duckdbThreads,
    memoryLimit: opts.duckdbMemoryLimit,
    blockAllocatorMemory: opts.duckdbBlockAllocatorMemory,
    logger: opts.logger,
    readOnly: opts.readOnly,
  });
}
