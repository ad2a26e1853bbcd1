import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { encodeLine, payloadToRows, UNPRICED, type SpanCosts } from '@trace-ingest/shared/rows';
import { makePayload, makeSpan, makeTrace } from '../../../test/factories.js';
import { DuckDBInstance } from '@duckdb/node-api';
import { DuckDbSpanStore } from './duckdb.js';
import { applyDuckDbMigrations } from './duckdb-migrations.js';
import { SpanStoreRejectedError } from './span-store.js';
import { exportRows } from './export.js';

const ctx = { orgId: 'org_a', keyPrefix: 'ti_abcdefghi', receivedAt: 1_700_000_000_000 };
const priced: SpanCosts = {
  input_cost: '0.000002500000000001',
  output_cost: '0.00001',
  reasoning_cost: '0',
  cached_input_cost: '0',
  cache_write_input_cost: '0',
  image_cost: '0',
  web_search_cost: '0',
  request_cost: '0',
  cache_write_1h_input_cost: '0',
  audio_input_cost: '0',
  cached_audio_input_cost: '0',
  audio_output_cost: '0',
  total_cost: '0.000012500000000001',
  priced: true,
  price_source: 'override:test',
};

function lines(rows: ReturnType<typeof payloadToRows>): Buffer {
  return Buffer.from(rows.map((r) => encodeLine(r) + '\n').join(''));
}

