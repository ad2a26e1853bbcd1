/**
 * The DuckDB store's rollups as writes leave them: each write inserts
 * partial rows (a span's share, or a share taken back), and a fold sums a
 * key's partial rows into one row once enough were written.
 */
import { DAILY_ROLLUPS, dailyDeltaSql, DUCKDB_ROLLUP, MEASURES, TRACE_EXTRA, TRACE_FIELDS, TRACE_KEYS, traceDeltaSql } from '@trace-ingest/shared/rollups';
import type { DuckDbFile } from './duckdb-file.js';

/** Rollups whose keys a day grow with the day's traffic (a row per trace, per session): folded by what was written since the last fold. */
const GROWING_ROLLUPS: readonly string[] = ['traces', 'sessions_daily'];

export class RollupFolding {
  /** UTC days whose rollup rows were written since the last compaction. */
  private readonly touched = new Set<string>();
  /** Partial rollup rows written since the last compaction. */
  private deltaRows = 0;
  /** Per growing rollup, the first rowid not folded yet (set at open: rows already there are left as they are). */
  private readonly unfolded = new Map<string, number>();
  /** Days whose growing rollups were folded in parts (a key may have a row per part) since the last whole fold. */
  private readonly partDays = new Set<string>();

  constructor(
    private readonly file: DuckDbFile,
    private readonly compactRows: number,
  ) {}

  /** After the file is attached: the rows there now count as folded, since the positions noted for another file mean nothing in this one. */
  async opened(): Promise<void> {
    this.unfolded.clear();
    await this.markFolded();
  }

  /** Runs an insert into a rollup and counts its rows toward the next compaction. */
  async bump(sql: string): Promise<void> {
    this.deltaRows += await this.file.run(sql);
  }

  /** Takes the spans matching `where` back out of both rollups. */
  async takeBack(where: string): Promise<void> {
    for (const r of DAILY_ROLLUPS) await this.bump(`INSERT INTO ${r.table} ${dailyDeltaSql(DUCKDB_ROLLUP, 'spans', -1, where, r)}`);
    await this.bump(`INSERT INTO traces ${traceDeltaSql(DUCKDB_ROLLUP, 'spans', -1, where)}`);
  }

  /** Notes days whose rollup rows a write changed: the next fold covers them. */
  touch(days: Iterable<string>): void {
    for (const day of days) this.touched.add(day);
  }

  /**
   * Folds the partial rollup rows of the days written since the last
   * compaction into one row per key. Its cost is the rows of those days (live
   * traffic: today's), never the table's.
   */
  async compactIfDue(): Promise<void> {
    if (this.deltaRows < this.compactRows) return;
    await this.compactNow();
  }

  /**
   * Folds partial rollup rows into one per key. The narrow rollups (at most
   * customers x models keys a day) fold the touched days whole; `traces` and
   * `sessions_daily`, whose keys a day grow with the day's traffic, fold only
   * the rows written since their last fold (by rowid, which DuckDB reads by
   * row group), so a fold costs what was written since, not the day. `whole`
   * folds every day written since the last whole fold, in every rollup
   * (erasure, compactRollups).
   */
  async compactNow(whole = false): Promise<void> {
    const days = [...(whole ? new Set([...this.touched, ...this.partDays]) : this.touched)].sort();
    if (days.length === 0) return;
    const inDays = `start_date IN (${days.map((day) => `DATE '${day}'`).join(', ')})`;
    const sums = MEASURES.map((m) => `sum(${m.name}) AS ${m.name}`).join(', ');
    const tables = [
      ...DAILY_ROLLUPS.map((r) => ({ table: r.table, keys: r.keys, extra: '' })),
      {
        table: 'traces',
        keys: TRACE_KEYS,
        extra:
          `, ${TRACE_EXTRA.map((e) => `${e.agg}(${e.name}) AS ${e.name}`).join(', ')}, ` +
          TRACE_FIELDS.map((f) => `min(${f.candidate}) AS ${f.candidate}`).join(', '),
      },
    ];
    await this.file.transaction(async () => {
      for (const t of tables) {
        const since = whole ? undefined : this.unfolded.get(t.table);
        // A part of a key's rows may net no spans but some cost (a reprice's take-back and re-add): only a whole key's rows may go.
        const [rows, having] = since === undefined ? [inDays, ' HAVING sum(spans) <> 0'] : [`rowid >= ${since}`, ''];
        await this.file.run(
          `CREATE OR REPLACE TEMP TABLE ti_compact AS SELECT ${t.keys.join(', ')}, ${sums}${t.extra} FROM ${t.table} WHERE ${rows} ` +
            `GROUP BY ${t.keys.join(', ')}${having}`,
        );
        await this.file.run(`DELETE FROM ${t.table} WHERE ${rows}`);
        await this.file.run(`INSERT INTO ${t.table} SELECT * FROM ti_compact`);
      }
      await this.file.run('DROP TABLE ti_compact');
    });
    await this.markFolded();
    if (whole) this.partDays.clear();
    else for (const day of this.touched) this.partDays.add(day);
    this.touched.clear();
    this.deltaRows = 0;
  }

  /** Notes where the growing rollups' unfolded rows begin: after every row there now (appends take higher rowids). */
  private async markFolded(): Promise<void> {
    for (const table of GROWING_ROLLUPS) {
      const since = this.unfolded.get(table) ?? 0;
      const [r] = await this.file.rows(`SELECT max(rowid) AS m FROM ${table} WHERE rowid >= ${since}`);
      // A checkpoint's vacuum may renumber rows downwards: then the next fold starts from the table's end, which only leaves rows unfolded.
      const [all] = r?.m === null || r?.m === undefined ? await this.file.rows(`SELECT max(rowid) AS m FROM ${table}`) : [r];
      this.unfolded.set(table, all?.m === null || all?.m === undefined ? since : Number(all.m) + 1);
    }
  }
}
