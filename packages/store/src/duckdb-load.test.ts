import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import {
  completeRow,
  encodeLine,
  encodeRow,
  payloadToRows,
  SPAN_COLUMNS,
  UNPRICED,
  type ColumnKind,
  type SpanCosts,
  type SpanRow,
} from '@trace-ingest/shared/rows';
import { makePayload, makeSpan, makeTrace } from '../../../test/factories.js';
import { batchColumnList, batchReadColumns, linesByStart, startOf } from './duckdb-load.js';
import { DuckDbSpanStore } from './duckdb.js';
import { loadColumnList, readJsonColumns } from './duckdb-migrations.js';

const ctx = { orgId: 'org_a', keyPrefix: 'ti_abcdefghi', receivedAt: 1_700_000_000_000 };
const text = (bufs: readonly Buffer[]) => Buffer.concat(bufs).toString('utf8');

describe('linesByStart', () => {
  it('orders lines by start time, stably, across chunks, and skips empty lines', async () => {
    const a = '{"x":"\\"start_time\\":1","start_time":30}\n';
    const b = '{"start_time":10,"y":1}\n';
    const c = '{"start_time":30,"z":2}\n';
    const d = '{"start_time":-5}\n';
    const out = await linesByStart([Buffer.from(a + b), Buffer.alloc(0), Buffer.from('\n' + c + d)]);
    expect(out.map((l) => l.toString())).toEqual([d, b, a, c]);
  });

  it('joins chunks that split a line, and ends the last line', async () => {
    const out = await linesByStart([Buffer.from('{"start_time":2}\n{"start_'), Buffer.from('time":1}')]);
    expect(text(out)).toBe('{"start_time":1}\n{"start_time":2}\n');
  });

  it('returns the lines as they are when they are in order already', async () => {
    const chunk = Buffer.from('{"start_time":1}\n{"start_time":1}\n{"start_time":2}\n');
    const out = await linesByStart(chunk);
    expect(out).toHaveLength(3);
    expect(out[0]?.buffer).toBe(chunk.buffer);
  });

  it('lets the event loop run while it scans a large batch', async () => {
    const chunks = Array.from({ length: 10_000 }, (_, i) => Buffer.from(`{"start_time":${10_000 - i}}\n`));
    let ran = false;
    setImmediate(() => (ran = true));
    const out = await linesByStart(chunks);
    expect(ran).toBe(true);
    expect(startOf(out[0] as Buffer)).toBe(1);
    expect(out).toHaveLength(10_000);
  });

  it('puts a line without a numeric start time first', async () => {
    expect(startOf(Buffer.from('{"start_time":"soon"}'))).toBe(-Infinity);
    expect(startOf(Buffer.from('{"org_id":"o"}'))).toBe(-Infinity);
    expect(text(await linesByStart(Buffer.from('{"start_time":3}\n{"start_time":"x"}\n')))).toBe('{"start_time":"x"}\n{"start_time":3}\n');
  });
});

describe('batch load columns', () => {
  let dir: string;
  let instance: DuckDBInstance;
  let conn: DuckDBConnection;
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-load-'));
    instance = await DuckDBInstance.create(':memory:');
    conn = await instance.connect();
  });
  afterEach(() => {
    conn.closeSync();
    instance.closeSync();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('loads every column exactly as the plain read_json load does, decimals included', async () => {
    const costs = (v: string): SpanCosts => ({ ...UNPRICED, input_cost: v, total_cost: v, priced: true });
    const values = ['0', '0.000000000000000001', '-0.5', '12', '99999999999999999999.999999999999999999', '-3.000000000000000007', '1.10'];
    const rows = values.flatMap((v, i) => payloadToRows(makePayload({ traces: [makeTrace({ traceId: `t${i}`, spans: [makeSpan()] })] }), ctx, () => costs(v)));
    // A line of an older version, without most keys: the empty value of each kind, as before.
    const file = path.join(dir, 'b.ndjson');
    fs.writeFileSync(file, rows.map((r) => encodeRow(r) + '\n').join('') + '{"org_id":"o","trace_id":"t","span_id":"s","start_time":1}\n');
    const read = (cols: string, list: string) => `SELECT ${list} FROM read_json('${file}', format = 'newline_delimited', columns = ${cols})`;
    await conn.run(`CREATE TABLE plain AS ${read(readJsonColumns(), loadColumnList())}`);
    await conn.run(`CREATE TABLE batch AS ${read(batchReadColumns(), batchColumnList())}`);
    const diff = await conn.runAndReadAll(
      'SELECT (SELECT count(*) FROM (SELECT * FROM plain EXCEPT ALL SELECT * FROM batch)) + ' +
        '(SELECT count(*) FROM (SELECT * FROM batch EXCEPT ALL SELECT * FROM plain)) AS n',
    );
    expect(Number(diff.getRowObjectsJson()[0]?.n)).toBe(0);
    const got = (await conn.runAndReadAll('SELECT input_cost::VARCHAR AS c, typeof(input_cost) AS t FROM batch ORDER BY rowid')).getRowObjectsJson();
    expect(got.map((r) => r.t)).toEqual(Array(values.length + 1).fill('DECIMAL(38,18)'));
    expect(got.map((r) => r.c)).toEqual([
      '0.000000000000000000',
      '0.000000000000000001',
      '-0.500000000000000000',
      '12.000000000000000000',
      '99999999999999999999.999999999999999999',
      '-3.000000000000000007',
      '1.100000000000000000',
      '0.000000000000000000',
    ]);
    // A decimal the column cannot hold is refused, as read_json refuses it (an error the store reports as rejected rows).
    fs.writeFileSync(file, '{"input_cost":"100000000000000000000"}\n');
    await expect(conn.run(`CREATE TABLE big AS ${read(batchReadColumns(), batchColumnList())}`)).rejects.toThrow(/^Conversion Error/);
  });
});

