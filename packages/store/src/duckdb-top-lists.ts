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
 * fields): a read then needs the day's list and touches only, not the
 * day's rollup rows.
 */
import { addDays, daysBetween, isDayText } from '@trace-ingest/shared/dates';
import { MEASURES } from '@trace-ingest/shared/rollups';
import { sqlString, type DuckDbFile } from './duckdb-file.js';
import type { SqlPart, TopLists } from './span-store.js';
import { dateLiteral, TOP_LISTS, TOP_LISTS_CHUNK_DAYS, TOP_LISTS_WINDOW_DAYS, unmarkedDays, type TopList, type TopListName } from './top-lists.js';

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
  const n = Math.max(0, Math.trunc(perDay));
  return [
    // Keys and cost alone: grouping every measure of every group of a day was most of a rebuild.
    `CREATE OR REPLACE TEMP TABLE ti_top_day AS SELECT org_id, start_date, ${g}, sum(total_cost) AS total_cost FROM ${list.source} ` +
      `WHERE ${ofOrg} AND ${inDays} GROUP BY org_id, start_date, ${g} HAVING sum(spans) <> 0`,
    // The neighbouring days' rows of the groups seen on these days: those groups have more than one day.
    `CREATE OR REPLACE TEMP TABLE ti_top_near AS ${dayRowsSql(list, `${ofOrg} AND ${aroundSql(days)} AND ${g} IN (SELECT ${g} FROM ti_top_day)`)}`,
    `CREATE OR REPLACE TEMP TABLE ti_top_multi AS SELECT ${g} FROM ti_top_near UNION SELECT ${g} FROM ti_top_day GROUP BY ${g} HAVING count(*) > 1`,
    `CREATE OR REPLACE TEMP TABLE ti_top_kept AS SELECT start_date, ${g}, ` +
      `row_number() OVER (PARTITION BY start_date ORDER BY total_cost DESC, ${g}) AS day_rank, ${g} IN (SELECT ${g} FROM ti_top_multi) AS multi ` +
      `FROM ti_top_day QUALIFY day_rank <= ${n} OR multi`,
    `DELETE FROM ${list.table} WHERE ${ofOrg} AND (${inDays} OR (${near} AND ${g} IN (SELECT ${g} FROM ti_top_multi)))`,
    // Every measure, of the groups kept only.
    `INSERT INTO ${list.table} SELECT d.*, k.day_rank, k.multi ` +
      `FROM (${dayRowsSql(list, `${ofOrg} AND ${inDays} AND ${g} IN (SELECT ${g} FROM ti_top_kept)`)}) d ` +
      `JOIN ti_top_kept k ON k.start_date = d.start_date AND k.${g} = d.${g}`,
    `INSERT INTO ${list.table} SELECT *, NULL, true FROM ti_top_near`,
    `DELETE FROM ${list.marks} WHERE ${ofOrg} AND ${inDays}`,
    `DELETE FROM ${list.touches} WHERE ${ofOrg} AND ${inDays}`,
    `INSERT INTO ${list.marks} SELECT ${org}, v.d, coalesce(c.n, 0) FROM (VALUES ${days.map((d) => `(${dateLiteral(d)})`).join(', ')}) v(d) ` +
      'LEFT JOIN (SELECT start_date, count(*) AS n FROM ti_top_day GROUP BY start_date) c ON c.start_date = v.d',
    'DROP TABLE ti_top_day',
    'DROP TABLE ti_top_near',
    'DROP TABLE ti_top_multi',
    'DROP TABLE ti_top_kept',
  ];
}

/**
 * The statements, run in one transaction, that bring the list of `day` (a
 * marked day with touches) of one org up to date. Costs only grew since the
 * mark, so a group that was neither listed nor touched still ranks below the
 * listed groups that ranked above it: the day's first N, and every rank up to
 * N, are those among the listed and touched groups, whose rows of the day
 * are read alone. A touched group not known to span days yet is looked up on
 * the days around (as a rebuild would), and one seen there joins the
 * multi-day rows. A touched group is new to the day when every span it has
 * there came after the mark, which updates the day's group count.
 */
