import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createClient, ClickHouseLogLevel, type ClickHouseClient } from '@clickhouse/client';
import { encodeLine, spanToRow, SPAN_COLUMNS, UNPRICED, type SpanCosts, type SpanRow } from '@trace-ingest/shared/rows';
import type { Span, Trace } from '@trace-ingest/shared/schema';
import { applyClickHouseMigrations, bindParams, ClickHouseSpanStore, loadClickHouseMigrations, unquoteCosts } from '@trace-ingest/store/clickhouse';
import { createSpanStore } from '@trace-ingest/store/open-stores';
import { SpanStoreRejectedError, SpanStoreSchemaError } from '@trace-ingest/store/span-store';
import { startClickHouse, type ClickHouseTestServer } from './support/clickhouse-server.js';

const RECEIVED_AT = Date.UTC(2026, 10, 2, 8, 0, 0);
const ctx = { orgId: 'org_ch', keyPrefix: 'ti_abc123', receivedAt: RECEIVED_AT };

let seq = 0;
function span(partial: Partial<Span> = {}): Span {
  const n = ++seq;
  return {
    spanId: `span-${n}`,
    spanType: 'llm',
    name: `call ${n}`,
    startTime: Date.UTC(2026, 10, 1, 23, 59, 59, 500),
    endTime: Date.UTC(2026, 10, 2, 0, 0, 1),
    ...partial,
  };
}
function trace(spans: Span[], partial: Partial<Trace> = {}): Trace {
  return { traceId: `trace-${++seq}`, spans, ...partial };
}
function rowsOf(t: Trace, costs: SpanCosts = UNPRICED, receivedAt = RECEIVED_AT): SpanRow[] {
  return t.spans.map((s) => spanToRow(t, s, { ...ctx, receivedAt }, costs));
}
const linesOf = (rows: readonly SpanRow[]) => Buffer.from(rows.map((r) => encodeLine(r) + '\n').join(''));

/** A decimal string without trailing fractional zeros: ClickHouse prints all 18 digits. */
function canonicalDecimal(s: string): string {
  if (!s.includes('.')) return s === '-0' ? '0' : s;
  const t = s.replace(/0+$/, '').replace(/\.$/, '');
  return t === '-0' ? '0' : t;
}

/** Every column of SPAN_COLUMNS, decimals as text so no float touches them. */
const SELECT_ALL = SPAN_COLUMNS.map(([name, kind]) => (kind === 'decimal' ? `toString(${name}) AS ${name}` : name)).join(', ');

function expectRowEquals(actual: Record<string, unknown> | undefined, expected: SpanRow): void {
  expect(actual).toBeDefined();
  for (const [name, kind] of SPAN_COLUMNS) {
    const got = actual?.[name];
    const want = expected[name];
    if (kind === 'decimal') expect([name, canonicalDecimal(String(got))]).toEqual([name, canonicalDecimal(String(want))]);
    else if (kind === 'bool') expect([name, got]).toEqual([name, want ? 1 : 0]);
    else expect([name, got]).toEqual([name, want]);
  }
}

