/**
 * Per-day lists of the groups that can rank first (DuckDB), for the
 * groupings with about as many groups as spans: traces and sessions.
 * Ranking a range's traces by cost otherwise groups every trace of every
 * day in it, which grows with the traces stored (2M traces in 90 days: ~2 s).
 *
 * Costs are never negative, so a group with rows on one day only that ranks
 * among the first N of a range ranks among the first N of its day: every
 * group that costs more that day costs at least as much in the range. A
 * list therefore keeps, per org and UTC day, that day's `perDay` costliest
 * groups, plus every row of each group seen on more than one day (days at
 * most TOP_LISTS_WINDOW_DAYS apart); a ranking of at most `perDay` groups
 * reads those rows alone and is exact. Each row keeps its rank in its day, so
 * a ranking of N reads only the first N of each day (and the multi-day rows).
 *
 * A marks table holds the days whose list is current, with how many groups
 * each has (a range's trace count without grouping its traces). A write that
 * may lower a day's costs (a reprice, a replacement, an erasure, a trace
 * that moves) removes that day's mark in its own transaction; a read
 * rebuilds the unmarked days of its range first. A write that only adds
 * spans notes the groups it added to (the touches) instead: costs only
 * grow, so the day's new first N lie among its listed groups and the
 * touched ones, and a read brings the list up to date from those alone.
 * A trace touch holds the trace's whole row of the day as its write left it
 * (the write reads what was stored of its traces anyway, to resolve their
 * fields); a session touch holds what the write added, and whether the
 * session is new to the day (a filter of the day's sessions tells, without
 * reading the day's rollup rows). A read then needs the day's list and
 * touches, and the rollup rows of the few sessions that could enter the list.
 */
import { DuckDBDateValue } from '@duckdb/node-api';
import { addDays, DAY_MS, dayMs, daysBetween, isDayText } from '@trace-ingest/shared/dates';
import { DAILY_ROLLUPS, dailyDeltaSql, DUCKDB_ROLLUP, MEASURES } from '@trace-ingest/shared/rollups';
import { isConflict, sqlString, type DuckDbFile } from './duckdb-file.js';
import type { QueryRow, SqlPart, TopLists } from './span-store.js';
import { dateLiteral, TOP_LISTS, TOP_LISTS_CHUNK_DAYS, TOP_LISTS_WINDOW_DAYS, unmarkedDays, type TopList, type TopListName } from './top-lists.js';
import { fingerprintOf, fingerprintSql, TraceFilter } from './trace-filter.js';

/**
 * New touches of a day, in lists' worth (perDay each), past which the writer advances the day after its write while
 * the org's list is watched (WATCHED_MS): an advance costs about its touches and the list, paid once per that many
 * touches, and a read then never takes in more. Unwatched, the day is unmarked instead once its touches also pass a
 * quarter of its groups.
 */
const ADVANCE_TOUCHES = 10;

/**
 * How long after a read of an org's list the writer advances every day a write touched, in the write's transaction:
 * while someone is looking (a console open), a read then finds the day current and writes nothing, so it never waits
 * for the writer, nor for a checkpoint of DuckDB's (which holds every write, an advance beside the writer too, for
 * seconds on a busy day). The advance costs about the write's touches and the day's list.
 */
const READING_MS = 300_000;

/**
 * How long after a read of an org's list the writer keeps that list's days current itself (advances a busy day,
 * builds the next one): while someone looks, reads stay short; when nobody has for this long, a busy day's list lapses
 * and writes into it pay nothing for it (a marked day's touches cost ~20% of an insert's CPU), and the next read
 * rebuilds it (2-3.5 s at 10M spans in the day).
 */
const WATCHED_MS = 3_600_000;

/** Days of a `deltas` list's groups the insert path keeps fingerprints of (live traffic writes into one or two). */
const GROUP_FILTER_DAYS = 4;

/**
 * The ranks a day's list keeps: a `deltas` list keeps twice those a ranking reads, so that the groups below
 * it (its floor) cost well under its Nth, and what a write adds to one of them rarely could lift it that far.
 */
const keptRanks = (l: TopList, perDay: number): number => (l.touchKind === 'deltas' ? 2 : 1) * Math.max(0, Math.trunc(perDay));

/** A touch a read has not taken in yet (a `deltas` list keeps the ones it took in and left unread, fresh NULL). */
const NEW_TOUCH = 'fresh IS NOT NULL';

/** The temp table (in a write's transaction) of the groups of a `deltas` list the write brings to a day for the first time. */
const newGroupsTable = (l: TopList): string => `ti_new_${l.group}`;

/**
 * For a `deltas` list: statements, run after `near` (a day's rows of some groups, read from the rollups) was written
 * into the list, that zero what the touches of those days and groups hold: the list rows hold all of it now.
 */
function nearTouchesSql(l: TopList, near: string): string[] {
  if (l.touchKind !== 'deltas') return [];
  const match = ['org_id', 'start_date', l.group].map((k) => `${l.touches}.${k} = n.${k}`).join(' AND ');
  return [`UPDATE ${l.touches} SET ${MEASURES.map((m) => `${m.name} = 0`).join(', ')} FROM ${near} n WHERE ${match}`];
}

/** A list's rows for `where`: one per org, day and group, its partial rollup rows summed. */
function dayRowsSql(list: TopList, where: string): string {
  const sums = MEASURES.map((m) => `sum(${m.name}) AS ${m.name}`).join(', ');
  const extras = list.extras.map((e) => `, min(${e}) AS ${e}`).join('');
  const keys = `org_id, start_date, ${list.group}`;
  return `SELECT ${keys}, ${sums}${extras} FROM ${list.source} WHERE ${where} GROUP BY ${keys} HAVING sum(spans) <> 0`;
}

/**
 * The days within TOP_LISTS_WINDOW_DAYS of `days` (sorted) that are not among them, as ranges of days
 * (a SQL condition): ranges skip the row groups of `days` by their min/max, where a NOT would read them.
 */
export function aroundSql(days: readonly string[]): string {
  const own = new Set(days);
  const around = new Set<string>();
  for (const day of days)
    for (let k = -TOP_LISTS_WINDOW_DAYS; k <= TOP_LISTS_WINDOW_DAYS; k++) {
      const d = addDays(day, k);
      // Days beyond the years 0000-9999 have no DATE literal, and no rows.
      if (!own.has(d) && isDayText(d)) around.add(d);
    }
  const runs: [string, string][] = [];
  for (const d of [...around].sort()) {
    const run = runs[runs.length - 1];
    if (run !== undefined && addDays(run[1], 1) === d) run[1] = d;
    else runs.push([d, d]);
  }
  if (runs.length === 0) return 'false';
  return `(${runs.map(([a, b]) => `start_date BETWEEN ${dateLiteral(a)} AND ${dateLiteral(b)}`).join(' OR ')})`;
}

