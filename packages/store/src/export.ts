import { once } from 'node:events';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { csvCell } from '@trace-ingest/shared/csv';
import { DAY_MS } from '@trace-ingest/shared/dates';
import { encodeRow, SPAN_COLUMNS } from '@trace-ingest/shared/rows';
import { readJsonColumns } from './duckdb-migrations.js';
import { FOCUS_COLUMN_NAMES, focusJsonColumns } from './focus.js';
import { reportDialect } from './reports.js';
import { storedColumns, storedToRow } from './row-codec.js';
import type { QueryRow, SpanStore } from './span-store.js';

/**
 * Exports of an org's spans: the columns of the `spans` table, one row per
 * span, streamed from the store and written as they arrive, so memory stays
 * that of one chunk whatever the range holds. Parquet is written by DuckDB's
 * own writer (for ClickHouse installs too), from a work file of the rows
 * beside the output. A FOCUS chargeback file (store/focus.ts) goes through
 * the same CSV and Parquet writers with its own columns.
 */

export type ExportFormat = 'parquet' | 'csv' | 'ndjson';
/** The file a FOCUS export is written as. */
export type FocusFileType = 'csv' | 'parquet';

export interface ExportFilter {
  orgId: string;
  /** Epoch ms, inclusive. */
  from: number;
  /** Epoch ms, exclusive. */
  to: number;
}

const COLUMN_NAMES = SPAN_COLUMNS.map(([n]) => n);

/** The query of an export (one row per span, start order), for either store, values bound. */
export function exportQuery(kind: SpanStore['kind'], f: ExportFilter): { sql: string; params: unknown[] } {
  const dialect = reportDialect(kind);
  const columns = storedColumns(dialect);
  // ClickHouse: the text casts are aliased as the columns, so the filter runs in a subquery on the columns themselves.
  const source = `(SELECT * FROM ${dialect.from} WHERE org_id = ? AND start_time >= ? AND start_time < ? ORDER BY start_time, trace_id, span_id) s`;
  return { sql: `SELECT ${columns} FROM ${source}`, params: [f.orgId, f.from, f.to] };
}

const EXPORT_WINDOW_MS = DAY_MS;

/**
 * An export's rows, one UTC day of start times at a time, each day in start
 * order: the store sorts a day, never the whole range, so its memory is that
 * of the largest day whatever the range (a month of 2 KB texts sorted at once
 * ran DuckDB out of a 256 MiB limit).
 */
export async function* exportRows(store: SpanStore, f: ExportFilter): AsyncIterable<QueryRow> {
  for (let lo = f.from; lo < f.to;) {
    const hi = Math.min(f.to, (Math.floor(lo / EXPORT_WINDOW_MS) + 1) * EXPORT_WINDOW_MS);
    const { sql, params } = exportQuery(store.kind, { orgId: f.orgId, from: lo, to: hi });
    yield* store.queryStream(sql, params);
    lo = hi;
  }
}

/** The spans an export will write (for its progress). */
export async function exportCount(store: SpanStore, f: ExportFilter): Promise<number> {
  const dialect = reportDialect(store.kind);
  const [r] = await store.query(`SELECT count(*) AS n FROM ${dialect.from} WHERE org_id = ? AND start_time >= ? AND start_time < ?`, [f.orgId, f.from, f.to]);
  return Number(r?.n ?? 0);
}

export interface ExportWriter {
  /** Canonical lines (encodeRow, one per line), whole lines per chunk. */
  write(lines: Buffer): Promise<void>;
  /** Finishes the file; idempotent. */
  close(): Promise<void>;
  /** Removes a partial file after a failure. */
  abort(): Promise<void>;
}

/** Bytes written through a file stream, waiting when it is full. */
class LineFile {
  private readonly stream: fs.WriteStream;
  constructor(readonly file: string) {
    this.stream = fs.createWriteStream(file, { flags: 'w' });
  }
  async write(data: string | Buffer): Promise<void> {
    // events.once takes its 'error' listener off again once 'drain' comes: listeners of their own would pile up, one per full buffer.
    if (!this.stream.write(data)) await once(this.stream, 'drain');
  }
  close(): Promise<void> {
    return new Promise((resolve, reject) => this.stream.end((e?: Error | null) => (e ? reject(e) : resolve())));
  }
}

/** The canonical lines are NDJSON already: passed through as bytes. */
class NdjsonWriter implements ExportWriter {
  private readonly out: LineFile;
  private closed = false;
  constructor(file: string) {
    this.out = new LineFile(file);
  }
  async write(lines: Buffer): Promise<void> {
    await this.out.write(lines);
  }
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.out.close();
  }
  async abort(): Promise<void> {
    await this.close().catch(() => undefined);
    await fsp.rm(this.out.file, { force: true });
  }
}