export function advanceTopListSql(list: TopList, org: string, day: string, perDay: number): string[] {
  const g = list.group;
  const ofOrg = `org_id = ${org}`;
  const onDay = `start_date = ${dateLiteral(day)}`;
  const near = `start_date BETWEEN ${dateLiteral(day)} - ${TOP_LISTS_WINDOW_DAYS} AND ${dateLiteral(day)} + ${TOP_LISTS_WINDOW_DAYS}`;
  const around = aroundSql([day]);
  const n = Math.max(0, Math.trunc(perDay));
  return [
    `CREATE OR REPLACE TEMP TABLE ti_adv_touched AS SELECT ${g}, sum(spans) AS added FROM ${list.touches} WHERE ${ofOrg} AND ${onDay} GROUP BY ${g}`,
    `CREATE OR REPLACE TEMP TABLE ti_adv_multi AS SELECT DISTINCT ${g} FROM ${list.table} WHERE ${ofOrg} AND ${onDay} AND multi`,
    // Keys, cost and spans alone, as a rebuild does: every measure is summed for the groups kept only.
    `CREATE OR REPLACE TEMP TABLE ti_adv_cost AS SELECT ${g}, sum(total_cost) AS total_cost, sum(spans) AS spans FROM ${list.source} ` +
      `WHERE ${ofOrg} AND ${onDay} AND ${g} IN (SELECT ${g} FROM ti_adv_touched UNION SELECT ${g} FROM ${list.table} WHERE ${ofOrg} AND ${onDay}) ` +
      `GROUP BY ${g} HAVING sum(spans) <> 0`,
    `CREATE OR REPLACE TEMP TABLE ti_adv_near AS ${dayRowsSql(
      list,
      `${ofOrg} AND ${around} AND ${g} IN (SELECT ${g} FROM ti_adv_touched EXCEPT SELECT ${g} FROM ti_adv_multi)`,
    )}`,
    `INSERT INTO ti_adv_multi SELECT DISTINCT ${g} FROM ti_adv_near`,
    `CREATE OR REPLACE TEMP TABLE ti_adv_kept AS SELECT ${g}, row_number() OVER (ORDER BY total_cost DESC, ${g}) AS day_rank, ` +
      `${g} IN (SELECT ${g} FROM ti_adv_multi) AS multi FROM ti_adv_cost QUALIFY day_rank <= ${n} OR multi`,
    `DELETE FROM ${list.table} WHERE ${ofOrg} AND (${onDay} OR (${near} AND ${g} IN (SELECT ${g} FROM ti_adv_near)))`,
    `INSERT INTO ${list.table} SELECT d.*, k.day_rank, k.multi ` +
      `FROM (${dayRowsSql(list, `${ofOrg} AND ${onDay} AND ${g} IN (SELECT ${g} FROM ti_adv_kept)`)}) d JOIN ti_adv_kept k ON k.${g} = d.${g}`,
    `INSERT INTO ${list.table} SELECT *, NULL, true FROM ti_adv_near`,
    `UPDATE ${list.marks} SET group_count = group_count + ` +
      `(SELECT count(*) FROM ti_adv_cost c JOIN ti_adv_touched t ON t.${g} = c.${g} WHERE c.spans = t.added) WHERE ${ofOrg} AND ${onDay}`,
    `DELETE FROM ${list.touches} WHERE ${ofOrg} AND ${onDay}`,
    ...['ti_adv_touched', 'ti_adv_multi', 'ti_adv_cost', 'ti_adv_near', 'ti_adv_kept'].map((t) => `DROP TABLE ${t}`),
  ];
}

/**
 * The statements, run in one transaction, that bring the list of `day` (a
 * marked day with touches) of one org up to date from its list rows and
 * touches alone, for a list whose touches hold each group's whole row of the
 * day (`touchRows`): it costs what was written since the mark, not the day.
 * A touched group's row is its last touch's (rows only grow, so the one
 * with the most spans); the others keep their list rows. As in
 * advanceTopListSql, the day's first N are among those groups, touched
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
 * text) of `orgs` (SQL string literals): with the spans each adds, or, for a
 * list with `touchRows`, with the group's whole row of the day as the write
 * left it (what was stored of it, plus the write's) and whether the write
 * brought its first spans of that day. A touch of a day without a
 * mark of its org and list is harmless: that day is rebuilt when read, which
 * drops its touches.
 */
export function touchSql(from: TouchSources, l: TopList, days: readonly string[], orgs: readonly string[]): string | undefined {
  if (days.length === 0 || orgs.length === 0) return undefined;
  const where = (t: string) => `${t}start_date IN (${days.map(dateLiteral).join(', ')}) AND ${t}org_id IN (${orgs.join(', ')})`;
  const keys = `org_id, start_date, ${l.group}`;
  if (!l.touchRows) return `INSERT INTO ${l.touches} SELECT ${keys}, count(*) FROM ${from.spans} WHERE ${where('')} GROUP BY ${keys}`;
  const match = ['org_id', 'start_date', l.group].map((k) => `k.${k} = w.${k}`).join(' AND ');
  const row = [...MEASURES.map((m) => `coalesce(k.${m.name}, 0) + w.${m.name}`), ...l.extras.map((e) => `least(k.${e}, w.${e})`)];
  return (
    `INSERT INTO ${l.touches} SELECT w.org_id, w.start_date, w.${l.group}, ${row.join(', ')}, coalesce(k.spans, 0) = 0 ` +
    `FROM ${from.traceRows} w LEFT JOIN ${from.knownTraceRows} k ON ${match} WHERE ${where('w.')}`
  );
}

/**
 * A query of the days of `list` among `days` of `orgs` (marked) whose touches outgrew what a rebuild of the
 * day reads: more touches than a quarter of the day's groups, and than ten times its list (an advance reads
 * every touch, a rebuild every group, at about a third of the work per row). Rows: org_id, d.
 */