/**
 * The statements, run in one transaction, that rebuild the lists of `days`
 * (sorted, at most TOP_LISTS_CHUNK_DAYS) of one org (`org`: a SQL string
 * literal) and mark those days current.
 */
export function rebuildTopListSql(list: TopList, org: string, days: readonly string[], perDay: number): string[] {
  const first = days[0];
  const last = days[days.length - 1];
  if (first === undefined || last === undefined) return [];
  const g = list.group;
  const inDays = `start_date IN (${days.map(dateLiteral).join(', ')})`;
  const near = `start_date BETWEEN ${dateLiteral(first)} - ${TOP_LISTS_WINDOW_DAYS} AND ${dateLiteral(last)} + ${TOP_LISTS_WINDOW_DAYS}`;
  const ofOrg = `org_id = ${org}`;
  const n = keptRanks(list, perDay);
  const deltas = list.touchKind === 'deltas';
  return [
    // Day, group and cost alone (the org is one): grouping every measure of every group of a day was most of a rebuild.
    `CREATE OR REPLACE TEMP TABLE ti_top_day AS SELECT start_date, ${g}, sum(total_cost) AS total_cost FROM ${list.source} ` +
      `WHERE ${ofOrg} AND ${inDays} GROUP BY start_date, ${g} HAVING sum(spans) <> 0`,
    // The neighbouring days' rows of the groups seen on these days: those groups have more than one day.
    `CREATE OR REPLACE TEMP TABLE ti_top_near AS ${dayRowsSql(list, `${ofOrg} AND ${aroundSql(days)} AND ${g} IN (SELECT ${g} FROM ti_top_day)`)}`,
    // A group is in ti_top_day once per day: on a single day none is there twice, and its groups need no second grouping.
    `CREATE OR REPLACE TEMP TABLE ti_top_multi AS SELECT ${g} FROM ti_top_near` +
      (days.length > 1 ? ` UNION SELECT ${g} FROM ti_top_day GROUP BY ${g} HAVING count(*) > 1` : ''),
    ...keptSql(g, deltas ? n + 1 : n),
    `DELETE FROM ${list.table} WHERE ${ofOrg} AND (${inDays} OR (${near} AND ${g} IN (SELECT ${g} FROM ti_top_multi)))`,
    // Every measure, of the groups kept only.
    `INSERT INTO ${list.table} SELECT d.*, k.day_rank, k.multi ` +
      `FROM (${dayRowsSql(list, `${ofOrg} AND ${inDays} AND ${g} IN (SELECT ${g} FROM ti_top_kept)`)}) d ` +
      `JOIN ti_top_kept k ON k.start_date = d.start_date AND k.${g} = d.${g} WHERE k.day_rank <= ${n} OR k.multi`,
    `INSERT INTO ${list.table} SELECT *, NULL, true FROM ti_top_near`,
    ...nearTouchesSql(list, 'ti_top_near'),
    `DELETE FROM ${list.marks} WHERE ${ofOrg} AND ${inDays}`,
    `DELETE FROM ${list.touches} WHERE ${ofOrg} AND ${inDays}`,
    `INSERT INTO ${list.marks} (org_id, start_date, group_count) SELECT ${org}, v.d, coalesce(c.n, 0) ` +
      `FROM (VALUES ${days.map((d) => `(${dateLiteral(d)})`).join(', ')}) v(d) ` +
      'LEFT JOIN (SELECT start_date, count(*) AS n FROM ti_top_day GROUP BY start_date) c ON c.start_date = v.d',
    ...(deltas
      ? [
          `UPDATE ${list.marks} SET floor_cost = k.total_cost FROM ti_top_kept k ` +
            `WHERE ${list.marks}.${ofOrg} AND ${list.marks}.start_date = k.start_date AND k.day_rank = ${n + 1}`,
        ]
      : []),
    'DROP TABLE ti_top_day',
    'DROP TABLE ti_top_near',
    'DROP TABLE ti_top_multi',
    'DROP TABLE ti_top_kept',
    'DROP TABLE ti_top_cut',
  ];
}

/**
 * Statements that keep, per day of ti_top_day, its first `ranks` groups by cost with their rank, and its multi-day
 * groups (ti_top_multi) whatever their rank (`day_rank` NULL past the ranked ones: reads take multi-day rows at any
 * rank). A day's `ranks` costliest values are found first (a bounded top per day), so only the groups that cost at
 * least the last of them are sorted, where ranking every group of a busy day was half of its rebuild. Those groups
 * are the start of the day's order by cost, so their ranks are the day's. A `deltas` list's floor is the cost of the
 * first group past its ranks, kept here for the marks.
 */
export function keptSql(g: string, ranks: number): string[] {
  // A day of fewer groups than ranks has its least cost as its cut: every group of it is ranked. No cut: none is.
  const cut =
    ranks > 0
      ? `SELECT start_date, list_last(max(total_cost, ${ranks})) AS cut FROM ti_top_day GROUP BY start_date`
      : 'SELECT DISTINCT start_date, NULL AS cut FROM ti_top_day';
  const ranked = 'd.total_cost >= c.cut';
  const multi = `d.${g} IN (SELECT ${g} FROM ti_top_multi)`;
  return [
    `CREATE OR REPLACE TEMP TABLE ti_top_cut AS ${cut}`,
    `CREATE OR REPLACE TEMP TABLE ti_top_kept AS SELECT d.start_date, d.${g}, d.total_cost, ` +
      `row_number() OVER (PARTITION BY d.start_date ORDER BY d.total_cost DESC, d.${g}) AS day_rank, ${multi} AS multi ` +
      `FROM ti_top_day d JOIN ti_top_cut c ON c.start_date = d.start_date WHERE ${ranked} QUALIFY day_rank <= ${ranks} OR multi ` +
      `UNION ALL SELECT d.start_date, d.${g}, d.total_cost, NULL, true ` +
      `FROM ti_top_day d JOIN ti_top_cut c ON c.start_date = d.start_date WHERE (${ranked}) IS NOT TRUE AND ${multi}`,
  ];
}

/** The statements of an advance of a `deltas` list (see advanceFromDeltasSql), run in one transaction in this order. */
export interface DeltaAdvance {
  prepare: string[];
  /** A query of how many groups must be read from the rollups (a row with `n`). */
  looks: string;
  /** Reads them: `any` false when `looks` counted none (the statement then reads no row). */
  lookup: (any: boolean) => string;
  finish: string[];
}

