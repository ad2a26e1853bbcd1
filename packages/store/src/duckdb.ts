import fs from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance, JsonDuckDBValueConverter, StatementType, type DuckDBConnection, type DuckDBValue } from '@duckdb/node-api';
import { DAY_MS, daysBetween, dayMs as dayStartMs, utcDay as dayOf } from '@trace-ingest/shared/dates';
import {
  ERASE_COLUMN,
  rollupsNaming,
  TEXT_COLUMNS,
  type EraseCounts,
  type EraseTarget,
  type RetentionCut,
  type RetentionResult,
} from '@trace-ingest/shared/lifecycle';
import { COST_COLUMNS, SPAN_COLUMNS, type ColumnKind } from '@trace-ingest/shared/rows';
import {
  candidateSql,
  candidateValueSql,
  dailyDeltaSql,
  DAILY_ROLLUPS,
  DUCKDB_ROLLUP,
  MEASURES,
  TRACE_EXTRA,
  TRACE_FIELDS,
  TRACE_KEYS,
  TRACE_WINDOW_DAYS,
  traceDeltaSql,
} from '@trace-ingest/shared/rollups';
import { applyDuckDbMigrations, loadColumnList, readJsonColumns, type DuckDbMigrationLogger } from './duckdb-migrations.js';
import { batchColumnList, batchReadColumns, linesByStart } from './duckdb-load.js';
import { groupCountSql, listRowsSql, rebuildTopListSql, unmarkSql } from './duckdb-top-lists.js';
import { TraceFilter } from './trace-filter.js';
import { dateLiteral, TOP_LISTS, TOP_LISTS_CHUNK_DAYS, TOP_LISTS_PER_DAY, unmarkedDays, type TopListName } from './top-lists.js';
import {
  chunksOf,
  ReadOnlyQueryError,
  SpanStoreFileError,
  SpanStoreRejectedError,
  SpanStoreSchemaError,
  type CostChange,
  type Lines,
  type QueryRow,
  type SpanStore,
  type TopLists,
} from './span-store.js';

// The parts, for callers that need one of them (tests, tools).
export { applyDuckDbMigrations, DUCKDB_TYPES, loadDuckDbMigrations, spansSchemaDrift } from './duckdb-migrations.js';

/** Rollups whose keys a day grow with the day's traffic (a row per trace, per session): folded by what was written since the last fold. */
const GROWING_ROLLUPS: readonly string[] = ['traces', 'sessions_daily'];

/** Days of traces the insert path keeps fingerprints of: a batch's days and the days either side (live traffic: three). */
const TRACE_FILTER_DAYS = 6;

/** The catalog name the spans file is attached as; queries name the table alone. */
const CATALOG = 'spans_store';
const ROW_GROUP_ROWS = 8192;

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

// Error classes DuckDB raises when the data itself is wrong (retrying cannot help)...
const REJECTED = /^(Conversion Error|Invalid Input Error|Constraint Error|Binder Error|Out of Range Error)/;
// ...except a table or column the file lacks: its schema is behind, which a migration mends.
const INVALIDATED = /has been invalidated/;
const SCHEMA_BEHIND = /^(Binder Error: Table "[^"]*" does not have a column|Catalog Error: Table with name \S+ does not exist)/;

export interface DuckDbSpanStoreOptions {
  file: string;
  /** Where bulk-load files are written; defaults to a folder beside the database. */
  tmpDir?: string;
  /** DuckDB's memory_limit (default: DuckDB's own, 80% of RAM). Too low a limit fails large inserts. */
  memoryLimit?: string | undefined;
  /** DuckDB's worker threads (default: DuckDB's own, one per core). */
  threads?: number | undefined;
  /** Where the migrations applied at start are reported. */
  logger?: DuckDbMigrationLogger | undefined;
  /** The migrations folder (default: the shipped `migrations/duckdb/`); tests give their own. */
  migrationsDir?: URL | undefined;
  /** Partial rollup rows written before they are folded into one per key (default 20,000). */
  compactRows?: number | undefined;
  /** DuckDB's checkpoint_threshold: the size its own log reaches before a checkpoint (default 256MB). */
  checkpointThreshold?: string | undefined;
  /** How many traces (and sessions) each day's top list keeps (default TOP_LISTS_PER_DAY); tests give a few. */
  topListsPerDay?: number | undefined;
  /**
   * Attach the file read-only and migrate nothing: for a process that only
   * reads (`trace-ingest sql` with no server running). Its writes fail.
   */
  readOnly?: boolean | undefined;
}

/**
 * The embedded span store: one DuckDB file under DATA_DIR. Rows are bulk
 * loaded from the canonical NDJSON lines with `read_json` (the fastest path
 * measured, ~55k rows/s) and deduplicated by the primary key, so a replayed
 * batch never shows a span twice.
 */
export class DuckDbSpanStore implements SpanStore {
  readonly kind = 'duckdb';
  readonly rollups = true;
  readonly topLists: TopLists;
  private instance: DuckDBInstance | undefined;
  private writer: DuckDBConnection | undefined;
  private reader: DuckDBConnection | undefined;
  private readonly tmpDir: string;
  private seq = 0;
  /** UTC days whose rollup rows were written since the last compaction. */
  private readonly touched = new Set<string>();
  /** Days that may hold a top list mark (see unmark). */
  private readonly markedDays = new Set<string>();
  /** Partial rollup rows written since the last compaction. */
  private deltaRows = 0;
  /** Per growing rollup, the first rowid not folded yet (set at start: rows already there are left as they are). */
  private readonly unfolded = new Map<string, number>();
  /** Days whose growing rollups were folded in parts (a key may have a row per part) since the last whole fold. */
  private readonly partDays = new Set<string>();
  /** The traces stored on the days inserts write to: a batch of new traces looks nothing up. */
  private readonly traceFilter = new TraceFilter(TRACE_FILTER_DAYS);
  private readonly compactRows: number;
  /** Device and inode of the file opened at start: the path must still lead to it. */
  private identity: string | undefined;
  /** Set while the file is gone from the path. */
  private lost: string | undefined;
  private checking: Promise<void> = Promise.resolve();
  /** The write running on the writer connection: a transaction's statements must not interleave with another's. */
  private writing: Promise<unknown> = Promise.resolve();

