/**
 * The DuckDB store's removals: retention, which deletes old rows and empties
 * old texts a window at a time, and erasure of a customer, trace or session.
 */
import { DAY_MS, utcDay as dayOf } from '@trace-ingest/shared/dates';
import {
  ERASE_COLUMN,
  rollupsNaming,
  TEXT_COLUMNS,
  type EraseCounts,
  type EraseTarget,
  type RetentionCut,
  type RetentionResult,
} from '@trace-ingest/shared/lifecycle';
import { sqlString, type DuckDbFile } from './duckdb-file.js';
import type { RollupFolding } from './duckdb-rollup-folding.js';
import type { DuckDbTopLists } from './duckdb-top-lists.js';
import { dateLiteral, TOP_LISTS } from './top-lists.js';

/** Rows one retention window aims at: a delete or update that size commits quickly enough to leave inserts waiting little. */
const EXPIRE_BATCH_ROWS = 50_000;

export class DuckDbLifecycle {
  constructor(
    private readonly file: DuckDbFile,
    private readonly folding: RollupFolding,
    private readonly topLists: DuckDbTopLists,
  ) {}

  /**
   * Deletes the org's rows started before `rowsBefore`: their days are found
   * with one scan of two narrow columns, then deleted a window at a time
   * (each its own transaction) so a pass never holds a huge delete. Texts are
   * emptied the same way from the org's mark in `retention_marks`, so a pass
   * reads only rows not emptied yet. Rollups are left alone: they keep the
   * costs of expired rows. A checkpoint after a pass lets DuckDB reuse the
   * freed blocks (and truncate the file when they are at its end).
   */
  async expire(cut: RetentionCut, maxRows: number): Promise<RetentionResult> {
    const file = this.file;
    await file.checkFile();
    // Each statement and window takes the writer on its own: inserts go on between windows.
    const read = (sql: string) => file.exclusive(() => file.rows(sql));
    const org = sqlString(cut.orgId);
    const out: RetentionResult = { deletedRows: 0, emptiedRows: 0, done: true };
    if (cut.rowsBefore !== undefined) {
      const before = cut.rowsBefore;
      const [r] = await read(`SELECT min(start_time) AS lo FROM spans WHERE org_id = ${org} AND start_time < ${before}`);
      if (r?.lo !== null && r?.lo !== undefined) {
        const d = await this.inWindows(Number(r.lo), before, maxRows, (lo, hi) =>
          file.run(`DELETE FROM spans WHERE org_id = ${org} AND start_time >= ${lo} AND start_time < ${hi}`),
        );
        out.deletedRows = d.rows;
        out.done = d.done;
      }
      if (out.done)
        await file.exclusive(() =>
          file.transaction(async () => {
            // The daily rollups, sessions_daily among them, keep their rows; the traces and their list go.
            const old = `org_id = ${org} AND start_date < ${dateLiteral(dayOf(before))}`;
            for (const t of ['traces', TOP_LISTS.trace.table, TOP_LISTS.trace.marks, TOP_LISTS.trace.touches]) await file.run(`DELETE FROM ${t} WHERE ${old}`);
          }),
        );
    }
    if (cut.textsBefore !== undefined && out.done) {
      const before = cut.textsBefore;
      const [m] = await read(`SELECT texts_before FROM retention_marks WHERE org_id = ${org}`);
      let from = m?.texts_before === null || m?.texts_before === undefined ? undefined : Number(m.texts_before);
      if (from === undefined) {
        const [r] = await read(`SELECT min(start_time) AS lo FROM spans WHERE org_id = ${org} AND start_time < ${before}`);
        from = r?.lo === null || r?.lo === undefined ? before : Number(r.lo);
      }
      const nonEmpty = TEXT_COLUMNS.map((c) => `${c} <> ''`).join(' OR ');
      const empty = TEXT_COLUMNS.map((c) => `${c} = ''`).join(', ');
      const d = await this.inWindows(from, before, maxRows - out.deletedRows, async (lo, hi) => {
        const n = await file.run(`UPDATE spans SET ${empty} WHERE org_id = ${org} AND start_time >= ${lo} AND start_time < ${hi} AND (${nonEmpty})`);
        await file.run(
          `INSERT INTO retention_marks (org_id, texts_before) VALUES (${org}, ${hi}) ON CONFLICT (org_id) DO UPDATE SET texts_before = excluded.texts_before`,
        );
        return n;
      });
      out.emptiedRows = d.rows;
      out.done = d.done;
    }
    if (out.deletedRows + out.emptiedRows > 0) await file.exclusive(() => file.run('CHECKPOINT'));
    return out;
  }