describe('DuckDbSpanStore', () => {
  let dir: string;
  let store: DuckDbSpanStore;
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-duck-'));
    store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb') });
    await store.start();
  });
  afterEach(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('stores every column of a row and reads it back exactly', async () => {
    const payload = makePayload({
      traces: [
        makeTrace({
          traceId: 't-1',
          agentName: 'agent ✓',
          workflowName: 'wf',
          workflowRunId: 'run-1',
          sessionId: 's',
          customer: { id: 'cust-1', name: 'Ünïcode 😀', imageUrl: 'https://x.test/a.png' },
          metadata: { env: 'prod', "it's": 'a "quote"\n' },
          spans: [
            makeSpan({
              spanId: 's-1',
              modelId: 'gpt-4o',
              provider: 'openai',
              usage: { inputTokens: 1, outputTokens: 1 },
              ttftMs: 12.5,
              chunkOffsets: [1, 2],
              chunkTokens: [3, 4],
              rateLimit: { tokensRemaining: 9 },
              input: 'x'.repeat(1_000_000),
              metadata: { k: 'v' },
            }),
          ],
        }),
      ],
    });
    await store.insertLines(lines(payloadToRows(payload, ctx, () => priced)), 1);
    const [row] = await store.query(
      "SELECT *, total_cost::VARCHAR AS total_text, trace_metadata['env'] AS env, length(input) AS input_len FROM spans WHERE span_id = ?",
      ['s-1'],
    );
    expect(row).toMatchObject({
      org_id: 'org_a',
      trace_id: 't-1',
      agent_name: 'agent ✓',
      workflow_run_id: 'run-1',
      customer_name: 'Ünïcode 😀',
      trace_metadata_keys: ['env', "it's"],
      trace_metadata_values: ['prod', 'a "quote"\n'],
      env: 'prod',
      start_date: '2026-11-01',
      duration_ms: '1000',
      ttft_ms: 12.5,
      chunk_offsets: ['1', '2'],
      rate_limit_tokens_remaining: '9',
      rate_limit_tokens_limit: null,
      reasoning_duration_ms: null,
      priced: true,
      total_text: '0.000012500000000001',
      input_len: '1000000',
    });
  });

  it('shows a replayed batch once', async () => {
    const rows = payloadToRows(makePayload({ traces: [makeTrace({ spans: [makeSpan(), makeSpan()] })] }), ctx, () => UNPRICED);
    await store.insertLines(lines(rows), 2);
    await store.insertLines(lines(rows), 2);
    const [r] = await store.query('SELECT count(*)::INTEGER AS n FROM spans');
    expect(r?.n).toBe(2);
  });

  it('streams a read chunk by chunk while rows are replaced, and stops when the reader stops', async () => {
    const spans = Array.from({ length: 5000 }, () => makeSpan());
    const rows = payloadToRows(makePayload({ traces: [makeTrace({ spans })] }), ctx, () => UNPRICED);
    await store.insertLines(lines(rows), rows.length);
    let seen = 0;
    for await (const r of store.queryStream('SELECT span_id, name FROM spans WHERE org_id = ? ORDER BY span_id', [ctx.orgId])) {
      expect(typeof r.span_id).toBe('string');
      // A write through the store's writer while the read is open does not end the read.
      if (seen === 10) await store.replaceLines(lines(rows.slice(0, 1)), 1);
      seen++;
    }
    expect(seen).toBe(5000);
    let taken = 0;
    for await (const _ of store.queryStream('SELECT span_id FROM spans')) if (++taken === 3) break;
    expect(taken).toBe(3);
    // The store still answers after an abandoned stream.
    const [n] = await store.query('SELECT count(*)::INTEGER AS n FROM spans');
    expect(n?.n).toBe(5000);
  });

  it('keeps the first copy of a span met again, within a batch or across batches, and the new spans beside it', async () => {
    const first = payloadToRows(
      makePayload({ traces: [makeTrace({ traceId: 't-1', spans: [makeSpan({ spanId: 'a' }), makeSpan({ spanId: 'b' })] })] }),
      ctx,
      () => UNPRICED,
    );
    const later = { ...ctx, receivedAt: ctx.receivedAt + 1000 };
    const again = payloadToRows(
      makePayload({ traces: [makeTrace({ traceId: 't-1', spans: [makeSpan({ spanId: 'b' }), makeSpan({ spanId: 'c' })] })] }),
      later,
      () => UNPRICED,
    );
    const twiceInOne = payloadToRows(
      makePayload({ traces: [makeTrace({ traceId: 't-2', spans: [makeSpan({ spanId: 'd' }), makeSpan({ spanId: 'd', name: 'second' })] })] }),
      later,
      () => UNPRICED,
    );
    const fresh = payloadToRows(makePayload({ traces: [makeTrace({ traceId: 't-3', spans: [makeSpan({ spanId: 'e' })] })] }), later, () => UNPRICED);
    await store.insertLines(lines(first), 2);
    await store.insertLines(lines(again), 2); // conflicts with a stored span
    await store.insertLines(lines(fresh), 1); // after a conflict: none here
    await store.insertLines(lines(twiceInOne), 2); // the same span twice in one batch
    await store.insertLines(lines([...fresh, ...first]), 3); // nothing new at all
    const rows = await store.query('SELECT trace_id, span_id, received_at::DOUBLE AS received_at, name FROM spans ORDER BY trace_id, span_id');
    expect(rows).toEqual([
      { trace_id: 't-1', span_id: 'a', received_at: ctx.receivedAt, name: first[0]?.name },
      { trace_id: 't-1', span_id: 'b', received_at: ctx.receivedAt, name: first[1]?.name },
      { trace_id: 't-1', span_id: 'c', received_at: later.receivedAt, name: again[1]?.name },
      { trace_id: 't-2', span_id: 'd', received_at: later.receivedAt, name: twiceInOne[0]?.name },
      { trace_id: 't-3', span_id: 'e', received_at: later.receivedAt, name: fresh[0]?.name },
    ]);
  });

  it('takes rows in chunks of whole lines, as the write log hands them over', async () => {
    const rows = payloadToRows(makePayload({ traces: [makeTrace({ spans: [makeSpan(), makeSpan(), makeSpan()] }), makeTrace()] }), ctx, () => UNPRICED);
    // More chunks than one vectored write takes (1024), one row each, and empty ones between.
    const chunks = Array.from({ length: 1500 }, (_, i) => (i % 375 === 0 ? lines([rows[i / 375] as (typeof rows)[number]]) : Buffer.alloc(0)));
    await store.insertLines(chunks, rows.length);
    const [r] = await store.query('SELECT count(*)::INTEGER AS n FROM spans');
    expect(r?.n).toBe(4);
  });

  it('rejects rows the table cannot hold with SpanStoreRejectedError', async () => {
    const bad = Buffer.from(JSON.stringify({ org_id: 'o', start_time: 'not a number' }) + '\n');
    await expect(store.insertLines(bad, 1)).rejects.toBeInstanceOf(SpanStoreRejectedError);
  });

  it('keeps rows across a restart', async () => {
    const rows = payloadToRows(makePayload(), ctx, () => UNPRICED);
    await store.insertLines(lines(rows), 1);
    await store.close();
    await store.close();
    store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb') });
    await store.start();
    const [r] = await store.query('SELECT count(*)::INTEGER AS n FROM spans');
    expect(r?.n).toBe(1);
  });

  it('writes row groups of 8,192 rows, so a checkpoint never rewrites a huge one', async () => {
    const payload = makePayload({ traces: Array.from({ length: 20 }, () => makeTrace({ spans: Array.from({ length: 1000 }, () => makeSpan()) })) });
    const rows = payloadToRows(payload, ctx, () => UNPRICED);
    await store.insertLines(lines(rows), rows.length);
    const [r] = await store.query(
      'SELECT count(DISTINCT row_group_id)::INTEGER AS groups, max(count)::INTEGER AS largest ' +
        "FROM pragma_storage_info('spans') WHERE segment_type <> 'VALIDITY'",
    );
    // With DuckDB's default (122,880 rows) these 20,000 rows would be one group.
    expect(r?.groups).toBeGreaterThanOrEqual(3);
    expect(r?.largest).toBeLessThanOrEqual(8192);
  });

  it('opens a file written by a plain DuckDB instance, and the file stays a plain DuckDB file', async () => {
    await store.close();
    const file = path.join(dir, 'older.duckdb');
    const plain = await DuckDBInstance.create(file);
    const conn = await plain.connect();
    await applyDuckDbMigrations(conn);
    conn.closeSync();
    plain.closeSync();
    store = new DuckDbSpanStore({ file });
    await store.start();
    await store.insertLines(lines(payloadToRows(makePayload(), ctx, () => UNPRICED)), 1);
    await store.close();
    const again = await DuckDBInstance.create(file);
    const c = await again.connect();
    const n = (await c.runAndReadAll('SELECT count(*)::INTEGER AS n FROM spans')).getRowObjectsJson()[0]?.n;
    c.closeSync();
    again.closeSync();
    expect(n).toBe(1);
    store = new DuckDbSpanStore({ file });
    await store.start();
  });
});