/**
 * The statements, run in one transaction, that bring the list of `day` (a
 * marked day with touches) of one org up to date, for a list whose touches
 * hold what each write added (`deltas`). Costs only grew since the list was
 * current, so the day's first N are among its listed groups and the touched
 * ones. A listed group's row is its list row plus its touches; a group new
 * to the day is its touches. Any other touched group cost at most the day's
 * floor (its mark's) when the list was current, and so now at most the floor
 * plus its touches: it is read from the day's rollup rows only when that
 * bound reaches the Nth cost of the known rows, or when it turns out to span
 * days; otherwise it keeps its touches, which add up until it is read. The
 * list keeps twice N ranks and the groups touched since the last advance
 * (the next spans of a session come soon after: its row is then known), the
 * floor rises to the costliest known row left out, and, as in
 * advanceFromTouchesSql, touched groups not known to span
 * days are looked up on the days around and the groups new to the day are
 * counted.
 */
export function advanceFromDeltasSql(list: TopList, org: string, day: string, perDay: number): DeltaAdvance {
  if (list.extras.length > 0) throw new Error(`the ${list.table} list keeps columns beyond the measures; its touches cannot hold deltas of them`);
  const g = list.group;
  const ofOrg = `org_id = ${org}`;
  const onDay = `start_date = ${dateLiteral(day)}`;
  const near = `start_date BETWEEN ${dateLiteral(day)} - ${TOP_LISTS_WINDOW_DAYS} AND ${dateLiteral(day)} + ${TOP_LISTS_WINDOW_DAYS}`;
  const n = Math.max(0, Math.trunc(perDay));
  const keep = keptRanks(list, perDay);
  const ms = MEASURES.map((m) => m.name);
  const listed = `(SELECT * FROM ${list.table} WHERE ${ofOrg} AND ${onDay})`;
  const nearGroups = `${g} IN (SELECT ${g} FROM ti_sadv_near)`;
  const mark = `${list.marks}.${ofOrg} AND ${list.marks}.${onDay}`;
  return {
    prepare: [
      `CREATE OR REPLACE TEMP TABLE ti_sadv_touched AS SELECT ${g}, ${ms.map((m) => `sum(${m}) AS ${m}`).join(', ')}, ` +
        // A group with only touches carried over (fresh NULL) is not new.
        `coalesce(bool_or(fresh), false) AS new ` +
        `FROM ${list.touches} WHERE ${ofOrg} AND ${onDay} GROUP BY ${g}`,
      // exact: the group's whole row of the day is known (listed, or new to the day); the other touched groups hold what was added.
      `CREATE OR REPLACE TEMP TABLE ti_sadv_cand AS SELECT t.${g}, ${ms.map((m) => `coalesce(l.${m}, 0) + t.${m} AS ${m}`).join(', ')}, ` +
        `coalesce(l.multi, false) AS multi, true AS touched, l.${g} IS NOT NULL OR t.new AS exact, t.new AS new ` +
        `FROM ti_sadv_touched t LEFT JOIN ${listed} l ON l.${g} = t.${g} ` +
        `UNION ALL SELECT l.${g}, ${ms.map((m) => `l.${m}`).join(', ')}, l.multi, false, true, false FROM ${listed} l ` +
        `WHERE NOT EXISTS (SELECT 1 FROM ti_sadv_touched t WHERE t.${g} = l.${g})`,
      `CREATE OR REPLACE TEMP TABLE ti_sadv_near AS ${dayRowsSql(
        list,
        `${ofOrg} AND ${aroundSql([day])} AND ${g} IN (SELECT ${g} FROM ti_sadv_cand WHERE touched AND NOT multi)`,
      )}`,
      // No floor: every group of the day was listed. No Nth: fewer known rows than N, so every touched group is read.
      `CREATE OR REPLACE TEMP TABLE ti_sadv_bound AS SELECT ` +
        `coalesce((SELECT floor_cost FROM ${list.marks} WHERE ${ofOrg} AND ${onDay}), 0) AS floor, ` +
        `${n === 0 ? 'NULL' : `(SELECT total_cost FROM ti_sadv_cand WHERE exact ORDER BY total_cost DESC LIMIT 1 OFFSET ${n - 1})`} AS nth`,
      `CREATE OR REPLACE TEMP TABLE ti_sadv_look AS SELECT c.${g}, c.${nearGroups} OR b.nth IS NULL OR c.total_cost + b.floor >= b.nth AS look ` +
        `FROM ti_sadv_cand c, ti_sadv_bound b WHERE NOT c.exact`,
    ],
    looks: 'SELECT count(*) AS n FROM ti_sadv_look WHERE look',
    lookup: (any) =>
      `CREATE OR REPLACE TEMP TABLE ti_sadv_found AS ${dayRowsSql(
        list,
        any ? `${ofOrg} AND ${onDay} AND ${g} IN (SELECT ${g} FROM ti_sadv_look WHERE look)` : 'false',
      )}`,
    finish: [
      // Kept: the ranks, the groups of several days, and the groups touched since the last advance (a late span of theirs
      // finds their row listed); a group past the ranks that was not touched again leaves, its cost going into the floor.
      `CREATE OR REPLACE TEMP TABLE ti_sadv_final AS SELECT *, day_rank <= ${keep} OR multi OR ${nearGroups} OR touched AS kept FROM (` +
        `SELECT *, row_number() OVER (ORDER BY total_cost DESC, ${g}) AS day_rank FROM (` +
        `SELECT ${g}, ${ms.join(', ')}, multi, touched FROM ti_sadv_cand WHERE exact ` +
        `UNION ALL SELECT f.${g}, ${ms.map((m) => `f.${m}`).join(', ')}, c.multi, true FROM ti_sadv_found f JOIN ti_sadv_cand c ON c.${g} = f.${g}))`,
      `DELETE FROM ${list.table} WHERE ${ofOrg} AND (${onDay} OR (${near} AND ${nearGroups}))`,
      `INSERT INTO ${list.table} SELECT ${org}, ${dateLiteral(day)}, ${g}, ${ms.join(', ')}, day_rank, multi OR ${nearGroups} ` +
        `FROM ti_sadv_final WHERE kept`,
      `INSERT INTO ${list.table} SELECT *, NULL, true FROM ti_sadv_near`,
      ...nearTouchesSql(list, 'ti_sadv_near'),
      // A group read from the rollups whose row is what its touches added is new too (a fingerprint shared with a stored one).
      `UPDATE ${list.marks} SET group_count = group_count + (SELECT count(*) FROM ti_sadv_cand WHERE new) + ` +
        `(SELECT count(*) FROM ti_sadv_found f JOIN ti_sadv_cand c ON c.${g} = f.${g} WHERE f.spans = c.spans), ` +
        `floor_cost = greatest(coalesce(floor_cost, 0), coalesce((SELECT max(total_cost) FROM ti_sadv_final WHERE NOT kept), 0)) WHERE ${mark}`,
      `DELETE FROM ${list.touches} WHERE ${ofOrg} AND ${onDay}`,
      // The groups left unread keep what was added to them, in one touch each (fresh NULL: nothing new to a read): their
      // bound is the floor they had plus all that was added since.
      `INSERT INTO ${list.touches} (org_id, start_date, ${g}, ${ms.join(', ')}, fresh) SELECT ${org}, ${dateLiteral(day)}, ${g}, ${ms.join(', ')}, NULL ` +
        `FROM ti_sadv_touched WHERE ${g} IN (SELECT ${g} FROM ti_sadv_look WHERE NOT look)`,
      ...['ti_sadv_touched', 'ti_sadv_cand', 'ti_sadv_near', 'ti_sadv_bound', 'ti_sadv_look', 'ti_sadv_found', 'ti_sadv_final'].map((t) => `DROP TABLE ${t}`),
    ],
  };
}

