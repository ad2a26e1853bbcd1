import { COST_COLUMNS, USAGE_COLUMNS } from './rows.js';
import { unpricedSql } from './unpriced.js';

/**
 * The two derived tables every span store keeps beside `spans`, defined once
 * here and rendered by each store (DuckDB: written in the insert's own
 * transaction; ClickHouse: the same aggregation as materialized views).
 *
 * - `usage_daily`: one row per (org, UTC day, customer, model, provider, span
 *   type, workflow) with the sums of every measure. Reports and console pages
 *   grouped by those dimensions read it instead of the spans.
 * - `traces`: one row per (org, trace, UTC day) with the trace's measures on
 *   that day and, for each trace-level field, its best candidate (below). A
 *   trace that crosses midnight has a row per day, so a day range sums exactly
 *   what a scan of the spans in that range sums.
 *
 * Both are additive: a store may hold several partial rows for one key (one
 * per insert until they are compacted, or a negative row that takes back a
 * span's share when it is repriced or moved to another customer), and every
 * reader sums. So a rollup is exact whenever every span was added once and
 * every correction taken back once, whatever the order.
 */

/** How a measure is taken from one span row. */
export type MeasureKind = 'one' | 'unpriced' | 'column';

export interface Measure {
  name: string;
  kind: MeasureKind;
  /** 'int' sums as a 64-bit integer; 'decimal' as the exact cost decimal. */
  type: 'int' | 'decimal';
}

/** The summed measures of both tables, in table order. */
export const MEASURES: readonly Measure[] = [
  { name: 'spans', kind: 'one', type: 'int' },
  { name: 'unpriced', kind: 'unpriced', type: 'int' },
  ...USAGE_COLUMNS.map((c): Measure => ({ name: c, kind: 'column', type: 'int' })),
  ...COST_COLUMNS.map((c): Measure => ({ name: c, kind: 'column', type: 'decimal' })),
];

/**
 * The grouping columns of `usage_daily`, all span columns. The customer and
 * its name are the trace's resolved values (see TRACE_FIELDS), so a trace's
 * cost sits under one customer. Its rows per day are at most customers x
 * models used that day; a workflow (or a session) would multiply them, and is
 * a trace-level field: grouping by it reads `traces`.
 */
export const DAILY_KEYS = ['org_id', 'start_date', 'customer_id', 'customer_name', 'model_id', 'provider', 'span_type'] as const;
export type DailyKey = (typeof DAILY_KEYS)[number];

/** A per-day rollup: its table and the span columns it groups by. */
export interface DailyRollup {
  table: string;
  keys: readonly string[];
}

/**
 * Every per-day rollup. Sessions and workflows are trace-level fields whose
 * values multiply usage_daily's rows, so each has a narrow table of its own
 * (a day holds as many rows as sessions, or workflows, that day). Customers
 * and models have narrow tables too: usage_daily holds customers x models
 * rows a day, which grows with traffic (340k rows for 1M spans over 90 days),
 * while a report by customer, by model or by day needs only one of the two
 * (18k and 8k rows for the same spans, whatever their number).
 */
export const DAILY_ROLLUPS: readonly DailyRollup[] = [
  { table: 'usage_daily', keys: DAILY_KEYS },
  { table: 'customers_daily', keys: ['org_id', 'start_date', 'customer_id', 'customer_name'] },
  { table: 'models_daily', keys: ['org_id', 'start_date', 'model_id', 'provider', 'span_type'] },
  { table: 'sessions_daily', keys: ['org_id', 'start_date', 'customer_id', 'session_id'] },
  { table: 'workflows_daily', keys: ['org_id', 'start_date', 'workflow_name'] },
];

/** The grouping columns of `traces`. */
export const TRACE_KEYS = ['org_id', 'trace_id', 'start_date'] as const;

/**
 * Trace-level fields: set on any span of a trace, they apply to all of its
 * spans. Each is stored as a candidate: the value prefixed with a rank, so
 * the smallest candidate wins and merging two partial rows is `min`.
 * The rank says which span's value wins: a root span (no parent) before any
 * other, then the span seen first (earliest received_at). A field counts as
 * set on a span when its `when` column is not empty (a customer's name and
 * picture come with the customer id that span sent).
 */