/** NDJSON lines (one object each) as CSV of `columns`, in that order, through the one CSV cell rule (shared/csv.ts). */
class CsvWriter implements ExportWriter {
  private readonly out: LineFile;
  private header = false;
  private closed = false;
  constructor(
    file: string,
    private readonly columns: readonly string[],
  ) {
    this.out = new LineFile(file);
  }
  async write(lines: Buffer): Promise<void> {
    let text = this.header ? '' : `${this.columns.join(',')}\n`;
    this.header = true;
    for (const line of lines.toString('utf8').split('\n')) {
      if (line === '') continue;
      const row = JSON.parse(line) as Record<string, unknown>;
      text += this.columns.map((c) => csvCell(row[c])).join(',') + '\n';
    }
    await this.out.write(text);
  }
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (!this.header) await this.out.write(`${this.columns.join(',')}\n`);
    await this.out.close();
  }
  async abort(): Promise<void> {
    await this.close().catch(() => undefined);
    await fsp.rm(this.out.file, { force: true });
  }
}

/**
 * The rows as canonical lines in a work file beside the output, then one
 * DuckDB COPY from it into Parquet: DuckDB reads the lines and writes row
 * groups of ROW_GROUP_ROWS as it goes, within its memory limit.
 */
class ParquetWriter implements ExportWriter {
  private readonly work: string;
  private readonly lines: LineFile;
  private closed = false;

  constructor(
    private readonly file: string,
    /** The lines' columns and their types, as read_json takes them. */
    private readonly columns: string,
  ) {
    this.work = fs.mkdtempSync(path.join(path.dirname(path.resolve(file)), '.ti-export-'));
    this.lines = new LineFile(path.join(this.work, 'rows.ndjson'));
  }

  async write(lines: Buffer): Promise<void> {
    await this.lines.write(lines);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      await this.lines.close();
      const db = await DuckDBInstance.create(':memory:', { memory_limit: '160MB', threads: '1', temp_directory: this.work, preserve_insertion_order: 'false' });
      const c = await db.connect();
      try {
        const source = `read_json(${quote(this.lines.file)}, format = 'newline_delimited', columns = ${this.columns}, maximum_object_size = 33554432)`;
        // Small row groups: each is held whole while written, and a span may carry megabytes of text.
        await c.run(`COPY (SELECT * FROM ${source}) TO ${quote(path.resolve(this.file))} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE ${ROW_GROUP_ROWS})`);
      } finally {
        c.closeSync();
        db.closeSync();
      }
    } finally {
      await fsp.rm(this.work, { recursive: true, force: true });
    }
  }

  async abort(): Promise<void> {
    this.closed = true;
    await this.lines.close().catch(() => undefined);
    await fsp.rm(this.work, { recursive: true, force: true });
    await fsp.rm(this.file, { force: true });
  }
}

const ROW_GROUP_ROWS = 8192;
const quote = (s: string): string => `'${s.replaceAll("'", "''")}'`;

export function exportWriter(format: ExportFormat, file: string): ExportWriter {
  return format === 'parquet' ? new ParquetWriter(file, readJsonColumns()) : format === 'csv' ? new CsvWriter(file, COLUMN_NAMES) : new NdjsonWriter(file);
}

/** A FOCUS chargeback file: CSV (decimals as exact text) or Parquet (DECIMAL(38,18), UTC timestamps, Tags as JSON). */
export function focusWriter(type: FocusFileType, file: string): ExportWriter {
  return type === 'parquet' ? new ParquetWriter(file, focusJsonColumns()) : new CsvWriter(file, FOCUS_COLUMN_NAMES);
}

/** A store's rows as canonical lines, a chunk of whole lines at a time (what the admin socket sends, and a writer takes). */
export async function* exportLines(rows: AsyncIterable<QueryRow>, chunk = 2000): AsyncIterable<Buffer> {
  let buf: string[] = [];
  for await (const r of rows) {
    buf.push(encodeRow(storedToRow(r)));
    if (buf.length >= chunk) {
      yield Buffer.from(buf.join('\n') + '\n');
      buf = [];
    }
  }
  if (buf.length > 0) yield Buffer.from(buf.join('\n') + '\n');
}

/**
 * Writes chunks of canonical lines as they come (they may split a line:
 * only whole lines reach the writer); reports the running count of rows.
 */
export async function writeExport(
  chunks: AsyncIterable<Buffer>,
  writer: ExportWriter,
  onProgress: (written: number) => void = () => undefined,
): Promise<number> {
  let written = 0;
  let rest: Buffer = Buffer.alloc(0);
  try {
    for await (const c of chunks) {
      const data = rest.length === 0 ? c : Buffer.concat([rest, c]);
      const end = data.lastIndexOf(10);
      if (end < 0) {
        rest = data;
        continue;
      }
      const whole = data.subarray(0, end + 1);
      rest = Buffer.from(data.subarray(end + 1));
      for (let i = whole.indexOf(10); i >= 0; i = whole.indexOf(10, i + 1)) written++;
      await writer.write(whole);
      onProgress(written);
    }
    if (rest.length > 0) throw new Error('the export ended in the middle of a row');
    await writer.close();
    onProgress(written);
    return written;
  } catch (e) {
    await writer.abort();
    throw e;
  }
}
