import type { Config } from '@trace-ingest/shared/config';
import type { ControlStore } from '@trace-ingest/store/control-store-types';
import { createControlStore, createSpanStore } from '@trace-ingest/store/open-stores';
import type { SpanStore } from '@trace-ingest/store/span-store';

/** What an action works with; tests build it over a temp DATA_DIR. */
export interface CliContext {
  config: Config;
  keys(): Promise<ControlStore>;
  spans(): Promise<SpanStore>;
  close(): Promise<void>;
}

export function createContext(config: Config): CliContext {
  let keys: ControlStore | undefined;
  let spans: SpanStore | undefined;
  const opts = {
    sqliteFile: config.sqliteFile,
    duckdbFile: config.duckdbFile,
    databaseUrl: config.DATABASE_URL,
    clickhouseUrl: config.CLICKHOUSE_URL,
    // A command reads rollups or streams: it needs little of DuckDB's cache, and must not take 80% of RAM beside a server.
    duckdbMemoryLimit: config.DUCKDB_MEMORY_LIMIT ?? '256MiB',
  };
  return {
    config,
    async keys() {
      if (keys === undefined) {
        const k = await createControlStore(opts);
        await k.start();
        keys = k;
      }
      return keys;
    },
    async spans() {
      if (spans === undefined) {
        const s = await createSpanStore(opts);
        await s.start();
        spans = s;
      }
      return spans;
    },
    async close() {
      await spans?.close();
      await keys?.close();
      spans = undefined;
      keys = undefined;
    },
  };
}