  constructor(private readonly opts: DuckDbSpanStoreOptions) {
    this.tmpDir = opts.tmpDir ?? path.join(path.dirname(opts.file), 'tmp');
    this.compactRows = opts.compactRows ?? 20_000;
    this.topLists = {
      perDay: opts.topListsPerDay ?? TOP_LISTS_PER_DAY,
      ready: async (list, org, from, to) => {
        await this.refreshTopList(list, org, from, to);
        return true;
      },
      rows: (list, org, from, to, cond) => listRowsSql(TOP_LISTS[list], org, from, to, cond),
      groupCount: (list, org, from, to) => groupCountSql(TOP_LISTS[list], org, from, to),
    };
  }

  async start(): Promise<void> {
    if (this.instance !== undefined) return;
    const readOnly = this.opts.readOnly === true;
    if (!readOnly) {
      await fs.mkdir(path.dirname(this.opts.file), { recursive: true, mode: 0o700 });
      await fs.mkdir(this.tmpDir, { recursive: true, mode: 0o700 });
      await removeLoadFiles(this.tmpDir);
    }
    const created = !readOnly && (await fileIdentity(this.opts.file)) === undefined;
    // The largest row the v1 contract allows is under 32 MiB as JSON (four 1M-character texts),
    // which bounds read_json's buffers (maximum_object_size below).
    const settings: Record<string, string> = {};
    if (this.opts.memoryLimit !== undefined) settings.memory_limit = this.opts.memoryLimit;
    if (this.opts.threads !== undefined) settings.threads = String(this.opts.threads);
    // A checkpoint's cost grows with the file, so fewer of them (a larger threshold than DuckDB's 16 MB) keep the cost per row flat.
    settings.checkpoint_threshold = this.opts.checkpointThreshold ?? '256MB';
    // Spilled blocks (span texts) stay in DATA_DIR beside the file, not in the working directory.
    settings.temp_directory = `${this.opts.file}.tmp`;
    // The file is attached to an in-memory instance so it can take ROW_GROUP_SIZE:
    // every checkpoint (one per 16 MB of DuckDB's own log) rewrites the row group
    // being appended to, and at DuckDB's 122,880 rows that group holds hundreds of
    // MB of text, which slowed inserts of large spans as it filled.
    const instance = await DuckDBInstance.create(':memory:', settings);
    try {
      const boot = await instance.connect();
      await boot.run(`ATTACH ${sqlString(this.opts.file)} AS ${CATALOG} (${readOnly ? 'READ_ONLY' : `ROW_GROUP_SIZE ${ROW_GROUP_ROWS}`})`);
      if (created) await fs.chmod(this.opts.file, 0o600);
      this.reader = await instance.connect();
      await this.reader.run(`USE ${CATALOG}`);
      if (!readOnly) {
        this.writer = await instance.connect();
        await this.writer.run(`USE ${CATALOG}`);
        await applyDuckDbMigrations(this.writer, this.opts.logger, this.opts.migrationsDir);
      }
      await lockDown(boot, readOnly ? [] : [path.resolve(this.tmpDir)]);
      boot.closeSync();
      this.instance = instance;
      if (!readOnly) {
        await this.loadMarkedDays();
        this.unfolded.clear();
        this.traceFilter.clear();
        await this.markFolded();
      }
    } catch (e) {
      this.instance = undefined;
      instance.closeSync();
      throw e;
    }
    this.instance = instance;
    this.identity = await fileIdentity(this.opts.file);
  }

  async close(): Promise<void> {
    const instance = this.instance;
    if (instance === undefined) return;
    this.instance = undefined;
    const writer = this.writer;
    this.writer = undefined;
    // Checkpointed now so the next start has no log of DuckDB's own to replay.
    await writer?.run('CHECKPOINT').catch(() => undefined);
    writer?.closeSync();
    this.reader?.closeSync();
    this.reader = undefined;
    // Closing detaches the file: it is then free for another process.
    instance.closeSync();
  }

  async ping(): Promise<void> {
    await this.checkFile();
    try {
      await this.conn('reader').run('SELECT 1');
    } catch (e) {
      await this.reopenIfInvalidated(e instanceof Error ? e.message : String(e));
      throw e;
    }
  }

  /**
   * The open file must still be the one at the path: a file removed (or
   * replaced) under the running server would take rows that vanish at stop.
   * Removed: SpanStoreFileError until a file is back at the path (restored,
   * or made by `trace-ingest migrate`). Replaced: the new file is opened.
   */
  private checkFile(): Promise<void> {
    // One check at a time: the flusher and /readyz may both find the file replaced, and only one may reopen it.
    const run = this.checking.then(() => this.checkFileNow());
    this.checking = run.catch(() => undefined);
    return run;
  }

  private async checkFileNow(): Promise<void> {
    if (this.instance === undefined) return;
    const now = await fileIdentity(this.opts.file);
    if (now === this.identity) return;
    if (now === undefined) {
      this.lost =
        `the span store file ${this.opts.file} was removed while the server ran: batches get 503 until a file is back at that path ` +
        '(restore it from a backup, or run "trace-ingest migrate" to start an empty one); acknowledged spans wait in the write log';
      throw new SpanStoreFileError(this.lost);
    }
    await this.close();
    await this.start();
    this.lost = undefined;
  }

  problem(): string | undefined {
    return this.lost;
  }

  private conn(which: 'reader' | 'writer'): DuckDBConnection {
    const c = which === 'reader' ? this.reader : this.writer;
    if (c === undefined) throw new Error('span store is not started');
    return c;
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
    await this.exclusive(() => this.insertNow(lines));
  }

