import {
  candidateSql,
  CLICKHOUSE_ROLLUP,
  DAILY_ROLLUPS,
  dailyDeltaSql,
  MEASURES,
  RANK_DIGITS,
  TRACE_EXTRA,
  TRACE_FIELDS,
  TRACE_KEYS,
  TRACE_WINDOW_DAYS,
  traceDeltaSql,
  type DailyRollup,
  type RollupDialect,
} from '@trace-ingest/shared/rollups';
import { bindParams } from './clickhouse-sql.js';
import { addDays, checkedDay } from '@trace-ingest/shared/dates';
import type { Lease, QueryRow } from './span-store.js';

/**
 * The derived tables of ClickHouse (the rollups of rollups.ts and `traces`),
 * derived from the distinct spans (`spans FINAL`) by one process at a time,
 * per changed (org, day), in the background. Writers only append spans; a
 * view on `spans` counts every row appended per (org, day) in
 * `span_changes`. A derivation pass reads those counters, and for each
 * (org, day) whose counter differs from the one its latest derivation
 * recorded (`derived_marks`), with the days next to it (trace-level fields
 * reach across TRACE_WINDOW_DAYS):
 * 1. writes again, one received_at later, the spans whose trace-level fields
 *    differ from their trace's resolved values (TRACE_FIELDS' rule over the
 *    distinct spans), so a trace's spans carry its root's customer whichever
 *    replica stored the root and when;
 * 2. inserts the days' rows of every derived table under a new derivation
 *    number (`<table>_d`), then the marks naming that number with the
 *    counters read before step 1: readers see a day's rows of its latest
 *    mark only (the views named as the tables), so a day switches whole.
 * 3. builds the top lists (clickhouse-top-lists.ts) of every day whose list
 *    does not name the day's current derivation: the days just derived.
 * A write after the counters were read changes them, so its day is derived
 * again; step 1's own writes do too, and the next pass finds nothing to
 * move and records the settled counter. No rule depends on a clock.
 */

/** Derived tables and the table that holds their rows per derivation. */
export const DERIVED_TABLES: readonly string[] = [...DAILY_ROLLUPS.map((r) => r.table), 'traces'];
export const derivedTable = (table: string): string => `${table}_d`;

const CHANGES = 'span_changes';
const MARKS = 'derived_marks';
/** The views of migrations 0002-0005 that added each insert to the rollups. */
const OLD_VIEWS = ['usage_daily_mv', 'traces_mv', 'sessions_daily_mv', 'workflows_daily_mv', 'customers_daily_mv', 'models_daily_mv'];

/** The aggregation without weights: a derivation reads each span once. */
export const DERIVE_DIALECT: RollupDialect = { ...CLICKHOUSE_ROLLUP, weight: undefined };

const LOW_CARDINALITY = new Set(['model_id', 'provider', 'span_type', 'workflow_name']);
const keyType = (k: string): string => (k === 'start_date' ? 'Date' : LOW_CARDINALITY.has(k) ? 'LowCardinality(String)' : 'String');
const measureType = (t: 'int' | 'decimal'): string => (t === 'int' ? 'Int64' : 'Decimal(38, 18)');

/** The columns of a derived table as the readers see them, with their types. */
export function derivedColumns(table: string): [string, string][] {
  if (table === 'traces')
    return [
      ...TRACE_KEYS.map((k): [string, string] => [k, keyType(k)]),
      ...MEASURES.map((m): [string, string] => [m.name, `AggregateFunction(sum, ${measureType(m.type)})`]),
      ...TRACE_EXTRA.map((e): [string, string] => [e.name, `AggregateFunction(${e.agg}, Int64)`]),
      ...TRACE_FIELDS.map((f): [string, string] => [f.candidate, 'AggregateFunction(min, String)']),
    ];
  const rollup = DAILY_ROLLUPS.find((r) => r.table === table);
  if (rollup === undefined) throw new Error(`not a derived table: ${table}`);
  return [...rollup.keys.map((k): [string, string] => [k, keyType(k)]), ...MEASURES.map((m): [string, string] => [m.name, measureType(m.type)])];
}

const keysOf = (table: string): readonly string[] => (table === 'traces' ? TRACE_KEYS : (DAILY_ROLLUPS.find((r) => r.table === table)?.keys ?? []));

/** The current derivation of each (org, day). */
const CURRENT = `SELECT org_id, start_date, max(derivation) FROM ${MARKS} GROUP BY org_id, start_date`;