describe('ClickHouseSpanStore on a real clickhouse-server', () => {
  let ch: ClickHouseTestServer;
  let store: ClickHouseSpanStore;
  let admin: ClickHouseClient;
  const db = `ti_test_${randomBytes(5).toString('hex')}`;
  const client = (database: string) => createClient({ url: `http://127.0.0.1:${ch.httpPort}`, database, log: { level: ClickHouseLogLevel.OFF } });

  beforeAll(async () => {
    ch = await startClickHouse();
    console.info(`clickhouse-server ready on :${ch.httpPort} in ${ch.startMs.toFixed(0)} ms`);
    admin = client('default');
    store = new ClickHouseSpanStore({ url: ch.urlFor(db), requestTimeoutMs: 10_000 });
    await store.start();
  });

  afterAll(async () => {
    await store?.close();
    await admin?.command({ query: `DROP DATABASE IF EXISTS ${db}` }).catch(() => undefined);
    await admin?.close();
    await ch?.dispose();
  });

  it('runs on the ClickHouse the tests are about: the installed Debian package', async () => {
    const [r] = await store.query('SELECT version() AS v');
    console.info(`server version ${String(r?.v)}`);
    // e.g. 18.16.1+ds-7.4 for the package, 18.16.1 from the server.
    const packaged = execFileSync('dpkg-query', ['-W', '-f', '${Version}', 'clickhouse-server'], { encoding: 'utf8' })
      .replace(/^\d+:/, '')
      .replace(/[+~-].*$/, '');
    expect(packaged).toMatch(/^\d+\.\d+\.\d+$/);
    expect(r?.v).toBe(packaged);
  });

  it('logs its migrations through the logger it is opened with', async () => {
    const fresh = `${db}_logged`;
    const infos: { obj: object; msg: string }[] = [];
    const logger = { warn: () => undefined, info: (obj: object, msg: string) => infos.push({ obj, msg }) };
    const s = await createSpanStore({ sqliteFile: '', duckdbFile: '', clickhouseUrl: ch.urlFor(fresh), logger });
    onTestFinished(async () => {
      await s.close();
      await admin.command({ query: `DROP DATABASE IF EXISTS ${fresh}` });
    });
    await s.start();
    expect(infos).toEqual([
      {
        obj: expect.objectContaining({
          database: fresh,
          applied: [
            '0001_spans',
            '0002_rollups',
            '0003_sessions_workflows_daily',
            '0004_retention_columns',
            '0005_customers_models_daily',
            '0006_top_lists',
            '0007_billing_dimensions',
            '0008_derived_tables',
            '0009_top_lists_derived',
          ],
        }) as unknown,
        msg: 'ClickHouse migrations applied',
      },
    ]);
  });

  it('applies the migrations once: again, and from several instances at once, changes nothing', async () => {
    const c = client(db);
    try {
      expect(await applyClickHouseMigrations(c, db)).toEqual([]);
      await Promise.all(Array.from({ length: 4 }, () => applyClickHouseMigrations(c, db)));
      const others = Array.from({ length: 4 }, () => new ClickHouseSpanStore({ url: ch.urlFor(db) }));
      await Promise.all(others.map((s) => s.start()));
      await Promise.all(others.map((s) => s.close()));
      await expect(applyClickHouseMigrations(c, 'some_other_db')).rejects.toThrow(/not "some_other_db"/);
    } finally {
      await c.close();
    }
    const versions = await store.query('SELECT version, count() AS n FROM schema_migrations FINAL GROUP BY version ORDER BY version');
    expect(versions).toEqual([
      { version: '0001_spans', n: 1 },
      { version: '0002_rollups', n: 1 },
      { version: '0003_sessions_workflows_daily', n: 1 },
      { version: '0004_retention_columns', n: 1 },
      { version: '0005_customers_models_daily', n: 1 },
      { version: '0006_top_lists', n: 1 },
      { version: '0007_billing_dimensions', n: 1 },
      { version: '0008_derived_tables', n: 1 },
      { version: '0009_top_lists_derived', n: 1 },
    ]);
    const cols = await store.query("SELECT name FROM system.columns WHERE database = ? AND table = 'spans'", [db]);
    // Beside the rows' columns: the derived metadata pairs, the rollups' weight (0002_rollups) and the retention written for TTLs (0004).
    const extra = new Set(['trace_metadata', 'span_metadata', 'rollup_weight', 'retention_days', 'text_days']);
    expect(cols.map((c2) => String(c2.name)).filter((n) => !extra.has(n))).toEqual(SPAN_COLUMNS.map(([n]) => n));
  });

  it('migrates a fresh database from several replicas starting at once', async () => {
    const fresh = `${db}_race`;
    const replicas = Array.from({ length: 6 }, () => new ClickHouseSpanStore({ url: ch.urlFor(fresh) }));
    try {
      await Promise.all(replicas.map((s) => s.start()));
      const [r] = await replicas[0]!.query('SELECT countDistinct(version) AS v FROM schema_migrations');
      expect(r?.v).toBe(9);
    } finally {
      await Promise.all(replicas.map((s) => s.close()));
      await admin.command({ query: `DROP DATABASE IF EXISTS ${fresh}` });
    }
  });

  it('upgrades a migrations table from before checksums and warns about a changed file', async () => {
    const old = `${db}_old`;
    await admin.command({ query: `CREATE DATABASE ${old}` });
    const c = client(old);
    try {
      await c.command({ query: 'CREATE TABLE schema_migrations (version String, applied_at DateTime) ENGINE = MergeTree ORDER BY version' });
      const [first] = await loadClickHouseMigrations();
      for (const query of first?.statements ?? []) await c.command({ query, clickhouse_settings: { allow_experimental_low_cardinality_type: 1 } });
      await c.command({ query: "INSERT INTO schema_migrations VALUES ('0001_spans', now())" });
      const warnings: object[] = [];
      const logger = { warn: (o: object) => warnings.push(o), info: () => undefined };
      expect(await applyClickHouseMigrations(c, old, logger)).toEqual([
        '0002_rollups',
        '0003_sessions_workflows_daily',
        '0004_retention_columns',
        '0005_customers_models_daily',
        '0006_top_lists',
        '0007_billing_dimensions',
        '0008_derived_tables',
        '0009_top_lists_derived',
      ]);
      expect(warnings).toEqual([expect.objectContaining({ version: '0001_spans', recorded: '' })]);
    } finally {
      await c.close();
      await admin.command({ query: `DROP DATABASE IF EXISTS ${old}` });
    }
  });

  it('stores every column of a real row exactly', async () => {
    const big = 'é'.repeat(250_000) + 'x'.repeat(500_000); // 1 MB of UTF-8
    const full = span({
      parentSpanId: 'parent-0',
      spanType: 'agent',
      name: 'plan → act 😀',
      status: 'error',
      errorMessage: "quota 'exceeded'\n\\retry\\",
      provider: 'openai',
      modelId: 'gpt-4o-2024-08-06',
      usage: {
        inputTokens: 1_000_000,
        outputTokens: 2,
        totalTokens: 1_000_002,
        reasoningTokens: 3,
        cachedInputTokens: 4,
        cacheWriteInputTokens: 5,
        imageCount: 6,
        webSearchCount: 7,
        requestCount: 8,
      },
      ttftMs: 12.75,
      chunkOffsets: [0, 15, 3_000_000_000],
      chunkTokens: [1, 2, 3],
      reasoningOffsets: [],
      reasoningChunkTokens: [9],
      reasoningDurationMs: 0,
      input: big,
      output: '{"json": "as text", "tab": "\t"}',
      toolCatalog: '[]',
      modelCallMs: 1234,
      systemFingerprint: 'fp_abc',
      safetyMetadata: '{}',
      sources: 'https://example.com/?q=a&b=c',
      rateLimit: { requestsLimit: 100, requestsRemaining: 99, requestsResetMs: 0, tokensLimit: 9_007_199_254_740_991 },
      metadata: { k: 'v', ключ: 'значение', '': 'empty key' },
    });
    const sparse = span({ spanType: 'tool', name: 'bare' });
    const t = trace([full, sparse], {
      traceName: 'it\'s a "trace"',
      agentName: 'agent',
      workflowName: 'wf',
      workflowRunId: 'run-1',
      sessionId: 'sess-1',
      customer: { id: 'cust-1', name: 'Zoë 🚀', imageUrl: 'https://img.example/zoe.png' },
      metadata: { env: 'prod', 'a\tb': 'line\nbreak' },
    });
    const costs: SpanCosts = {
      input_cost: '0.000000000000000001',
      output_cost: '12345678901234567890.123456789012345678',
      reasoning_cost: '0.5',
      cached_input_cost: '-0.25',
      cache_write_input_cost: '3',
      image_cost: '0',
      web_search_cost: '0.010000000000000001',
      request_cost: '99999999999999999999.999999999999999999',
      cache_write_1h_input_cost: '0',
      audio_input_cost: '0',
      cached_audio_input_cost: '0',
      audio_output_cost: '0',
      total_cost: '12345678901234567890.984263789012345680',
      priced: true,
      price_source: 'catalog:2026-11-01',
    };
    const rows = rowsOf(t, costs);
    await store.insertLines(linesOf(rows), rows.length);

    const got = await store.query(`SELECT ${SELECT_ALL} FROM spans FINAL WHERE org_id = ? AND trace_id = ? ORDER BY span_id`, [ctx.orgId, t.traceId]);
    expect(got).toHaveLength(2);
    const bySpan = new Map(got.map((r) => [r.span_id, r]));
    expectRowEquals(bySpan.get(full.spanId), rows[0]!);
    expectRowEquals(bySpan.get(sparse.spanId), rows[1]!);
    expect(String(bySpan.get(full.spanId)?.input).length).toBe(750_000);
    expect(bySpan.get(full.spanId)?.start_date).toBe('2026-11-01');
    expect(bySpan.get(sparse.spanId)?.ttft_ms).toBeNull();
    expect(bySpan.get(sparse.spanId)?.model_call_ms).toBeNull();

    const [meta] = await store.query('SELECT trace_metadata, span_metadata FROM spans FINAL WHERE trace_id = ? AND span_id = ?', [t.traceId, full.spanId]);
    expect(meta).toEqual({
      trace_metadata: [
        ['env', 'prod'],
        ['a\tb', 'line\nbreak'],
      ],
      span_metadata: [
        ['k', 'v'],
        ['ключ', 'значение'],
        ['', 'empty key'],
      ],
    });
    const kv = await store.query('SELECT kv[1] AS k, kv[2] AS v FROM spans FINAL ARRAY JOIN span_metadata AS kv WHERE trace_id = ? AND kv[1] = ?', [
      t.traceId,
      'ключ',
    ]);
    expect(kv).toEqual([{ k: 'ключ', v: 'значение' }]);
  });

  it('refuses a cost outside Decimal(38,18) as rejected data', async () => {
    const t = trace([span()]);
    const rows = rowsOf(t, { ...UNPRICED, total_cost: '123456789012345678901.5', priced: true });
    await expect(store.insertLines(linesOf(rows), 1)).rejects.toBeInstanceOf(SpanStoreRejectedError);
  });

  it('shows a retried insert once, with FINAL and with LIMIT 1 BY / argMax', async () => {
    const t = trace([span(), span(), span()]);
    const first = rowsOf(t);
    await store.insertLines(linesOf(first), 3);
    await store.insertLines(linesOf(first), 3);
    // A repricing: the same spans again with a newer received_at and new costs.
    const repriced = rowsOf(t, { ...UNPRICED, total_cost: '0.42', priced: true, price_source: 'override:7' }, RECEIVED_AT + 1000);
    await store.replaceLines(linesOf(repriced), 3);

    const [raw] = await store.query('SELECT count() AS n FROM spans WHERE trace_id = ?', [t.traceId]);
    expect(raw?.n).toBeGreaterThanOrEqual(3); // copies until a merge; FINAL hides them
    const final = await store.query(
      'SELECT span_id, toString(total_cost) AS c, price_source FROM spans FINAL WHERE org_id = ? AND trace_id = ? ORDER BY span_id',
      [ctx.orgId, t.traceId],
    );
    expect(final).toHaveLength(3);
    for (const r of final) expect([canonicalDecimal(String(r.c)), r.price_source]).toEqual(['0.42', 'override:7']);

    const limitBy = await store.query(
      `SELECT span_id, toString(total_cost) AS c FROM spans WHERE org_id = ? AND trace_id = ?
       ORDER BY span_id, received_at DESC LIMIT 1 BY org_id, trace_id, span_id`,
      [ctx.orgId, t.traceId],
    );
    expect(limitBy.map((r) => canonicalDecimal(String(r.c)))).toEqual(['0.42', '0.42', '0.42']);
    const [sum] = await store.query(
      `SELECT count() AS spans, toString(sum(c)) AS total FROM (
         SELECT argMax(total_cost, received_at) AS c FROM spans WHERE org_id = ? AND trace_id = ? GROUP BY org_id, trace_id, span_id)`,
      [ctx.orgId, t.traceId],
    );
    expect([sum?.spans, canonicalDecimal(String(sum?.total))]).toEqual([3, '1.26']);

    await admin.command({ query: `OPTIMIZE TABLE ${db}.spans FINAL` });
    const [merged] = await store.query('SELECT count() AS n FROM spans WHERE trace_id = ?', [t.traceId]);
    expect(merged?.n).toBe(3);
  });

  it('refuses malformed rows with SpanStoreRejectedError', async () => {
    const bad = [
      JSON.stringify({ org_id: 'o', start_time: 'yesterday' }),
      JSON.stringify({ org_id: 'o', start_date: 'not a date' }),
      JSON.stringify({ org_id: 'o', chunk_offsets: [1, 'x'] }),
      JSON.stringify({ org_id: 42 }),
    ];
    for (const line of bad) {
      const err = await store.insertLines(Buffer.from(line + '\n'), 1).then(
        () => null,
        (e: unknown) => e,
      );
      expect([line, err]).toEqual([line, expect.any(SpanStoreRejectedError)]);
    }
  });

  it('refuses rows for a column or table the database lacks as retryable (schema behind), never as rejected data', async () => {
    const err = await store.insertLines(Buffer.from(JSON.stringify({ org_id: 'o', no_such_column: 1 }) + '\n'), 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SpanStoreSchemaError);
    expect((err as Error).message).toMatch(/trace-ingest migrate/);
    const bare = `${db}_bare`;
    await admin.command({ query: `CREATE DATABASE IF NOT EXISTS ${bare}` });
    const s = new ClickHouseSpanStore({ url: ch.urlFor(bare) });
    onTestFinished(async () => {
      await s.close();
      await admin.command({ query: `DROP DATABASE IF EXISTS ${bare}` });
    });
    await s.start();
    await admin.command({ query: `DROP TABLE ${bare}.spans` });
    const row = encodeLine(spanToRow(trace([span()]), span(), ctx, UNPRICED)) + '\n';
    await expect(s.insertLines(Buffer.from(row), 1)).rejects.toBeInstanceOf(SpanStoreSchemaError);
  });

  it('binds hostile parameters as plain values', async () => {
    const hostile = [
      "'; DROP TABLE spans; --",
      "\\'",
      'back\\slash\\',
      'new\nline\r\ttab\0nul',
      '😀 Ünïcode \u2028',
      "''",
      '?',
      '-- not a comment',
      '/* nor this */',
    ];
    for (const v of hostile) {
      const [r] = await store.query('SELECT ? AS v, length(?) AS bytes, ? AS n', [v, v, -1]);
      expect(r).toEqual({ v, bytes: Buffer.byteLength(v), n: -1 });
    }
    const [r] = await store.query('SELECT has(?, ?) AS found, ? AS nothing, ? AS yes', [hostile, "\\'", null, true]);
    expect(r).toEqual({ found: 1, nothing: null, yes: 1 });
    expect((await store.query('SELECT count() AS n FROM spans WHERE org_id = ?', ["' OR 1 = 1 OR '"]))[0]?.n).toBe(0);
    expect(bindParams('SELECT 2-?', [-3])).toBe('SELECT 2-(-3)');
    expect((await store.query('SELECT 2-? AS x', [-3]))[0]?.x).toBe(5);
  });

  it('inserts 20k rows in one request (rate printed, not asserted)', async () => {
    const spans = Array.from({ length: 20_000 }, (_, i) =>
      span({ spanId: `bulk-${i}`, modelId: 'gpt-4o', provider: 'openai', input: 'lorem ipsum '.repeat(60), usage: { inputTokens: i, outputTokens: 10 } }),
    );
    const t = trace(spans, { customer: { id: 'bulk' } });
    const rows = rowsOf(t, { ...UNPRICED, input_cost: '0.00025', total_cost: '0.00025', priced: true });
    const lines = linesOf(rows);
    let body: Buffer = lines;
    let unquoteMs = Number.POSITIVE_INFINITY;
    for (let i = 0; i < 3; i++) {
      const u0 = performance.now();
      body = unquoteCosts(lines);
      unquoteMs = Math.min(unquoteMs, performance.now() - u0);
    }
    // Two quotes less per cost a line carries: input and total (the zero ones are left out).
    expect(body.length).toBe(lines.length - 2 * 2 * rows.length);
    const t0 = performance.now();
    await store.insertLines(lines, rows.length);
    const ms = performance.now() - t0;
    console.info(
      `insert ${rows.length} rows (${(lines.length / 1e6).toFixed(1)} MB): ${ms.toFixed(0)} ms, ${Math.round(rows.length / (ms / 1000))} rows/s; ` +
        `cost unquoting alone ${unquoteMs.toFixed(1)} ms`,
    );
    const [r] = await store.query('SELECT count() AS n, toString(sum(input_cost)) AS c FROM spans FINAL WHERE trace_id = ?', [t.traceId]);
    expect([r?.n, canonicalDecimal(String(r?.c))]).toEqual([20_000, '5']);
  });

  it('streams a read row by row, inserting meanwhile, and closes the response when the reader stops', async () => {
    const spans = Array.from({ length: 3000 }, (_, i) => span({ spanId: `stream-${String(i).padStart(4, '0')}`, input: 'x'.repeat(2000) }));
    const t = trace(spans);
    const rows = rowsOf(t, UNPRICED);
    await store.insertLines(linesOf(rows), rows.length);
    let seen = 0;
    for await (const r of store.queryStream('SELECT span_id FROM spans FINAL WHERE trace_id = ? ORDER BY span_id', [t.traceId])) {
      expect(r.span_id).toBe(`stream-${String(seen).padStart(4, '0')}`);
      if (seen === 5) await store.replaceLines(linesOf(rows.slice(0, 1)), 1);
      seen++;
    }
    expect(seen).toBe(3000);
    let taken = 0;
    for await (const _ of store.queryStream('SELECT span_id, input FROM spans WHERE trace_id = ?', [t.traceId])) if (++taken === 2) break;
    expect(taken).toBe(2);
    const [n] = await store.query('SELECT count() AS n FROM spans FINAL WHERE trace_id = ?', [t.traceId]);
    expect(Number(n?.n)).toBe(3000);
  });

  it('fails inserts with a retryable error while the server is down, and succeeds after restart', async () => {
    const t = trace([span(), span()]);
    const lines = linesOf(rowsOf(t));
    await ch.stop();
    try {
      const err = await store.insertLines(lines, 2).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(Error);
      expect(err).not.toBeInstanceOf(SpanStoreRejectedError);
      await expect(store.ping()).rejects.toThrow();
    } finally {
      await ch.start();
    }
    await store.ping();
    await store.insertLines(lines, 2);
    const [r] = await store.query('SELECT count() AS n FROM spans FINAL WHERE trace_id = ?', [t.traceId]);
    expect(r?.n).toBe(2);
  });

  it('closes idempotently', async () => {
    const s = new ClickHouseSpanStore({ url: ch.urlFor(db) });
    await s.start();
    await s.close();
    await s.close();
    await expect(s.ping()).rejects.toThrow(/not started/);
  });
});