/**
 * The statements, run in one transaction, that bring the list of `day` (a
 * marked day with touches) of one org up to date from its list rows and
 * touches alone, for a list whose touches hold each group's whole row of the
 * day (`rows`): it costs what was written since the mark, not the day.
 * A touched group's row is its last touch's (rows only grow, so the one
 * with the most spans); the others keep their list rows. Costs only grew,
 * so the day's first N are among those groups; touched
 * groups not known to span days are looked up on the days around, and a
 * group whose first touch brought its first spans of the day is counted.
 */
export function advanceFromTouchesSql(list: TopList, org: string, day: string, perDay: number): string[] {
  const g = list.group;
  const ofOrg = `org_id = ${org}`;
  const onDay = `start_date = ${dateLiteral(day)}`;
  const near = `start_date BETWEEN ${dateLiteral(day)} - ${TOP_LISTS_WINDOW_DAYS} AND ${dateLiteral(day)} + ${TOP_LISTS_WINDOW_DAYS}`;
  const n = Math.max(0, Math.trunc(perDay));
  const row = [g, ...MEASURES.map((m) => m.name), ...list.extras];
  const listed = `(SELECT * FROM ${list.table} WHERE ${ofOrg} AND ${onDay})`;
  const nearGroups = `${g} IN (SELECT ${g} FROM ti_dadv_near)`;
  const lastTouch = row
    .slice(1)
    .map((c) => `arg_max(${c}, spans) AS ${c}`)
    .join(', ');
  return [
    // arg_max, not a window: a window sorts every column of every touch (about 3x the time).
    `CREATE OR REPLACE TEMP TABLE ti_dadv_touched AS SELECT ${g}, ${lastTouch}, bool_or(fresh) AS new ` +
      `FROM ${list.touches} WHERE ${ofOrg} AND ${onDay} GROUP BY ${g}`,
    `CREATE OR REPLACE TEMP TABLE ti_dadv_cand AS ` +
      `SELECT ${row.map((c) => `t.${c}`).join(', ')}, coalesce(l.multi, false) AS multi, true AS touched ` +
      `FROM ti_dadv_touched t LEFT JOIN ${listed} l ON l.${g} = t.${g} ` +
      `UNION ALL SELECT ${row.map((c) => `l.${c}`).join(', ')}, l.multi, false FROM ${listed} l ` +
      `WHERE NOT EXISTS (SELECT 1 FROM ti_dadv_touched t WHERE t.${g} = l.${g})`,
    `CREATE OR REPLACE TEMP TABLE ti_dadv_near AS ${dayRowsSql(
      list,
      `${ofOrg} AND ${aroundSql([day])} AND ${g} IN (SELECT ${g} FROM ti_dadv_cand WHERE touched AND NOT multi)`,
    )}`,
    `DELETE FROM ${list.table} WHERE ${ofOrg} AND (${onDay} OR (${near} AND ${nearGroups}))`,
    `INSERT INTO ${list.table} SELECT ${org}, ${dateLiteral(day)}, ${row.join(', ')}, day_rank, multi OR ${nearGroups} ` +
      `FROM (SELECT *, row_number() OVER (ORDER BY total_cost DESC, ${g}) AS day_rank FROM ti_dadv_cand) ` +
      `WHERE day_rank <= ${n} OR multi OR ${nearGroups}`,
    `INSERT INTO ${list.table} SELECT *, NULL, true FROM ti_dadv_near`,
    `UPDATE ${list.marks} SET group_count = group_count + (SELECT count(*) FROM ti_dadv_touched WHERE new) WHERE ${ofOrg} AND ${onDay}`,
    `DELETE FROM ${list.touches} WHERE ${ofOrg} AND ${onDay}`,
    ...['ti_dadv_touched', 'ti_dadv_cand', 'ti_dadv_near'].map((t) => `DROP TABLE ${t}`),
  ];
}

/** Removes the marks (and touches) of `orgs`' days from `lo` to `hi` (SQL date expressions) in `lists`: their rows changed. */
export function unmarkSql(orgs: string, lo: string, hi: string, lists: readonly TopListName[] = ['trace', 'session']): string[] {
  return lists
    .map((name) => TOP_LISTS[name])
    .flatMap((l) => [l.marks, l.touches].map((t) => `DELETE FROM ${t} WHERE org_id IN (${orgs}) AND start_date BETWEEN ${lo} AND ${hi}`));
}

/** The marks of each list on a write's days: the days (text), the orgs (SQL string literals) and the pairs marked (day, NUL, org). */
export type WriteMarks = Map<TopList, { days: string[]; orgs: string[]; pairs: Set<string> }>;

/** A write of new spans, as its touches read it. */
export interface TouchSources {
  /** The new spans (a table of the write's transaction). */
  spans: string;
  /** Their rows of the trace rollup, one per org, day and trace (a table of the write's transaction). */
  traceRows: string;
  /** What was stored of their traces before, one row per org, trace and day, with every measure (a table of the write's transaction). */
  knownTraceRows: string;
}

/**
 * Notes in `list` the groups the new spans add to on `days` (marked days, as
 * text) of `orgs` (SQL string literals), each with whether the write brought
 * its first spans of that day (a `deltas` list: the groups DuckDbTopLists.beforeAdd
 * found new), and with what the write added to each measure
 * (`deltas`) or the group's whole row of the day as the write left it (what
 * was stored of it, plus the write's: `rows`). A touch of a day without a
 * mark of its org and list is harmless: that day is rebuilt when read, which
 * drops its touches.
 */
