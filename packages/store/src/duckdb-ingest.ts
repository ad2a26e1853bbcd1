/**
 * The DuckDB store's writes of spans: new rows stored once each with their
 * traces' fields resolved, replacement rows, and new costs, each with its
 * rollup shares in the same transaction.
 */
import { DAY_MS, dayMs as dayStartMs, isDayText, utcDay as dayOf } from '@trace-ingest/shared/dates';
import { COST_COLUMNS, SPAN_COLUMNS, type ColumnKind } from '@trace-ingest/shared/rows';
import {
  candidateSql,
  candidateValueSql,
  dailyDeltaSql,
  DAILY_ROLLUPS,
  DUCKDB_ROLLUP,
  MEASURES,
  TRACE_FIELDS,
  TRACE_WINDOW_DAYS,
  traceDeltaSql,
} from '@trace-ingest/shared/rollups';
import type { DuckDbFile } from './duckdb-file.js';
import { batchColumnList, batchReadColumns, linesByStart } from './duckdb-load.js';
import { loadColumnList, readJsonColumns } from './duckdb-migrations.js';
import type { RollupFolding } from './duckdb-rollup-folding.js';
import type { DuckDbTopLists } from './duckdb-top-lists.js';
import type { CostChange, Lines } from './span-store.js';
import { dateLiteral } from './top-lists.js';
import { fingerprintOf, fingerprintSql, TraceFilter, type Fingerprint } from './trace-filter.js';

/** Days of traces the insert path keeps fingerprints of: a batch's days and the days either side (live traffic: three). */
const TRACE_FILTER_DAYS = 6;

const COLUMN_LIST = SPAN_COLUMNS.map(([n]) => `"${n}"`).join(', ');

/** What a cost change carries: the span's identity, its start time (to find it by row-group min/max) and its new costs. */
const COST_CHANGE_COLUMNS: readonly (readonly [string, ColumnKind])[] = [
  ['org_id', 'string'],
  ['trace_id', 'string'],
  ['span_id', 'string'],
  ['start_time', 'int'],
  ...COST_COLUMNS.map((c) => [c, 'decimal'] as const),
  ['priced', 'bool'],
  ['price_source', 'string'],
];

interface BatchRange {
  lo: number;
  hi: number;
  dayLo: string;
  dayHi: string;
}

/** The SELECT that reads a load file (a SQL string) with read_json's `columns` and the select list over them. */
function readJsonSql(file: string, list: string, columns: string): string {
  // The largest row the v1 contract allows is under 32 MiB as JSON, which bounds read_json's buffers.
  return `SELECT ${list} FROM read_json(${file}, format = 'newline_delimited', columns = ${columns}, maximum_object_size = 33554432)`;
}

export class DuckDbIngest {
  /** The traces stored on the days inserts write to: a batch of new traces looks nothing up. */
  private readonly traceFilter = new TraceFilter(TRACE_FILTER_DAYS);

  constructor(
    private readonly file: DuckDbFile,
    private readonly folding: RollupFolding,
    private readonly topLists: DuckDbTopLists,
  ) {}

  /** After the file is attached: fingerprints of another file's traces must not stand for this one's. */
  opened(): void {
    this.traceFilter.clear();
  }

  /**
   * Stores rows once each and adds them to the rollups, in one transaction.
   * There is no index to keep: a span is stored already when a stored span
   * with its (org_id, trace_id, span_id) starts within the batch's own
   * start-time range, which DuckDB reads by row-group min/max, so the check
   * costs what the spans of that range cost, not the table. Duplicates are a
   * client re-sending a span (same start time) or the write log replayed.
   */
  async insertLines(lines: Lines, rowCount: number): Promise<void> {
    if (rowCount === 0) return;
    await this.file.exclusive(() => this.insertNow(lines));
  }

