/**
 * Per-day top lists, the rule both span stores keep (DuckDB:
 * duckdb-top-lists.ts, ClickHouse: clickhouse-top-lists.ts): for the
 * groupings with about as many groups as spans (traces, sessions), each
 * day's `perDay` costliest groups and every group seen on more than one day,
 * so that a ranking of up to `perDay` groups over any range reads a few rows
 * a day instead of every group of every day.
 */
import { checkedDay, eachDay } from '@trace-ingest/shared/dates';
import type { TopListName, TopLists } from './span-store.js';

export type { TopListName };

/** One list: the rollup it is cut from, the group it ranks, its table, its marks and (DuckDB) the groups written since a mark. */
export interface TopList {
  source: string;
  group: string;
  table: string;
  marks: string;
  touches: string;
  /** Columns of the source kept beside the measures (each the min of the day's rows): a trace's name and customer candidates. */
  extras: readonly string[];
  /**
   * What a touch (DuckDB) holds beside whether the write brought the group's first spans of that day:
   * `rows`, the group's whole row of the day as the write left it (traces: the write reads its traces'
   * stored rows anyway); `deltas`, what the write added to each measure (sessions: a write would have to
   * read the day's rollup rows to know more). Either way a read advances the day from the list and its
   * touches, reading the day's rollup rows of a few groups at most.
   */
  touchKind: 'rows' | 'deltas';
}

export const TOP_LISTS: Readonly<Record<TopListName, TopList>> = {
  trace: {
    source: 'traces',
    group: 'trace_id',
    table: 'trace_tops',
    marks: 'trace_top_days',
    touches: 'trace_top_touches',
    extras: ['name_c', 'customer_c'],
    touchKind: 'rows',
  },
  session: {
    source: 'sessions_daily',
    group: 'session_id',
    table: 'session_tops',
    marks: 'session_top_days',
    touches: 'session_top_touches',
    extras: [],
    touchKind: 'deltas',
  },
};

/** How many groups a day's list keeps: rankings of up to this many groups read the lists. */
export const TOP_LISTS_PER_DAY = 1000;
/**
 * Rows of one group on days at most this far apart are found to be one
 * group when a day's list is built. A trace or session with a longer pause
 * between the days of its spans is ranked by the part of its cost within
 * each stretch.
 */
export const TOP_LISTS_WINDOW_DAYS = 7;
/** Days rebuilt per transaction: bounds what one rebuild holds in memory. */
export const TOP_LISTS_CHUNK_DAYS = 16;

/** A DATE literal from a day's text. */
export function dateLiteral(day: string): string {
  return `DATE '${checkedDay(day)}'`;
}

/** The days from `from` up to `to` (exclusive) that `marked` lacks, in order. */
export function unmarkedDays(from: string, to: string, marked: ReadonlySet<string>): string[] {
  return eachDay(from, to).filter((day) => !marked.has(day));
}

/**
 * The reads of one request (the console's traces page: its ranking, its
 * count and its labels) ask once among them whether each day of a list is
 * ready (on DuckDB, which builds the days it finds out of date, each once),
 * so they read the same lists or all read the derived rows.
 */
export class RefreshScope {
  /** Per list and org, the ranges of days asked for (or being asked for) in this scope: disjoint, in the order made. */
  private readonly ranges = new Map<string, { from: string; to: string; ready: Promise<boolean> }[]>();

  /** Whether every day of the range is ready, asking the lists only for the parts this scope has not asked for. */
  async refresh(lists: Pick<TopLists, 'ready'>, name: TopListName, orgId: string, fromDay: string, toDay: string): Promise<boolean> {
    checkedDay(fromDay);
    checkedDay(toDay);
    const key = `${name}\0${orgId}`;
    const known = this.ranges.get(key) ?? [];
    this.ranges.set(key, known);
    const waits = new Set<Promise<boolean>>();
    const gaps: [string, string][] = [];
    // Day texts (YYYY-MM-DD) order as their days do.
    let at = fromDay;
    for (const r of [...known].sort((a, b) => (a.from < b.from ? -1 : 1))) {
      if (r.to <= at || r.from >= toDay) continue;
      if (r.from > at) gaps.push([at, r.from]);
      waits.add(r.ready);
      at = r.to;
    }
    if (at < toDay) gaps.push([at, toDay]);
    for (const [from, to] of gaps) {
      const ready = lists.ready(name, orgId, from, to);
      known.push({ from, to, ready });
      waits.add(ready);
    }
    return (await Promise.all(waits)).every(Boolean);
  }
}