/** Migration 0008's statements, rendered from rollups.ts (a test holds the file to them). */
export function derivedSchemaStatements(): string[] {
  const out = OLD_VIEWS.map((v) => `DROP TABLE IF EXISTS ${v}`);
  out.push(
    `CREATE TABLE IF NOT EXISTS ${CHANGES} (org_id String, start_date Date, rows UInt64) ENGINE = SummingMergeTree() ORDER BY (org_id, start_date)`,
    `CREATE MATERIALIZED VIEW IF NOT EXISTS ${CHANGES}_mv TO ${CHANGES} AS SELECT org_id, start_date, count() AS rows FROM spans GROUP BY org_id, start_date`,
    // The days stored before the view: their counters start from their rows (a count twice only derives a day once more).
    `INSERT INTO ${CHANGES} SELECT org_id, start_date, count() AS rows FROM spans GROUP BY org_id, start_date`,
    `CREATE TABLE IF NOT EXISTS ${MARKS} (org_id String, start_date Date, derivation UInt64, changes UInt64) ` +
      'ENGINE = ReplacingMergeTree(derivation) ORDER BY (org_id, start_date)',
  );
  for (const t of DERIVED_TABLES) {
    const cols = derivedColumns(t);
    const rest = keysOf(t).filter((k) => k !== 'org_id' && k !== 'start_date');
    out.push(
      `CREATE TABLE IF NOT EXISTS ${derivedTable(t)} (derivation UInt64, ${cols.map(([n, ty]) => `${n} ${ty}`).join(', ')}) ENGINE = MergeTree() ` +
        `PARTITION BY toYYYYMM(start_date) ORDER BY (org_id, start_date, derivation, ${rest.join(', ')})`,
      `DROP TABLE IF EXISTS ${t}`,
      `CREATE VIEW IF NOT EXISTS ${t} AS SELECT ${cols.map(([n]) => n).join(', ')} FROM ${derivedTable(t)} ` +
        `WHERE (org_id, start_date, derivation) IN (${CURRENT})`,
    );
  }
  return out;
}

const day = (d: string): string => `toDate('${checkedDay(d)}')`;
const dayList = (days: readonly string[]): string => days.map(day).join(', ');

/** The parts shared by the statements that find and rewrite the spans whose trace-level fields differ from their trace's. */
function resolveParts(org: string, days: readonly string[], traces: string) {
  const d = DERIVE_DIALECT;
  const fields: string[] = TRACE_FIELDS.map((f) => f.column);
  const value = (c: string) => `if(${c} = '~', '', substring(${c}, ${RANK_DIGITS + 1}))`;
  const resolved = TRACE_FIELDS.map((f) => `${value(`min(${candidateSql(d, f)})`)} AS r_${f.column}`);
  const inDays = `org_id = ${org} AND start_date IN (${dayList(days)})${traces}`;
  const around = new Set<string>();
  for (const d of days) for (let k = -TRACE_WINDOW_DAYS; k <= TRACE_WINDOW_DAYS; k++) around.add(addDays(d, k));
  const near = `org_id = ${org} AND start_date IN (${dayList([...around].sort())})`;
  // ALL, not ANY: the right side has one row per trace, and a current engine's ANY INNER JOIN keeps one left row per trace too.
  const join =
    `ALL INNER JOIN (SELECT org_id, trace_id, ${resolved.join(', ')} FROM spans FINAL WHERE ${near} ` +
    `AND trace_id IN (SELECT trace_id FROM spans WHERE ${inDays}) GROUP BY org_id, trace_id) AS r USING (org_id, trace_id) ` +
    `WHERE NOT (${fields.map((f) => `${f} = r_${f}`).join(' AND ')})`;
  return { fields, inDays, join };
}

/**
 * The traces of `days` with a span whose trace-level fields differ from the trace's resolved ones. It reads
 * the few columns the rule needs, not the texts: on most passes it finds none and nothing is rewritten.
 */
export function unresolvedTracesSql(org: string, days: readonly string[]): string {
  const { fields, inDays, join } = resolveParts(org, days, '');
  return `SELECT DISTINCT trace_id FROM (SELECT org_id, trace_id, ${fields.join(', ')} FROM spans FINAL WHERE ${inDays}) AS s ${join}`;
}

/** The statement that writes again the spans of `days` (of `traceIds` only) whose trace-level fields differ from their trace's. */
export function resolveSql(columns: readonly string[], org: string, days: readonly string[], traceIds: readonly string[]): string {
  const traces = bindParams(` AND trace_id IN (${traceIds.map(() => '?').join(', ')})`, traceIds);
  const { fields, inDays, join } = resolveParts(org, days, traces);
  const select = columns.map((c) => (fields.includes(c) ? `r_${c}` : c === 'received_at' ? 'received_at + 1' : c));
  return `INSERT INTO spans (${columns.join(', ')}) SELECT ${select.join(', ')} FROM (SELECT * FROM spans FINAL WHERE ${inDays}) AS s ${join}`;
}

