import { addDays, ceilDay, DAY_MS, floorDay, utcDay } from '@trace-ingest/shared/dates';
import { formatDecimal, parseDecimal } from '@trace-ingest/shared/decimal';
import { COST_COLUMNS, REPORT_COST_COLUMNS, USAGE_COLUMNS, type CostColumn, type SpanCosts, type SpanRow } from '@trace-ingest/shared/rows';
import { USAGE_DIMENSIONS } from '@trace-ingest/shared/fields';
import type { Span } from '@trace-ingest/shared/schema';
import { candidateValueSql, CLICKHOUSE_ROLLUP, DUCKDB_ROLLUP, TRACE_WINDOW_DAYS, type RollupDialect } from '@trace-ingest/shared/rollups';
import type { CostChange, QueryRow, SpanStore, SqlPart } from './span-store.js';
import { costDescending } from './clickhouse-sql.js';
import { decimalText, storedColumns, storedToRow } from './row-codec.js';
import { dateLiteral, RefreshScope, TOP_LISTS, type TopListName } from './top-lists.js';

export { RefreshScope };

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
  /**
   * Expressions as one comma-separated text: a report's measures come back as
   * one value per row, since converting each value of a result costs a store's client more than computing it.
   */
  pack(exprs: readonly string[]): string;
  /** A condition: the span has a model but no price. */
  unpricedCondition: string;
  /** The count of such spans in a group. */
  unpriced: string;
  /** A YYYY-MM-DD day (made here from a number, never request text) as a date. */
  dateLiteral(day: string): string;
  /** A date plus n days. */
  addDays(date: string, n: number): string;
  /** The sum of a `traces` measure over the rows meeting a condition. */
  sumIf(column: string, cond: string): string;
  /** The number of rows meeting a condition. */
  countIf(cond: string): string;
  /** An aggregate: the group's texts joined by commas. */
  joinText(expr: string): string;
  /** How the rollups are spelled on this store. */
  rollup: RollupDialect;
  /** ORDER BY keys for a cost, largest first (then a caller's own keys). */
  costDesc(expr: string): string;
  /**
   * Whether a top-list ranking runs on its own before the ranked groups'
   * measures are read with their ids as values (faster on ClickHouse), or as
   * their subquery of IN (faster on DuckDB, as one query).
   */
  ranksApart: boolean;
}

export function reportDialect(kind: SpanStore['kind']): ReportDialect {
  return kind === 'clickhouse'
    ? {
        from: 'spans FINAL',
        text: (e) => `toString(${e})`,
        pack: (es) => `concat(${es.map((e) => `toString(${e})`).join(", ',', ")})`,
        unpricedCondition: CLICKHOUSE_ROLLUP.unpriced,
        unpriced: `sum(if(${CLICKHOUSE_ROLLUP.unpriced}, 1, 0))`,
        dateLiteral: (day) => `toDate('${day}')`,
        addDays: (e, n) => `addDays(${e}, ${n})`,
        sumIf: (c, cond) => `sumMergeIf(${c}, ${cond})`,
        countIf: (cond) => `countIf(${cond})`,
        joinText: (e) => `arrayStringConcat(groupArray(${e}), ',')`,
        rollup: CLICKHOUSE_ROLLUP,
        costDesc: costDescending,
        ranksApart: true,
      }
    : {
        from: 'spans',
        text: (e) => `CAST(${e} AS VARCHAR)`,
        // concat_ws skips NULLs, which would shift every later measure: an empty sum is 0.
        pack: (es) => `concat_ws(',', ${es.map((e) => `coalesce(CAST(${e} AS VARCHAR), '0')`).join(', ')})`,
        unpricedCondition: DUCKDB_ROLLUP.unpriced,
        unpriced: `sum(${DUCKDB_ROLLUP.unpricedFlag})`,
        dateLiteral,
        addDays: (e, n) => `(${e} + ${n})`,
        sumIf: (c, cond) => `sum(${c}) FILTER (WHERE ${cond})`,
        countIf: (cond) => `count(*) FILTER (WHERE ${cond})`,
        joinText: (e) => `string_agg(${e}, ',')`,
        rollup: DUCKDB_ROLLUP,
        costDesc: (e) => `${e} DESC`,
        ranksApart: false,
      };
}