export const TRACE_FIELDS = [
  { candidate: 'name_c', column: 'trace_name', when: 'trace_name' },
  { candidate: 'customer_c', column: 'customer_id', when: 'customer_id' },
  { candidate: 'customer_name_c', column: 'customer_name', when: 'customer_id' },
  { candidate: 'customer_image_c', column: 'customer_image_url', when: 'customer_id' },
  { candidate: 'session_c', column: 'session_id', when: 'session_id' },
  { candidate: 'agent_c', column: 'agent_name', when: 'agent_name' },
  { candidate: 'workflow_c', column: 'workflow_name', when: 'workflow_name' },
  { candidate: 'workflow_run_c', column: 'workflow_run_id', when: 'workflow_name' },
] as const;
export type TraceField = (typeof TRACE_FIELDS)[number];

/** Digits of a candidate's rank prefix: root flag (10^15) plus received_at in epoch ms. */
export const RANK_DIGITS = 16;
export const NON_ROOT_RANK = 1_000_000_000_000_000;

/**
 * Trace-level fields are shared by the spans of a trace that start within
 * this many UTC days of each other: an insert looks up what is already known
 * of its traces in the stored rows of those days only, so its cost does not
 * grow with the table.
 */
export const TRACE_WINDOW_DAYS = 1;

/** The columns of `traces` beyond its keys and measures. */
export const TRACE_EXTRA = [
  { name: 'first_start', type: 'int', agg: 'min', expr: 'start_time' },
  { name: 'last_start', type: 'int', agg: 'max', expr: 'start_time' },
  { name: 'last_end', type: 'int', agg: 'max', expr: 'end_time' },
] as const;

/** How each store spells what the rollups need. */
export interface RollupDialect {
  /** The count of one span, typed as the spans column (ClickHouse's views insert no conversion). */
  one: string;
  /**
   * A column of `spans` every measure is multiplied by, when the store takes
   * shares back by writing rows: ClickHouse writes a span's new version in
   * the same insert as a copy of its old one weighted -1, so the views move
   * the rollups atomically (a ClickHouse insert block is all or nothing).
   */
  weight?: string;
  /** The unpriced rule (unpriced.ts) as a condition on one row. */
  unpriced: string;
  /** The unpriced-span indicator of one row (1 or 0), typed likewise. */
  unpricedFlag: string;
  /**
   * An aggregate of the `traces` table as written: plain in DuckDB, a state
   * (`sumState`, `minState`) in ClickHouse's AggregatingMergeTree.
   */
  traceAgg(fn: 'sum' | 'min' | 'max', expr: string): string;
  /** The same aggregate as read back (`sumMerge` in ClickHouse). */
  traceMerge(fn: 'sum' | 'min' | 'max', expr: string): string;
  /** `s` zero-padded on the left to n characters. */
  lpad(expr: string, n: number): string;
  /** Text from a 1-based position to the end. */
  substrFrom(expr: string, from: number): string;
  /** A number as text. */
  text(expr: string): string;
  /** A candidate when nothing is set, which min passes over: NULL in DuckDB, '~' (after every digit) in ClickHouse. */
  none: string;
}

/** The rank of a span row as a fixed-width text prefix. */
export function rankSql(dialect: RollupDialect): string {
  return dialect.lpad(dialect.text(`(CASE WHEN parent_span_id = '' THEN 0 ELSE ${NON_ROOT_RANK} END + received_at)`), RANK_DIGITS);
}

/** The candidate of one trace field from one span row. */
export function candidateSql(dialect: RollupDialect, f: TraceField): string {
  return `CASE WHEN ${f.when} <> '' THEN concat(${rankSql(dialect)}, ${f.column}) ELSE ${dialect.none} END`;
}

/** A candidate's value ('' when none). */
export function candidateValueSql(dialect: RollupDialect, candidate: string): string {
  return `coalesce(${dialect.substrFrom(candidate, RANK_DIGITS + 1)}, '')`;
}

/** One measure's value for one span row. */
export function measureSql(dialect: RollupDialect, m: Measure): string {
  const v = m.kind === 'one' ? dialect.one : m.kind === 'unpriced' ? dialect.unpricedFlag : m.name;
  return dialect.weight === undefined ? v : `${v} * ${dialect.weight}`;
}