  private async insertNow(lines: Lines): Promise<void> {
    await this.writeBatch(lines, 'first', async (range) => {
      await this.file.run(
        `DELETE FROM ti_batch USING spans s WHERE s.start_time BETWEEN ${range.lo} AND ${range.hi} ` +
          'AND s.org_id = ti_batch.org_id AND s.trace_id = ti_batch.trace_id AND s.span_id = ti_batch.span_id',
      );
      await this.addBatch(range, 'new');
    });
    // A batch's temp tables would otherwise stay in memory until the next one replaces them, beside it.
    await this.file.run('DROP TABLE IF EXISTS ti_batch');
    await this.file.run('DROP TABLE IF EXISTS ti_resolved');
    await this.file.run('DROP TABLE IF EXISTS ti_trace_rows');
    await this.file.run('DROP TABLE IF EXISTS ti_known_days');
    await this.file.confirmFile();
    await this.folding.compactIfDue();
    await this.topLists.refreshDue();
  }

  /** Rows that replace the stored rows of the same spans: their old share of the rollups is taken back first. */
  async replaceLines(lines: Lines, rowCount: number): Promise<void> {
    if (rowCount === 0) return;
    await this.file.exclusive(() => this.replaceNow(lines));
  }

  private async replaceNow(lines: Lines): Promise<void> {
    await this.writeBatch(lines, 'last', async (range) => {
      const stored =
        `start_time BETWEEN ${range.lo} AND ${range.hi} AND EXISTS (SELECT 1 FROM ti_batch b ` +
        'WHERE b.org_id = spans.org_id AND b.trace_id = spans.trace_id AND b.span_id = spans.span_id)';
      await this.folding.takeBack(stored);
      await this.file.run(`DELETE FROM spans WHERE ${stored}`);
      await this.addBatch(range, 'replacing');
    });
    await this.file.confirmFile();
    await this.folding.compactIfDue();
  }

  /** Loads a batch into ti_batch (keeping the first or the last copy of each span) and runs `write` on it in the same transaction, unless it is empty. */
  private async writeBatch(lines: Lines, keep: 'first' | 'last', write: (range: BatchRange) => Promise<void>): Promise<void> {
    await this.file.checkFile();
    await this.withBatchFile(lines, (source) =>
      this.file.transaction(
        async () => {
          await this.loadBatch(source, keep);
          const range = await this.batchRange();
          if (range !== undefined) await write(range);
        },
        // The attempt rolled back noted its sessions as stored: they would not count as new to their day again.
        () => this.topLists.forgetStored(),
      ),
    );
  }

  /** New costs for stored spans: only the cost columns are rewritten, and the rollups move by the difference. */
  async updateCosts(changes: readonly CostChange[]): Promise<void> {
    if (changes.length === 0) return;
    await this.file.exclusive(() => this.updateCostsNow(changes));
  }

  private async updateCostsNow(changes: readonly CostChange[]): Promise<void> {
    await this.file.checkFile();
    const lines = changes.map((c) => JSON.stringify(c)).join('\n') + '\n';
    const [list, columns] = [loadColumnList(COST_CHANGE_COLUMNS), readJsonColumns(COST_CHANGE_COLUMNS)];
    await this.file.withLoadFile([Buffer.from(lines)], (file) =>
      this.file.transaction(async () => {
        await this.file.run(`CREATE OR REPLACE TEMP TABLE ti_costs AS ${readJsonSql(file, list, columns)}`);
        const [r] = await this.file.rows('SELECT min(start_time) AS lo, max(start_time) AS hi FROM ti_costs');
        const match = 'c.org_id = spans.org_id AND c.trace_id = spans.trace_id AND c.span_id = spans.span_id';
        const stored = `start_time BETWEEN ${Number(r?.lo)} AND ${Number(r?.hi)} AND EXISTS (SELECT 1 FROM ti_costs c WHERE ${match})`;
        await this.folding.takeBack(stored);
        await this.file.run(
          `UPDATE spans SET ${[...COST_COLUMNS, 'priced', 'price_source'].map((k) => `${k} = c.${k}`).join(', ')} FROM ti_costs c ` +
            `WHERE spans.start_time BETWEEN ${Number(r?.lo)} AND ${Number(r?.hi)} AND ${match}`,
        );
        for (const r of DAILY_ROLLUPS) await this.folding.bump(`INSERT INTO ${r.table} ${dailyDeltaSql(DUCKDB_ROLLUP, 'spans', 1, stored, r)}`);
        await this.folding.bump(`INSERT INTO traces ${traceDeltaSql(DUCKDB_ROLLUP, 'spans', 1, stored)}`);
        await this.topLists.unmark('ti_costs', dayOf(Number(r?.lo)), dayOf(Number(r?.hi)));
        this.folding.touch(changes.map((c) => dayOf(c.start_time)));
      }),
    );
    await this.folding.compactIfDue();
  }