  private async insertNow(lines: Lines): Promise<void> {
    await this.checkFile();
    await this.withBatchFile(lines, (source) =>
      this.transaction(async () => {
        await this.loadBatch(source, 'first');
        const range = await this.batchRange();
        if (range === undefined) return;
        await this.run(
          `DELETE FROM ti_batch USING spans s WHERE s.start_time BETWEEN ${range.lo} AND ${range.hi} ` +
            'AND s.org_id = ti_batch.org_id AND s.trace_id = ti_batch.trace_id AND s.span_id = ti_batch.span_id',
        );
        await this.addBatch(range);
      }),
    );
    // A batch's temp tables would otherwise stay in memory until the next one replaces them, beside it.
    await this.run('DROP TABLE IF EXISTS ti_batch');
    await this.run('DROP TABLE IF EXISTS ti_resolved');
    await this.confirmFile();
    await this.compactIfDue();
  }

  /** After a write: the rows went into the file at the path, not into one removed or replaced meanwhile. */
  private async confirmFile(): Promise<void> {
    if ((await fileIdentity(this.opts.file)) !== this.identity) {
      throw new SpanStoreFileError(`the span store file ${this.opts.file} was removed or replaced during an insert; the rows are inserted again`);
    }
  }

  /** Rows that replace the stored rows of the same spans: their old share of the rollups is taken back first. */
  async replaceLines(lines: Lines, rowCount: number): Promise<void> {
    if (rowCount === 0) return;
    await this.exclusive(() => this.replaceNow(lines));
  }

  private async replaceNow(lines: Lines): Promise<void> {
    await this.checkFile();
    await this.withBatchFile(lines, (source) =>
      this.transaction(async () => {
        await this.loadBatch(source, 'last');
        const range = await this.batchRange();
        if (range === undefined) return;
        const stored =
          `start_time BETWEEN ${range.lo} AND ${range.hi} AND EXISTS (SELECT 1 FROM ti_batch b ` +
          'WHERE b.org_id = spans.org_id AND b.trace_id = spans.trace_id AND b.span_id = spans.span_id)';
        await this.takeBack(stored);
        await this.run(`DELETE FROM spans WHERE ${stored}`);
        await this.addBatch(range);
      }),
    );
    await this.confirmFile();
    await this.compactIfDue();
  }

  /** New costs for stored spans: only the cost columns are rewritten, and the rollups move by the difference. */
  async updateCosts(changes: readonly CostChange[]): Promise<void> {
    if (changes.length === 0) return;
    await this.exclusive(() => this.updateCostsNow(changes));
  }

  private async updateCostsNow(changes: readonly CostChange[]): Promise<void> {
    await this.checkFile();
    const lines = changes.map((c) => JSON.stringify(c)).join('\n') + '\n';
    await this.withLoadFile(
      Buffer.from(lines),
      (source) =>
        this.transaction(async () => {
          await this.run(`CREATE OR REPLACE TEMP TABLE ti_costs AS ${source}`);
          const [r] = await this.rows('SELECT min(start_time) AS lo, max(start_time) AS hi FROM ti_costs');
          const match = 'c.org_id = spans.org_id AND c.trace_id = spans.trace_id AND c.span_id = spans.span_id';
          const stored = `start_time BETWEEN ${Number(r?.lo)} AND ${Number(r?.hi)} AND EXISTS (SELECT 1 FROM ti_costs c WHERE ${match})`;
          await this.takeBack(stored);
          await this.run(
            `UPDATE spans SET ${[...COST_COLUMNS, 'priced', 'price_source'].map((k) => `${k} = c.${k}`).join(', ')} FROM ti_costs c ` +
              `WHERE spans.start_time BETWEEN ${Number(r?.lo)} AND ${Number(r?.hi)} AND ${match}`,
          );
          for (const r of DAILY_ROLLUPS) await this.bump(`INSERT INTO ${r.table} ${dailyDeltaSql(DUCKDB_ROLLUP, 'spans', 1, stored, r)}`);
          await this.bump(`INSERT INTO traces ${traceDeltaSql(DUCKDB_ROLLUP, 'spans', 1, stored)}`);
          await this.unmark('ti_costs', dayOf(Number(r?.lo)), dayOf(Number(r?.hi)));
          for (const c of changes) this.touched.add(dayOf(c.start_time));
        }),
      COST_CHANGE_COLUMNS,
    );
    await this.compactIfDue();
  }

  /**
   * Fills ti_batch from a batch's lines (in start-time order: see withBatchFile) with one copy of
   * each span, the first or the last received. The copies are deleted in place, so the table stays
   * in the order the rows are stored in.
   */
  private async loadBatch(source: string, keep: 'first' | 'last'): Promise<void> {
    await this.run(`CREATE OR REPLACE TEMP TABLE ti_batch AS ${source}`);
    // Copies within one batch are rare (a client sending a span again within a flush): looked for before any is deleted.
    const dup = await this.rows('SELECT 1 AS x FROM ti_batch GROUP BY org_id, trace_id, span_id HAVING count(*) > 1 LIMIT 1');
    if (dup.length === 0) return;
    const order = keep === 'first' ? 'received_at, rowid' : 'received_at DESC, rowid DESC';
    await this.run(
      'DELETE FROM ti_batch WHERE rowid IN (SELECT rowid FROM ti_batch ' +
        `QUALIFY row_number() OVER (PARTITION BY org_id, trace_id, span_id ORDER BY ${order}) > 1)`,
    );
  }

  /** The start times and UTC days the batch in ti_batch spans (undefined when it is empty). */
  private async batchRange(): Promise<BatchRange | undefined> {
    const [r] = await this.rows(
      'SELECT count(*) AS n, min(start_time) AS lo, max(start_time) AS hi, ' +
        'CAST(min(start_date) AS VARCHAR) AS dlo, CAST(max(start_date) AS VARCHAR) AS dhi FROM ti_batch',
    );
    if (r === undefined || Number(r.n) === 0) return undefined;
    return { lo: Number(r.lo), hi: Number(r.hi), dayLo: String(r.dlo), dayHi: String(r.dhi) };
  }

