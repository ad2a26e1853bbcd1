import { DAY_MS, floorDay } from './dates.js';

/**
 * The data-lifecycle rules both span stores apply, defined once: which
 * columns are texts (emptied before a row expires), what an erasure selects,
 * and when rows and texts expire. DuckDB and ClickHouse render them.
 */

/** Span columns that hold free text a user sent: emptied after an org's text retention, and by `record: no-text`. */
export const TEXT_COLUMNS = ['input', 'output', 'tool_catalog', 'sources', 'safety_metadata'] as const;

/** What `erase` removes: every span of a customer, of a trace or of a session, in one org. */
export type EraseKind = 'customer' | 'trace' | 'session';
export interface EraseTarget {
  kind: EraseKind;
  id: string;
}

/** The span column an erasure selects on. */
export const ERASE_COLUMN: Record<EraseKind, 'customer_id' | 'trace_id' | 'session_id'> = {
  customer: 'customer_id',
  trace: 'trace_id',
  session: 'session_id',
};

/** What an erasure removed (or, dry, would remove). */
export interface EraseCounts {
  spans: number;
  traces: number;
  /** Rows of the daily rollups and the trace table that carry the erased id. */
  rollupRows: number;
}

/** Retention of one org, in days; 0 keeps forever. */
export interface Retention {
  days: number;
  textDays: number;
}

/** The install's defaults (RETENTION_DAYS, TEXT_RETENTION_DAYS): finance keeps costs for over a year, prompts a month. */
export const DEFAULT_RETENTION: Retention = { days: 400, textDays: 30 };

/**
 * The instants before which an org's rows, and its texts, are gone: whole UTC
 * days, so both stores (ClickHouse deletes by `start_date`) cut at the same
 * place. A row of day D goes once D is more than `days` days before today.
 * Undefined: nothing expires.
 */
export function retentionCuts(now: number, r: Retention): { rowsBefore?: number; textsBefore?: number } {
  const today = floorDay(now);
  return {
    ...(r.days > 0 ? { rowsBefore: today - r.days * DAY_MS } : {}),
    ...(r.textDays > 0 && (r.days === 0 || r.textDays < r.days) ? { textsBefore: today - r.textDays * DAY_MS } : {}),
  };
}

/** One org's cut, as a store applies it. */
export interface RetentionCut {
  orgId: string;
  rowsBefore?: number | undefined;
  textsBefore?: number | undefined;
}

/** What one retention pass did; `done` false when it stopped at its row budget and more is due. */
export interface RetentionResult {
  deletedRows: number;
  emptiedRows: number;
  done: boolean;
}

/**
 * Rollup rows that carry the erased id itself, beyond the erased traces' rows
 * of `traces`: deleted whole, since every span they sum is erased (and the
 * costs of rows that expired before stay only here).
 */
export function rollupsNaming(kind: EraseKind): { table: string; column: string }[] {
  if (kind === 'customer') {
    return [
      { table: 'usage_daily', column: 'customer_id' },
      { table: 'customers_daily', column: 'customer_id' },
      { table: 'sessions_daily', column: 'customer_id' },
    ];
  }
  if (kind === 'session') return [{ table: 'sessions_daily', column: 'session_id' }];
  return [];
}
