import { formatDecimal, parseDecimal } from '@trace-ingest/shared/decimal';
import { COST_COLUMNS, encodeRow, REPORT_COST_COLUMNS, SPAN_COLUMNS, USAGE_COLUMNS, type SpanCosts, type SpanRow } from '@trace-ingest/shared/rows';
import { USAGE_DIMENSIONS } from '@trace-ingest/shared/fields';
import type { Span } from '@trace-ingest/shared/schema';
import type { QueryRow, SpanStore } from './span-store.js';

/**
 * Cost and usage reports over the span store, one row per span counted (the
 * DuckDB primary key; FINAL in ClickHouse), with exact decimal sums.
 */

export const GROUPS = {
  customer: 'customer_id',
  model: 'model_id',
  provider: 'provider',
  day: 'start_date',
  'span-type': 'span_type',
  trace: 'trace_id',
  session: 'session_id',
  workflow: 'workflow_name',
} as const;

export type GroupBy = keyof typeof GROUPS;

const TOKENS = USAGE_COLUMNS;
const COSTS = REPORT_COST_COLUMNS;

export interface UsageRow {
  group: string;
  /** The value of the second grouping (`then`), when one was asked for. */
  subgroup?: string;
  spans: number;
  unpricedSpans: number;
  tokens: Record<(typeof TOKENS)[number], number>;
  costs: Record<(typeof COSTS)[number], string>;
}

export interface UsageFilter {
  orgId: string;
  /** Epoch ms, inclusive. */
  from: number;
  /** Epoch ms, exclusive. */
  to: number;
  by: GroupBy;
  /** A second grouping inside the first, e.g. by day then model (one row per pair). */
  then?: GroupBy | undefined;
  customerId?: string | undefined;
  traceId?: string | undefined;
}

/** How report SQL is spelled on each span store: the one-row-per-span source, text casts, unpriced spans. */
export interface ReportDialect {
  /** `spans`, read one row per span (FINAL on ClickHouse). */
  from: string;
  /** An expression as text, so decimals and dates come back exact. */
  text(expr: string): string;
  /** A condition: the span has a model but no price. */
  unpricedCondition: string;
  /** The count of such spans in a group. */
  unpriced: string;
}

export function reportDialect(kind: SpanStore['kind']): ReportDialect {
  return kind === 'clickhouse'
    ? {
        from: 'spans FINAL',
        text: (e) => `toString(${e})`,
        unpricedCondition: "priced = 0 AND model_id != ''",
        unpriced: "sum(if(priced = 0 AND model_id != '', 1, 0))",
      }
    : {
        from: 'spans',
        text: (e) => `CAST(${e} AS VARCHAR)`,
        unpricedCondition: "NOT priced AND model_id <> ''",
        unpriced: "sum(CASE WHEN NOT priced AND model_id <> '' THEN 1 ELSE 0 END)",
      };
}

function filterSql(f: Omit<UsageFilter, 'by' | 'then'>): { where: string; params: unknown[] } {
  const where = ['org_id = ?', 'start_time >= ?', 'start_time < ?'];
  const params: unknown[] = [f.orgId, f.from, f.to];
  if (f.customerId !== undefined) {
    where.push('customer_id = ?');
    params.push(f.customerId);
  }
  if (f.traceId !== undefined) {
    where.push('trace_id = ?');
    params.push(f.traceId);
  }
  return { where: where.join(' AND '), params };
}

/**
 * Usage grouped by one dimension (and optionally a second inside it). With
 * `limit`, only that many groups of the largest cost are read (one level of
 * grouping only), so a range with millions of traces stays cheap.
 */
