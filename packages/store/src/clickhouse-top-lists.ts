/**
 * The per-day top lists of top-lists.ts on ClickHouse (migrations 0006, 0009),
 * built by the derivation pass (clickhouse-derive.ts) right after it derives a
 * day; reads build nothing. A day's list is current when its latest mark names
 * the day's current derivation (`derived_marks`); a ranking over a day whose
 * list is not current reads the derived rows instead. A build never deletes:
 * its rows carry a build number and readers take each day's latest build. A
 * build that finds a group on several days (`multi`) marks the neighbouring
 * days' lists out of date, so the same pass builds them again.
 */
import { MEASURES } from '@trace-ingest/shared/rollups';
import { bindParams, costDescending } from './clickhouse-sql.js';
import type { QueryRow, SqlPart, TopListName, TopLists } from './span-store.js';
import { addDays, checkedDay } from '@trace-ingest/shared/dates';
import { TOP_LISTS, TOP_LISTS_CHUNK_DAYS, TOP_LISTS_PER_DAY, TOP_LISTS_WINDOW_DAYS, type TopList } from './top-lists.js';

const MARKS = 'top_list_marks';
/** The derivation marks of clickhouse-derive.ts: the current derivation of each (org, day). */
const DERIVED = 'derived_marks';
/** Builds of a pass after its first, for days a build found lacking a group of several days (left over: built next pass). */
const MAX_PASSES = 8;

const day = (d: string): string => `toDate('${checkedDay(d)}')`;
const dayList = (days: readonly string[]): string => days.map(day).join(', ');

/** How a list's source is aggregated: `traces` holds aggregate states, `sessions_daily` plain sums. */
const agg = (list: TopList, fn: 'sum' | 'min', column: string): string => (list.source === 'traces' ? `${fn}Merge(${column})` : `${fn}(${column})`);

/** The columns of a list table after its keys, in order. */
const VALUE_COLUMNS = (list: TopList): string[] => [...MEASURES.map((m) => m.name), ...list.extras];

/** One row per day and group of the org's source rows meeting `where`, with every measure and extra; groups with no span left out. */
function dayRowsSql(list: TopList, org: string, where: string, prewhere?: string): string {
  const values = [...MEASURES.map((m) => `${agg(list, 'sum', m.name)} AS ${m.name}`), ...list.extras.map((e) => `${agg(list, 'min', e)} AS ${e}`)];
  // HAVING on the alias: ClickHouse reads `spans` there as the aggregate named so.
  const keys = `start_date, ${list.group}`;
  // A filter, not PREWHERE: the source is a view over the derived rows.
  const pre = prewhere === undefined ? '' : ` AND ${prewhere}`;
  return `SELECT ${keys}, ${values.join(', ')} FROM ${list.source} WHERE org_id = ${org} AND ${where}${pre} GROUP BY ${keys} HAVING spans <> 0`;
}

/** The (day, group) keys of the org's source rows meeting `where` that have spans. */
function keysSql(list: TopList, org: string, where: string): string {
  const keys = `start_date, ${list.group}`;
  return `SELECT ${keys} FROM ${list.source} WHERE org_id = ${org} AND ${where} GROUP BY ${keys} HAVING ${agg(list, 'sum', 'spans')} <> 0`;
}

/** A list's rows of the latest builds of an org's days meeting `days` (a condition on a day column, given its name). */
function currentSql(name: TopListName, org: string, days: (column: string) => string): string {
  const latest = `SELECT list_day, max(build) FROM ${MARKS} WHERE org_id = ${org} AND list = '${name}' AND ${days('list_day')} GROUP BY list_day`;
  return `org_id = ${org} AND ${days('start_date')} AND (start_date, build) IN (${latest})`;
}

/**
 * The statements that build the lists of `days` (sorted, at most
 * TOP_LISTS_CHUNK_DAYS) of one org (`org`: a bound string literal) as of
 * build `build` (a number above every earlier build's): `rows`, then
 * `neighbours` (the query for the days around them whose lists lack a group
 * these days found of several days), then `mark` (each day's mark, naming the
 * derivation of the day the rows were built from).
 */
