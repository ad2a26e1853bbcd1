import { encodeRow, type SpanRow } from '@trace-ingest/shared/rows';
import { CLICKHOUSE_ROLLUP, NON_ROOT_RANK, RANK_DIGITS, TRACE_FIELDS, TRACE_WINDOW_DAYS, type TraceField } from '@trace-ingest/shared/rollups';
import { bindParams } from './clickhouse-sql.js';
import { reportDialect, storedColumns, storedToRow } from './reports.js';
import type { QueryRow } from './span-store.js';

/**
 * What the ClickHouse store does around an insert so that its rollups (the
 * materialized views of migration 0002, fed by every insert into spans) stay
 * exact, with the rules DuckDB's insert applies in one transaction:
 * - only spans not stored yet are inserted;
 * - each trace's fields are resolved with what the `traces` table knows;
 * - a stored span that changes (its trace learned a customer, a reprice) is
 *   written again in the same insert as a copy of its stored version weighted
 *   -1 (`rollup_weight`): the views take the old share back and add the new
 *   one in one insert block, which ClickHouse applies whole or not at all. A
 *   retry after a failed insert recomputes everything; after an insert that
 *   succeeded unseen, the spans already show the change and nothing moves.
 */

type Run = (sql: string) => Promise<QueryRow[]>;

const DAY_MS = 86_400_000;
const d = CLICKHOUSE_ROLLUP;
// An IN list stays well under ClickHouse's 256 KiB query limit.
const IN_CHUNK = 500;

/** A span's identity as one map key. */
export const spanKey = (r: { org_id: string; trace_id: string; span_id: string }): string => `${r.org_id}\u0000${r.trace_id}\u0000${r.span_id}`;
// Every stored column, decimals and dates as text (aliased as the columns: read from a subquery).
const COLUMNS = storedColumns(reportDialect('clickhouse'));
const traceKey = (r: { org_id: string; trace_id: string }): string => `${r.org_id}\u0000${r.trace_id}`;
const dayText = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

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

/** A span row's candidate for a trace field, as the views compute it (candidateSql). */
function candidate(r: SpanRow, f: TraceField): string | undefined {
  if (r[f.when] === '') return undefined;
  const rank = (r.parent_span_id === '' ? 0 : NON_ROOT_RANK) + r.received_at;
  return String(rank).padStart(RANK_DIGITS, '0') + r[f.column];
}

const none = (c: string | undefined): boolean => c === undefined || c.startsWith('~');
const better = (a: string | undefined, b: string | undefined): string | undefined => (none(a) ? b : none(b) ? a : (a as string) < (b as string) ? a : b);
const valueOf = (c: string | undefined): string => (none(c) ? '' : (c as string).slice(RANK_DIGITS));

/** The rows, each once (the first received), without the spans already stored. */
export async function unstoredRows(run: Run, rows: readonly SpanRow[]): Promise<SpanRow[]> {
  const once = new Map<string, SpanRow>();
  for (const r of rows) {
    const k = spanKey(r);
    const seen = once.get(k);
    if (seen === undefined || r.received_at < seen.received_at) once.set(k, r);
  }
  const fresh = [...once.values()];
  if (fresh.length === 0) return fresh;
  const { lo, hi } = startRange(fresh);
  const stored = new Set<string>();
  for (const part of inChunks([...new Set(fresh.map((r) => r.trace_id))])) {
    const found = await run(
      bindParams(
        'SELECT org_id, trace_id, span_id FROM spans WHERE start_date >= toDate(?) AND start_date <= toDate(?) ' +
          `AND start_time >= ? AND start_time <= ? AND trace_id IN (${part.map(() => '?').join(', ')})`,
        [dayText(lo), dayText(hi), lo, hi, ...part],
      ),
    );
    for (const f of found) stored.add(spanKey(f as SpanRow));
  }
  return fresh.filter((r) => !stored.has(spanKey(r)));
}

/**
 * The trace-level fields of each trace in `rows`, resolved with what the
 * traces table knows of it (TRACE_FIELDS' rule, as DuckDB's insert does).
 */
