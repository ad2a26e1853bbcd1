import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { SPAN_COLUMNS, type ColumnKind } from '@trace-ingest/shared/rows';
import { DUCKDB_TYPES, loadColumnList } from './duckdb-migrations.js';
import { chunksOf, type Lines } from './span-store.js';

const NEWLINE = 0x0a;
const START_KEY = Buffer.from('"start_time":');
/** Lines scanned between yields to the event loop (~3 ms of `small` lines). */
const YIELD_LINES = 4096;

/**
 * The lines of a batch in start-time order (stable: lines that start at the
 * same time keep their order), as views of the given chunks, so the table
 * built from them is in the order the spans are stored in and no SQL sort of
 * whole rows is needed. A line without a readable start time sorts first; the
 * load rejects it as it would have unsorted. The scan (~0.7 µs a line) yields
 * every YIELD_LINES lines: a 32,768-row insert would hold the event loop, and
 * every request waiting on it, for 20-30 ms.
 */
export async function linesByStart(lines: Lines): Promise<Buffer[]> {
  const chunks = chunksOf(lines).filter((c) => c.length > 0);
  // Chunks hold whole lines (the write log's records); anything else is joined first.
  const whole = chunks.every((c) => c[c.length - 1] === NEWLINE) ? chunks : [withNewline(Buffer.concat(chunks))];
  const out: Buffer[] = [];
  const starts: number[] = [];
  let sorted = true;
  let last = -Infinity;
  let scanned = 0;
  for (const chunk of whole) {
    if (scanned >= YIELD_LINES) {
      scanned = 0;
      await yieldToLoop();
    }
    for (let at = 0; at < chunk.length;) {
      const end = chunk.indexOf(NEWLINE, at);
      const line = chunk.subarray(at, end + 1);
      at = end + 1;
      if (line.length === 1) continue;
      const start = startOf(line);
      if (start < last) sorted = false;
      last = start;
      out.push(line);
      starts.push(start);
      scanned++;
    }
  }
  if (sorted) return out;
  const order = out.map((_, i) => i);
  order.sort((a, b) => (starts[a] as number) - (starts[b] as number) || a - b);
  return order.map((i) => out[i] as Buffer);
}

function withNewline(b: Buffer): Buffer {
  return b.length > 0 && b[b.length - 1] !== NEWLINE ? Buffer.concat([b, Buffer.from('\n')]) : b;
}

/**
 * The start time of a line: the integer after its `"start_time":` key. In a
 * JSON line that text is the key itself (a quote inside a string value is
 * escaped). -Infinity when there is none.
 */
export function startOf(line: Buffer): number {
  const at = line.indexOf(START_KEY);
  if (at < 0) return -Infinity;
  let i = at + START_KEY.length;
  let neg = false;
  if (line[i] === 0x2d) {
    neg = true;
    i++;
  }
  let n = 0;
  let digits = 0;
  for (; i < line.length; i++) {
    const c = line[i] as number;
    if (c < 0x30 || c > 0x39) break;
    n = n * 10 + (c - 0x30);
    digits++;
  }
  if (digits === 0) return -Infinity;
  return neg ? -n : n;
}

/**
 * read_json's `columns` for a batch of span lines: decimals are read as text
 * and cast in the select list (`batchColumnList`), where a zero, most cost
 * columns of most spans, skips the cast.
 */
export function batchReadColumns(columns: readonly (readonly [string, ColumnKind])[] = SPAN_COLUMNS): string {
  return `{${columns.map(([n, k]) => `'${n}': '${k === 'decimal' ? 'VARCHAR' : DUCKDB_TYPES[k]}'`).join(', ')}}`;
}

/** The select list of a batch read with `batchReadColumns`: as `loadColumnList`, the decimals cast exactly from their text. */
export function batchColumnList(columns: readonly (readonly [string, ColumnKind])[] = SPAN_COLUMNS): string {
  return columns
    .map(([n, k]) =>
      k === 'decimal'
        ? `CASE WHEN "${n}" IS NULL OR "${n}" = '0' THEN 0::${DUCKDB_TYPES.decimal} ELSE CAST("${n}" AS ${DUCKDB_TYPES.decimal}) END AS "${n}"`
        : loadColumnList([[n, k]]),
    )
    .join(', ');
}
