import type { Config } from '@trace-ingest/shared/config';
import type { ControlStore } from '@trace-ingest/store/control-store-types';
import { checkDataDir } from '@trace-ingest/shared/data-dir';
import { createControlStore, createSpanStore } from '@trace-ingest/store/open-stores';
import type { SpanStore } from '@trace-ingest/store/span-store';

/** What an action works with; tests build it over a temp DATA_DIR. */
export interface CliContext {
  config: Config;
  keys(): Promise<ControlStore>;
  spans(): Promise<SpanStore>;
  /**
   * The span store for ad-hoc queries: the one `spans()` opened, else the
   * DuckDB file attached read-only (one process may not hold both).
   */
  readOnlySpans(): Promise<SpanStore>;
  close(): Promise<void>;
}

/** DuckDB's memory limit in a CLI command when DUCKDB_MEMORY_LIMIT is unset. */
export const CLI_DUCKDB_MEMORY = '256MiB';
/**
 * reprice reads a range's rows once, in order: DuckDB's cache of them is never read again, so a
 * smaller pool lowers the command's peak memory in the same time.
 */
export const REPRICE_DUCKDB_MEMORY = '128MiB';

/** What a command may ask of the stores it opens; the environment's settings win. */
export interface ContextDefaults {
  duckdbMemoryLimit?: string;
}

export function createContext(config: Config, defaults: ContextDefaults = {}): CliContext {
  let keys: ControlStore | undefined;
  let spans: SpanStore | undefined;
  let readOnly: SpanStore | undefined;
  const opts = {
    sqliteFile: config.sqliteFile,
    duckdbFile: config.duckdbFile,
    databaseUrl: config.DATABASE_URL,
    clickhouseUrl: config.CLICKHOUSE_URL,
    postgresTimeouts: {
      statementMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
      lockMs: config.DATABASE_LOCK_TIMEOUT_MS,
      idleInTransactionMs: config.DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS,
      queryMs: config.DATABASE_QUERY_TIMEOUT_MS,
    },
    // A command reads rollups or streams: it needs little of DuckDB's cache, and must not take 80% of RAM beside a server.
    duckdbMemoryLimit: config.DUCKDB_MEMORY_LIMIT ?? defaults.duckdbMemoryLimit ?? CLI_DUCKDB_MEMORY,
  };
  return {
    config,
    async keys() {
      if (keys === undefined) {
        if (config.DATABASE_URL === undefined) checkDataDir(config.dataDir);
        const k = await createControlStore(opts);
        await k.start();
        keys = k;
      }
      return keys;
    },
    async spans() {
      if (spans === undefined) {
        if (config.CLICKHOUSE_URL === undefined) checkDataDir(config.dataDir);
        await readOnly?.close();
        readOnly = undefined;
        const s = await createSpanStore(opts);
        await s.start();
        spans = s;
      }
      return spans;
    },
    async readOnlySpans() {
      if (spans !== undefined) return spans;
      if (readOnly === undefined) {
        const s = await createSpanStore({ ...opts, readOnly: true });
        await s.start();
        readOnly = s;
      }
      return readOnly;
    },
    async close() {
      await readOnly?.close();
      readOnly = undefined;
      await spans?.close();
      await keys?.close();
      spans = undefined;
      keys = undefined;
    },
  };
}