/** The statements that insert the derived rows of `days` of one org as derivation `derivation`. */
export function deriveSql(org: string, days: readonly string[], derivation: number): string[] {
  const source = `(SELECT * FROM spans FINAL WHERE org_id = ${org} AND start_date IN (${dayList(days)}))`;
  const v = `toUInt64(${Math.trunc(derivation)}) AS derivation, `;
  const withDerivation = (sql: string) => sql.replace(/^SELECT /, `SELECT ${v}`);
  const usage = DAILY_ROLLUPS[0] as DailyRollup;
  // Rollups whose keys usage_daily holds are summed from its rows of this derivation, not from the spans again.
  const fromUsage =
    `(SELECT * FROM ${derivedTable(usage.table)} WHERE org_id = ${org} AND start_date IN (${dayList(days)}) ` + `AND derivation = ${Math.trunc(derivation)})`;
  const sums = (r: DailyRollup) =>
    `SELECT ${r.keys.join(', ')}, ${MEASURES.map((m) => `sum(${m.name}) AS ${m.name}`).join(', ')} FROM ${fromUsage} GROUP BY ${r.keys.join(', ')}`;
  return DERIVED_TABLES.map((t) => {
    const cols = ['derivation', ...derivedColumns(t).map(([n]) => n)].join(', ');
    const rollup = DAILY_ROLLUPS.find((r) => r.table === t);
    const body =
      rollup === undefined
        ? traceDeltaSql(DERIVE_DIALECT, source, 1)
        : rollup !== usage && rollup.keys.every((k) => usage.keys.includes(k))
          ? sums(rollup)
          : dailyDeltaSql(DERIVE_DIALECT, source, 1, '', rollup);
    return `INSERT INTO ${derivedTable(t)} (${cols}) ${withDerivation(body)}`;
  });
}

/** What the deriver needs of its store's connection. */
export interface DeriveServer {
  query(sql: string): Promise<QueryRow[]>;
  command(sql: string): Promise<void>;
}

export type { Lease } from './span-store.js';