describe('DuckDbSpanStore and its load-file folder', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-duck-tmp-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('makes the folder again when it was removed while running, and removes leftover load files at start', async () => {
    const tmp = path.join(dir, 'tmp');
    fs.mkdirSync(tmp);
    fs.writeFileSync(path.join(tmp, 'load-123-7.ndjson'), 'x'.repeat(1000));
    fs.writeFileSync(path.join(tmp, 'keep.txt'), 'not ours');
    const store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb') });
    await store.start();
    try {
      expect(fs.readdirSync(tmp)).toEqual(['keep.txt']);
      fs.rmSync(tmp, { recursive: true });
      await store.insertLines(lines(payloadToRows(makePayload(), ctx, () => UNPRICED)), 1);
      expect(Number((await store.query('SELECT count(*)::INTEGER AS n FROM spans'))[0]?.n)).toBe(1);
      expect(fs.readdirSync(tmp)).toEqual([]);
    } finally {
      await store.close();
    }
  });
});

describe('DuckDbSpanStore under a small memory limit', () => {
  it('exports more than its memory limit in start order, a day at a time', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-duck-mem-'));
    // Rows not checkpointed yet stay in memory: a small threshold, as the limit is small.
    const store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb'), memoryLimit: '100MiB', threads: 1, checkpointThreshold: '16MB' });
    await store.start();
    try {
      // 80,000 spans of 2 KB text that does not compress over 7 days: ~160 MB, well over the limit.
      for (let b = 0; b < 32; b++) {
        const traces = Array.from({ length: 625 }, (_, t) =>
          makeTrace({
            traceId: `m-${b}-${t}`,
            spans: Array.from({ length: 4 }, (_, i) =>
              makeSpan({
                spanId: `s${i}`,
                startTime: 1_767_225_600_000 + (b * 625 + t) * 30_000 + i,
                endTime: 1_767_225_600_001,
                input: randomBytes(1500).toString('base64'),
              }),
            ),
          }),
        );
        const rows = payloadToRows(makePayload({ traces }), ctx, () => UNPRICED);
        await store.insertLines(lines(rows), rows.length);
      }
      // Opened again, as a CLI opens the file: the rows are in the file, not in memory.
      await store.close();
      await store.start();
      let n = 0;
      let last = 0;
      for await (const r of exportRows(store, { orgId: 'org_a', from: 1_767_225_600_000, to: 1_767_225_600_000 + 8 * 86_400_000 })) {
        expect(Number(r.start_time)).toBeGreaterThanOrEqual(last);
        last = Number(r.start_time);
        n++;
      }
      expect(n).toBe(80_000);
    } finally {
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