describe('the two line forms', () => {
  it("load the same rows: the write log's lines leave out empty values, which the load gives back", async () => {
    const value = (name: string, kind: ColumnKind, i: number): unknown =>
      ({
        string: `${name}-${i}`,
        int: i + 1,
        nullable_int: i,
        nullable_float: i + 0.5,
        date: '2026-01-01',
        decimal: `${i}.25`,
        bool: true,
        string_array: [`${name}-${i}`, ''],
        int_array: [i, 0],
      })[kind];
    // Every column set, every column empty that may be, and each half of the columns set.
    const shapes = [() => true, () => false, (c: number) => c % 2 === 0, (c: number) => c % 2 === 1];
    const base = payloadToRows(makePayload({ traces: [makeTrace({ traceId: 't', spans: [makeSpan({ spanId: 's' })] })] }), ctx, () => UNPRICED)[0];
    if (base === undefined) throw new Error('no row');
    const rows = shapes.map((set, i) => {
      const row: Record<string, unknown> = { ...base, span_id: `s${i}` };
      SPAN_COLUMNS.forEach(([name, kind], c) => {
        if (!['org_id', 'trace_id', 'span_id', 'start_time', 'end_time', 'start_date', 'received_at'].includes(name))
          // Metadata values go with their keys: a map's two lists are set or left out together.
          row[name] = set(name.endsWith('_values') ? c - 1 : c) ? value(name.replace('_values', '_keys'), kind, i) : completeRow({})[name];
      });
      return row as SpanRow;
    });
    const lines = rows.map((r) => encodeLine(r));
    expect(lines[1]?.length).toBeLessThan((encodeRow(rows[1] as SpanRow).length * 2) / 3);
    const stored = async (text: string) => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-forms-'));
      const store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb'), threads: 1 });
      await store.start();
      try {
        await store.insertLines(Buffer.from(text), rows.length);
        return await store.query('SELECT * EXCLUDE (received_at) FROM spans ORDER BY span_id');
      } finally {
        await store.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    };
    const full = await stored(rows.map((r) => encodeRow(r) + '\n').join(''));
    expect(full).toHaveLength(rows.length);
    expect(await stored(lines.map((l) => l + '\n').join(''))).toEqual(full);
  });
});

describe('DuckDbSpanStore batches', () => {
  it('stores a batch in start-time order whatever order its lines came in, on several threads', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-load-'));
    const store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb'), threads: 2 });
    await store.start();
    try {
      const base = 1_767_225_600_000;
      const spans = Array.from({ length: 5000 }, (_, i) => makeSpan({ spanId: `s${i}`, startTime: base + ((i * 7919) % 5000), endTime: base + 6000 }));
      const rows = payloadToRows(makePayload({ traces: [makeTrace({ traceId: 't', spans })] }), ctx, () => UNPRICED);
      await store.insertLines(Buffer.from(rows.map((r) => encodeRow(r) + '\n').join('')), rows.length);
      const [r] = await store.query(
        'SELECT count(*)::INTEGER AS n, count(*) FILTER (WHERE start_time < prev)::INTEGER AS backwards ' +
          'FROM (SELECT start_time, lag(start_time) OVER (ORDER BY rowid) AS prev FROM spans)',
      );
      expect(r).toEqual({ n: 5000, backwards: 0 });
    } finally {
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