  /**
   * Writes a batch of span lines to a load file in start-time order and runs `body` with the
   * SELECT that reads them (in that order: DuckDB keeps a file's order in a table made from it).
   */
  private async withBatchFile(lines: Lines, body: (source: string) => Promise<void>): Promise<void> {
    await this.file.withLoadFile(await linesByStart(lines), (file) => body(readJsonSql(file, batchColumnList(), batchReadColumns())));
  }

  /**
   * Fills ti_batch from a batch's lines (in start-time order: see withBatchFile) with one copy of
   * each span, the first or the last received. The copies are deleted in place, so the table stays
   * in the order the rows are stored in.
   */
  private async loadBatch(source: string, keep: 'first' | 'last'): Promise<void> {
    await this.file.run(`CREATE OR REPLACE TEMP TABLE ti_batch AS ${source}`);
    // Copies within one batch are rare (a client sending a span again within a flush): looked for before any is deleted.
    const dup = await this.file.rows('SELECT 1 AS x FROM ti_batch GROUP BY org_id, trace_id, span_id HAVING count(*) > 1 LIMIT 1');
    if (dup.length === 0) return;
    const order = keep === 'first' ? 'received_at, rowid' : 'received_at DESC, rowid DESC';
    await this.file.run(
      'DELETE FROM ti_batch WHERE rowid IN (SELECT rowid FROM ti_batch ' +
        `QUALIFY row_number() OVER (PARTITION BY org_id, trace_id, span_id ORDER BY ${order}) > 1)`,
    );
  }

  /** The start times and UTC days the batch in ti_batch spans (undefined when it is empty). */
  private async batchRange(): Promise<BatchRange | undefined> {
    const [r] = await this.file.rows(
      'SELECT count(*) AS n, min(start_time) AS lo, max(start_time) AS hi, ' +
        'CAST(min(start_date) AS VARCHAR) AS dlo, CAST(max(start_date) AS VARCHAR) AS dhi FROM ti_batch',
    );
    if (r === undefined || Number(r.n) === 0) return undefined;
    return { lo: Number(r.lo), hi: Number(r.hi), dayLo: String(r.dlo), dayHi: String(r.dhi) };
  }