  /** Takes the spans matching `where` back out of both rollups. */
  private async takeBack(where: string): Promise<void> {
    for (const r of DAILY_ROLLUPS) await this.bump(`INSERT INTO ${r.table} ${dailyDeltaSql(DUCKDB_ROLLUP, 'spans', -1, where, r)}`);
    await this.bump(`INSERT INTO traces ${traceDeltaSql(DUCKDB_ROLLUP, 'spans', -1, where)}`);
  }

  /**
   * Adds the new spans in ti_batch: their traces' fields resolved with what
   * is known of those traces (TRACE_FIELDS' rule), earlier spans of a trace
   * whose fields changed moved along (rollups included), then the rows.
   */
  private async addBatch(range: BatchRange): Promise<void> {
    const d = DUCKDB_ROLLUP;
    const days = `start_date BETWEEN DATE '${range.dayLo}' - ${TRACE_WINDOW_DAYS} AND DATE '${range.dayHi}' + ${TRACE_WINDOW_DAYS}`;
    const cands = TRACE_FIELDS.map((f) => f.candidate);
    const batchTraces = (await this.rows('SELECT org_id, trace_id, CAST(start_date AS VARCHAR) AS d, min(start_time) AS s FROM ti_batch GROUP BY ALL')).map(
      (r) => ({ org: String(r.org_id), trace: String(r.trace_id), day: String(r.d), start: Number(r.s) }),
    );
    const since = await this.storedSince(batchTraces);
    await this.run(
      `CREATE OR REPLACE TEMP TABLE ti_known AS SELECT t.org_id, t.trace_id, ${cands.map((c) => `min(t.${c}) AS ${c}`).join(', ')}, ` +
        'min(t.first_start) AS first_start, max(t.last_start) AS last_start FROM traces t ' +
        `WHERE t.${days}${since === null ? ' AND false' : since === undefined ? '' : ` AND t.last_start >= ${since}`} ` +
        'AND EXISTS (SELECT 1 FROM ti_batch b WHERE b.org_id = t.org_id AND b.trace_id = t.trace_id) GROUP BY t.org_id, t.trace_id',
    );
    await this.bump(`INSERT INTO traces ${traceDeltaSql(d, 'ti_batch', 1)}`);
    for (const t of batchTraces) this.traceFilter.add(t.day, t.org, t.trace, t.start);
    const value = (e: string) => candidateValueSql(d, e);
    const changed = cands.map((c) => `${value(`k.${c}`)} <> ${value(`least(b.${c}, k.${c})`)}`).join(' OR ');
    await this.run(
      `CREATE OR REPLACE TEMP TABLE ti_resolved AS SELECT b.org_id, b.trace_id, ${cands.map((c) => `least(b.${c}, k.${c}) AS ${c}`).join(', ')}, ` +
        `k.trace_id IS NOT NULL AND (${changed}) AS moved FROM ` +
        `(SELECT org_id, trace_id, ${TRACE_FIELDS.map((f) => `min(${candidateSql(d, f)}) AS ${f.candidate}`).join(', ')} ` +
        'FROM ti_batch GROUP BY org_id, trace_id) b ' +
        'LEFT JOIN ti_known k ON k.org_id = b.org_id AND k.trace_id = b.trace_id',
    );
    const set = TRACE_FIELDS.map((f) => `${f.column} = ${value(`r.${f.candidate}`)}`).join(', ');
    await this.run(`UPDATE ti_batch SET ${set} FROM ti_resolved r WHERE ti_batch.org_id = r.org_id AND ti_batch.trace_id = r.trace_id`);
    const [m] = await this.rows(
      'SELECT count(*) AS n, min(k.first_start) AS lo, max(k.last_start) AS hi FROM ti_resolved r JOIN ti_known k USING (org_id, trace_id) WHERE r.moved',
    );
    if (Number(m?.n) > 0) {
      // Spans stored before this batch taught their trace a customer (or another field): they move with it, exactly once.
      // Only the start times of the moved traces' stored spans are read (the traces rows bound them), not the days around the batch.
      const lo = Math.max(dayStartMs(range.dayLo) - TRACE_WINDOW_DAYS * DAY_MS, Number(m?.lo));
      const hi = Math.min(dayStartMs(range.dayHi) + (TRACE_WINDOW_DAYS + 1) * DAY_MS - 1, Number(m?.hi));
      const window = `start_time BETWEEN ${lo} AND ${hi}`;
      const moved = 'EXISTS (SELECT 1 FROM ti_resolved r WHERE r.moved AND r.org_id = spans.org_id AND r.trace_id = spans.trace_id)';
      for (const r of DAILY_ROLLUPS) await this.bump(`INSERT INTO ${r.table} ${dailyDeltaSql(d, 'spans', -1, `${window} AND ${moved}`, r)}`);
      await this.run(
        `UPDATE spans SET ${set} FROM ti_resolved r WHERE spans.${window} AND r.moved AND r.org_id = spans.org_id AND r.trace_id = spans.trace_id`,
      );
      for (const r of DAILY_ROLLUPS) await this.bump(`INSERT INTO ${r.table} ${dailyDeltaSql(d, 'spans', 1, `${window} AND ${moved}`, r)}`);
      for (const day of await this.daysOf(`spans WHERE ${window} AND ${moved}`)) this.touched.add(day);
      await this.unmark('ti_batch', dayOf(dayStartMs(range.dayLo) - TRACE_WINDOW_DAYS * DAY_MS), dayOf(dayStartMs(range.dayHi) + TRACE_WINDOW_DAYS * DAY_MS));
    }
    // ti_batch is in start-time order already (withBatchFile), which keeps row groups' start-time ranges narrow.
    await this.run(`INSERT INTO spans (${COLUMN_LIST}) SELECT ${COLUMN_LIST} FROM ti_batch`);
    for (const r of DAILY_ROLLUPS) await this.bump(`INSERT INTO ${r.table} ${dailyDeltaSql(d, 'ti_batch', 1, '', r)}`);
    // The days of the batch's spans, not every day between its first and last: start times are the client's and can be centuries apart.
    for (const day of await this.daysOf('ti_batch')) this.touched.add(day);
    await this.unmark('ti_batch', range.dayLo, range.dayHi);
  }