/** The lease of a process that is the only writer of its ClickHouse database (no PostgreSQL). */
export class InProcessLease implements Lease {
  hold(): Promise<boolean> {
    return Promise.resolve(true);
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

interface DayState {
  org: string;
  day: string;
  changes: number;
  marked: number | undefined;
}

/** Days derived per statement: a first derivation of a long history goes a month at a time. */
const CHUNK_DAYS = 31;
/** Traces rewritten per statement, so a statement stays within ClickHouse's query size. */
const RESOLVE_TRACES = 1000;

/**
 * Derivation passes over the changed days. One pass at a time per process;
 * passes run only while the lease is held.
 */
export class ClickHouseDeriver {
  private chain: Promise<unknown> = Promise.resolve();
  private derivation = 0;
  private columns: string[] | undefined;
  /** The latest (marked, so current) derivation of each (org, day) derived since the last clean-up. */
  private sinceCleanup = new Map<string, number>();
  private passes = 0;

  constructor(
    private readonly server: DeriveServer,
    private readonly lease: Lease,
    /** The top lists built from the derived rows at the end of each pass (none: no lists). */
    private readonly lists?: { build(): Promise<number> },
  ) {}

  /** One pass (queued behind any running one); the number of days it derived and lists it built, or undefined without the lease. */
  pass(): Promise<number | undefined> {
    const next = this.chain.then(() => this.runPass());
    this.chain = next.catch(() => undefined);
    return next;
  }

  /** Passes until no day is left to derive (a test's or a tool's wait), at most `maxPasses`. */
  async settle(maxPasses = 20): Promise<void> {
    for (let i = 0; i < maxPasses; i++) {
      const n = await this.pass();
      if (n === undefined) throw new Error('another process holds the derivation lease');
      if (n === 0) return;
    }
    throw new Error(`derived tables still changing after ${maxPasses} passes`);
  }

  /** The (org, day)s whose derived rows lag their spans (a read only). */
  async pending(orgId?: string): Promise<{ org: string; day: string }[]> {
    return (await this.states(orgId)).filter((s) => s.marked !== s.changes).map(({ org, day }) => ({ org, day }));
  }

  private async states(orgId?: string): Promise<DayState[]> {
    const where = orgId === undefined ? '' : bindParams(' WHERE org_id = ?', [orgId]);
    const rows = await this.server.query(
      `SELECT c.org_id AS org, toString(c.start_date) AS day, c.n AS changes, m.marked AS marked, m.m AS mark FROM ` +
        `(SELECT org_id, start_date, sum(rows) AS n FROM ${CHANGES}${where} GROUP BY org_id, start_date) c ANY LEFT JOIN ` +
        `(SELECT org_id, start_date, argMax(changes, derivation) AS m, toUInt8(1) AS marked FROM ${MARKS}${where} GROUP BY org_id, start_date) m ` +
        'USING (org_id, start_date)',
    );
    return rows.map((r) => ({
      org: String(r.org),
      day: String(r.day),
      changes: Number(r.changes),
      marked: Number(r.marked) === 1 ? Number(r.mark) : undefined,
    }));
  }

  private async spanColumns(): Promise<string[]> {
    if (this.columns === undefined) {
      const rows = await this.server.query(
        "SELECT name FROM system.columns WHERE database = currentDatabase() AND table = 'spans' AND default_kind NOT IN ('ALIAS', 'MATERIALIZED')",
      );
      this.columns = rows.map((r) => String(r.name));
    }
    return this.columns;
  }

  private async runPass(): Promise<number | undefined> {
    if (!(await this.lease.hold())) return undefined;
    const states = await this.states();
    const dirty = states.filter((s) => s.marked !== s.changes);
    // The top lists of the days just derived (and of any day whose list is behind its derivation), under the same lease.
    if (dirty.length === 0) return (await this.lists?.build()) ?? 0;
    const [max] = await this.server.query(`SELECT max(derivation) AS v FROM ${MARKS}`);
    this.derivation = Math.max(this.derivation, Number(max?.v ?? 0)) + 1;
    const v = this.derivation;
    const byOrg = new Map<string, Map<string, number>>();
    for (const s of states) {
      let m = byOrg.get(s.org);
      if (m === undefined) byOrg.set(s.org, (m = new Map()));
      m.set(s.day, s.changes);
    }
    let derived = 0;
    const columns = await this.spanColumns();
    for (const [org, known] of byOrg) {
      const affected = new Set<string>();
      const dirtyDays = new Set(dirty.filter((s) => s.org === org).map((s) => s.day));
      for (const s of dirty)
        if (s.org === org)
          for (let k = -TRACE_WINDOW_DAYS; k <= TRACE_WINDOW_DAYS; k++) {
            const d = addDays(s.day, k);
            if (known.has(d)) affected.add(d);
          }
      const orgSql = bindParams('?', [org]);
      // Trace-level fields reach across days: the spans of the days around a changed day move too (which changes those days).
      const around = [...affected].sort();
      for (let i = 0; i < around.length; i += CHUNK_DAYS) {
        const chunk = around.slice(i, i + CHUNK_DAYS);
        const ids = (await this.server.query(unresolvedTracesSql(orgSql, chunk))).map((r) => String(r.trace_id));
        for (let j = 0; j < ids.length; j += RESOLVE_TRACES) await this.server.command(resolveSql(columns, orgSql, chunk, ids.slice(j, j + RESOLVE_TRACES)));
      }
      const days = [...dirtyDays].sort();
      for (let i = 0; i < days.length; i += CHUNK_DAYS) {
        const chunk = days.slice(i, i + CHUNK_DAYS);
        for (const s of deriveSql(orgSql, chunk, v)) await this.server.command(s);
        // The marks last: readers switch to this derivation's rows of a day when its mark is seen.
        await this.server.command(
          `INSERT INTO ${MARKS} (org_id, start_date, derivation, changes) VALUES ` +
            chunk.map((d) => bindParams(`(?, ${day(d)}, ${v}, ?)`, [org, known.get(d) ?? 0])).join(', '),
        );
        for (const d of chunk) this.sinceCleanup.set(`${org}\u0000${d}`, v);
        derived += chunk.length;
      }
    }
    derived += (await this.lists?.build()) ?? 0;
    if (++this.passes % 30 === 0) await this.cleanup();
    return derived;
  }

  /** Deletes the rows of the derivations superseded since the last clean-up (one mutation per table). */
  async cleanup(): Promise<void> {
    const entries = [...this.sinceCleanup];
    this.sinceCleanup = new Map();
    if (entries.length === 0) return;
    const byV = new Map<number, string[]>();
    for (const [k, v] of entries) {
      const [org, d] = k.split('\u0000') as [string, string];
      const list = byV.get(v) ?? [];
      list.push(bindParams(`(org_id = ? AND start_date = ${day(d)} AND derivation < ${v})`, [org]));
      byV.set(v, list);
    }
    const where = [...byV.values()].flat().join(' OR ');
    for (const t of DERIVED_TABLES) await this.server.command(`ALTER TABLE ${derivedTable(t)} DELETE WHERE ${where}`);
  }
}