  /**
   * Adds the new spans in ti_batch: their traces' fields resolved with what
   * is known of those traces (TRACE_FIELDS' rule), earlier spans of a trace
   * whose fields changed moved along (rollups included), then the rows.
   * New spans only add to their groups' costs; replacing ones may lower them.
   */
  private async addBatch(range: BatchRange, spans: 'new' | 'replacing'): Promise<void> {
    const d = DUCKDB_ROLLUP;
    const days = `start_date BETWEEN DATE '${range.dayLo}' - ${TRACE_WINDOW_DAYS} AND DATE '${range.dayHi}' + ${TRACE_WINDOW_DAYS}`;
    const cands = TRACE_FIELDS.map((f) => f.candidate);
    const batchTraces = (
      await this.file.rows(`SELECT ${fingerprintSql('org_id', 'trace_id')}, CAST(start_date AS VARCHAR) AS d, min(start_time) AS s FROM ti_batch GROUP BY ALL`)
    ).map((r) => ({ fp: fingerprintOf(r), day: String(r.d), start: Number(r.s) }));
    const since = await this.storedSince(batchTraces);
    const known =
      `WHERE t.${days}${since === null ? ' AND false' : since === undefined ? '' : ` AND t.last_start >= ${since}`} ` +
      'AND EXISTS (SELECT 1 FROM ti_batch b WHERE b.org_id = t.org_id AND b.trace_id = t.trace_id)';
    const mins = (t: string) => cands.map((c) => `min(${t}${c}) AS ${c}`).join(', ');
    const wholeRows = spans === 'new' && (await this.topLists.touchesWholeRows(range.dayLo, range.dayHi));
    if (wholeRows) {
      // Per day first, with every measure: the trace list's touches take a trace's row of a day from it (one read of the rows, not two).
      const sums = MEASURES.map((m) => `sum(t.${m.name}) AS ${m.name}`).join(', ');
      await this.file.run(
        `CREATE OR REPLACE TEMP TABLE ti_known_days AS SELECT t.org_id, t.trace_id, t.start_date, ${sums}, ${mins('t.')}, ` +
          `min(t.first_start) AS first_start, max(t.last_start) AS last_start FROM traces t ${known} GROUP BY t.org_id, t.trace_id, t.start_date`,
      );
      await this.file.run(
        `CREATE OR REPLACE TEMP TABLE ti_known AS SELECT org_id, trace_id, ${mins('')}, min(first_start) AS first_start, ` +
          'max(last_start) AS last_start FROM ti_known_days GROUP BY org_id, trace_id',
      );
      // The batch's own trace rows, kept for the trace list's touches.
      await this.file.run(`CREATE OR REPLACE TEMP TABLE ti_trace_rows AS ${traceDeltaSql(d, 'ti_batch', 1)}`);
      await this.folding.bump('INSERT INTO traces SELECT * FROM ti_trace_rows');
    } else {
      await this.file.run(
        `CREATE OR REPLACE TEMP TABLE ti_known AS SELECT t.org_id, t.trace_id, ${mins('t.')}, min(t.first_start) AS first_start, ` +
          `max(t.last_start) AS last_start FROM traces t ${known} GROUP BY t.org_id, t.trace_id`,
      );
      await this.folding.bump(`INSERT INTO traces ${traceDeltaSql(d, 'ti_batch', 1)}`);
    }
    for (const t of batchTraces) this.traceFilter.add(t.day, t.fp, t.start);
    const value = (e: string) => candidateValueSql(d, e);
    const changed = cands.map((c) => `${value(`k.${c}`)} <> ${value(`least(b.${c}, k.${c})`)}`).join(' OR ');
    await this.file.run(
      `CREATE OR REPLACE TEMP TABLE ti_resolved AS SELECT b.org_id, b.trace_id, ${cands.map((c) => `least(b.${c}, k.${c}) AS ${c}`).join(', ')}, ` +
        `k.trace_id IS NOT NULL AND (${changed}) AS moved FROM ` +
        `(SELECT org_id, trace_id, ${TRACE_FIELDS.map((f) => `min(${candidateSql(d, f)}) AS ${f.candidate}`).join(', ')} ` +
        'FROM ti_batch GROUP BY org_id, trace_id) b ' +
        'LEFT JOIN ti_known k ON k.org_id = b.org_id AND k.trace_id = b.trace_id',
    );
    const set = TRACE_FIELDS.map((f) => `${f.column} = ${value(`r.${f.candidate}`)}`).join(', ');
    await this.file.run(`UPDATE ti_batch SET ${set} FROM ti_resolved r WHERE ti_batch.org_id = r.org_id AND ti_batch.trace_id = r.trace_id`);
    const [m] = await this.file.rows(
      'SELECT count(*) AS n, min(k.first_start) AS lo, max(k.last_start) AS hi FROM ti_resolved r JOIN ti_known k USING (org_id, trace_id) WHERE r.moved',
    );
    if (Number(m?.n) > 0) {
      // Spans stored before this batch taught their trace a customer (or another field): they move with it, exactly once.
      // Only the start times of the moved traces' stored spans are read (the traces rows bound them), not the days around the batch.
      const lo = Math.max(dayStartMs(range.dayLo) - TRACE_WINDOW_DAYS * DAY_MS, Number(m?.lo));
      const hi = Math.min(dayStartMs(range.dayHi) + (TRACE_WINDOW_DAYS + 1) * DAY_MS - 1, Number(m?.hi));
      const window = `start_time BETWEEN ${lo} AND ${hi}`;
      const moved = 'EXISTS (SELECT 1 FROM ti_resolved r WHERE r.moved AND r.org_id = spans.org_id AND r.trace_id = spans.trace_id)';
      for (const r of DAILY_ROLLUPS) await this.folding.bump(`INSERT INTO ${r.table} ${dailyDeltaSql(d, 'spans', -1, `${window} AND ${moved}`, r)}`);
      await this.file.run(
        `UPDATE spans SET ${set} FROM ti_resolved r WHERE spans.${window} AND r.moved AND r.org_id = spans.org_id AND r.trace_id = spans.trace_id`,
      );
      for (const r of DAILY_ROLLUPS) await this.folding.bump(`INSERT INTO ${r.table} ${dailyDeltaSql(d, 'spans', 1, `${window} AND ${moved}`, r)}`);
      this.folding.touch(await this.file.days(`spans WHERE ${window} AND ${moved}`));
      await this.topLists.noteMoved('session', `spans WHERE ${window} AND ${moved}`);
      // A moved span leaves one session's costs for another's; a trace's costs stay, and the batch touches its traces below.
      await this.topLists.unmark(
        'ti_batch',
        dayOf(dayStartMs(range.dayLo) - TRACE_WINDOW_DAYS * DAY_MS),
        dayOf(dayStartMs(range.dayHi) + TRACE_WINDOW_DAYS * DAY_MS),
        ['session'],
      );
    }
    // Which sessions are new to their day is told from what was stored before this batch's rows.
    const marks = spans === 'new' ? await this.topLists.marksOf(range.dayLo, range.dayHi) : undefined;
    if (marks !== undefined) {
      await this.topLists.beforeAdd('ti_batch', range.dayLo, range.dayHi, marks);
      await this.topLists.noteNewDays('ti_batch', range.dayLo, range.dayHi, marks);
    }
    // ti_batch is in start-time order already (withBatchFile), which keeps row groups' start-time ranges narrow.
    await this.file.run(`INSERT INTO spans (${COLUMN_LIST}) SELECT ${COLUMN_LIST} FROM ti_batch`);
    for (const r of DAILY_ROLLUPS) await this.folding.bump(`INSERT INTO ${r.table} ${dailyDeltaSql(d, 'ti_batch', 1, '', r)}`);
    // The days of the batch's spans, not every day between its first and last: start times are the client's and can be centuries apart.
    this.folding.touch(await this.file.days('ti_batch'));
    if (marks !== undefined) await this.topLists.touch({ spans: 'ti_batch', traceRows: 'ti_trace_rows', knownTraceRows: 'ti_known_days' }, marks);
    else {
      await this.topLists.unmark('ti_batch', range.dayLo, range.dayHi);
      // The rows replaced may have been a session's last of their day.
      this.topLists.forgetStored(range.dayLo, range.dayHi);
    }
  }