export async function usageReport(store: SpanStore, f: UsageFilter & { limit?: number | undefined }): Promise<UsageRow[]> {
  const d = reportDialect(store.kind);
  const group = GROUPS[f.by];
  const filter = filterSql(f);
  let { where, params } = filter;
  const sub = f.then === undefined ? undefined : GROUPS[f.then];
  if (f.limit !== undefined && sub === undefined) {
    // Ranked in a subquery: in ClickHouse the outer select's alias total_cost would shadow the column.
    where +=
      ` AND ${group} IN (SELECT ${group} FROM ${d.from} WHERE ${filter.where} ` +
      `GROUP BY ${group} ORDER BY sum(total_cost) DESC, ${group} LIMIT ${Math.max(0, Math.trunc(f.limit))})`;
    params = [...params, ...filter.params];
  }
  const sql = `SELECT ${d.text(group)} AS grp, ${sub === undefined ? '' : `${d.text(sub)} AS sub, `}count(*) AS spans, ${d.unpriced} AS unpriced,
      ${TOKENS.map((t) => `${d.text(`sum(${t})`)} AS ${t}`).join(', ')},
      ${COSTS.map((c) => `${d.text(`sum(${c})`)} AS ${c}`).join(', ')}
    FROM ${d.from} WHERE ${where} GROUP BY ${group}${sub === undefined ? '' : `, ${sub}`}`;
  const rows = await store.query(sql, params);
  const out = rows.map((r): UsageRow => ({
    group: String(r.grp),
    ...(sub === undefined ? {} : { subgroup: String(r.sub) }),
    spans: Number(r.spans),
    unpricedSpans: Number(r.unpriced),
    tokens: Object.fromEntries(TOKENS.map((t) => [t, Number(r[t])])) as UsageRow['tokens'],
    costs: Object.fromEntries(COSTS.map((c) => [c, formatDecimal(parseDecimal(String(r[c])))])) as UsageRow['costs'],
  }));
  // Sorted by cost, exactly (decimal comparison), then by name.
  return out.sort((a, b) => {
    const d2 = parseDecimal(b.costs.total_cost) - parseDecimal(a.costs.total_cost);
    return d2 > 0n ? 1 : d2 < 0n ? -1 : a.group.localeCompare(b.group) || (a.subgroup ?? '').localeCompare(b.subgroup ?? '');
  });
}

/** How many distinct values of a dimension the filter's spans have (e.g. traces in a range). */
export async function countGroups(store: SpanStore, f: Omit<UsageFilter, 'then'>): Promise<number> {
  const d = reportDialect(store.kind);
  const { where, params } = filterSql(f);
  const [r] = await store.query(`SELECT count(DISTINCT ${GROUPS[f.by]}) AS n FROM ${d.from} WHERE ${where}`, params);
  return Number(r?.n ?? 0);
}

/**
 * What people call the groups of a report: a trace's name and customer, a
 * customer's name (the id is what groups; a client may send the name on some
 * spans only, so any name sent in the range is taken). Limited to `groups`.
 */
export async function groupLabels(
  store: SpanStore,
  f: Omit<UsageFilter, 'then' | 'by'> & { by: 'trace' | 'customer'; groups: readonly string[] },
): Promise<Record<string, { name: string; customer?: string }>> {
  if (f.groups.length === 0) return {};
  const d = reportDialect(store.kind);
  const { where, params } = filterSql(f);
  const column = GROUPS[f.by];
  const labels = f.by === 'trace' ? 'max(trace_name) AS name, max(customer_id) AS customer' : 'max(customer_name) AS name';
  const rows = await store.query(
    `SELECT ${column} AS g, ${labels} FROM ${d.from} WHERE ${where} AND ${column} IN (${f.groups.map(() => '?').join(', ')}) GROUP BY ${column}`,
    [...params, ...f.groups],
  );
  const out: Record<string, { name: string; customer?: string }> = {};
  for (const r of rows)
    out[String(r.g)] = f.by === 'trace' ? { name: String(r.name ?? ''), customer: String(r.customer ?? '') } : { name: String(r.name ?? '') };
  return out;
}

/** Every stored column, with decimals and dates as text so they survive either store's driver exactly. */
function storedColumns(d: ReportDialect): string {
  return SPAN_COLUMNS.map(([n, k]) => (k === 'decimal' || k === 'date' ? `${d.text(n)} AS ${n}` : n)).join(', ');
}

/** The spans of one trace of an org, in start order (the console's waterfall). */
export async function traceSpans(store: SpanStore, f: { orgId: string; traceId: string }, limit = 10_000): Promise<SpanRow[]> {
  const d = reportDialect(store.kind);
  const rows = await store.query(
    `SELECT ${storedColumns(d)} FROM ${d.from} WHERE org_id = ? AND trace_id = ? ORDER BY start_time, span_id LIMIT ${Math.trunc(limit)}`,
    [f.orgId, f.traceId],
  );
  return rows.map(storedToRow);
}

export function usageTotals(rows: readonly UsageRow[]): UsageRow {
  const total: UsageRow = {
    group: 'TOTAL',
    spans: 0,
    unpricedSpans: 0,
    tokens: Object.fromEntries(TOKENS.map((t) => [t, 0])) as UsageRow['tokens'],
    costs: Object.fromEntries(COSTS.map((c) => [c, '0'])) as UsageRow['costs'],
  };
  for (const r of rows) {
    total.spans += r.spans;
    total.unpricedSpans += r.unpricedSpans;
    for (const t of TOKENS) total.tokens[t] += r.tokens[t];
    for (const c of COSTS) total.costs[c] = formatDecimal(parseDecimal(total.costs[c]) + parseDecimal(r.costs[c]));
  }
  return total;
}