export function overTouchedSql(l: TopList, days: readonly string[], orgs: readonly string[], perDay: number): string {
  const where = `start_date IN (${days.map(dateLiteral).join(', ')}) AND org_id IN (${orgs.join(', ')})`;
  const floor = Math.max(1, Math.trunc(perDay)) * 10;
  return (
    `SELECT t.org_id, CAST(t.start_date AS VARCHAR) AS d FROM ` +
    `(SELECT org_id, start_date, count(*) AS n FROM ${l.touches} WHERE ${where} GROUP BY org_id, start_date) t ` +
    `JOIN ${l.marks} m ON m.org_id = t.org_id AND m.start_date = t.start_date WHERE t.n > greatest(${floor}, m.group_count // 4)`
  );
}

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

  constructor(
    private readonly file: DuckDbFile,
    readonly perDay: number,
  ) {}

  /**
   * Reads the file's marked days before any write, so the set holds every day a mark exists for: marks are written only by the
   * file's one writer (the DATA_DIR lock) and only after the set has their days.
   */
  async opened(): Promise<void> {
    for (const l of Object.values(TOP_LISTS))
      for (const r of await this.file.rows(`SELECT DISTINCT CAST(start_date AS VARCHAR) AS d, org_id FROM ${l.marks}`))
        this.noteMark(String(r.d), String(r.org_id));
  }

  /** Brings the range's days up to date first (rebuilt or advanced), so the lists are always ready. */
  async ready(list: TopListName, orgId: string, fromDay: string, toDay: string): Promise<boolean> {
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
   * New spans (from `lo` to `hi`) only add to their groups: notes those
   * groups on the marked days of each list (in the write's transaction),
   * which keeps the marks. Nothing when none of those days was marked.
   */
  async touch(from: TouchSources, lo: string, hi: string): Promise<void> {
    if (!this.anyMarked(lo, hi)) return;
    // The marks of the days that may hold one, as literal days and orgs: the batch is small and a join was most of a touch's cost.
    const candidates = [...this.markedDays.keys()].filter((day) => day >= lo && day <= hi);
    for (const l of Object.values(TOP_LISTS)) {
      const marked = await this.file.rows(
        `SELECT DISTINCT CAST(start_date AS VARCHAR) AS d, org_id FROM ${l.marks} WHERE start_date IN (${candidates.map(dateLiteral).join(', ')})`,
      );
      const days = [...new Set(marked.map((r) => String(r.d)))];
      const orgs = [...new Set(marked.map((r) => sqlString(String(r.org_id))))];
      const sql = touchSql(from, l, days, orgs);
      if (sql === undefined) continue;
      await this.file.run(sql);
      // A day read rarely while it fills is rebuilt when read, not advanced over its every write since.
      for (const r of await this.file.rows(overTouchedSql(l, days, orgs, this.perDay))) {
        const where = `org_id = ${sqlString(String(r.org_id))} AND start_date = ${dateLiteral(String(r.d))}`;
        for (const t of [l.marks, l.touches]) await this.file.run(`DELETE FROM ${t} WHERE ${where}`);
      }
    }
  }

  /**
   * Whether new spans from `lo` to `hi` are noted with their groups' whole rows (a list with
   * `touchRows` has a mark on one of those days): the write then keeps those rows (`knownTraceRows`).
   */
  async touchesWholeRows(lo: string, hi: string): Promise<boolean> {
    if (!this.anyMarked(lo, hi)) return false;
    const days = [...this.markedDays.keys()].filter((day) => day >= lo && day <= hi).map(dateLiteral);
    for (const l of Object.values(TOP_LISTS))
      if (l.touchRows && (await this.file.rows(`SELECT 1 AS x FROM ${l.marks} WHERE start_date IN (${days.join(', ')}) LIMIT 1`)).length > 0) return true;
    return false;
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
    const [current] = await this.file.query(
      `SELECT (SELECT count(*) FROM ${list.marks} WHERE ${range}) AS marked, (SELECT count(*) FROM ${list.touches} WHERE ${range}) AS touched`,
    );
    if (daysBetween(fromDay, toDay) === Number(current?.marked ?? 0) && Number(current?.touched ?? 0) === 0) return;
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
            await this.file.run(`INSERT INTO ${list.marks} SELECT ${org}, d, 0 FROM (VALUES ${empty.map((day) => `(${dateLiteral(day)})`).join(', ')}) v(d)`);
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

  /** Advances up to a chunk of the range's touched days (every one marked: a touch needs a mark, an unmark drops touches); true when none is left. */
  private async advance(list: TopList, org: string, range: string): Promise<boolean> {
    const touched = (await this.file.rows(`SELECT DISTINCT CAST(start_date AS VARCHAR) AS d FROM ${list.touches} WHERE ${range} ORDER BY d`)).map((r) =>
      String(r.d),
    );
    for (const day of touched.slice(0, TOP_LISTS_CHUNK_DAYS))
      await this.file.transaction(async () => {
        const sql = list.touchRows ? advanceFromTouchesSql(list, org, day, this.perDay) : advanceTopListSql(list, org, day, this.perDay);
        for (const s of sql) await this.file.run(s);
      });
    return touched.length <= TOP_LISTS_CHUNK_DAYS;
  }
}