export function buildTopListSql(
  list: TopList,
  name: TopListName,
  org: string,
  days: readonly string[],
  next: { build: number },
  perDay: number,
): { rows: string; mark: string; neighbours: string } | undefined {
  const first = days[0];
  const last = days[days.length - 1];
  if (first === undefined || last === undefined) return undefined;
  const g = list.group;
  const inDays = `start_date IN (${dayList(days)})`;
  const build = `toUInt64(${Math.trunc(next.build)})`;
  const near = (c: string) => `${c} >= ${day(addDays(first, -TOP_LISTS_WINDOW_DAYS))} AND ${c} <= ${day(addDays(last, TOP_LISTS_WINDOW_DAYS))}`;
  const around = (c: string) => `${near(c)} AND ${c} NOT IN (${dayList(days)})`;
  const built = `SELECT ${g} FROM ${list.table} WHERE org_id = ${org} AND ${inDays} AND build = ${build} AND multi = 1`;
  // The groups of these days that have rows on another day nearby, found on their keys alone: a group whose
  // rows there were erased (its spans sum to 0) is found too, and only keeps its own row in the list.
  const ofDays = `SELECT ${g} FROM ${list.source} WHERE org_id = ${org} AND ${inDays}`;
  const multi =
    `SELECT ${g} FROM ${list.source} WHERE ${g} IN (${ofDays}) AND org_id = ${org} AND ${around('start_date')}` +
    (days.length > 1 ? ` UNION ALL ${ofDays} GROUP BY ${g} HAVING uniqExact(start_date) > 1` : '');
  const columns = ['org_id', 'start_date', 'build', g, 'multi', ...VALUE_COLUMNS(list)].join(', ');
  const values = VALUE_COLUMNS(list).join(', ');
  // Each day's first perDay groups of one day by cost (ties by group), and every group of several days (each its own
  // LIMIT BY key).
  const ranked = (cost: string) =>
    `ORDER BY start_date, ${costDescending(cost)}, ${g} LIMIT ${Math.max(0, Math.trunc(perDay))} BY start_date, is_multi, if(is_multi, ${g}, '')`;
  const kept =
    `SELECT ${g} FROM (SELECT start_date, ${g}, ${agg(list, 'sum', 'total_cost')} AS c, ${g} IN (${multi}) AS is_multi FROM ${list.source} ` +
    `WHERE org_id = ${org} AND ${inDays} GROUP BY start_date, ${g} HAVING ${agg(list, 'sum', 'spans')} <> 0) ${ranked('c')}`;
  // Grouping every measure of a day's groups is most of a build: one day (steady ingest) finds the groups it keeps on their
  // cost first and groups only theirs whole, while a chunk of days (a first build) groups its rows once, where two steps cost more.
  const own =
    `INSERT INTO ${list.table} (${columns}) SELECT ${org}, start_date, ${build}, ${g}, ${g} IN (${multi}) AS is_multi, ${values} ` +
    (days.length === 1 ? `FROM (${dayRowsSql(list, org, inDays, `${g} IN (${kept})`)})` : `FROM (${dayRowsSql(list, org, inDays)}) ${ranked('total_cost')}`);
  const derivations = `SELECT start_date AS list_day, max(derivation) AS derivation FROM ${DERIVED} WHERE org_id = ${org} AND ${inDays} GROUP BY start_date`;
  return {
    rows: own,
    mark:
      `INSERT INTO ${MARKS} (org_id, list, list_day, build, derivation, groups) SELECT ${org}, '${name}', list_day, ${build}, derivation, groups ` +
      `FROM (SELECT list_day, groups FROM (SELECT arrayJoin([${dayList(days)}]) AS list_day) d ANY LEFT JOIN ` +
      `(SELECT start_date AS list_day, count() AS groups FROM (${keysSql(list, org, inDays)}) GROUP BY start_date) c USING list_day) dc ` +
      `ANY LEFT JOIN (${derivations}) v USING list_day`,
    neighbours:
      // The groups this build found of several days, from its own rows: cheaper than finding them again.
      `SELECT DISTINCT toString(start_date) AS day FROM (${keysSql(list, org, `${around('start_date')} AND ${g} IN (${built})`)}) ` +
      `WHERE (start_date, ${g}) NOT IN (SELECT start_date, ${g} FROM ${list.table} WHERE ${currentSql(name, org, around)} AND multi = 1)`,
  };
}