  /**
   * Since when the batch's traces may have rows stored within a day of
   * theirs: null when none may (most batches of live traffic), the earliest
   * start of those that may, or undefined when the batch's days are too many
   * to keep (its lookup then reads those days, as it would without the filter).
   */
  private async storedSince(traces: readonly { fp: Fingerprint; day: string }[]): Promise<number | null | undefined> {
    const near = new Map<string, string[]>();
    for (const t of traces)
      if (!near.has(t.day))
        near.set(
          t.day,
          [-1, 0, 1].map((n) => dayOf(dayStartMs(t.day) + n * TRACE_WINDOW_DAYS * DAY_MS)),
        );
    const all = new Set([...near.values()].flat());
    // Days beyond the years 0000-9999 (a day either side of the calendar's ends) have no DATE literal: read as without the filter.
    if (all.size > TRACE_FILTER_DAYS || [...all].some((day) => !isDayText(day))) return undefined;
    for (const day of all) {
      if (this.traceFilter.has(day)) continue;
      // Once per day and process: the day's traces, read in one pass.
      const c = await this.file.columns(
        // Every row, not grouped: the filter keeps the earliest start under a fingerprint itself (grouping the day's rows
        // here first cost more than the rows it saved). Starts as DOUBLE (exact for ms since 1970), so no BIGINT becomes
        // a JS BigInt.
        `SELECT ${fingerprintSql('org_id', 'trace_id')}, first_start::DOUBLE AS s FROM traces WHERE start_date = ${dateLiteral(day)}`,
      );
      this.traceFilter.load(day, { lo: c.fp_lo ?? [], hi: c.fp_hi ?? [], start: c.s }, all);
    }
    let since: number | null = null;
    for (const t of traces) {
      const s = this.traceFilter.since(near.get(t.day) ?? [], t.fp);
      if (s !== undefined && (since === null || s < since)) since = s;
    }
    return since;
  }
}
