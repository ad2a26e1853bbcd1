/**
 * Where span rows end up: embedded DuckDB by default, ClickHouse when
 * CLICKHOUSE_URL is set. Both hold the `spans` table of `@trace-ingest/shared/rows`.
 */

import type { EraseCounts, EraseTarget, RetentionCut, RetentionResult } from '@trace-ingest/shared/lifecycle';
import type { SpanCosts } from '@trace-ingest/shared/rows';

export type QueryRow = Record<string, unknown>;

/** New costs for one stored span, found by its identity and start time. */
export type CostChange = { org_id: string; trace_id: string; span_id: string; start_time: number } & SpanCosts;

/** Canonical lines: one buffer, or chunks that each hold whole lines. */
export type Lines = Buffer | readonly Buffer[];

/** The chunks of `lines`, without copying. */
export function chunksOf(lines: Lines): readonly Buffer[] {
  return Buffer.isBuffer(lines) ? [lines] : (lines as readonly Buffer[]);
}

/** The groupings with per-day top lists: those with about as many groups as spans. */
export type TopListName = 'trace' | 'session';

/** Per-day lists of the groups of largest cost (see SpanStore.topLists). */
export interface TopLists {
  /** Rankings of up to this many groups can read the lists. */
  readonly perDay: number;
  /**
   * Whether the lists of an org's days from `fromDay` up to `toDay`
   * (exclusive) are current, so a ranking may read them (ClickHouse: a read
   * that builds nothing, the derivation builds them; DuckDB, the one writer:
   * builds the days its writes marked out of date first, and answers true).
   */
  ready(list: TopListName, orgId: string, fromDay: string, toDay: string): Promise<boolean>;
  /**
   * A subquery (for FROM) of a list's current rows of an org's days from
   * `fromDay` up to `toDay`, one per day and group, with `cond` (over the
   * list's columns) applied inside: the group column, start_date, the
   * measures, the extras, `multi` and `day_rank` (each row's rank in its
   * day, NULL for a multi-day row below the ranks kept; a store may rank
   * none: 0).
   */
  rows(list: TopListName, orgId: string, fromDay: string, toDay: string, cond?: SqlPart): SqlPart;
  /** A scalar subquery: how many groups those days have, a group of several days counted once a day. */
  groupCount(list: TopListName, orgId: string, fromDay: string, toDay: string): SqlPart;
}

/** SQL with its `?` placeholders' values, in order. */
export interface SqlPart {
  sql: string;
  params: unknown[];
}

/** Who may run a cluster-wide job: one process of the cluster at a time. */
export interface Lease {
  /** Whether this process holds the lease now (taking it when free). */
  hold(): Promise<boolean>;
  close(): Promise<void>;
}

export interface SpanStore {
  readonly kind: 'duckdb' | 'clickhouse';
  /** Whether the store keeps the rollups of `@trace-ingest/shared/rollups` (usage_daily, traces), which reports then read. */
  readonly rollups: boolean;
  /**
   * Per-day lists of the traces and sessions that can rank first in a range
   * (top-lists.ts): a ranking of at most `perDay` of them reads the lists,
   * not every trace.
   */
  readonly topLists?: TopLists | undefined;
  /**
   * Whether the rollups of an org's day may not hold every stored span of it
   * yet (ClickHouse derives them in the background); absent: they always do
   * (DuckDB writes them with the spans).
   */
  rollupsBehind?(orgId: string, day: string): Promise<boolean>;
  /** Connects and applies pending migrations. */
  start(): Promise<void>;
  /** The store's own background jobs, for the server (ClickHouse: the derivation, while `lease` is held); after start(). */
  startBackground?(lease: Lease | undefined): void;
  close(): Promise<void>;
  /** Throws when the store cannot be reached. */
  ping(): Promise<void>;
  /** Set while the store knows it cannot keep rows (its file is gone): batches are refused meanwhile. */
  problem?(): string | undefined;

  /**
   * Inserts rows given as lines (`encodeLine` or `encodeRow`, one per
   * line; a key left out holds its column's empty value), as one buffer or as chunks of whole lines (the write log's
   * records, passed on without copying them into one buffer). Idempotent on (org_id, trace_id, span_id) as seen by the
   * one-row-per-span query form: a replayed or retried insert never shows a
   * span twice. Throws SpanStoreRejectedError when the store refuses the data
   * itself (retrying cannot help), any other error when it may be transient.
   */
  insertLines(lines: Lines, rowCount: number): Promise<void>;

  /** Query for the service's own reports; values bound, never concatenated. */
  query(sql: string, params?: readonly unknown[]): Promise<QueryRow[]>;

  /**
   * Like query, but rows are handed out as the store produces them, so a
   * read over many large rows (repricing) holds a bounded number at a time.
   * Stop early with `break`: the read is cancelled.
   */
  queryStream(sql: string, params?: readonly unknown[]): AsyncIterable<QueryRow>;

  /**
   * An ad-hoc query from ops: refused with ReadOnlyQueryError unless it only
   * reads. With `maxRows`, the store stops reading there (memory stays bounded
   * whatever the query returns).
   */
  readOnlyQuery(sql: string, params?: readonly unknown[], maxRows?: number): Promise<QueryRow[]>;

  /**
   * Writes rows (lines, as insertLines takes them) that replace the stored rows with the same
   * (org_id, trace_id, span_id): used to reprice. The replacement rows carry a
   * newer received_at.
   */
  replaceLines(lines: Lines, rowCount: number): Promise<void>;

  /**
   * Rewrites the costs of stored spans (repricing), keeping the rollups
   * exact: each span's old share is taken back and its new one added.
   */
  updateCosts(changes: readonly CostChange[]): Promise<void>;

  /**
   * One retention pass for one org: rows started before `rowsBefore` are
   * deleted (with their `traces` rows; the daily rollups keep their costs)
   * and the texts (TEXT_COLUMNS) of rows started before `textsBefore` are
   * emptied, in batches, stopping once about `maxRows` rows were touched.
   */
  expire(cut: RetentionCut, maxRows: number): Promise<RetentionResult>;

  /**
   * Removes every span of a customer, trace or session of an org, its share
   * of every rollup, and every rollup or trace row that carries the id.
   * Idempotent; `dryRun` only counts.
   */
  erase(orgId: string, target: EraseTarget, dryRun: boolean): Promise<EraseCounts>;

  /** Bytes the store holds on disk (its files, or its tables' parts) and, where it can tell, bytes free on that disk. */
  disk(): Promise<{ usedBytes: number; freeBytes: number | undefined }>;
}

/** A query that would write, or more than one statement, given to readOnlyQuery. */
export class ReadOnlyQueryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReadOnlyQueryError';
  }
}

/**
 * The store refused the rows themselves (a bad value): dead-letter them. Never
 * for a table or column the store lacks: that is SpanStoreSchemaError.
 */
export class SpanStoreRejectedError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SpanStoreRejectedError';
  }
}

/**
 * The store lacks a table or column the rows need: its schema is behind the
 * code (an upgrade not migrated yet, a hand-altered file). Retryable, never a
 * dead letter: the rows wait in the write log until `trace-ingest migrate` (or
 * a restart, which migrates) brings the schema up to date.
 */
export class SpanStoreSchemaError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(`span store schema is behind (run trace-ingest migrate, or restart the server, which migrates): ${message}`, options);
    this.name = 'SpanStoreSchemaError';
  }
}

/**
 * The store's file is gone from under the running process (an embedded
 * store): retryable, and a reason to stop acknowledging batches until a file
 * is back, since rows written meanwhile would not survive a stop.
 */
export class SpanStoreFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SpanStoreFileError';
  }
}