export async function resolvedFields(run: Run, rows: readonly SpanRow[]): Promise<Map<string, Partial<SpanRow>>> {
  const out = new Map<string, Partial<SpanRow>>();
  if (rows.length === 0) return out;
  const batch = new Map<string, { org_id: string; trace_id: string; cands: (string | undefined)[] }>();
  for (const r of rows) {
    const k = traceKey(r);
    let t = batch.get(k);
    if (t === undefined) batch.set(k, (t = { org_id: r.org_id, trace_id: r.trace_id, cands: TRACE_FIELDS.map(() => undefined) }));
    const cands = t.cands;
    TRACE_FIELDS.forEach((f, i) => (cands[i] = better(cands[i], candidate(r, f))));
  }
  const { lo, hi } = startRange(rows);
  const window = [dayText(lo - TRACE_WINDOW_DAYS * DAY_MS), dayText(hi + TRACE_WINDOW_DAYS * DAY_MS)];
  const known = new Map<string, string[]>();
  for (const part of inChunks([...batch.values()])) {
    const found = await run(
      bindParams(
        `SELECT org_id, trace_id, ${TRACE_FIELDS.map((f) => `${d.traceMerge('min', f.candidate)} AS ${f.candidate}`).join(', ')} FROM traces ` +
          `WHERE start_date >= toDate(?) AND start_date <= toDate(?) AND (org_id, trace_id) IN (${part.map(() => '(?, ?)').join(', ')}) ` +
          'GROUP BY org_id, trace_id',
        [...window, ...part.flatMap((t) => [t.org_id, t.trace_id])],
      ),
    );
    for (const f of found)
      known.set(
        traceKey(f as SpanRow),
        TRACE_FIELDS.map((tf) => String(f[tf.candidate] ?? '~')),
      );
  }
  for (const [k, t] of batch) {
    const old = known.get(k);
    out.set(k, Object.fromEntries(TRACE_FIELDS.map((f, i) => [f.column, valueOf(better(t.cands[i], old?.[i]))])) as Partial<SpanRow>);
  }
  return out;
}

/** The rows with their traces' resolved fields. */
export function withFields(rows: readonly SpanRow[], fields: Map<string, Partial<SpanRow>>): SpanRow[] {
  return rows.map((r) => ({ ...r, ...fields.get(traceKey(r)) }));
}

/** Stored spans of these traces (in the trace window around `rows`) whose trace-level fields differ from `fields`. */
export async function spansToMove(run: Run, rows: readonly SpanRow[], fields: Map<string, Partial<SpanRow>>): Promise<SpanRow[]> {
  if (rows.length === 0) return [];
  const { lo, hi } = startRange(rows);
  const window = [dayText(lo - TRACE_WINDOW_DAYS * DAY_MS), dayText(hi + TRACE_WINDOW_DAYS * DAY_MS)];
  const out: SpanRow[] = [];
  const traces = [...new Map(rows.map((r) => [traceKey(r), { org_id: r.org_id, trace_id: r.trace_id }])).values()];
  for (const part of inChunks(traces)) {
    const stored = await run(
      bindParams(
        `SELECT ${COLUMNS} FROM (SELECT * FROM spans FINAL WHERE start_date >= toDate(?) AND start_date <= toDate(?) ` +
          `AND (org_id, trace_id) IN (${part.map(() => '(?, ?)').join(', ')}))`,
        [...window, ...part.flatMap((t) => [t.org_id, t.trace_id])],
      ),
    );
    for (const s of stored) {
      const row = storedToRow(s);
      const f = fields.get(traceKey(row));
      if (f !== undefined && TRACE_FIELDS.some((tf) => row[tf.column] !== f[tf.column])) out.push(row);
    }
  }
  return out;
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
        [dayText(lo), dayText(hi), lo, hi, ...part.flatMap((s) => [s.org_id, s.trace_id, s.span_id])],
      ),
    );
    for (const f of found) out.push(storedToRow(f));
  }
  return out;
}

/**
 * The lines that replace a stored span by `next` and move the rollups with
 * it: a copy of the stored version weighted -1 (same version, so the table
 * still keeps one row per span) and the new version, one received_at later.
 */
export function replacement(stored: SpanRow, next: SpanRow, now: number, extra = ''): string[] {
  return [weighted(stored, -1, extra), weighted({ ...next, received_at: Math.max(now, stored.received_at + 1) }, 1, extra)];
}

/**
 * A row's line with its weight written out (18.16 fills a field missing from
 * JSONEachRow with the type's zero, not the column's DEFAULT), and `extra`
 * fields (`,"retention_days":30`) of columns beyond the span's.
 */
export function weighted(row: SpanRow, weight: 1 | -1, extra = ''): string {
  return `${encodeRow(row).slice(0, -1)},"rollup_weight":${weight}${extra}}`;
}