  /**
   * Calls `step` on consecutive start-time windows from `lo` to `before`,
   * each in its own transaction, widening a window while few rows fall in it
   * and narrowing it when many do; stops after about `budget` rows.
   */
  private async inWindows(
    lo: number,
    before: number,
    budget: number,
    step: (lo: number, hi: number) => Promise<number>,
  ): Promise<{ rows: number; done: boolean }> {
    let width = 3_600_000;
    let rows = 0;
    while (lo < before) {
      if (rows >= budget) return { rows, done: false };
      const hi = Math.min(before, lo + width);
      let n = 0;
      await this.file.exclusive(() =>
        this.file.transaction(async () => {
          n = await step(lo, hi);
        }),
      );
      rows += n;
      lo = hi;
      if (n < EXPIRE_BATCH_ROWS / 4) width = Math.min(width * 4, 30 * DAY_MS);
      else if (n > EXPIRE_BATCH_ROWS) width = Math.max(60_000, Math.floor(width / 2));
    }
    return { rows, done: true };
  }

  /**
   * Erasure in one transaction: the spans' shares are taken back from every
   * rollup, the spans deleted, then every rollup row that still names the id
   * (the take-back rows themselves, and costs of rows that expired earlier)
   * is deleted, and the days are compacted so no partial row is left.
   */
  async erase(orgId: string, target: EraseTarget, dryRun: boolean): Promise<EraseCounts> {
    const file = this.file;
    return file.exclusive(async () => {
      await file.checkFile();
      const org = sqlString(orgId);
      const id = sqlString(target.id);
      const where = `org_id = ${org} AND ${ERASE_COLUMN[target.kind]} = ${id}`;
      await file.run(`CREATE OR REPLACE TEMP TABLE ti_erase AS SELECT DISTINCT trace_id, start_date FROM spans WHERE ${where}`);
      const traceRows = `org_id = ${org} AND trace_id IN (SELECT trace_id FROM ti_erase)`;
      const named: [string, string][] = [
        ['traces', traceRows],
        ...rollupsNaming(target.kind).map((r): [string, string] => [r.table, `org_id = ${org} AND ${r.column} = ${id}`]),
      ];
      const [c] = await file.rows(
        `SELECT (SELECT count(*) FROM spans WHERE ${where}) AS spans, (SELECT count(DISTINCT trace_id) FROM ti_erase) AS traces, ` +
          named.map(([t, w]) => `(SELECT count(*) FROM ${t} WHERE ${w})`).join(' + ') +
          ' AS rollup_rows',
      );
      const counts = { spans: Number(c?.spans ?? 0), traces: Number(c?.traces ?? 0), rollupRows: Number(c?.rollup_rows ?? 0) };
      if (dryRun || counts.spans + counts.rollupRows === 0) return counts;
      const days = await file.days('ti_erase');
      await file.transaction(async () => {
        // The days whose top lists change: those of the spans, and of every rollup row that names the id.
        await file.run(
          'CREATE OR REPLACE TEMP TABLE ti_erase_days AS SELECT start_date FROM ti_erase UNION ' +
            named.map(([t, w]) => `SELECT DISTINCT start_date FROM ${t} WHERE ${w}`).join(' UNION '),
        );
        await this.folding.takeBack(where);
        await file.run(`DELETE FROM spans WHERE ${where}`);
        for (const [t, w] of named) await file.run(`DELETE FROM ${t} WHERE ${w}`);
        const changed = `org_id = ${org} AND start_date IN (SELECT start_date FROM ti_erase_days)`;
        // A trace's list rows and touches name its customer (customer_c) on every day of the trace.
        for (const t of [TOP_LISTS.trace.table, TOP_LISTS.trace.touches]) await file.run(`DELETE FROM ${t} WHERE ${traceRows} OR (${changed})`);
        await file.run(`DELETE FROM ${TOP_LISTS.session.table} WHERE ${changed}`);
        for (const l of Object.values(TOP_LISTS)) for (const t of [l.marks, l.touches]) await file.run(`DELETE FROM ${t} WHERE ${changed}`);
        await file.run('DROP TABLE ti_erase_days');
      });
      // Sessions may have left their days: the next write into a marked day reads which are stored again.
      this.topLists.forgetStored();
      this.folding.touch(days);
      await this.folding.compactNow(true);
      await file.run('DROP TABLE IF EXISTS ti_erase');
      return counts;
    });
  }
}