export function touchSql(from: TouchSources, l: TopList, days: readonly string[], orgs: readonly string[]): string | undefined {
  if (days.length === 0 || orgs.length === 0) return undefined;
  const where = (t: string) => `${t}start_date IN (${days.map(dateLiteral).join(', ')}) AND ${t}org_id IN (${orgs.join(', ')})`;
  const keys = `org_id, start_date, ${l.group}`;
  if (l.touchKind === 'deltas') {
    const rollup = DAILY_ROLLUPS.find((r) => r.table === l.source);
    if (rollup === undefined) throw new Error(`no daily rollup ${l.source}`);
    const fresh = ['org_id', 'start_date', l.group].map((k) => `f.${k} = w.${k}`).join(' AND ');
    return (
      `INSERT INTO ${l.touches} (${keys}, ${MEASURES.map((m) => m.name).join(', ')}, fresh) ` +
      `SELECT w.org_id, w.start_date, w.${l.group}, ${MEASURES.map((m) => `sum(w.${m.name})`).join(', ')}, bool_or(f.${l.group} IS NOT NULL) ` +
      `FROM (${dailyDeltaSql(DUCKDB_ROLLUP, from.spans, 1, where(''), rollup)}) w LEFT JOIN ${newGroupsTable(l)} f ON ${fresh} ` +
      `GROUP BY w.org_id, w.start_date, w.${l.group}`
    );
  }
  const match = ['org_id', 'start_date', l.group].map((k) => `k.${k} = w.${k}`).join(' AND ');
  const row = [...MEASURES.map((m) => `coalesce(k.${m.name}, 0) + w.${m.name}`), ...l.extras.map((e) => `least(k.${e}, w.${e})`)];
  return (
    `INSERT INTO ${l.touches} SELECT w.org_id, w.start_date, w.${l.group}, ${row.join(', ')}, coalesce(k.spans, 0) = 0 ` +
    `FROM ${from.traceRows} w LEFT JOIN ${from.knownTraceRows} k ON ${match} WHERE ${where('w.')}`
  );
}

/** The new touches of a day past which the writer advances it after its write while the org's list is watched. */
const advanceTouches = (perDay: number): number => Math.max(1, Math.trunc(perDay)) * ADVANCE_TOUCHES;

/**
 * A query of the days of `list` among `days` of `orgs` (marked) with more than `most` new touches, with how many (`n`)
 * and how many groups the day has (`groups`). Rows: org_id, d, n, groups.
 */
export function overTouchedSql(l: TopList, days: readonly string[], orgs: readonly string[], most: number): string {
  const where = `start_date IN (${days.map(dateLiteral).join(', ')}) AND org_id IN (${orgs.join(', ')}) AND ${NEW_TOUCH}`;
  return (
    `SELECT t.org_id, CAST(t.start_date AS VARCHAR) AS d, t.n, m.group_count AS groups FROM ` +
    `(SELECT org_id, start_date, count(*) AS n FROM ${l.touches} WHERE ${where} GROUP BY org_id, start_date HAVING count(*) > ${most}) t ` +
    `JOIN ${l.marks} m ON m.org_id = t.org_id AND m.start_date = t.start_date`
  );
}

/** Where an advance's statements run: the writer, or a connection beside it. */
interface Statements {
  run(sql: string): Promise<unknown>;
  rows(sql: string): Promise<QueryRow[]>;
}

/** The days of `range` with touches a read has not taken in (rows: d), in order. */
const touchedDaysSql = (l: TopList, range: string): string =>
  `SELECT DISTINCT CAST(start_date AS VARCHAR) AS d FROM ${l.touches} WHERE ${range} AND ${NEW_TOUCH} ORDER BY d`;

/** How many days of `where` a list has marked (`marked`) and how many new touches it holds there (`touched`). */
const stateSql = (l: TopList, where: string): string =>
  `SELECT (SELECT count(*) FROM ${l.marks} WHERE ${where}) AS marked, (SELECT count(*) FROM ${l.touches} WHERE ${where} AND ${NEW_TOUCH}) AS touched`;

const rangeSql = (fromDay: string, toDay: string): string => `start_date >= ${dateLiteral(fromDay)} AND start_date < ${dateLiteral(toDay)}`;

/** A list's rows of an org's days (see TopLists.rows): the table itself, one row per day and group. */
export function listRowsSql(list: TopList, orgId: string, fromDay: string, toDay: string, cond?: SqlPart): SqlPart {
  return {
    sql: `(SELECT * FROM ${list.table} WHERE org_id = ? AND ${rangeSql(fromDay, toDay)}${cond === undefined ? '' : ` AND ${cond.sql}`}) l`,
    params: [orgId, ...(cond?.params ?? [])],
  };
}

/** The days' group counts summed, from their marks (see TopLists.groupCount). */
export function groupCountSql(list: TopList, orgId: string, fromDay: string, toDay: string): SqlPart {
  return { sql: `(SELECT coalesce(sum(group_count), 0) FROM ${list.marks} WHERE org_id = ? AND ${rangeSql(fromDay, toDay)})`, params: [orgId] };
}

/** The DuckDB store's top lists: writes unmark or touch the days they change, and a read brings its days up to date. */
export class DuckDbTopLists implements TopLists {
  /** Days that may hold a mark, with the orgs that may hold one (any list): a write whose days hold none has nothing to unmark or touch. */
  private readonly markedDays = new Map<string, Set<string>>();
  /**
   * Per `deltas` list, the groups stored on the days writes touched while marked, so a write tells a group new to its
   * day without reading the day's rollup rows. It may name a group that is not stored (a shared fingerprint, or one whose
   * rows went: an advance reads such a group's rows when it could rank), never miss one that is.
   */
  private readonly stored = new Map<TopList, TraceFilter>(
    Object.values(TOP_LISTS)
      .filter((l) => l.touchKind === 'deltas')
      .map((l) => [l, new TraceFilter(GROUP_FILTER_DAYS)]),
  );

  /** Days of an org and list the writer brings up to date after its write (refreshDue): built new, or advanced over many touches. */
  private readonly due = new Map<string, { list: TopList; org: string; day: string; kind: 'rebuild' | 'advance' }>();
  /** Lists, orgs and days noteNewDays looked at (a day is new once). */
  private readonly lookedAt = new Set<string>();

  /** When each list of each org was last read (this process's monotonic clock). */
  private readonly lastRead = new Map<string, number>();