/** A stored row (as a store returns it) back in the canonical SpanRow form. */
export function storedToRow(r: QueryRow): SpanRow {
  const out: Record<string, unknown> = {};
  for (const [name, kind] of SPAN_COLUMNS) {
    const v = r[name];
    switch (kind) {
      case 'int':
        out[name] = Number(v);
        break;
      case 'nullable_int':
      case 'nullable_float':
        out[name] = v === null || v === undefined ? null : Number(v);
        break;
      case 'decimal':
        out[name] = formatDecimal(parseDecimal(String(v)));
        break;
      case 'bool':
        out[name] = v === true || v === 1 || v === '1' || v === 'true';
        break;
      case 'date':
        out[name] = String(v).slice(0, 10);
        break;
      case 'int_array':
        out[name] = (v as unknown[]).map(Number);
        break;
      case 'string_array':
        out[name] = (v as unknown[]).map(String);
        break;
      case 'string':
        out[name] = String(v ?? '');
        break;
    }
  }
  return out as unknown as SpanRow;
}

/** The Span fields pricing needs, from a stored row. */
export function rowToPricedSpan(r: SpanRow): Span {
  return {
    spanId: r.span_id,
    spanType: r.span_type as Span['spanType'],
    name: r.name,
    startTime: r.start_time,
    endTime: r.end_time,
    ...(r.provider === '' ? {} : { provider: r.provider }),
    ...(r.model_id === '' ? {} : { modelId: r.model_id }),
    usage: Object.fromEntries(USAGE_DIMENSIONS.map((d) => [d.field, r[d.column]])),
  };
}

export interface RepriceFilter {
  orgId: string;
  from: number;
  to: number;
  model?: string | undefined;
}

export interface RepriceResult {
  rowsScanned: number;
  rowsChanged: number;
  newlyPriced: number;
  costBefore: string;
  costAfter: string;
  costDifference: string;
}

const COST_KEYS: readonly (keyof SpanCosts)[] = [...COST_COLUMNS, 'priced', 'price_source'];

/**
 * Recomputes stored costs with today's prices (catalog and overrides) and
 * rewrites only the rows whose costs change; running it twice changes nothing
 * the second time.
 */
export async function reprice(store: SpanStore, price: (span: Span, orgId: string) => SpanCosts, f: RepriceFilter, batchRows = 5000): Promise<RepriceResult> {
  const d = reportDialect(store.kind);
  const where = ['org_id = ?', 'start_time >= ?', 'start_time < ?'];
  const params: unknown[] = [f.orgId, f.from, f.to];
  if (f.model !== undefined) {
    where.push('model_id = ?');
    params.push(f.model);
  }
  // Streamed: the rows (texts up to 1M characters each) are never all in memory at once.
  const stored = store.queryStream(`SELECT ${storedColumns(d)} FROM ${d.from} WHERE ${where.join(' AND ')} ORDER BY trace_id, span_id`, params);
  let rowsScanned = 0;
  let before = 0n;
  let after = 0n;
  let changed: string[] = [];
  let rowsChanged = 0;
  let newlyPriced = 0;
  const now = Date.now();
  const flush = async () => {
    if (changed.length === 0) return;
    await store.replaceLines(Buffer.from(changed.join('\n') + '\n'), changed.length);
    changed = [];
  };
  for await (const r of stored) {
    const row = storedToRow(r);
    rowsScanned++;
    const costs = price(rowToPricedSpan(row), row.org_id);
    before += parseDecimal(row.total_cost);
    after += parseDecimal(costs.total_cost);
    const differs = COST_KEYS.some((k) =>
      k === 'priced' || k === 'price_source' ? row[k] !== costs[k] : parseDecimal(row[k]) !== parseDecimal(costs[k] as string),
    );
    if (!differs) continue;
    rowsChanged++;
    if (!row.priced && costs.priced) newlyPriced++;
    changed.push(encodeRow({ ...row, ...costs, received_at: Math.max(now, row.received_at + 1) }));
    if (changed.length >= batchRows) await flush();
  }
  await flush();
  return {
    rowsScanned,
    rowsChanged,
    newlyPriced,
    costBefore: formatDecimal(before),
    costAfter: formatDecimal(after),
    costDifference: formatDecimal(after - before),
  };
}
