import { utcDay } from '@trace-ingest/shared/dates';
import { CLICKHOUSE_ROLLUP } from '@trace-ingest/shared/rollups';
import { encodeRow, type SpanRow } from '@trace-ingest/shared/rows';
import { bindParams } from './clickhouse-sql.js';
import { storedColumns, storedToRow } from './row-codec.js';
import type { QueryRow } from './span-store.js';

/**
 * Reads and lines of the ClickHouse store around its spans. Writers only
 * append; the derived tables are derived from the distinct spans in the
 * background (clickhouse-derive.ts).
 */

type Run = (sql: string) => Promise<QueryRow[]>;

// An IN list stays well under ClickHouse's 256 KiB query limit.
const IN_CHUNK = 500;

/** A span's identity as one map key. */
export const spanKey = (r: { org_id: string; trace_id: string; span_id: string }): string => `${r.org_id}\u0000${r.trace_id}\u0000${r.span_id}`;
// Every stored column, decimals and dates as text (aliased as the columns: read from a subquery).
const COLUMNS = storedColumns(CLICKHOUSE_ROLLUP);

export function inChunks<T>(xs: readonly T[], n = IN_CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < xs.length; i += n) out.push(xs.slice(i, i + n));
  return out;
}

function startRange(rows: readonly { start_time: number }[]): { lo: number; hi: number } {
  let lo = Infinity;
  let hi = -Infinity;
  for (const r of rows) {
    lo = Math.min(lo, r.start_time);
    hi = Math.max(hi, r.start_time);
  }
  return { lo, hi };
}

/** The stored rows of these spans (their current versions). */
export async function storedSpans(run: Run, spans: readonly { org_id: string; trace_id: string; span_id: string; start_time: number }[]): Promise<SpanRow[]> {
  const out: SpanRow[] = [];
  for (const part of inChunks(spans)) {
    const { lo, hi } = startRange(part);
    const found = await run(
      bindParams(
        `SELECT ${COLUMNS} FROM (SELECT * FROM spans FINAL WHERE start_date >= toDate(?) AND start_date <= toDate(?) ` +
          `AND start_time >= ? AND start_time <= ? AND (org_id, trace_id, span_id) IN (${part.map(() => '(?, ?, ?)').join(', ')}))`,
        [utcDay(lo), utcDay(hi), lo, hi, ...part.flatMap((s) => [s.org_id, s.trace_id, s.span_id])],
      ),
    );
    for (const f of found) out.push(storedToRow(f));
  }
  return out;
}

/**
 * A row's line with its weight written out (18.16 fills a field missing from
 * JSONEachRow with the type's zero, not the column's DEFAULT), and `extra`
 * fields (`,"retention_days":30`) of columns beyond the span's.
 */
export function weighted(row: SpanRow, weight: 1 | -1, extra = ''): string {
  return `${encodeRow(row).slice(0, -1)},"rollup_weight":${weight}${extra}}`;
}
