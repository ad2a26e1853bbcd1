import path from 'node:path';
import type { EraseCounts, EraseTarget, RetentionCut, RetentionResult } from '@trace-ingest/shared/lifecycle';
import { DuckDbFile } from './duckdb-file.js';
import { DuckDbIngest } from './duckdb-ingest.js';
import { DuckDbLifecycle } from './duckdb-lifecycle.js';
import type { DuckDbMigrationLogger } from './duckdb-migrations.js';
import { readOnlyQuery, streamRows } from './duckdb-reads.js';
import { RollupFolding } from './duckdb-rollup-folding.js';
import { DuckDbTopLists } from './duckdb-top-lists.js';
import type { CostChange, Lines, QueryRow, SpanStore, TopLists } from './span-store.js';
import { TOP_LISTS_PER_DAY } from './top-lists.js';

// The parts, for callers that need one of them (tests, tools).
export { applyDuckDbMigrations, DUCKDB_TYPES, loadDuckDbMigrations, spansSchemaDrift } from './duckdb-migrations.js';

export interface DuckDbSpanStoreOptions {
  file: string;
  /** Where bulk-load files are written; defaults to a folder beside the database. */
  tmpDir?: string;
  /** DuckDB's memory_limit (default: DuckDB's own, 80% of RAM). Too low a limit fails large inserts. */
  memoryLimit?: string | undefined;
  /**
   * DuckDB's block_allocator_memory (default: none): memory for its blocks kept once touched, never given back. Without it
   * every insert's new blocks are fresh pages, faulted in and zeroed by the kernel, and given back after the insert.
   */
  blockAllocatorMemory?: string | undefined;
  /** DuckDB's worker threads (default: DuckDB's own, one per core). */
  threads?: number | undefined;
  /** Where the migrations applied at start are reported. */
  logger?: DuckDbMigrationLogger | undefined;
  /** The migrations folder (default: the shipped `migrations/duckdb/`); tests give their own. */
  migrationsDir?: URL | undefined;
  /** Partial rollup rows written before they are folded into one per key (default 20,000). */
  compactRows?: number | undefined;
  /** DuckDB's checkpoint_threshold: the size its own log reaches before a checkpoint (default 64MB). */
  checkpointThreshold?: string | undefined;
  /** Rows per row group of what this process writes (default 8,192); row groups written before keep their size. */
  rowGroupRows?: number | undefined;
  /** DuckDB's storage format the file is written in (default v1.5.0; an older file is brought to it at attach). */
  storageVersion?: string | undefined;
  /** How many traces (and sessions) each day's top list keeps (default TOP_LISTS_PER_DAY); tests give a few. */
  topListsPerDay?: number | undefined;
  /** A monotonic clock in ms (default performance.now): how long ago an org's lists were last read; tests step it. */
  monotonicNow?: (() => number) | undefined;
  /**
   * Attach the file read-only and migrate nothing: for a process that only
   * reads (`trace-ingest sql` with no server running). Its writes fail.
   */
  readOnly?: boolean | undefined;
}

/**
 * The embedded span store: one DuckDB file under DATA_DIR. Rows are bulk
 * loaded from the canonical NDJSON lines with `read_json` (the fastest path
 * measured) and deduplicated by the primary key, so a replayed batch never
 * shows a span twice. Its parts: the file and its connections, the writes
 * of spans, the rollups' folding, the top lists, and retention and erasure.
 */
export class DuckDbSpanStore implements SpanStore {
  readonly kind = 'duckdb';
  readonly rollups = true;
  readonly topLists: TopLists;
  private readonly lists: DuckDbTopLists;
  private readonly file: DuckDbFile;
  private readonly folding: RollupFolding;
  private readonly ingest: DuckDbIngest;
  private readonly lifecycle: DuckDbLifecycle;

  constructor(opts: DuckDbSpanStoreOptions) {
    this.file = new DuckDbFile({ ...opts, tmpDir: opts.tmpDir ?? path.join(path.dirname(opts.file), 'tmp') }, () => this.opened());
    this.folding = new RollupFolding(this.file, opts.compactRows ?? 20_000);
    this.lists = new DuckDbTopLists(this.file, opts.topListsPerDay ?? TOP_LISTS_PER_DAY, opts.monotonicNow);
    this.topLists = this.lists;
    this.ingest = new DuckDbIngest(this.file, this.folding, this.lists);
    this.lifecycle = new DuckDbLifecycle(this.file, this.folding, this.lists);
  }

  /** Each attach of a writable file, the first and any reopening: what the parts derive from the file is read again. */
  private async opened(): Promise<void> {
    await this.lists.opened();
    this.ingest.opened();
    await this.folding.opened();
  }

  start(): Promise<void> {
    return this.file.open();
  }

  close(): Promise<void> {
    return this.file.close();
  }

  ping(): Promise<void> {
    return this.file.ping();
  }

  problem(): string | undefined {
    return this.file.problem();
  }

  insertLines(lines: Lines, rowCount: number): Promise<void> {
    return this.ingest.insertLines(lines, rowCount);
  }

  replaceLines(lines: Lines, rowCount: number): Promise<void> {
    return this.ingest.replaceLines(lines, rowCount);
  }

  updateCosts(changes: readonly CostChange[]): Promise<void> {
    return this.ingest.updateCosts(changes);
  }

  /** Folds every partial rollup row written since the last whole fold. */
  async compactRollups(): Promise<void> {
    await this.file.exclusive(() => this.folding.compactNow(true));
  }

  expire(cut: RetentionCut, maxRows: number): Promise<RetentionResult> {
    return this.lifecycle.expire(cut, maxRows);
  }

  erase(orgId: string, target: EraseTarget, dryRun: boolean): Promise<EraseCounts> {
    return this.lifecycle.erase(orgId, target, dryRun);
  }

  disk(): Promise<{ usedBytes: number; freeBytes: number | undefined }> {
    return this.file.disk();
  }

  query(sql: string, params: readonly unknown[] = []): Promise<QueryRow[]> {
    return this.file.query(sql, params);
  }

  queryStream(sql: string, params: readonly unknown[] = []): AsyncIterable<QueryRow> {
    return streamRows(this.file, sql, params);
  }

  readOnlyQuery(sql: string, params: readonly unknown[] = [], maxRows?: number): Promise<QueryRow[]> {
    return readOnlyQuery(this.file, sql, params, maxRows);
  }
}