/** A list's rows of the latest build of each of an org's days (TopLists.rows). */
export function listRowsSql(list: TopList, name: TopListName, orgId: string, fromDay: string, toDay: string, cond?: SqlPart): SqlPart {
  const current = currentSql(name, bindParams('?', [orgId]), (c) => `${c} >= ${day(fromDay)} AND ${c} < ${day(toDay)}`);
  return {
    sql: `(SELECT *, toUInt64(0) AS day_rank FROM ${list.table} WHERE ${current}${cond === undefined ? '' : ` AND ${cond.sql}`}) l`,
    params: [...(cond?.params ?? [])],
  };
}

/** The group counts of the latest builds of an org's days, summed (TopLists.groupCount). */
export function groupCountSql(name: TopListName, orgId: string, fromDay: string, toDay: string): SqlPart {
  return {
    sql:
      `(SELECT sum(n) FROM (SELECT argMax(groups, build) AS n FROM ${MARKS} WHERE org_id = ? AND list = '${name}' ` +
      `AND list_day >= ${day(fromDay)} AND list_day < ${day(toDay)} GROUP BY list_day))`,
    params: [orgId],
  };
}

/** What the lists need of their store's connection. */
export interface TopListsServer {
  query(sql: string): Promise<QueryRow[]>;
  command(sql: string): Promise<void>;
  /** Runs a mutation (`ALTER TABLE table action`) and waits for it. */
  mutate(table: string, action: string): Promise<void>;
}

/**
 * The top lists of a ClickHouse store: read by rankings, built only by the
 * derivation pass (build), which holds the derivation lease.
 */
export class ClickHouseTopLists implements TopLists {
  private lastBuild = 0;

  constructor(
    private readonly server: TopListsServer,
    readonly perDay: number = TOP_LISTS_PER_DAY,
  ) {}

  rows(name: TopListName, orgId: string, fromDay: string, toDay: string, cond?: SqlPart): SqlPart {
    return listRowsSql(TOP_LISTS[name], name, orgId, fromDay, toDay, cond);
  }

  groupCount(name: TopListName, orgId: string, fromDay: string, toDay: string): SqlPart {
    return groupCountSql(name, orgId, fromDay, toDay);
  }

  /** Whether every derived day of the range has its list built from its current derivation (a read). */
  async ready(name: TopListName, orgId: string, fromDay: string, toDay: string): Promise<boolean> {
    return (await this.outOfDate(name, orgId, fromDay, toDay)).length === 0;
  }

  /** The derived (org, day)s, of one org and range when given, whose latest list mark does not name their current derivation. */
  async outOfDate(name: TopListName, orgId?: string, fromDay?: string, toDay?: string): Promise<{ org: string; day: string }[]> {
    const where = (c: string) =>
      [
        ...(orgId === undefined ? [] : [bindParams('org_id = ?', [orgId])]),
        ...(fromDay === undefined ? [] : [`${c} >= ${day(fromDay)}`]),
        ...(toDay === undefined ? [] : [`${c} < ${day(toDay)}`]),
      ]
        .map((w) => ` AND ${w}`)
        .join('');
    const rows = await this.server.query(
      `SELECT org_id AS org, toString(start_date) AS day FROM (SELECT org_id, start_date, max(derivation) AS v FROM ${DERIVED} ` +
        `WHERE 1 = 1${where('start_date')} GROUP BY org_id, start_date) d ANY LEFT JOIN ` +
        `(SELECT org_id, list_day AS start_date, argMax(derivation, build) AS lv FROM ${MARKS} WHERE list = '${name}'${where('list_day')} ` +
        'GROUP BY org_id, list_day) l USING (org_id, start_date) WHERE lv <> v ORDER BY org, day',
    );
    return rows.map((r) => ({ org: String(r.org), day: String(r.day) }));
  }