/**
 * The aggregate columns of span rows, `sign` 1 to add them and -1 to take
 * them back, with `agg` the aggregate as the target table takes it.
 */
export function measureAggregates(dialect: RollupDialect, sign: 1 | -1, agg: (fn: 'sum', expr: string) => string = (fn, e) => `${fn}(${e})`): string[] {
  return MEASURES.map((m) => `${agg('sum', sign === 1 ? measureSql(dialect, m) : `-(${measureSql(dialect, m)})`)} AS ${m.name}`);
}

/** The select that adds (or takes back) span rows from `source` into a per-day rollup (usage_daily by default). */
export function dailyDeltaSql(dialect: RollupDialect, source: string, sign: 1 | -1, where = '', rollup: DailyRollup = DAILY_ROLLUPS[0] as DailyRollup): string {
  const keys = rollup.keys.join(', ');
  return `SELECT ${keys}, ${measureAggregates(dialect, sign).join(', ')} FROM ${source}${where === '' ? '' : ` WHERE ${where}`} GROUP BY ${keys}`;
}

/**
 * The select that adds (or takes back) span rows from `source` into traces.
 * Taking back leaves the candidates alone (NULL, which min skips): a field
 * once seen on a trace stays known.
 */
export function traceDeltaSql(dialect: RollupDialect, source: string, sign: 1 | -1, where = ''): string {
  const keys = TRACE_KEYS.join(', ');
  const extras = TRACE_EXTRA.map((e) => `${dialect.traceAgg(e.agg, e.expr)} AS ${e.name}`);
  const cands = TRACE_FIELDS.map((f) => `${dialect.traceAgg('min', sign === 1 ? candidateSql(dialect, f) : dialect.none)} AS ${f.candidate}`);
  const filter = where === '' ? '' : ` WHERE ${where}`;
  const measures = measureAggregates(dialect, sign, dialect.traceAgg);
  return `SELECT ${keys}, ${measures.join(', ')}, ${extras.join(', ')}, ${cands.join(', ')} FROM ${source}${filter} GROUP BY ${keys}`;
}

/** Every column of usage_daily, in table order. */
export const DAILY_COLUMNS: readonly string[] = [...DAILY_KEYS, ...MEASURES.map((m) => m.name)];
/** Every column of traces, in table order. */
export const TRACE_COLUMNS: readonly string[] = [
  ...TRACE_KEYS,
  ...MEASURES.map((m) => m.name),
  ...TRACE_EXTRA.map((e) => e.name),
  ...TRACE_FIELDS.map((f) => f.candidate),
];

const DUCKDB_UNPRICED = unpricedSql({ isFalse: (c) => `NOT ${c}`, notEmpty: (c) => `${c} <> ''` });
const CLICKHOUSE_UNPRICED = unpricedSql({ isFalse: (c) => `${c} = 0`, notEmpty: (c) => `${c} != ''` });

/** The DuckDB spelling. */
export const DUCKDB_ROLLUP: RollupDialect = {
  one: '1',
  unpriced: DUCKDB_UNPRICED,
  unpricedFlag: `CASE WHEN ${DUCKDB_UNPRICED} THEN 1 ELSE 0 END`,
  traceAgg: (fn, e) => `${fn}(${e})`,
  traceMerge: (fn, e) => `${fn}(${e})`,
  lpad: (e, n) => `lpad(${e}, ${n}, '0')`,
  substrFrom: (e, from) => `substr(${e}, ${from})`,
  text: (e) => `CAST(${e} AS VARCHAR)`,
  none: 'NULL',
};

/** The ClickHouse spelling (18.16 and current servers). */
export const CLICKHOUSE_ROLLUP: RollupDialect = {
  one: 'toInt64(1)',
  weight: 'rollup_weight',
  unpriced: CLICKHOUSE_UNPRICED,
  unpricedFlag: `toInt64(if(${CLICKHOUSE_UNPRICED}, 1, 0))`,
  traceAgg: (fn, e) => `${fn}State(${e})`,
  traceMerge: (fn, e) => `${fn}Merge(${e})`,
  lpad: (e, n) => `concat(substring('${'0'.repeat(RANK_DIGITS)}', 1, ${n} - length(${e})), ${e})`,
  substrFrom: (e, from) => `substring(${e}, ${from})`,
  text: (e) => `toString(${e})`,
  none: "'~'",
};