  /**
   * Since when the batch's traces may have rows stored within a day of
   * theirs: null when none may (most batches of live traffic), the earliest
   * start of those that may, or undefined when the batch's days are too many
   * to keep (its lookup then reads those days, as before the filter).
   */
  private async storedSince(traces: readonly { org: string; trace: string; day: string }[]): Promise<number | null | undefined> {
    const near = new Map<string, string[]>();
    for (const t of traces)
      if (!near.has(t.day))
        near.set(
          t.day,
          [-1, 0, 1].map((n) => dayOf(dayStartMs(t.day) + n * TRACE_WINDOW_DAYS * DAY_MS)),
        );
    const all = new Set([...near.values()].flat());
    // Days beyond the years 0000-9999 (a day either side of the calendar's ends) have no DATE literal: read as before.
    if (all.size > TRACE_FILTER_DAYS || [...all].some((day) => !/^\d{4}-\d{2}-\d{2}$/.test(day))) return undefined;
    for (const day of all) {
      if (this.traceFilter.has(day)) continue;
      // Once per day and process: the day's traces, read in one pass (2M traces: about a second).
      const rows = await this.rows(`SELECT org_id, trace_id, min(first_start) AS s FROM traces WHERE start_date = ${dateLiteral(day)} GROUP BY ALL`);
      this.traceFilter.load(
        day,
        rows.map((r) => [String(r.org_id), String(r.trace_id), Number(r.s)] as const),
      );
    }
    let since: number | null = null;
    for (const t of traces) {
      const s = this.traceFilter.since(near.get(t.day) ?? [], t.org, t.trace);
      if (s !== undefined && (since === null || s < since)) since = s;
    }
    return since;
  }

  /** The distinct UTC days (as text) of the rows of `from` (a table, or a table with its WHERE clause). */
  private async daysOf(from: string): Promise<string[]> {
    return (await this.rows(`SELECT DISTINCT CAST(start_date AS VARCHAR) AS d FROM ${from}`)).map((r) => String(r.d));
  }

  /**
   * The top lists of the days from `lo` to `hi` of the orgs in `source` are
   * out of date (in the write's transaction). Skipped when none of those days
   * was ever marked: an ingest nobody reads meanwhile pays nothing for it.
   */
  private async unmark(source: string, lo: string, hi: string): Promise<void> {
    // The marked days, not the range's: a batch can span centuries (start times are the client's).
    let marked = false;
    for (const day of this.markedDays)
      if (day >= lo && day <= hi) {
        marked = true;
        break;
      }
    if (!marked) return;
    for (const sql of unmarkSql(`SELECT DISTINCT org_id FROM ${source}`, dateLiteral(lo), dateLiteral(hi))) await this.run(sql);
  }

  /** The days a top list mark may exist for (any org, any list): read at start, added to before a mark is written. */
  private async loadMarkedDays(): Promise<void> {
    for (const l of Object.values(TOP_LISTS)) for (const day of await this.daysOf(l.marks)) this.markedDays.add(day);
  }

  /**
   * Rebuilds the org's unmarked days of a top list from `fromDay` to `toDay`,
   * a chunk of days per transaction (inserts go on between chunks). Days
   * with no rows at all, outside the org's first and last day, are only marked.
   */
  private async refreshTopList(name: TopListName, orgId: string, fromDay: string, toDay: string): Promise<void> {
    const list = TOP_LISTS[name];
    const org = sqlString(orgId);
    const range = `org_id = ${org} AND start_date >= ${dateLiteral(fromDay)} AND start_date < ${dateLiteral(toDay)}`;
    const missing = async () => {
      const marked = await this.rows(`SELECT CAST(start_date AS VARCHAR) AS d FROM ${list.marks} WHERE ${range}`);
      return unmarkedDays(fromDay, toDay, new Set(marked.map((r) => String(r.d))));
    };
    // A read that finds its days current takes nothing from the writer (the reader connection: the writer may be mid-transaction).
    const current = await this.query(`SELECT count(*) AS n FROM ${list.marks} WHERE ${range}`);
    if (daysBetween(fromDay, toDay) === Number(current[0]?.n ?? 0)) return;
    for (;;) {
      const done = await this.exclusive(async () => {
        await this.checkFile();
        let days = await missing();
        if (days.length > 2 * TOP_LISTS_CHUNK_DAYS) {
          const [b] = await this.rows(
            `SELECT CAST(min(start_date) AS VARCHAR) AS lo, CAST(max(start_date) AS VARCHAR) AS hi FROM ${list.source} WHERE ${range}`,
          );
          const [lo, hi] = [String(b?.lo ?? '9999-12-31'), String(b?.hi ?? '0000-01-01')];
          const empty = days.filter((day) => day < lo || day > hi);
          for (const day of empty) this.markedDays.add(day);
          if (empty.length > 0)
            await this.run(`INSERT INTO ${list.marks} SELECT ${org}, d, 0 FROM (VALUES ${empty.map((day) => `(${dateLiteral(day)})`).join(', ')}) v(d)`);
          days = days.filter((day) => day >= lo && day <= hi);
        }
        const chunk = days.slice(0, TOP_LISTS_CHUNK_DAYS);
        for (const day of chunk) this.markedDays.add(day);
        await this.transaction(async () => {
          for (const sql of rebuildTopListSql(list, org, chunk, this.topLists.perDay)) await this.run(sql);
        });
        return days.length <= TOP_LISTS_CHUNK_DAYS;
      });
      if (done) return;
    }
  }