  /**
   * Builds the lists of every derived day whose list is out of date (the
   * derivation pass, under its lease, right after it derived): the number
   * of (list, org, day)s built.
   */
  async build(): Promise<number> {
    let built = 0;
    const [max] = await this.server.query(`SELECT max(build) AS b FROM ${MARKS}`);
    // Numbers taken under the lease, one above the latest: no clock orders two builds.
    this.lastBuild = Math.max(this.lastBuild, Number(max?.b ?? 0));
    for (const name of Object.keys(TOP_LISTS) as TopListName[]) {
      const byOrg = new Map<string, string[]>();
      for (const { org, day: d } of await this.outOfDate(name)) byOrg.set(org, [...(byOrg.get(org) ?? []), d]);
      for (const [org, days] of byOrg) built += await this.buildDays(name, org, days);
    }
    return built;
  }

  private async buildDays(name: TopListName, orgId: string, first: readonly string[]): Promise<number> {
    const org = bindParams('?', [orgId]);
    let built = 0;
    let days = [...first].sort();
    // A build may find days around it whose lists lack a group of several days: it marks them out of date
    // before its own mark, and they are built next (each pass flags groups a list lacked, so this ends).
    for (let pass = 0; days.length > 0 && pass < MAX_PASSES; pass++) {
      const next = new Set<string>();
      for (let i = 0; i < days.length; i += TOP_LISTS_CHUNK_DAYS) {
        const chunk = days.slice(i, i + TOP_LISTS_CHUNK_DAYS);
        const sql = buildTopListSql(TOP_LISTS[name], name, org, chunk, { build: ++this.lastBuild }, this.perDay);
        if (sql === undefined) continue;
        await this.server.command(sql.rows);
        // The days this pass builds next find those groups themselves.
        const later = new Set(days.slice(i + TOP_LISTS_CHUNK_DAYS));
        const lacking = (await this.server.query(sql.neighbours)).map((r) => String(r.day)).filter((d) => !later.has(d));
        await this.invalidate(name, orgId, lacking);
        await this.server.command(sql.mark);
        built += chunk.length;
        for (const d of lacking) next.add(d);
      }
      days = [...next].sort();
    }
    return built;
  }

  /** Marks the lists of these days out of date (a mark naming no derivation): readers leave them, the next build takes them. */
  private async invalidate(name: TopListName, orgId: string, days: readonly string[]): Promise<void> {
    if (days.length === 0) return;
    await this.server.command(
      bindParams(
        `INSERT INTO ${MARKS} (org_id, list, list_day, build, derivation, groups) SELECT ?, '${name}', arrayJoin([${dayList(days)}]), ` +
          `toUInt64(${++this.lastBuild}), toUInt64(0), toUInt64(0)`,
        [orgId],
      ),
    );
  }

  /**
   * After an erasure's or a retention's mutations: deletes the lists' rows
   * that match `where` (over a list's columns; every build's, the replaced
   * ones too), and marks the org's built days before `before` (all, when
   * undefined) out of date, so that builds that ran meanwhile are built
   * again by the next derivation pass.
   */
  async forget(orgId: string, where: Partial<Record<TopListName, readonly string[]>>, before?: string): Promise<void> {
    for (const name of Object.keys(where) as TopListName[])
      for (const w of where[name] ?? []) await this.server.mutate(TOP_LISTS[name].table, `DELETE WHERE ${bindParams('org_id = ?', [orgId])} AND (${w})`);
    const until = before === undefined ? '' : ` AND list_day < ${day(before)}`;
    const [max] = await this.server.query(`SELECT max(build) AS b FROM ${MARKS}`);
    // Above every build so far, whichever process made it.
    await this.server.command(
      bindParams(
        `INSERT INTO ${MARKS} (org_id, list, list_day, build, derivation, groups) ` +
          `SELECT org_id, list, list_day, toUInt64(${Number(max?.b ?? 0) + 1}), toUInt64(0), toUInt64(0) FROM ${MARKS} ` +
          `WHERE org_id = ?${until} GROUP BY org_id, list, list_day`,
        [orgId],
      ),
    );
  }
}