  constructor(
    private readonly file: DuckDbFile,
    readonly perDay: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * Reads the file's marked days before any write, so the set holds every day a mark exists for: marks are written only by the
   * file's one writer (the DATA_DIR lock) and only after the set has their days.
   */
  async opened(): Promise<void> {
    this.forgetStored();
    this.due.clear();
    this.lookedAt.clear();
    for (const l of Object.values(TOP_LISTS))
      for (const r of await this.file.rows(`SELECT DISTINCT CAST(start_date AS VARCHAR) AS d, org_id FROM ${l.marks}`))
        this.noteMark(String(r.d), String(r.org_id));
  }

  /** Brings the range's days up to date first (rebuilt or advanced), so the lists are always ready. */
  async ready(list: TopListName, orgId: string, fromDay: string, toDay: string): Promise<boolean> {
    this.lastRead.set(`${TOP_LISTS[list].table}\0${orgId}`, this.now());
    await this.refresh(list, orgId, fromDay, toDay);
    return true;
  }

  rows(list: TopListName, orgId: string, fromDay: string, toDay: string, cond?: SqlPart): SqlPart {
    return listRowsSql(TOP_LISTS[list], orgId, fromDay, toDay, cond);
  }

  groupCount(list: TopListName, orgId: string, fromDay: string, toDay: string): SqlPart {
    return groupCountSql(TOP_LISTS[list], orgId, fromDay, toDay);
  }

  /**
   * The top lists of the days from `lo` to `hi` of the orgs in `source` are
   * out of date (in the write's transaction), in every list or in `lists`.
   * Skipped when none of those days was ever marked: an ingest nobody reads
   * meanwhile pays nothing for it.
   */
  async unmark(source: string, lo: string, hi: string, lists?: readonly TopListName[]): Promise<void> {
    if (!this.anyMarked(lo, hi)) return;
    for (const sql of unmarkSql(`SELECT DISTINCT org_id FROM ${source}`, dateLiteral(lo), dateLiteral(hi), lists)) await this.file.run(sql);
  }

  /**
   * New spans only add to their groups: notes those groups on the marked
   * days of each list (`marks`, from marksOf; in the write's transaction),
   * which keeps the marks. Nothing when none of those days was marked.
   */
  async touch(from: TouchSources, marks: WriteMarks): Promise<void> {
    for (const [l, m] of marks) {
      const sql = touchSql(from, l, m.days, m.orgs);
      if (sql === undefined) continue;
      await this.file.run(sql);
      const most = advanceTouches(this.perDay);
      const reading = [...m.pairs].some((p) => this.reading(l, p.slice(p.indexOf('\0') + 1)));
      for (const r of await this.file.rows(overTouchedSql(l, m.days, m.orgs, reading ? 0 : most))) {
        const [org, day, n] = [String(r.org_id), String(r.d), Number(r.n)];
        // Someone is looking: the day is advanced before the write commits, so no read ever finds its touches (DuckDB may
        // checkpoint at that commit, holding every write, a read's advance too, for seconds on a busy day).
        if (this.reading(l, org)) await this.advanceDayOn(this.file, l, sqlString(org), day);
        else if (this.watched(l, org) && n > most) this.noteDue(l, org, day, 'advance');
        else if (!this.watched(l, org) && n > most && n > Number(r.groups) / 4) {
          // Nobody reads the org's lists lately: the day is rebuilt when read (its touches outgrew a quarter of the groups
          // a rebuild reads, at about a third of the work per row), and writes to it pay nothing for a list meanwhile.
          const where = `org_id = ${sqlString(org)} AND start_date = ${dateLiteral(day)}`;
          for (const t of [l.marks, l.touches]) await this.file.run(`DELETE FROM ${t} WHERE ${where}`);
        }
      }
    }
    for (const l of marks.keys()) if (this.stored.has(l)) await this.file.run(`DROP TABLE IF EXISTS ${newGroupsTable(l)}`);
  }

  /**
   * The marks of each list on a write's days from `lo` to `hi`, read once for the write's touches (in its transaction,
   * after anything it unmarks), as literal days and orgs: the batch is small and a join was most of a touch's cost.
   */
  async marksOf(lo: string, hi: string): Promise<WriteMarks> {
    const out: WriteMarks = new Map();
    if (!this.anyMarked(lo, hi)) return out;
    const days = [...this.markedDays.keys()].filter((day) => day >= lo && day <= hi).map(dateLiteral);
    const lists = Object.values(TOP_LISTS);
    const rows = await this.file.rows(
      lists
        .map((l, i) => `SELECT ${i} AS l, CAST(start_date AS VARCHAR) AS d, org_id FROM ${l.marks} WHERE start_date IN (${days.join(', ')})`)
        .join(' UNION ALL '),
    );
    for (const [i, l] of lists.entries()) {
      const mine = rows.filter((r) => Number(r.l) === i);
      if (mine.length === 0) continue;
      out.set(l, {
        days: [...new Set(mine.map((r) => String(r.d)))],
        orgs: [...new Set(mine.map((r) => sqlString(String(r.org_id))))],
        pairs: new Set(mine.map((r) => `${String(r.d)}\0${String(r.org_id)}`)),
      });
    }
    return out;
  }

  /**
   * Before new spans (in `source`, their fields resolved, from `lo` to `hi`) go into the rollups: for each `deltas` list,
   * finds which of their groups are new to a marked day of their org (the table touchSql joins), and notes every group
   * of theirs in the filter of the days it holds. A marked day's filter is loaded first, from the rows stored before.
   */
  async beforeAdd(source: string, lo: string, hi: string, marks: WriteMarks): Promise<void> {
    for (const [l, filter] of this.stored) {
      const marked = marks.get(l)?.pairs ?? new Set<string>();
      const markedDays = new Set([...marked].map((k) => k.slice(0, k.indexOf('\0'))));
      for (const day of markedDays)
        if (!filter.has(day)) {
          // Once per day and process (and after a write that may have taken groups off it): the day's groups, in one pass.
          // Every row, not DISTINCT: the filter keeps a fingerprint once itself.
          const c = await this.file.columns(`SELECT ${fingerprintSql('org_id', l.group)} FROM ${l.source} WHERE start_date = ${dateLiteral(day)}`);
          filter.load(day, { lo: c.fp_lo ?? [], hi: c.fp_hi ?? [] }, markedDays);
        }
      const days = filter.loadedBetween(lo, hi);
      const fresh: [string, DuckDBDateValue, string][] = [];
      if (days.length > 0) {
        const groups = await this.file.rows(
          `SELECT DISTINCT org_id, CAST(start_date AS VARCHAR) AS d, ${l.group} AS g, ${fingerprintSql('org_id', l.group)} ` +
            `FROM ${source} WHERE start_date IN (${days.map(dateLiteral).join(', ')})`,
        );
        for (const r of groups) {
          const [org, day, g, fp] = [String(r.org_id), String(r.d), String(r.g), fingerprintOf(r)];
          if (marked.has(`${day}\0${org}`) && filter.since([day], fp) === undefined) fresh.push([org, new DuckDBDateValue(dayMs(day) / DAY_MS), g]);
          filter.add(day, fp, 0);
        }
      }
      // Only a list marked on these days is touched, and its touches join the table.
      if (!marks.has(l)) continue;
      await this.file.run(`CREATE OR REPLACE TEMP TABLE ${newGroupsTable(l)} (org_id VARCHAR, start_date DATE, ${l.group} VARCHAR)`);
      await this.file.appendTemp(newGroupsTable(l), fresh);
    }
  }

  /**
   * Rows of groups may have left the days from `lo` to `hi` (a replacement), or any day (an erasure): the filters of
   * those days are read again when next needed, so a group that came back counts as new to its day.
   */
  forgetStored(lo?: string, hi?: string): void {
    for (const filter of this.stored.values())
      if (lo === undefined || hi === undefined) filter.clear();
      else filter.forgetBetween(lo, hi);
  }

  /**
   * Spans stored earlier moved to other groups (a trace's session learned late): `moved` (a table and its condition,
   * for FROM: the spans that moved, in the write's transaction) notes their groups on the days each filter holds.
   */
  async noteMoved(list: TopListName, moved: string): Promise<void> {
    const l = TOP_LISTS[list];
    const filter = this.stored.get(l);
    if (filter === undefined || filter.empty) return;
    const rows = await this.file.rows(`SELECT DISTINCT CAST(start_date AS VARCHAR) AS d, ${fingerprintSql('org_id', l.group)} FROM ${moved}`);
    for (const r of rows) filter.add(String(r.d), fingerprintOf(r), 0);
  }

  /**
   * Whether new spans from `lo` to `hi` are noted with their groups' whole rows (a list whose touches are
   * `rows` has a mark on one of those days): the write then keeps those rows (`knownTraceRows`).
   */
  async touchesWholeRows(lo: string, hi: string): Promise<boolean> {
    if (!this.anyMarked(lo, hi)) return false;
    const days = [...this.markedDays.keys()].filter((day) => day >= lo && day <= hi).map(dateLiteral);
    for (const l of Object.values(TOP_LISTS))
      if (l.touchKind === 'rows' && (await this.file.rows(`SELECT 1 AS x FROM ${l.marks} WHERE start_date IN (${days.join(', ')}) LIMIT 1`)).length > 0)
        return true;
    return false;
  }

  /**
   * Days of the orgs in `source` (a write's new spans, in its transaction) from `lo` to `hi` that follow the org's
   * last marked day of a list by at most TOP_LISTS_WINDOW_DAYS and hold no mark, while the org's list is watched
   * (WATCHED_MS): the next day of an org whose lists are read. Built after the write (refreshDue) while the day is
   * small, and kept current by its touches from then on, so the first read of a busy day does not rebuild it. Each
   * day is looked at once per process.
   */
  async noteNewDays(source: string, lo: string, hi: string, marks: WriteMarks): Promise<void> {
    if (this.lastRead.size === 0 || !this.anyMarked(addDays(lo, -TOP_LISTS_WINDOW_DAYS), hi)) return;
    const pairs = (await this.file.rows(`SELECT DISTINCT org_id, CAST(start_date AS VARCHAR) AS d FROM ${source}`)).map((r) => ({
      org: String(r.org_id),
      day: String(r.d),
    }));
    for (const l of Object.values(TOP_LISTS)) {
      const marked = marks.get(l)?.pairs;
      const seen = (p: { org: string; day: string }) => marked?.has(`${p.day}\0${p.org}`) === true || this.lookedAt.has(`${l.table}\0${p.org}\0${p.day}`);
      const open = pairs.filter((p) => this.watched(l, p.org) && !seen(p));
      if (open.length === 0) continue;
      const orgs = [...new Set(open.map((p) => sqlString(p.org)))];
      const last = new Map(
        (await this.file.rows(`SELECT org_id, CAST(max(start_date) AS VARCHAR) AS d FROM ${l.marks} WHERE org_id IN (${orgs.join(', ')}) GROUP BY org_id`)).map(
          (r) => [String(r.org_id), String(r.d)],
        ),
      );
      // Start times are the client's: a batch can name any day, and each is looked at once.
      if (this.lookedAt.size > 100_000) this.lookedAt.clear();
      for (const p of open) {
        this.lookedAt.add(`${l.table}\0${p.org}\0${p.day}`);
        const m = last.get(p.org);
        if (m !== undefined && m < p.day && addDays(m, TOP_LISTS_WINDOW_DAYS) >= p.day) this.noteDue(l, p.org, p.day, 'rebuild');
      }
    }
  }

  /**
   * Brings the days made due by the last write up to date, each in its own transaction (the caller holds the writer,
   * after the write's transaction): new days built, busy ones advanced. A day a later write changed again is left to
   * whatever finds it then.
   */
  async refreshDue(): Promise<void> {
    const due = [...this.due.values()];
    this.due.clear();
    for (const d of due)
      try {
        await this.refreshOne(d);
      } catch (e) {
        // A read advanced the day beside the writer at the same moment (see advanceBeside): it is current.
        if (!isConflict(e)) throw e;
      }
  }

  private async refreshOne(d: { list: TopList; org: string; day: string; kind: 'rebuild' | 'advance' }): Promise<void> {
    const org = sqlString(d.org);
    const where = `org_id = ${org} AND start_date = ${dateLiteral(d.day)}`;
    const [state] = await this.file.rows(stateSql(d.list, where));
    const marked = Number(state?.marked ?? 0) > 0;
    if (d.kind === 'rebuild' && !marked) {
      this.noteMark(d.day, d.org);
      await this.file.transaction(async () => {
        for (const sql of rebuildTopListSql(d.list, org, [d.day], this.perDay)) await this.file.run(sql);
      });
    } else if (d.kind === 'advance' && marked && Number(state?.touched ?? 0) > 0) await this.advanceDay(d.list, org, d.day);
  }

  /** Whether the org's list was read within WATCHED_MS: the writer then keeps its days current itself. */
  private watched(list: TopList, org: string): boolean {
    return this.readWithin(list, org, WATCHED_MS);
  }

  /** Whether the org's list was read within READING_MS: the writer then advances every day it touches. */
  private reading(list: TopList, org: string): boolean {
    return this.readWithin(list, org, READING_MS);
  }

  private readWithin(list: TopList, org: string, ms: number): boolean {
    const at = this.lastRead.get(`${list.table}\0${org}`);
    return at !== undefined && this.now() - at <= ms;
  }

  private noteDue(list: TopList, org: string, day: string, kind: 'rebuild' | 'advance'): void {
    this.due.set(`${list.table}\0${org}\0${day}`, { list, org, day, kind });
  }

  /** Whether any day from `lo` to `hi` may hold a mark: the marked days, not the range's (a batch can span centuries: start times are the client's). */
  private anyMarked(lo: string, hi: string): boolean {
    for (const day of this.markedDays.keys()) if (day >= lo && day <= hi) return true;
    return false;
  }

  /** Notes a mark before it is written, so a write in its day finds it. */
  private noteMark(day: string, orgId: string): void {
    const orgs = this.markedDays.get(day);
    if (orgs === undefined) this.markedDays.set(day, new Set([orgId]));
    else orgs.add(orgId);
  }

  /**
   * Brings the org's days of a top list from `fromDay` to `toDay` up to
   * date: unmarked days rebuilt, a chunk of days per transaction, and marked
   * days with touches advanced, a day per transaction (inserts go on
   * between them). Days with no rows at all, outside the org's first and
   * last day, are only marked.
   */
  private async refresh(name: TopListName, orgId: string, fromDay: string, toDay: string): Promise<void> {
    const list = TOP_LISTS[name];
    const org = sqlString(orgId);
    const range = `org_id = ${org} AND start_date >= ${dateLiteral(fromDay)} AND start_date < ${dateLiteral(toDay)}`;
    const missing = async () => {
      const marked = await this.file.rows(`SELECT CAST(start_date AS VARCHAR) AS d FROM ${list.marks} WHERE ${range}`);
      return unmarkedDays(fromDay, toDay, new Set(marked.map((r) => String(r.d))));
    };
    // A read that finds its days current takes nothing from the writer (the reader connection: the writer may be mid-transaction).
    const [current] = await this.file.query(stateSql(list, range));
    const days = daysBetween(fromDay, toDay);
    const marked = days === Number(current?.marked ?? 0);
    if (marked && Number(current?.touched ?? 0) === 0) return;
    // Touched days are advanced beside the writer: the read does not wait for an insert in progress.
    if (marked && (await this.advanceBeside(list, org, range, days))) return;
    for (;;) {
      const done = await this.file.exclusive(async () => {
        await this.file.checkFile();
        let days = await missing();
        if (days.length === 0) return this.advance(list, org, range);
        if (days.length > 2 * TOP_LISTS_CHUNK_DAYS) {
          const [b] = await this.file.rows(
            `SELECT CAST(min(start_date) AS VARCHAR) AS lo, CAST(max(start_date) AS VARCHAR) AS hi FROM ${list.source} WHERE ${range}`,
          );
          const [lo, hi] = [String(b?.lo ?? '9999-12-31'), String(b?.hi ?? '0000-01-01')];
          const empty = days.filter((day) => day < lo || day > hi);
          for (const day of empty) this.noteMark(day, orgId);
          if (empty.length > 0)
            await this.file.run(
              `INSERT INTO ${list.marks} (org_id, start_date, group_count) SELECT ${org}, d, 0 ` +
                `FROM (VALUES ${empty.map((day) => `(${dateLiteral(day)})`).join(', ')}) v(d)`,
            );
          days = days.filter((day) => day >= lo && day <= hi);
        }
        const chunk = days.slice(0, TOP_LISTS_CHUNK_DAYS);
        for (const day of chunk) this.noteMark(day, orgId);
        await this.file.transaction(async () => {
          for (const sql of rebuildTopListSql(list, org, chunk, this.perDay)) await this.file.run(sql);
        });
        return false;
      });
      if (done) return;
    }
  }

  /**
   * Advances the touched days of `range` (every one marked) on a connection of its own, each in a transaction, beside
   * the writer: the advance deletes the day's list rows and touches and updates its mark, so a write that changes them
   * meanwhile (the writer's own advance, an unmark, an erasure, a reprice) conflicts with it, and the later of the two
   * is rolled back. False when this one was (the caller then goes through the writer), when the touched days are
   * more than a chunk, or when a write unmarked one of the range's `days` meanwhile (the writer then rebuilds it).
   */
  private async advanceBeside(list: TopList, org: string, range: string, days: number): Promise<boolean> {
    const conn = await this.file.connect();
    const on: Statements = { run: (sql) => this.file.runOn(conn, sql), rows: (sql) => this.file.rowsOn(conn, sql) };
    try {
      const touched = (await on.rows(touchedDaysSql(list, range))).map((r) => String(r.d));
      if (touched.length > TOP_LISTS_CHUNK_DAYS) return false;
      for (const day of touched) {
        await on.run('BEGIN TRANSACTION');
        try {
          await this.advanceDayOn(on, list, org, day);
          await on.run('COMMIT');
        } catch {
          await on.run('ROLLBACK').catch(() => undefined);
          return false;
        }
      }
      const [m] = await on.rows(`SELECT count(*) AS n FROM ${list.marks} WHERE ${range}`);
      return Number(m?.n ?? 0) === days;
    } finally {
      conn.closeSync();
    }
  }

  /** Advances up to a chunk of the range's touched days (every one marked: a touch needs a mark, an unmark drops touches); true when none is left. */
  private async advance(list: TopList, org: string, range: string): Promise<boolean> {
    const touched = (await this.file.rows(touchedDaysSql(list, range))).map((r) => String(r.d));
    for (const day of touched.slice(0, TOP_LISTS_CHUNK_DAYS)) await this.advanceDay(list, org, day);
    return touched.length <= TOP_LISTS_CHUNK_DAYS;
  }

  /** Advances one marked day of one org (`org`: a SQL string literal) from its list and touches, in one transaction on the writer. */
  private async advanceDay(list: TopList, org: string, day: string): Promise<void> {
    await this.file.transaction(() => this.advanceDayOn(this.file, list, org, day));
  }

  /** The statements of an advance of one day, run `on` the writer or beside it, inside the caller's transaction. */
  private async advanceDayOn(on: Statements, list: TopList, org: string, day: string): Promise<void> {
    if (list.touchKind === 'rows') {
      for (const s of advanceFromTouchesSql(list, org, day, this.perDay)) await on.run(s);
      return;
    }
    const a = advanceFromDeltasSql(list, org, day, this.perDay);
    for (const s of a.prepare) await on.run(s);
    const [looks] = await on.rows(a.looks);
    await on.run(a.lookup(Number(looks?.n ?? 0) > 0));
    for (const s of a.finish) await on.run(s);
  }
}