  /** Runs an insert into a rollup and counts its rows toward the next compaction. */
  private async bump(sql: string): Promise<void> {
    this.deltaRows += await this.run(sql);
  }

  /**
   * Folds the partial rollup rows of the days written since the last
   * compaction into one row per key. Its cost is the rows of those days (live
   * traffic: today's), never the table's.
   */
  private async compactIfDue(): Promise<void> {
    if (this.deltaRows < this.compactRows) return;
    await this.compactNow();
  }

  async compactRollups(): Promise<void> {
    await this.exclusive(() => this.compactNow(true));
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
  private async compactNow(whole = false): Promise<void> {
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
    await this.transaction(async () => {
      for (const t of tables) {
        const since = whole ? undefined : this.unfolded.get(t.table);
        // A part of a key's rows may net no spans but some cost (a reprice's take-back and re-add): only a whole key's rows may go.
        const [rows, having] = since === undefined ? [inDays, ' HAVING sum(spans) <> 0'] : [`rowid >= ${since}`, ''];
        await this.run(
          `CREATE OR REPLACE TEMP TABLE ti_compact AS SELECT ${t.keys.join(', ')}, ${sums}${t.extra} FROM ${t.table} WHERE ${rows} ` +
            `GROUP BY ${t.keys.join(', ')}${having}`,
        );
        await this.run(`DELETE FROM ${t.table} WHERE ${rows}`);
        await this.run(`INSERT INTO ${t.table} SELECT * FROM ti_compact`);
      }
      await this.run('DROP TABLE ti_compact');
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
      const [r] = await this.rows(`SELECT max(rowid) AS m FROM ${table} WHERE rowid >= ${since}`);
      // A checkpoint's vacuum may renumber rows downwards: then the next fold starts from the table's end, which only leaves rows unfolded.
      const [all] = r?.m === null || r?.m === undefined ? await this.rows(`SELECT max(rowid) AS m FROM ${table}`) : [r];
      this.unfolded.set(table, all?.m === null || all?.m === undefined ? since : Number(all.m) + 1);
    }
  }

  /** Runs `fn` once every write queued before it has finished. */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.writing.then(fn);
    this.writing = run.catch(() => undefined);
    return run;
  }

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
    await this.checkFile();
    // Each statement and window takes the writer on its own: inserts go on between windows.
    const read = (sql: string) => this.exclusive(() => this.rows(sql));
    const org = sqlString(cut.orgId);
    const out: RetentionResult = { deletedRows: 0, emptiedRows: 0, done: true };
    if (cut.rowsBefore !== undefined) {
      const before = cut.rowsBefore;
      const [r] = await read(`SELECT min(start_time) AS lo FROM spans WHERE org_id = ${org} AND start_time < ${before}`);
      if (r?.lo !== null && r?.lo !== undefined) {
        const d = await this.inWindows(Number(r.lo), before, maxRows, (lo, hi) =>
          this.run(`DELETE FROM spans WHERE org_id = ${org} AND start_time >= ${lo} AND start_time < ${hi}`),
        );
        out.deletedRows = d.rows;
        out.done = d.done;
      }
      if (out.done)
        await this.exclusive(() =>
          this.transaction(async () => {
            // The daily rollups, sessions_daily among them, keep their rows; the traces and their list go.
            const old = `org_id = ${org} AND start_date < ${dateLiteral(dayOf(before))}`;
            for (const t of ['traces', TOP_LISTS.trace.table, TOP_LISTS.trace.marks]) await this.run(`DELETE FROM ${t} WHERE ${old}`);
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
        const n = await this.run(`UPDATE spans SET ${empty} WHERE org_id = ${org} AND start_time >= ${lo} AND start_time < ${hi} AND (${nonEmpty})`);
        await this.run(
          `INSERT INTO retention_marks (org_id, texts_before) VALUES (${org}, ${hi}) ON CONFLICT (org_id) DO UPDATE SET texts_before = excluded.texts_before`,
        );
        return n;
      });
      out.emptiedRows = d.rows;
      out.done = d.done;
    }
    if (out.deletedRows + out.emptiedRows > 0) await this.exclusive(() => this.run('CHECKPOINT'));
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
      await this.exclusive(() =>
        this.transaction(async () => {
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
    return this.exclusive(async () => {
      await this.checkFile();
      const org = sqlString(orgId);
      const id = sqlString(target.id);
      const where = `org_id = ${org} AND ${ERASE_COLUMN[target.kind]} = ${id}`;
      await this.run(`CREATE OR REPLACE TEMP TABLE ti_erase AS SELECT DISTINCT trace_id, start_date FROM spans WHERE ${where}`);
      const traceRows = `org_id = ${org} AND trace_id IN (SELECT trace_id FROM ti_erase)`;
      const named: [string, string][] = [
        ['traces', traceRows],
        ...rollupsNaming(target.kind).map((r): [string, string] => [r.table, `org_id = ${org} AND ${r.column} = ${id}`]),
      ];
      const [c] = await this.rows(
        `SELECT (SELECT count(*) FROM spans WHERE ${where}) AS spans, (SELECT count(DISTINCT trace_id) FROM ti_erase) AS traces, ` +
          named.map(([t, w]) => `(SELECT count(*) FROM ${t} WHERE ${w})`).join(' + ') +
          ' AS rollup_rows',
      );
      const counts = { spans: Number(c?.spans ?? 0), traces: Number(c?.traces ?? 0), rollupRows: Number(c?.rollup_rows ?? 0) };
      if (dryRun || counts.spans + counts.rollupRows === 0) return counts;
      const days = await this.daysOf('ti_erase');
      await this.transaction(async () => {
        // The days whose top lists change: those of the spans, and of every rollup row that names the id.
        await this.run(
          'CREATE OR REPLACE TEMP TABLE ti_erase_days AS SELECT start_date FROM ti_erase UNION ' +
            named.map(([t, w]) => `SELECT DISTINCT start_date FROM ${t} WHERE ${w}`).join(' UNION '),
        );
        await this.takeBack(where);
        await this.run(`DELETE FROM spans WHERE ${where}`);
        for (const [t, w] of named) await this.run(`DELETE FROM ${t} WHERE ${w}`);
        const changed = `org_id = ${org} AND start_date IN (SELECT start_date FROM ti_erase_days)`;
        await this.run(`DELETE FROM ${TOP_LISTS.trace.table} WHERE ${traceRows} OR (${changed})`);
        await this.run(`DELETE FROM ${TOP_LISTS.session.table} WHERE ${changed}`);
        for (const l of Object.values(TOP_LISTS)) await this.run(`DELETE FROM ${l.marks} WHERE ${changed}`);
        await this.run('DROP TABLE ti_erase_days');
      });
      for (const d of days) this.touched.add(d);
      await this.compactNow(true);
      await this.run('DROP TABLE IF EXISTS ti_erase');
      return counts;
    });
  }

  async disk(): Promise<{ usedBytes: number; freeBytes: number | undefined }> {
    let usedBytes = 0;
    for (const f of [this.opts.file, `${this.opts.file}.wal`])
      usedBytes += await fs.stat(f).then(
        (st) => st.size,
        () => 0,
      );
    const st = await fs.statfs(path.dirname(this.opts.file)).catch(() => undefined);
    return { usedBytes, freeBytes: st === undefined ? undefined : st.bavail * st.bsize };
  }

  /** Runs `body` in one transaction on the writer; rolled back whole when it throws. */
  private async transaction(body: () => Promise<void>): Promise<void> {
    await this.run('BEGIN TRANSACTION');
    try {
      await body();
      await this.run('COMMIT');
    } catch (e) {
      await this.conn('writer')
        .run('ROLLBACK')
        .catch(() => undefined);
      throw e;
    }
  }

  private async rows(sql: string): Promise<QueryRow[]> {
    try {
      return (await this.conn('writer').runAndReadAll(sql)).getRowObjectsJson() as QueryRow[];
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      await this.reopenIfInvalidated(msg);
      throw e;
    }
  }

  /**
   * Writes a batch of span lines to a load file in start-time order and runs `body` with the
   * SELECT that reads them (in that order: DuckDB keeps a file's order in a table made from it).
   */
  private async withBatchFile(lines: Lines, body: (source: string) => Promise<void>): Promise<void> {
    const file = path.join(this.tmpDir, `load-${process.pid}-${++this.seq}.ndjson`);
    try {
      await fs.mkdir(this.tmpDir, { recursive: true, mode: 0o700 });
      await writeChunks(file, linesByStart(lines));
      await body(
        `SELECT ${batchColumnList()} FROM read_json(${sqlString(file)}, format = 'newline_delimited', ` +
          `columns = ${batchReadColumns()}, maximum_object_size = 33554432)`,
      );
    } finally {
      await fs.rm(file, { force: true });
    }
  }

  /** Writes the lines to a load file and runs `body` with the SELECT that reads them. */
  private async withLoadFile(
    lines: Lines,
    body: (source: string) => Promise<void>,
    columns: readonly (readonly [string, ColumnKind])[] = SPAN_COLUMNS,
  ): Promise<void> {
    const file = path.join(this.tmpDir, `load-${process.pid}-${++this.seq}.ndjson`);
    try {
      // Made again each time: an operator may have removed the folder while the server ran.
      await fs.mkdir(this.tmpDir, { recursive: true, mode: 0o700 });
      await writeChunks(file, chunksOf(lines));
      await body(
        `SELECT ${loadColumnList(columns)} FROM read_json(${sqlString(file)}, format = 'newline_delimited', ` +
          `columns = ${readJsonColumns(columns)}, maximum_object_size = 33554432)`,
      );
    } finally {
      await fs.rm(file, { force: true });
    }
  }

  /** Runs a load statement; returns the rows it changed. */
  private async run(sql: string): Promise<number> {
    try {
      const result = await this.conn('writer').run(sql);
      return Number(result.rowsChanged);
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      if (SCHEMA_BEHIND.test(msg)) throw new SpanStoreSchemaError(msg.split('\n')[0] ?? msg, { cause: e });
      if (REJECTED.test(msg)) throw new SpanStoreRejectedError(msg, { cause: e });
      await this.reopenIfInvalidated(msg);
      throw e;
    }
  }

  /**
   * A checkpoint that failed (a full disk) invalidates the attached file: every
   * later statement fails until it is detached and attached again, which
   * replays DuckDB's own log. Reopened here, so the store recovers by itself
   * once there is room; the failed statement is retried by its caller.
   */
  private async reopenIfInvalidated(msg: string): Promise<void> {
    if (!INVALIDATED.test(msg) || this.instance === undefined) return;
    const reopen = this.checking.then(async () => {
      await this.close();
      await this.start();
    });
    this.checking = reopen.catch(() => undefined);
    await reopen.catch(() => undefined);
  }

  /**
   * An ad-hoc query (`trace-ingest sql`), on a connection of its own inside a
   * READ ONLY transaction, on an instance whose files, network and extensions
   * are off (lockDown): DuckDB itself refuses a write (EXPLAIN ANALYZE DELETE
   * included), a host file, a URL or an extension, whatever the statement.
   * One SELECT or EXPLAIN, for a clear answer to anything else.
   */
  async readOnlyQuery(sql: string, params: readonly unknown[] = [], maxRows?: number): Promise<QueryRow[]> {
    // Never an answer from a file removed under the server (its rows are gone at stop); a replaced one is reopened first.
    await this.checkFile();
    if (this.instance === undefined) throw new Error('span store is not started');
    const conn = await this.instance.connect();
    try {
      await conn.run(`USE ${CATALOG}`);
      const extracted = await conn.extractStatements(sql);
      if (extracted.count !== 1) throw new ReadOnlyQueryError(`give exactly one statement (got ${extracted.count})`);
      await conn.run('BEGIN TRANSACTION READ ONLY');
      const prepared = await extracted.prepare(0).catch(refusal);
      if (prepared.statementType !== StatementType.SELECT && prepared.statementType !== StatementType.EXPLAIN) {
        throw new ReadOnlyQueryError('only SELECT (or EXPLAIN) queries are allowed: the span store is read-only here');
      }
      if (params.length > 0) prepared.bind(params as DuckDBValue[]);
      if (maxRows === undefined) return (await prepared.runAndReadAll().catch(refusal)).getRowObjectsJson() as QueryRow[];
      // Read chunk by chunk (2,048 rows each) and stop at maxRows: the rest is never materialized.
      const out: QueryRow[] = [];
      for await (const rows of (await prepared.stream().catch(refusal)).yieldRowObjectJson()) {
        for (const r of rows as QueryRow[]) {
          if (out.length >= maxRows) return out;
          out.push(r);
        }
      }
      return out;
    } finally {
      // The query's own transaction (or what it left) ends with it; the connection too, with any USE or PRAGMA of its own.
      await conn.run('ROLLBACK').catch(() => undefined);
      conn.closeSync();
    }
  }

  async *queryStream(sql: string, params: readonly unknown[] = []): AsyncIterable<QueryRow> {
    await this.checkFile();
    if (this.instance === undefined) throw new Error('span store is not started');
    // A connection of its own: another statement on a connection ends the stream running on it,
    // while writes through the writer (reprice replaces rows as it reads) leave this snapshot alone.
    const conn = await this.instance.connect();
    try {
      await conn.run(`USE ${CATALOG}`);
      const result = await conn.stream(sql, params as DuckDBValue[]);
      const names = result.deduplicatedColumnNames();
      // One data chunk (up to 2,048 rows) at a time, each reset once its rows are converted: a chunk's
      // native memory is otherwise freed only when a collection finds its wrapper, and wrappers that
      // live through a chunk's rows reach the old generation and hold its memory longer.
      for (;;) {
        const chunk = await result.fetchChunk();
        if (chunk === null || chunk.rowCount === 0) break;
        const columns = chunk.convertColumns(JsonDuckDBValueConverter);
        const count = chunk.rowCount;
        chunk.reset();
        for (let i = 0; i < count; i++) {
          const row: QueryRow = {};
          names.forEach((n, c) => (row[n] = columns[c]?.[i] ?? null));
          yield row;
        }
      }
    } finally {
      conn.closeSync();
    }
  }

  async query(sql: string, params: readonly unknown[] = []): Promise<QueryRow[]> {
    try {
      const reader = await this.conn('reader').runAndReadAll(sql, params as DuckDBValue[]);
      return reader.getRowObjectsJson() as QueryRow[];
    } catch (e) {
      await this.reopenIfInvalidated(e instanceof Error ? e.message : String(e));
      throw e;
    }
  }
}

/** Writes the chunks with vectored writes (off the event loop), never joining them in memory. */
async function writeChunks(file: string, chunks: readonly Buffer[]): Promise<void> {
  const fh = await fs.open(file, 'w');
  try {
    // writev takes at most IOV_MAX (1024) buffers per call.
    for (let i = 0; i < chunks.length; i += 1024) {
      const part = chunks.slice(i, i + 1024);
      let total = 0;
      for (const c of part) total += c.length;
      const { bytesWritten } = await fh.writev(part);
      if (bytesWritten !== total) await fh.write(Buffer.concat(part).subarray(bytesWritten));
    }
  } finally {
    await fh.close();
  }
}

async function fileIdentity(file: string): Promise<string | undefined> {
  try {
    const st = await fs.stat(file);
    return `${st.dev}:${st.ino}`;
  } catch {
    return undefined;
  }
}

/** Load files left by an earlier process (a crash or a full disk between writing one and removing it). */
async function removeLoadFiles(dir: string): Promise<void> {
  for (const name of await fs.readdir(dir)) {
    if (/^load-\d+-\d+\.ndjson$/.test(name)) await fs.rm(path.join(dir, name), { force: true });
  }
}

/** Rows one retention window aims at: a delete or update that size commits in well under a second. */
const EXPIRE_BATCH_ROWS = 50_000;

function sqlString(s: string): string {
  return `'${s.replaceAll("'", "''")}'`;
}

/**
 * What no query on this instance may do, set once the file is attached and
 * migrated, then locked: read or write host files (but the store's own load
 * folder, where the write path's batches are read from), reach a URL, or
 * install or load an extension. DuckDB keeps these for the instance's life.
 */
async function lockDown(conn: DuckDBConnection, allowedDirs: readonly string[]): Promise<void> {
  await conn.run(`SET GLOBAL allowed_directories = [${allowedDirs.map(sqlString).join(', ')}]`);
  await conn.run('SET GLOBAL enable_external_access = false');
  await conn.run('SET GLOBAL autoinstall_known_extensions = false');
  await conn.run('SET GLOBAL autoload_known_extensions = false');
  await conn.run('SET GLOBAL lock_configuration = true');
}

/** DuckDB's refusals of a write (a READ ONLY transaction) or of a file, URL or extension (lockDown), as what they are. */
function refusal(e: unknown): never {
  const msg = e instanceof Error ? e.message : String(e);
  if (/read-only mode|read-only database|Cannot write to database/i.test(msg)) {
    throw new ReadOnlyQueryError(`the span store is read-only here: ${msg.split('\n')[0] ?? msg}`);
  }
  if (/^Permission Error/.test(msg)) {
    throw new ReadOnlyQueryError(`a query reads the span store's tables only (no files, URLs or extensions): ${msg.split('\n')[0] ?? msg}`);
  }
  throw e instanceof Error ? e : new Error(msg);
}