function filterSql(f: Omit<UsageFilter, 'by' | 'then'>, dialect: ReportDialect): { where: string; params: unknown[] } {
  // The days too: ClickHouse finds rows by its sort key (org, start_date, ...), not by start_time.
  const where = ['org_id = ?', ...dayBounds(dialect, f.from, f.to), 'start_time >= ?', 'start_time < ?'];
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

/** The UTC days holding [from, to), as conditions on start_date (literals made here from numbers). */
function dayBounds(dialect: ReportDialect, from: number, to: number): string[] {
  const safe = (ms: number) => utcDay(Math.min(Math.max(ms, 0), 253_402_300_799_999));
  return [`start_date >= ${dialect.dateLiteral(safe(from))}`, `start_date <= ${dialect.dateLiteral(safe(to - 1))}`];
}

/**
 * What a report's route is chosen from: its filter, what the store keeps,
 * and the facts that cost a query, asked only when a route's condition needs them.
 */
export interface ReportInputs<F> {
  f: F;
  /** Whether the store keeps rollups; without them every report scans the spans (the oracle tests compare reports with). */
  rollups: boolean;
  /** The groups a day of the store's top lists keeps; undefined when it keeps none. */
  listsPerDay: number | undefined;
  /** The range as whole days the rollups answer and cut edges the spans answer, read once when first asked. */
  range(): Promise<RangeRoute>;
  /** The spans of the range's `less` slices, grouped as the report groups (none when it has none), read once when first asked. */
  taken(): Promise<UsageRow[]>;
  /** Whether a top list is up to date for these days (each day asked once among the reads of a RefreshScope). */
  listsReady(name: TopListName, days: Days): Promise<boolean>;
}

/** One way to answer a report: the inputs it answers, and how it reads them. */
export interface ReportRoute<F, R> {
  name: string;
  when(q: ReportInputs<F>): boolean | Promise<boolean>;
  read(store: SpanStore, q: ReportInputs<F>): Promise<R>;
}

/** The first route whose condition holds (every table ends with one that always holds). */
export async function chooseRoute<F, R>(routes: readonly ReportRoute<F, R>[], q: ReportInputs<F>): Promise<ReportRoute<F, R>> {
  for (const route of routes) if (await route.when(q)) return route;
  throw new Error('no report route holds');
}

/** A report read by the first route of `routes` that holds for `f` on this store. */
async function planned<F extends { orgId: string }, R>(
  store: SpanStore,
  routes: readonly ReportRoute<F, R>[],
  f: F,
  range: () => RangeRoute | Promise<RangeRoute>,
  scope = new RefreshScope(),
  grouped?: Omit<UsageQuery, 'from' | 'to'>,
): Promise<R> {
  const lists = store.topLists;
  let known: Promise<RangeRoute> | undefined;
  let taken: Promise<UsageRow[]> | undefined;
  const q: ReportInputs<F> = {
    f,
    rollups: store.rollups,
    listsPerDay: lists?.perDay,
    range: () => (known ??= Promise.resolve().then(range)),
    taken: () =>
      (taken ??= q.range().then(async ({ less }) => {
        if (less.length === 0) return [];
        if (grouped === undefined) throw new Error('a range with slices taken away, for a report that cannot take them');
        const parts = [];
        for (const slice of less) parts.push(await scanReport(store, { ...grouped, ...slice, limit: undefined }));
        return parts.length === 1 ? (parts[0] ?? []) : mergeRows(parts);
      })),
    listsReady: async (name, days) => lists !== undefined && (await scope.refresh(lists, name, f.orgId, days.from, days.to)),
  };
  return (await chooseRoute(routes, q)).read(store, q);
}

/** The whole days of a range, when it has no cut edge. */
async function wholeDays(q: ReportInputs<unknown>): Promise<Days | undefined> {
  const { days, edges } = await q.range();
  return edges.length === 0 ? days : undefined;
}

/** The whole days a route's condition found there. */
async function daysOf(q: ReportInputs<unknown>): Promise<Days> {
  const { days } = await q.range();
  if (days === undefined) throw new Error('a rollup route on a range of no whole day');
  return days;
}

type UsageQuery = UsageFilter & { limit?: number | undefined };

/** The rollup holding a usage report's grouping, or undefined when the spans must be read. */
const usageSource = (q: ReportInputs<UsageQuery>): DailySource | 'traces' | undefined =>
  q.rollups && q.f.traceId === undefined ? rollupFor(q.f.by, q.f.then, q.f.customerId !== undefined) : undefined;

/**
 * Whether the per-day top lists rank this report: one grouping by `name`,
 * no customer, no more groups than a day's list keeps, whole days, lists up to date.
 */
async function listsRank(q: ReportInputs<UsageQuery>, name: TopListName): Promise<boolean> {
  const { f } = q;
  if (usageSource(q) === undefined || f.by !== name || f.then !== undefined || f.customerId !== undefined) return false;
  if (f.limit === undefined || q.listsPerDay === undefined || f.limit > q.listsPerDay) return false;
  const days = await wholeDays(q);
  if (days === undefined || f.limit + (await q.taken()).length > q.listsPerDay) return false;
  return q.listsReady(name, days);
}

/**
 * A reader of a range's whole days (by `readDays`), its cut edges (from the
 * spans, added) and its `less` slices (from the spans, taken away), cut to the limit.
 */
function daysAndEdges(
  readDays: (store: SpanStore, f: UsageQuery, days: Days, q: ReportInputs<UsageQuery>) => Promise<UsageRow[]>,
): ReportRoute<UsageQuery, UsageRow[]>['read'] {
  return async (store, q) => {
    const { f } = q;
    const { days, edges } = await q.range();
    const taken = await q.taken();
    const parts: UsageRow[][] = [];
    // With partial days at the edges the ranked cut is made after they are added in. Taking away lowers only
    // the groups it finds, so the first `limit` of the range are among the first `limit` + that many of the whole days.
    const limit = edges.length > 0 || f.limit === undefined ? undefined : f.limit + taken.length;
    if (days !== undefined) parts.push(await readDays(store, { ...f, limit }, days, q));
    for (const e of edges) parts.push(await scanReport(store, { ...f, from: e.from, to: e.to, limit: undefined }));
    let rows = parts.length === 1 ? (parts[0] ?? []) : mergeRows(parts);
    if (taken.length > 0) rows = takeAway(rows, taken);
    rows = sortRows(rows);
    return f.limit === undefined || f.then !== undefined ? rows : rows.slice(0, rowCount(f.limit));
  };
}

/** usageReport's routes, in the order they are tried. */
export const USAGE_ROUTES: readonly ReportRoute<UsageQuery, UsageRow[]>[] = [
  { name: 'scan', when: (q) => usageSource(q) === undefined, read: (store, q) => scanReport(store, q.f) },
  { name: 'trace top list', when: (q) => listsRank(q, 'trace'), read: daysAndEdges((store, f, days) => fromTopList(store, 'trace', f, days)) },
  { name: 'session top list', when: (q) => listsRank(q, 'session'), read: daysAndEdges((store, f, days) => fromTopList(store, 'session', f, days)) },
  {
    name: 'traces',
    when: (q) => usageSource(q) === 'traces' && q.f.by === 'trace' && q.f.then === undefined && q.f.customerId === undefined,
    read: daysAndEdges(traceTotals),
  },
  { name: 'trace fields', when: (q) => usageSource(q) === 'traces', read: daysAndEdges(traceFieldReport) },
  {
    name: 'daily rollup',
    when: (q) => typeof usageSource(q) === 'object',
    read: daysAndEdges((store, f, days, q) => dailyReport(store, f, days, usageSource(q) as DailySource)),
  },
];

/**
 * Usage grouped by one dimension (and optionally a second inside it). With
 * `limit`, only that many groups of the largest cost are read (one level of
 * grouping only), so a range with millions of traces stays cheap. Reads
 * that share a `scope` bring each top list day up to date once among them.
 */
export async function usageReport(store: SpanStore, f: UsageQuery, scope?: RefreshScope): Promise<UsageRow[]> {
  return planned(store, USAGE_ROUTES, f, () => reportRoute(store, f), scope, f);
}

/** Usage read from the spans themselves: a single trace, a grouping no rollup holds, and the partial days at a range's edges. */
async function scanReport(store: SpanStore, f: UsageFilter & { limit?: number | undefined }): Promise<UsageRow[]> {
  const dialect = reportDialect(store.kind);
  const group = GROUPS[f.by];
  const filter = filterSql(f, dialect);
  let { where, params } = filter;
  const sub = f.then === undefined ? undefined : GROUPS[f.then];
  if (f.limit !== undefined && sub === undefined) {
    // Ranked in a subquery: in ClickHouse the outer select's alias total_cost would shadow the column.
    where +=
      ` AND ${group} IN (SELECT ${group} FROM ${dialect.from} WHERE ${filter.where} ` +
      `GROUP BY ${group} ORDER BY ${dialect.costDesc('sum(total_cost)')}, ${group} LIMIT ${rowCount(f.limit)})`;
    params = [...params, ...filter.params];
  }
  const measures = dialect.pack(['count(*)', dialect.unpriced, ...TOKENS.map((t) => `sum(${t})`), ...COSTS.map((c) => `sum(${c})`)]);
  const sql =
    `SELECT ${dialect.text(group)} AS grp, ${sub === undefined ? '' : `${dialect.text(sub)} AS sub, `}${measures} AS m ` +
    `FROM ${dialect.from} WHERE ${where} GROUP BY ${group}${sub === undefined ? '' : `, ${sub}`}`;
  return sortRows((await store.query(sql, params)).map((r) => toUsageRow(r, sub !== undefined)));
}

/** A report row from its group (and subgroup) and its packed measures (`m`: spans, unpriced, TOKENS, COSTS). */
function toUsageRow(r: QueryRow, withSub: boolean): UsageRow {
  const m = String(r.m).split(',');
  const tokens: Record<string, number> = {};
  TOKENS.forEach((t, i) => (tokens[t] = Number(m[2 + i])));
  const costs: Record<string, string> = {};
  COSTS.forEach((c, i) => (costs[c] = decimalText(m[2 + TOKENS.length + i] ?? '0')));
  return {
    group: String(r.grp ?? ''),
    ...(withSub ? { subgroup: String(r.sub ?? '') } : {}),
    spans: Number(m[0]),
    unpricedSpans: Number(m[1]),
    tokens: tokens as UsageRow['tokens'],
    costs: costs as UsageRow['costs'],
  };
}

/** Sorted by cost, exactly (decimal comparison), then by name. Each cost is parsed once, not once per comparison. */
function sortRows(rows: UsageRow[]): UsageRow[] {
  const keyed = rows.map((r) => ({ r, cost: parseDecimal(r.costs.total_cost) }));
  keyed.sort((a, b) => {
    const d2 = b.cost - a.cost;
    return d2 > 0n ? 1 : d2 < 0n ? -1 : byText(a.r.group, b.r.group) || byText(a.r.subgroup ?? '', b.r.subgroup ?? '');
  });
  return keyed.map((k) => k.r);
}

/** Code-unit order: the same on every machine, and far cheaper than localeCompare on large reports. */
const byText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Rows of the same group (and subgroup) from several parts of a range, added up. */
function mergeRows(parts: readonly UsageRow[][]): UsageRow[] {
  const out = new Map<string, UsageRow>();
  for (const part of parts)
    for (const r of part) {
      const key = `${r.group}\u0000${r.subgroup ?? ''}`;
      const seen = out.get(key);
      out.set(key, seen === undefined ? r : { ...usageTotals([seen, r]), group: r.group, ...(r.subgroup === undefined ? {} : { subgroup: r.subgroup }) });
    }
  return [...out.values()];
}

/**
 * The rows less the `taken` rows of the same group (and subgroup): a group
 * left with no span is dropped, as the rollups drop it. Taken rows of a group
 * not among `rows` (a ranked read left it out) are not taken from anything.
 */
function takeAway(rows: readonly UsageRow[], taken: readonly UsageRow[]): UsageRow[] {
  const key = (r: UsageRow) => `${r.group}\u0000${r.subgroup ?? ''}`;
  const less = new Map(taken.map((r) => [key(r), r]));
  const out: UsageRow[] = [];
  for (const r of rows) {
    const t = less.get(key(r));
    if (t === undefined) {
      out.push(r);
      continue;
    }
    if (r.spans === t.spans) continue;
    const tokens = { ...r.tokens };
    for (const k of TOKENS) tokens[k] -= t.tokens[k];
    const costs = { ...r.costs };
    for (const c of COSTS) costs[c] = formatDecimal(parseDecimal(r.costs[c]) - parseDecimal(t.costs[c]));
    out.push({ ...r, spans: r.spans - t.spans, unpricedSpans: r.unpricedSpans - t.unpricedSpans, tokens, costs });
  }
  return out;
}

/** A per-day rollup as reports read it: the groupings it holds, by column. */
interface DailySource {
  table: string;
  groups: Partial<Record<GroupBy, string>>;
}

/** The per-day rollups (DAILY_ROLLUPS), each with the dimensions it can group by; the first that fits is read (the narrowest). */
const DAILY_SOURCES: readonly DailySource[] = [
  { table: 'models_daily', groups: { model: 'model_id', provider: 'provider', day: 'start_date', 'span-type': 'span_type' } },
  { table: 'customers_daily', groups: { customer: 'customer_id', day: 'start_date' } },
  { table: 'usage_daily', groups: { customer: 'customer_id', model: 'model_id', provider: 'provider', day: 'start_date', 'span-type': 'span_type' } },
  { table: 'sessions_daily', groups: { session: 'session_id', customer: 'customer_id', day: 'start_date' } },
  { table: 'workflows_daily', groups: { workflow: 'workflow_name', day: 'start_date' } },
];
/** The traces table's groupings: the trace, or a field resolved per trace. */
const TRACE_GROUPS: Partial<Record<GroupBy, string>> = { trace: 'trace_id', session: 'session', customer: 'customer', workflow: 'workflow' };

function rollupFor(by: GroupBy, then: GroupBy | undefined, byCustomer: boolean): DailySource | 'traces' | undefined {
  const fits = (g: Partial<Record<GroupBy, string>>) =>
    g[by] !== undefined && (then === undefined || g[then] !== undefined) && (!byCustomer || g.customer !== undefined);
  return DAILY_SOURCES.find((s) => fits(s.groups)) ?? (fits(TRACE_GROUPS) ? 'traces' : undefined);
}

/** Whole UTC days [from, to) as YYYY-MM-DD. */
type Days = { from: string; to: string };

/** Epoch ms [from, to). */
type Slice = { from: number; to: number };

export interface RangeRoute {
  /** Whole days the rollups answer. */
  days?: Days;
  /** Parts of days cut by the range, read from the spans and added to the days. */
  edges: Slice[];
  /** Parts of the whole days outside the range, read from the spans and taken away from the days. */
  less: Slice[];
}

/** A range as whole UTC days [from, to) the rollups answer, and the partial days at its edges the spans answer. */
export function splitRange(from: number, to: number): RangeRoute {
  const first = ceilDay(from);
  const last = floorDay(to);
  if (first >= last) return { edges: from < to ? [{ from, to }] : [], less: [] };
  const edges: Slice[] = [];
  if (from < first) edges.push({ from, to: first });
  if (last < to) edges.push({ from: last, to });
  return { days: { from: utcDay(first), to: utcDay(last) }, edges, less: [] };
}

/**
 * Rows counted on either side of a cut, at most: enough to tell which side
 * is the smaller read, and a bound on the rows a report takes away.
 */
export const SLICE_ROWS = 10_000;

/** How a day cut by a range is read: whole (nothing beyond the cut), whole less the part beyond, or its part inside from the spans. */
type CutDay = 'whole' | 'less' | 'inside';

/**
 * The whole days the rollups answer, and how each day the range cuts is
 * read. The rollups hold every stored row, so a cut day with no row beyond
 * the cut is whole ("today so far", ending now, is all of today); one with
 * fewer rows beyond the cut than inside is the whole day less those rows (a
 * client clock ahead puts a few spans after now); otherwise the part inside
 * is read from the spans. So the spans read are the smaller side of a cut.
 */
export async function reportRoute(store: SpanStore, f: { orgId: string; from: number; to: number }): Promise<RangeRoute> {
  const { from, to } = f;
  if (!store.rollups || to <= from) return splitRange(from, to);
  const [lo, hi] = [floorDay(from), ceilDay(to)];
  if (lo < 0 || hi > 253_402_300_799_999) return splitRange(from, to);
  const dialect = reportDialect(store.kind);
  // Rows of a slice of one day, counted up to SLICE_ROWS, read by start time: the row groups (granules) outside are skipped.
  const rows = async (a: number, b: number) => {
    const [r] = await store.query(
      `SELECT count(*) AS n FROM (SELECT 1 AS x FROM spans WHERE org_id = ? AND ${dayBounds(dialect, a, b).join(' AND ')} ` +
        `AND start_time >= ${Math.trunc(a)} AND start_time < ${Math.trunc(b)} LIMIT ${SLICE_ROWS}) t`,
      [f.orgId],
    );
    return Number(r?.n ?? 0);
  };
  const cut = async (beyond: Slice, inside: Slice): Promise<CutDay> => {
    const n = await rows(beyond.from, beyond.to);
    if (n === 0) return 'whole';
    if (n >= SLICE_ROWS || n >= (await rows(inside.from, inside.to))) return 'inside';
    // Spans taken away from rollups that do not hold them yet would take away what was never added.
    return (await store.rollupsBehind?.(f.orgId, utcDay(beyond.from))) === true ? 'inside' : 'less';
  };
  let head: CutDay = lo < from ? await cut({ from: lo, to: from }, { from, to: Math.min(to, lo + DAY_MS) }) : 'whole';
  let tail: CutDay = to < hi ? await cut({ from: to, to: hi }, { from: Math.max(from, hi - DAY_MS), to }) : 'whole';
  // A range within one day takes away from that day only when neither side is read inside.
  if (hi - lo === DAY_MS && (head === 'inside' || tail === 'inside')) {
    if (head === 'less') head = 'inside';
    if (tail === 'less') tail = 'inside';
  }
  const route = splitRange(head === 'inside' ? from : lo, tail === 'inside' ? to : hi);
  if (head === 'less') route.less.push({ from: lo, to: from });
  if (tail === 'less') route.less.push({ from: to, to: hi });
  return route;
}

const ROLLUP_MEASURES = ['spans', 'unpriced', ...TOKENS, ...COSTS];

/**
 * Sums of every measure, named s_<measure>: ClickHouse takes an alias equal to
 * a column for that column everywhere in the query (sum(x) AS x breaks HAVING).
 */
function sumsSql(agg: (fn: 'sum', e: string) => string = (fn, e) => `${fn}(${e})`, prefix = ''): string {
  return ROLLUP_MEASURES.map((m) => `${agg('sum', prefix + m)} AS s_${m}`).join(', ');
}

/**
 * The grouped (and ranked) rows of `inner` with every measure as text, so
 * decimals and 64-bit counts come back exact. Converted outside the
 * aggregation: a store converts only the rows that remain after LIMIT.
 */
function asText(dialect: ReportDialect, inner: string, withSub: boolean): string {
  const measures = dialect.pack(ROLLUP_MEASURES.map((m) => `s_${m}`));
  return `SELECT ${dialect.text('grp')} AS grp, ${withSub ? `${dialect.text('sub')} AS sub, ` : ''}${measures} AS m FROM (${inner}) r`;
}

/** A limit as SQL's LIMIT takes it: a whole number, at least 0. */
const rowCount = (limit: number): number => Math.max(0, Math.trunc(limit));

/**
 * The `limit` groups of largest cost, ranked on the cost alone: every other
 * measure is then summed for those groups only (a range with 2M traces: the
 * ranking reads two columns, not twenty). Only for groupings with about as
 * many groups as rows: for customers or models the second read of the rows
 * costs more than it saves.
 */
const RANKED_FIRST: ReadonlySet<GroupBy> = new Set(['trace', 'session']);

/**
 * The first `limit` groups by cost (ties by group), as a subquery for IN, and
 * the params of `where` it needs.
 */
function topGroupsSql(
  dialect: ReportDialect,
  q: { group: string; table: string; where: string; spans: string; cost: string; limit: number },
  params: readonly unknown[],
): { sql: string; params: unknown[] } {
  const groups = `SELECT ${q.group} AS ti_g, ${q.cost} AS ti_c FROM ${q.table} WHERE ${q.where} GROUP BY ${q.group} HAVING ${q.spans} <> 0`;
  return { sql: `SELECT ti_g FROM (${groups}) g ORDER BY ${dialect.costDesc('ti_c')}, ti_g LIMIT ${rowCount(q.limit)}`, params: [...params] };
}

async function dailyReport(store: SpanStore, f: UsageQuery, days: Days, source: DailySource): Promise<UsageRow[]> {
  const dialect = reportDialect(store.kind);
  const group = source.groups[f.by] as string;
  const sub = f.then === undefined ? undefined : source.groups[f.then];
  const where = ['org_id = ?', `start_date >= ${dialect.dateLiteral(days.from)}`, `start_date < ${dialect.dateLiteral(days.to)}`];
  const params: unknown[] = [f.orgId];
  if (f.customerId !== undefined) {
    where.push('customer_id = ?');
    params.push(f.customerId);
  }
  const ranked = f.limit !== undefined && sub === undefined ? ` ORDER BY ${dialect.costDesc('sum(total_cost)')}, grp LIMIT ${rowCount(f.limit)}` : '';
  if (ranked !== '' && RANKED_FIRST.has(f.by)) {
    const top = topGroupsSql(
      dialect,
      { group, table: source.table, where: where.join(' AND '), spans: 'sum(spans)', cost: 'sum(total_cost)', limit: f.limit ?? 0 },
      params,
    );
    where.push(`${group} IN (${top.sql})`);
    params.push(...top.params);
  }
  const sql =
    `SELECT ${group} AS grp, ${sub === undefined ? '' : `${sub} AS sub, `}${sumsSql()} FROM ${source.table} ` +
    `WHERE ${where.join(' AND ')} GROUP BY ${group}${sub === undefined ? '' : `, ${sub}`} HAVING sum(spans) <> 0${ranked}`;
  return (await store.query(asText(dialect, sql, sub !== undefined), params)).map((r) => toUsageRow(r, sub !== undefined));
}

/** Per trace with no field to resolve: the rows of the range's days alone. */
async function traceTotals(store: SpanStore, f: UsageQuery, days: Days): Promise<UsageRow[]> {
  const dialect = reportDialect(store.kind);
  const ranked = f.limit === undefined ? '' : ` ORDER BY ${dialect.costDesc(dialect.rollup.traceMerge('sum', 'total_cost'))}, grp LIMIT ${rowCount(f.limit)}`;
  let where = `org_id = ? AND start_date >= ${dialect.dateLiteral(days.from)} AND start_date < ${dialect.dateLiteral(days.to)}`;
  const params: unknown[] = [f.orgId];
  if (f.limit !== undefined) {
    const [spans, cost] = [dialect.rollup.traceMerge('sum', 'spans'), dialect.rollup.traceMerge('sum', 'total_cost')];
    const top = topGroupsSql(dialect, { group: 'trace_id', table: 'traces', where, spans, cost, limit: f.limit }, params);
    where += ` AND trace_id IN (${top.sql})`;
    params.push(...top.params);
  }
  const sql =
    `SELECT trace_id AS grp, ${sumsSql(dialect.rollup.traceMerge)} FROM traces WHERE ${where} ` +
    `GROUP BY trace_id HAVING ${dialect.rollup.traceMerge('sum', 'spans')} <> 0${ranked}`;
  return (await store.query(asText(dialect, sql, false), params)).map((r) => toUsageRow(r, false));
}

/**
 * The traces of a range, each with its trace-level fields resolved (the
 * rows of the neighbouring days count, as at insert) and its measures of the
 * range's days, grouped by trace or by a resolved field.
 */
async function traceFieldReport(store: SpanStore, f: UsageQuery, days: Days): Promise<UsageRow[]> {
  const dialect = reportDialect(store.kind);
  // Day literals come from splitRange (numbers formatted here), never from request text.
  const inRange = `start_date >= ${dialect.dateLiteral(days.from)} AND start_date < ${dialect.dateLiteral(days.to)}`;
  const field = (g: string) => (g === 'trace_id' ? 'trace_id' : candidateValueSql(dialect.rollup, dialect.rollup.traceMerge('min', `${g}_c`)));
  const measures = ROLLUP_MEASURES.map((m) => `${dialect.sumIf(m, inRange)} AS t_${m}`).join(', ');
  const inner =
    `SELECT trace_id, ${field('customer')} AS customer, ${field('session')} AS session, ${field('workflow')} AS workflow, ${measures} ` +
    `FROM traces WHERE org_id = ? AND start_date >= ${dialect.addDays(dialect.dateLiteral(days.from), -TRACE_WINDOW_DAYS)} ` +
    `AND start_date < ${dialect.addDays(dialect.dateLiteral(days.to), TRACE_WINDOW_DAYS)} GROUP BY trace_id HAVING ${dialect.countIf(inRange)} > 0`;
  const params: unknown[] = [f.orgId];
  const group = TRACE_GROUPS[f.by] as string;
  const sub = f.then === undefined ? undefined : TRACE_GROUPS[f.then];
  const where = f.customerId === undefined ? '' : ' WHERE customer = ?';
  if (f.customerId !== undefined) params.push(f.customerId);
  const ranked = f.limit !== undefined && sub === undefined ? ` ORDER BY ${dialect.costDesc('sum(t_total_cost)')}, grp LIMIT ${rowCount(f.limit)}` : '';
  const sql =
    `SELECT ${group} AS grp, ${sub === undefined ? '' : `${sub} AS sub, `}${sumsSql(undefined, 't_')} FROM (${inner}) t${where} ` +
    `GROUP BY ${group}${sub === undefined ? '' : `, ${sub}`} HAVING sum(t_spans) <> 0${ranked}`;
  return (await store.query(asText(dialect, sql, sub !== undefined), params)).map((r) => toUsageRow(r, sub !== undefined));
}

/**
 * The first `limit` traces or sessions of a range from the store's per-day
 * top lists (the planner found them up to date and keeping as many a day):
 * their rows are few a day, whatever the traffic.
 */
async function fromTopList(store: SpanStore, name: TopListName, f: UsageQuery, days: Days): Promise<UsageRow[]> {
  const lists = store.topLists;
  if (lists === undefined || f.limit === undefined) throw new Error('a top list route with no lists or no limit');
  const dialect = reportDialect(store.kind);
  const { group } = TOP_LISTS[name];
  const limit = rowCount(f.limit);
  const rows = (cond: SqlPart) => lists.rows(name, f.orgId, days.from, days.to, cond);
  const single = rows({ sql: `NOT multi AND day_rank <= ${limit}`, params: [] });
  const multi = rows({ sql: 'multi', params: [] });
  // Ranked on the cost alone, then every measure summed for the groups ranked: a group of one day is one row (no grouping),
  // and only the groups of several days are summed.
  const ranked =
    `SELECT ${group} FROM (SELECT ${group}, total_cost AS c FROM ${single.sql} ` +
    `UNION ALL SELECT ${group}, sum(total_cost) AS c FROM ${multi.sql} GROUP BY ${group} HAVING sum(spans) <> 0) r ` +
    `ORDER BY ${dialect.costDesc('c')}, ${group} LIMIT ${limit}`;
  const rankedParams = [...single.params, ...multi.params];
  const of = (groups: SqlPart) => rows({ sql: `(day_rank <= ${limit} OR multi) AND ${group} IN (${groups.sql})`, params: groups.params });
  let read: SqlPart;
  if (dialect.ranksApart) {
    const ids = (await store.query(ranked, rankedParams)).map((r) => String(r[group]));
    if (ids.length === 0) return [];
    read = of({ sql: ids.map(() => '?').join(', '), params: ids });
  } else read = of({ sql: ranked, params: rankedParams });
  // In no order: usageReport sorts the rows exactly.
  const sql = `SELECT ${group} AS grp, ${sumsSql()} FROM ${read.sql} GROUP BY ${group}`;
  return (await store.query(asText(dialect, sql, false), read.params)).map((r) => toUsageRow(r, false));
}

/** A day's total cost and span count in one group, for a chart that draws nothing else. */
export interface DailyCost {
  group: string;
  day: string;
  cost: string;
  spans: number;
}

type CostsQuery = Omit<UsageFilter, 'then' | 'customerId' | 'traceId'> & { groups?: readonly string[] | undefined };

/** The per-day rollup holding a series' grouping by day, or undefined when the series comes from a usage report. */
const costsSource = (q: ReportInputs<CostsQuery>): DailySource | undefined => {
  const source = q.rollups ? rollupFor(q.f.by, 'day', false) : undefined;
  return typeof source === 'object' ? source : undefined;
};

/** dailyCosts' routes, in the order they are tried. */
export const DAILY_COST_ROUTES: readonly ReportRoute<CostsQuery, DailyCost[]>[] = [
  { name: 'nothing asked', when: (q) => q.f.groups !== undefined && q.f.groups.length === 0, read: () => Promise.resolve([]) },
  {
    name: 'usage by day',
    when: async (q) => {
      if (costsSource(q) === undefined) return true;
      const { days, edges, less } = await q.range();
      return days === undefined || edges.length > 0 || less.length > 0;
    },
    read: async (store, { f }) => {
      const wanted = f.groups === undefined ? undefined : new Set(f.groups);
      const rows = (await usageReport(store, { orgId: f.orgId, from: f.from, to: f.to, by: f.by, then: 'day' })).filter(
        (r) => wanted === undefined || wanted.has(r.group),
      );
      return byGroupAndDay(rows.map((r) => ({ group: r.group, day: r.subgroup ?? '', cost: r.costs.total_cost, spans: r.spans })));
    },
  },
  {
    name: 'daily rollup',
    when: () => true,
    read: async (store, q) => {
      const [dialect, days, { f }, source] = [reportDialect(store.kind), await daysOf(q), q, costsSource(q)];
      if (source === undefined) throw new Error('a daily rollup route with no rollup');
      const group = source.groups[f.by] as string;
      const only = f.groups === undefined ? '' : ` AND ${group} IN (${f.groups.map(() => '?').join(', ')})`;
      // One row per group, its days packed in one text ("day=cost=spans,..."): a store's client converts one value faster than many.
      const rows = await store.query(
        `SELECT ${dialect.text(group)} AS g, ${dialect.joinText(`concat(${['start_date', 'c', 'n'].map(dialect.text).join(", '=', ")})`)} AS days ` +
          `FROM (SELECT ${group}, start_date, sum(total_cost) AS c, sum(spans) AS n ` +
          `FROM ${source.table} WHERE org_id = ? AND start_date >= ${dialect.dateLiteral(days.from)} AND start_date < ${dialect.dateLiteral(days.to)}${only} ` +
          `GROUP BY ${group}, start_date HAVING sum(spans) <> 0) r GROUP BY ${group}`,
        [f.orgId, ...(f.groups ?? [])],
      );
      const out: DailyCost[] = [];
      for (const r of rows)
        for (const dayCost of String(r.days).split(',')) {
          const [day = '', cost = '0', spans = '0'] = dayCost.split('=');
          out.push({ group: String(r.g ?? ''), day: day.slice(0, 10), cost: decimalText(cost), spans: Number(spans) });
        }
      return byGroupAndDay(out);
    },
  },
];

/**
 * The total cost of each group per UTC day (in group, then day order), for `groups` only when given:
 * one measure, so a series of customers x days costs the store one sum per
 * row, not twenty.
 */
export async function dailyCosts(store: SpanStore, f: CostsQuery): Promise<DailyCost[]> {
  return planned(store, DAILY_COST_ROUTES, f, () => reportRoute(store, f));
}

const byGroupAndDay = (xs: DailyCost[]): DailyCost[] => xs.sort((a, b) => byText(a.group, b.group) || byText(a.day, b.day));

type CountQuery = Omit<UsageFilter, 'then'>;

/** Traces counted from a rollup: no single trace asked for. */
const countsTraces = (q: ReportInputs<CountQuery>): boolean => q.rollups && q.f.by === 'trace' && q.f.traceId === undefined;

/** countGroups' routes, in the order they are tried. */
export const COUNT_ROUTES: readonly ReportRoute<CountQuery, number>[] = [
  {
    name: 'trace top list',
    when: async (q) => {
      if (!countsTraces(q) || q.listsPerDay === undefined || q.f.customerId !== undefined) return false;
      const days = await wholeDays(q);
      return days !== undefined && (await q.listsReady('trace', days));
    },
    read: async (store, q) => {
      const [days, lists] = [await daysOf(q), store.topLists];
      if (lists === undefined) throw new Error('a top list route with no lists');
      // Each day's count of traces, less the traces counted on more than one day (every row of those is in the list).
      const total = lists.groupCount('trace', q.f.orgId, days.from, days.to);
      const multi = lists.rows('trace', q.f.orgId, days.from, days.to, { sql: 'multi', params: [] });
      const [r] = await store.query(`SELECT ${total.sql} AS n, (SELECT count(*) - count(DISTINCT ${TOP_LISTS.trace.group}) FROM ${multi.sql}) AS dup`, [
        ...total.params,
        ...multi.params,
      ]);
      return Number(r?.n ?? 0) - Number(r?.dup ?? 0) - (await tracesOnlyTaken(store, q));
    },
  },
  {
    name: 'traces',
    // A customer's traces are found by their resolved customer, which a slice taken away does not know.
    when: async (q) => countsTraces(q) && (await wholeDays(q)) !== undefined && (q.f.customerId === undefined || (await q.range()).less.length === 0),
    read: async (store, q) => {
      const [dialect, days, { f }] = [reportDialect(store.kind), await daysOf(q), q];
      const customer = f.customerId === undefined ? '' : ` HAVING ${candidateValueSql(dialect.rollup, dialect.rollup.traceMerge('min', 'customer_c'))} = ?`;
      const [r] = await store.query(
        `SELECT count(*) AS n FROM (SELECT trace_id FROM traces WHERE org_id = ? AND start_date >= ${dialect.dateLiteral(days.from)} ` +
          `AND start_date < ${dialect.dateLiteral(days.to)} GROUP BY trace_id${customer}) t`,
        f.customerId === undefined ? [f.orgId] : [f.orgId, f.customerId],
      );
      return Number(r?.n ?? 0) - (await tracesOnlyTaken(store, q));
    },
  },
  {
    name: 'scan',
    when: () => true,
    read: async (store, { f }) => {
      const dialect = reportDialect(store.kind);
      const { where, params } = filterSql(f, dialect);
      const [r] = await store.query(`SELECT count(DISTINCT ${GROUPS[f.by]}) AS n FROM ${dialect.from} WHERE ${where}`, params);
      return Number(r?.n ?? 0);
    },
  },
];

/**
 * The traces of the range's `less` slices with no span in the range: every
 * span the whole days hold of them is in those slices. Counted from the
 * whole days, they are taken away from the count.
 */
async function tracesOnlyTaken(store: SpanStore, q: ReportInputs<CountQuery>): Promise<number> {
  const taken = await q.taken();
  if (taken.length === 0) return 0;
  const [dialect, days] = [reportDialect(store.kind), await daysOf(q)];
  const inDays = new Map<string, number>();
  // A thousand ids a query: ClickHouse bounds a query's text (256 KiB by default).
  for (let i = 0; i < taken.length; i += 1000) {
    const ids = taken.slice(i, i + 1000).map((t) => t.group);
    const rows = await store.query(
      `SELECT trace_id AS g, ${dialect.rollup.traceMerge('sum', 'spans')} AS n FROM traces WHERE org_id = ? ` +
        `AND start_date >= ${dialect.dateLiteral(days.from)} AND start_date < ${dialect.dateLiteral(days.to)} ` +
        `AND trace_id IN (${ids.map(() => '?').join(', ')}) GROUP BY trace_id`,
      [q.f.orgId, ...ids],
    );
    for (const r of rows) inDays.set(String(r.g), Number(r.n));
  }
  return taken.filter((t) => inDays.get(t.group) === t.spans).length;
}

/** How many distinct values of a dimension the filter's spans have (e.g. traces in a range). */
export async function countGroups(store: SpanStore, f: CountQuery, scope = new RefreshScope()): Promise<number> {
  return planned(store, COUNT_ROUTES, f, () => reportRoute(store, f), scope, f);
}

type LabelQuery = Omit<UsageFilter, 'then' | 'by'> & { by: 'trace' | 'customer'; groups: readonly string[] };
type Labels = Record<string, { name: string; customer?: string }>;

/** A trace's name and customer from the rollups: the top lists for the traces they hold, `traces` for the rest. */
async function traceLabels(store: SpanStore, q: ReportInputs<LabelQuery>): Promise<Labels> {
  const [dialect, { from: lo, to: hi }, { f }] = [reportDialect(store.kind), await daysOf(q), q];
  const out: Labels = {};
  const value = (c: string) => candidateValueSql(dialect.rollup, c);
  // The days whose rows resolve the traces' fields, as at insert.
  const [windowFrom, windowTo] = [dialect.addDays(dialect.dateLiteral(lo), -TRACE_WINDOW_DAYS), dialect.addDays(dialect.dateLiteral(hi), TRACE_WINDOW_DAYS)];
  const days = `start_date >= ${windowFrom} AND start_date < ${windowTo}`;
  const read = async (from: SqlPart, min: (c: string) => string) => {
    const rows = await store.query(
      `SELECT trace_id AS g, ${value(min('name_c'))} AS name, ${value(min('customer_c'))} AS customer FROM ${from.sql} GROUP BY trace_id`,
      from.params,
    );
    for (const r of rows) out[String(r.g)] = { name: String(r.name ?? ''), customer: String(r.customer ?? '') };
  };
  const these = (groups: readonly string[]): SqlPart => ({ sql: `trace_id IN (${groups.map(() => '?').join(', ')})`, params: [...groups] });
  const lists = store.topLists;
  if (lists !== undefined) {
    // A trace in the (current) top lists has there every row of these days: the traces a ranking listed are read from a few rows a day.
    const [first, last] = [addDays(lo, -TRACE_WINDOW_DAYS), addDays(hi, TRACE_WINDOW_DAYS)];
    if (await q.listsReady('trace', { from: first, to: last })) await read(lists.rows('trace', f.orgId, first, last, these(f.groups)), (c) => `min(${c})`);
  }
  const rest = f.groups.filter((g) => out[g] === undefined);
  const traces = (groups: readonly string[]): SqlPart => ({
    sql: `traces WHERE org_id = ? AND ${days} AND ${these(groups).sql}`,
    params: [f.orgId, ...groups],
  });
  if (rest.length > 0) await read(traces(rest), (c) => dialect.rollup.traceMerge('min', c));
  return out;
}

/** groupLabels' routes, in the order they are tried. */
export const LABEL_ROUTES: readonly ReportRoute<LabelQuery, Labels>[] = [
  { name: 'nothing asked', when: (q) => q.f.groups.length === 0, read: () => Promise.resolve({}) },
  { name: 'trace rollups', when: (q) => q.rollups && q.f.by === 'trace', read: traceLabels },
  {
    name: 'customer rollups',
    when: (q) => q.rollups && q.f.by === 'customer',
    read: async (store, q) => {
      const [dialect, { from: lo, to: hi }, { f }] = [reportDialect(store.kind), await daysOf(q), q];
      const rows = await store.query(
        `SELECT customer_id AS g, max(customer_name) AS name FROM customers_daily WHERE org_id = ? AND start_date >= ${dialect.dateLiteral(lo)} ` +
          `AND start_date < ${dialect.dateLiteral(hi)} AND customer_id IN (${f.groups.map(() => '?').join(', ')}) GROUP BY customer_id`,
        [f.orgId, ...f.groups],
      );
      const out: Labels = {};
      for (const r of rows) out[String(r.g)] = { name: String(r.name ?? '') };
      return out;
    },
  },
  {
    name: 'scan',
    when: () => true,
    read: async (store, { f }) => {
      const dialect = reportDialect(store.kind);
      const { where, params } = filterSql(f, dialect);
      const column = GROUPS[f.by];
      const labels = f.by === 'trace' ? 'max(trace_name) AS name, max(customer_id) AS customer' : 'max(customer_name) AS name';
      const rows = await store.query(
        `SELECT ${column} AS g, ${labels} FROM ${dialect.from} WHERE ${where} AND ${column} IN (${f.groups.map(() => '?').join(', ')}) GROUP BY ${column}`,
        [...params, ...f.groups],
      );
      const out: Labels = {};
      for (const r of rows)
        out[String(r.g)] = f.by === 'trace' ? { name: String(r.name ?? ''), customer: String(r.customer ?? '') } : { name: String(r.name ?? '') };
      return out;
    },
  },
];

/**
 * What people call the groups of a report: a trace's name and customer, a
 * customer's name (the id is what groups; a client may send the name on some
 * spans only, so any name sent in the range is taken). Limited to `groups`.
 */
export async function groupLabels(store: SpanStore, f: LabelQuery, scope = new RefreshScope()): Promise<Labels> {
  // Labels need no exact range: the whole days around it do.
  const around = (): RangeRoute => ({ days: { from: utcDay(floorDay(f.from)), to: utcDay(ceilDay(f.to)) }, edges: [], less: [] });
  return planned(store, LABEL_ROUTES, f, around, scope);
}

/** The spans of one trace of an org, in start order (the console's waterfall). */
export async function traceSpans(store: SpanStore, f: { orgId: string; traceId: string }, limit = 10_000): Promise<SpanRow[]> {
  const dialect = reportDialect(store.kind);
  let window = '';
  const params: unknown[] = [f.orgId, f.traceId];
  if (store.rollups) {
    // The trace table says when the trace's spans start, so only those row groups of spans are read.
    const [t] = await store.query(
      `SELECT ${dialect.rollup.traceMerge('min', 'first_start')} AS lo, ${dialect.rollup.traceMerge('max', 'last_start')} AS hi, count() AS n ` +
        'FROM traces WHERE org_id = ? AND trace_id = ?',
      [f.orgId, f.traceId],
    );
    if (t === undefined || Number(t.n) === 0 || t.lo === null || t.lo === undefined) return [];
    window = ` AND ${dayBounds(dialect, Number(t.lo), Number(t.hi) + 1).join(' AND ')} AND start_time >= ? AND start_time <= ?`;
    params.push(Number(t.lo), Number(t.hi));
  }
  const rows = await store.query(
    // From a subquery: the text casts are aliased as the columns, which the filter must not see (ClickHouse).
    `SELECT ${storedColumns(dialect)} FROM (SELECT * FROM ${dialect.from} WHERE org_id = ? AND trace_id = ?${window}) s ` +
      `ORDER BY start_time, span_id LIMIT ${Math.trunc(limit)}`,
    params,
  );
  return rows.map((r) => storedToRow(r));
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
    // The tier and region it was billed in, as stored (a batch call's tier is `batch`).
    ...(r.service_tier === '' ? {} : { serviceTier: r.service_tier }),
    ...(r.region === '' ? {} : { region: r.region }),
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
  const dialect = reportDialect(store.kind);
  const where = ['org_id = ?', ...dayBounds(dialect, f.from, f.to), 'start_time >= ?', 'start_time < ?'];
  const params: unknown[] = [f.orgId, f.from, f.to];
  if (f.model !== undefined) {
    where.push('model_id = ?');
    params.push(f.model);
  }
  // Streamed, and only what pricing reads: texts never leave the store, and memory holds one batch of changes.
  const columns = [
    ...['org_id', 'trace_id', 'span_id', 'span_type', 'name', 'start_time', 'end_time', 'provider', 'model_id', 'service_tier', 'region'],
    ...USAGE_COLUMNS,
    ...COST_KEYS,
  ];
  const stored = store.queryStream(
    `SELECT ${columns.map((c) => (COST_COLUMNS.includes(c as CostColumn) ? `${dialect.text(c)} AS ${c}` : c)).join(', ')} ` +
      `FROM ${dialect.from} WHERE ${where.join(' AND ')}`,
    params,
  );
  let rowsScanned = 0;
  let before = 0n;
  let after = 0n;
  let changed: CostChange[] = [];
  let rowsChanged = 0;
  let newlyPriced = 0;
  const flush = async () => {
    if (changed.length === 0) return;
    await store.updateCosts(changed);
    changed = [];
  };
  for await (const r of stored) {
    const row = storedToRow(r, columns);
    rowsScanned++;
    const costs = price(rowToPricedSpan(row), row.org_id);
    before += parseDecimal(row.total_cost);
    after += parseDecimal(costs.total_cost);
    // Equal texts first: both sides are in formatDecimal's form, so most rows never parse a decimal.
    const differs = COST_KEYS.some((k) =>
      k === 'priced' || k === 'price_source' ? row[k] !== costs[k] : row[k] !== costs[k] && parseDecimal(row[k]) !== parseDecimal(costs[k] as string),
    );
    if (!differs) continue;
    rowsChanged++;
    if (!row.priced && costs.priced) newlyPriced++;
    changed.push({ org_id: row.org_id, trace_id: row.trace_id, span_id: row.span_id, start_time: row.start_time, ...costs });
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
