import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { loadConfig } from '@trace-ingest/shared/config';
import { formatDecimal, parseDecimal } from '@trace-ingest/shared/decimal';
import { encodeLine, payloadToRows, SPAN_COLUMNS, type SpanCosts } from '@trace-ingest/shared/rows';
import type { Span } from '@trace-ingest/shared/schema';
import { createContext, type CliContext } from '@trace-ingest/cli/program-context';
import { exportSpans } from '@trace-ingest/cli/actions/export';
import { ClickHouseSpanStore } from '@trace-ingest/store/clickhouse';
import { DuckDbSpanStore } from '@trace-ingest/store/duckdb';
import { exportLines, exportQuery, exportWriter, focusWriter, writeExport } from '@trace-ingest/store/export';
import { focusLines, focusRecords } from '@trace-ingest/store/focus';
import { createPricing } from '@trace-ingest/store/pricing';
import { usage } from '@trace-ingest/cli/actions/usage';
import { makePayload, makeSpan, makeTrace } from '../factories.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

const run = promisify(execFile);
const CLI = fileURLToPath(new URL('../../packages/cli/bin/trace-ingest.js', import.meta.url));
const T0 = Date.parse('2026-10-03T10:00:00Z');
const costs: SpanCosts = {
  input_cost: '0.000000000000000001',
  output_cost: '1.25',
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
  total_cost: '1.250000000000000001',
  priced: true,
  price_source: 'override:x',
};

/** n spans of one org over a few days in October 2026, with text that CSV must quote. */
function lines(orgId: string, n: number, text = 'a "quoted", multi\nline ✓ text', tracePrefix = 'tr'): Buffer {
  const traces = Array.from({ length: Math.ceil(n / 4) }, (_, t) =>
    makeTrace({
      traceId: `${tracePrefix}-${t}`,
      customer: { id: `cust-${t % 3}` },
      spans: Array.from({ length: 4 }, (_, i) => makeSpan({ spanId: `s-${i}`, startTime: T0 + t * 60_000 + i, endTime: T0 + t * 60_000 + i + 5, input: text })),
    }),
  );
  const rows = payloadToRows(makePayload({ traces }), { orgId, keyPrefix: 'ti_x', receivedAt: T0 }, () => costs).slice(0, n);
  return Buffer.from(rows.map((r) => encodeLine(r) + '\n').join(''));
}

async function readParquet(file: string): Promise<{ n: number; total: string; columns: string[]; text: string }> {
  const db = await DuckDBInstance.create(':memory:');
  const c = await db.connect();
  try {
    const [r] = (
      await c.runAndReadAll(`SELECT count(*)::INTEGER AS n, CAST(sum(total_cost) AS VARCHAR) AS total, any_value(input) AS text FROM read_parquet('${file}')`)
    ).getRowObjectsJson();
    const cols = (await c.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet('${file}')`)).getRowObjectsJson().map((x) => String(x.column_name));
    return { n: Number(r?.n), total: formatDecimal(parseDecimal(String(r?.total))), columns: cols, text: String(r?.text) };
  } finally {
    c.closeSync();
    db.closeSync();
  }
}

/**
 * FOCUS 1.2 (FinOps-Open-Cost-and-Usage-Spec/FOCUS_Spec at tag v1.2,
 * specification/columns/*.md): every Mandatory column with its data type and
 * whether it allows nulls, and the Conditional columns whose condition holds
 * here (usage priced from published unit prices), which must not be null on
 * a "Usage" row.
 */
const FOCUS_MANDATORY: Record<string, ['String' | 'Decimal' | 'Date/Time', boolean]> = {
  BilledCost: ['Decimal', false],
  BillingAccountId: ['String', false],
  BillingAccountName: ['String', true],
  BillingCurrency: ['String', false],
  BillingPeriodEnd: ['Date/Time', false],
  BillingPeriodStart: ['Date/Time', false],
  ChargeCategory: ['String', false],
  ChargeClass: ['String', true],
  ChargeDescription: ['String', true],
  ChargePeriodEnd: ['Date/Time', false],
  ChargePeriodStart: ['Date/Time', false],
  ContractedCost: ['Decimal', false],
  EffectiveCost: ['Decimal', false],
  InvoiceIssuerName: ['String', false],
  ListCost: ['Decimal', false],
  PricingQuantity: ['Decimal', true],
  PricingUnit: ['String', true],
  ProviderName: ['String', false],
  PublisherName: ['String', false],
  ServiceCategory: ['String', false],
  ServiceName: ['String', false],
};
const FOCUS_CONDITIONAL_ON_USAGE: Record<string, 'String' | 'Decimal' | 'JSON'> = {
  ListUnitPrice: 'Decimal',
  ContractedUnitPrice: 'Decimal',
  ConsumedQuantity: 'Decimal',
  ConsumedUnit: 'String',
  PricingCategory: 'String',
  SkuId: 'String',
  SkuPriceId: 'String',
  SkuMeter: 'String',
};
const NUMERIC = /^-?\d+(\.\d+)?$/;
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;
const PARQUET_TYPE = { String: 'VARCHAR', Decimal: 'DECIMAL(38,18)', 'Date/Time': 'TIMESTAMP WITH TIME ZONE', JSON: 'JSON' };

/** A month of priced traffic: two customers in two workflows, two models over several buckets, an unpriced model, a long-context tier. */
function chargeable(orgId: string, price: (span: Span, org: string) => SpanCosts) {
  const traces = [];
  for (let d = 0; d < 20; d++) {
    const t0 = Date.parse('2026-10-03T10:00:00Z') + d * 86_400_000;
    for (const [i, customer] of ['c-north', 'c-south', ''].entries())
      traces.push(
        makeTrace({
          traceId: `tr-${d}-${i}`,
          ...(customer === '' ? {} : { customer: { id: customer } }),
          ...(i === 1 ? { workflowName: 'refunds', workflowRunId: `run-${d}` } : {}),
          spans: [
            makeSpan({
              spanId: 'a',
              startTime: t0,
              endTime: t0 + 9,
              provider: 'openai',
              modelId: 'gpt-4o',
              usage: { inputTokens: 1000 + d, cachedInputTokens: 300, outputTokens: 77 },
            }),
            makeSpan({ spanId: 'b', startTime: t0 + 10, endTime: t0 + 19, provider: 'openai', modelId: 'gpt-4o', usage: { inputTokens: 10, outputTokens: 5 } }),
            makeSpan({
              spanId: 'c',
              startTime: t0 + 20,
              endTime: t0 + 29,
              provider: 'anthropic',
              modelId: 'claude-sonnet-4-20250514',
              // Every third day over 200k tokens of prompt: the long-context tier's unit prices, rows of their own.
              usage: { inputTokens: d % 3 === 0 ? 250_000 : 3000, cacheWriteInputTokens: 500, outputTokens: 700 },
            }),
            makeSpan({ spanId: 'd', startTime: t0 + 30, endTime: t0 + 39, provider: 'openai', modelId: 'in-house-llm', usage: { inputTokens: 42 } }),
          ],
        }),
      );
  }
  return payloadToRows(makePayload({ traces }), { orgId, keyPrefix: 'ti_x', receivedAt: Date.parse('2026-10-03T10:00:00Z') }, price);
}

async function duck<T = Record<string, unknown>>(sql: string): Promise<T[]> {
  const db = await DuckDBInstance.create(':memory:');
  const c = await db.connect();
  try {
    return (await c.runAndReadAll(sql)).getRowObjectsJson() as T[];
  } finally {
    c.closeSync();
    db.closeSync();
  }
}

describe("export of an org's spans (DuckDB, through the running server)", () => {
  let t: TestServer;
  let ctx: CliContext;
  let store: DuckDbSpanStore;
  let orgId = '';
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-export-'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-export-data-'));
  beforeAll(async () => {
    // The server's own store, given to it: the test writes rows through the store's insert path.
    store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb') });
    t = await startTestServer({}, { spanStore: store }, dir);
    ({ orgId } = await t.newKey('acme'));
    ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
  });
  afterAll(async () => {
    await ctx?.close();
    await t?.close();
    fs.rmSync(out, { recursive: true, force: true });
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('writes every column of the spans table, one row per span, in Parquet, CSV and NDJSON, exactly', async () => {
    await store.insertLines(lines(orgId, 400), 400);
    await store.insertLines(lines('org_other', 40), 40);
    const window = { org: 'acme', from: '2026-10-01', to: '2026-10-31' };
    const progress: [number, number][] = [];
    const pq = await exportSpans(ctx, { ...window, format: 'parquet', out: path.join(out, 'a.parquet') }, (n, total) => progress.push([n, total]));
    expect(pq.rows).toBe(400);
    expect(progress.at(-1)).toEqual([400, 400]);
    const back = await readParquet(pq.file);
    expect(back).toEqual({
      n: 400,
      total: formatDecimal(parseDecimal(costs.total_cost) * 400n),
      columns: SPAN_COLUMNS.map(([n]) => n),
      text: 'a "quoted", multi\nline ✓ text',
    });
    // No work files are left beside the output.
    expect(fs.readdirSync(out)).toEqual(['a.parquet']);

    const csv = await exportSpans(ctx, { ...window, format: 'csv', out: path.join(out, 'a.csv') });
    expect(csv.rows).toBe(400);
    const db = await DuckDBInstance.create(':memory:');
    onTestFinished(() => db.closeSync());
    const c = await db.connect();
    const [fromCsv] = (
      await c.runAndReadAll(
        `SELECT count(*)::INTEGER AS n, CAST(sum(total_cost::DECIMAL(38,18)) AS VARCHAR) AS t FROM read_csv('${csv.file}', header = true, all_varchar = true)`,
      )
    ).getRowObjectsJson();
    expect(fromCsv).toEqual({ n: 400, t: '500.000000000000000400' });
    expect(fs.readFileSync(csv.file, 'utf8').split('\n')[0]).toBe(SPAN_COLUMNS.map(([n]) => n).join(','));

    const nd = await exportSpans(ctx, { ...window, format: 'ndjson', out: path.join(out, 'a.ndjson') });
    const first = JSON.parse(fs.readFileSync(nd.file, 'utf8').split('\n')[0] ?? '{}') as Record<string, unknown>;
    expect(Object.keys(first)).toEqual(SPAN_COLUMNS.map(([n]) => n));
    expect(first).toMatchObject({ org_id: orgId, total_cost: costs.total_cost, input: 'a "quoted", multi\nline ✓ text' });
    c.closeSync();
  });

  it('holds memory flat: the CLI process exporting 200,000 spans (300 MB of text) peaks as one exporting 20,000', async () => {
    const big = 'x'.repeat(1500);
    const { orgId: small } = await t.newKey('small');
    const { orgId: large } = await t.newKey('large');
    await store.insertLines(lines(small, 20_000, big), 20_000);
    for (let i = 0; i < 10; i++) await store.insertLines(lines(large, 20_000, big, `b${i}`), 20_000);
    const peakKb = async (args: string[]) => {
      const { stderr } = await run('/usr/bin/time', ['-f', 'peak %M', process.execPath, CLI, ...args], {
        env: { ...process.env, DATA_DIR: t.dir },
        maxBuffer: 1 << 24,
      });
      return Number(/peak (\d+)/.exec(stderr)?.[1]);
    };
    const peak = async (org: string) => {
      const file = path.join(out, `${org}.parquet`);
      const kb = await peakKb(['export', '--org', org, '--from', '2026-10-01', '--to', '2026-10-31', '--format', 'parquet', '--out', file]);
      return { kb, rows: (await readParquet(file)).n };
    };
    // The CLI's own start-up peak is the floor: Node's module loader alone peaks near it before its first collection.
    const idle = await peakKb(['--help']);
    const a = await peak('small');
    const b = await peak('large');
    expect([a.rows, b.rows]).toEqual([20_000, 200_000]);
    // 10x the rows (300 MB of text): more memory only within the export's DuckDB memory limit (160 MB), which the
    // 20k export does not fill and the 200k one may, far under the text it wrote; and a bounded sum above start-up.
    expect(b.kb - a.kb, `peaks (KB): start-up ${idle}, 20k ${a.kb}, 200k ${b.kb}`).toBeLessThan(160 * 1024);
    expect(b.kb - idle, `peaks (KB): start-up ${idle}, 20k ${a.kb}, 200k ${b.kb}`).toBeLessThan(256 * 1024);
  }, 480_000);

  it("writes FOCUS 1.2's required columns of their types, CSV and Parquet; unit price times quantity is the cost; the costs are usage's", async () => {
    const { orgId: focusOrg } = await t.newKey('focus');
    const pricing = await createPricing(t.keys, {});
    const priced = chargeable(focusOrg, pricing.price);
    await store.insertLines(Buffer.from(priced.map((r) => encodeLine(r) + '\n').join('')), priced.length);
    const window = { org: 'focus', month: '2026-10' };
    const csv = await exportSpans(ctx, { ...window, format: 'focus', out: path.join(out, 'focus.csv') });
    const rows = await duck<Record<string, string | null>>(`SELECT * FROM read_csv('${csv.file}', header = true, all_varchar = true)`);
    expect(rows.length).toBe(csv.rows);
    const header = fs.readFileSync(csv.file, 'utf8').split('\n')[0]?.split(',') ?? [];
    for (const c of [...Object.keys(FOCUS_MANDATORY), ...Object.keys(FOCUS_CONDITIONAL_ON_USAGE), 'Tags']) expect(header, c).toContain(c);
    // Columns of this product's own are prefixed x_, as the specification asks.
    const focusNames = new Set([...Object.keys(FOCUS_MANDATORY), ...Object.keys(FOCUS_CONDITIONAL_ON_USAGE), 'Tags', 'ChargeFrequency', 'ServiceSubcategory']);
    for (const c of header) expect(focusNames.has(c) || c.startsWith('x_'), c).toBe(true);

    const dec = (v: string | null | undefined) => parseDecimal(v ?? 'NaN');
    for (const r of rows) {
      for (const [c, [type, nullable]] of Object.entries(FOCUS_MANDATORY)) {
        const v = r[c];
        if (v === null || v === undefined) {
          expect(nullable, `${c} is null`).toBe(true);
          continue;
        }
        if (type === 'Decimal') expect(v, c).toMatch(NUMERIC);
        if (type === 'Date/Time') expect(v, c).toMatch(INSTANT);
      }
      expect(r.ChargeCategory).toBe('Usage');
      expect(r.ChargeClass).toBeNull();
      expect(r.BillingCurrency).toBe('USD');
      expect(r.ServiceCategory).toBe('AI and Machine Learning');
      for (const [c, type] of Object.entries(FOCUS_CONDITIONAL_ON_USAGE)) {
        expect(r[c], c).not.toBeNull();
        if (type === 'Decimal') expect(r[c], c).toMatch(NUMERIC);
      }
      // The product of unit price and quantity matches the cost (FOCUS: ListUnitPrice, ContractedUnitPrice), exactly.
      expect(formatDecimal((dec(r.ListUnitPrice) * dec(r.PricingQuantity)) / 10n ** 18n), JSON.stringify(r)).toBe(formatDecimal(dec(r.ListCost)));
      expect(formatDecimal((dec(r.ContractedUnitPrice) * dec(r.PricingQuantity)) / 10n ** 18n)).toBe(formatDecimal(dec(r.ContractedCost)));
      expect([r.BilledCost, r.EffectiveCost, r.ContractedCost]).toEqual([r.ListCost, r.ListCost, r.ListCost]);
      // A charge period is a UTC day of the billing period (the month).
      expect(Date.parse(r.ChargePeriodEnd ?? '') - Date.parse(r.ChargePeriodStart ?? '')).toBe(86_400_000);
      expect([r.BillingPeriodStart, r.BillingPeriodEnd]).toEqual(['2026-10-01T00:00:00Z', '2026-11-01T00:00:00Z']);
      const tags = JSON.parse(r.Tags ?? '') as Record<string, unknown>;
      for (const v of Object.values(tags)) expect(typeof v).toBe('string');
      expect(tags.trace).toMatch(/^tr-/);
    }
    // The money adds up to `usage`, to the last of 18 decimals: in total, per customer (tag), per model (service), per bucket.
    const sum = (xs: Record<string, string | null>[]) => formatDecimal(xs.reduce((a, r) => a + dec(r.BilledCost), 0n));
    const byCustomer = await usage(ctx, { ...window, by: 'customer' });
    const total = formatDecimal(byCustomer.reduce((a, r) => a + parseDecimal(r.costs.total_cost ?? '0'), 0n));
    expect(sum(rows)).toBe(total);
    for (const c of byCustomer)
      expect(sum(rows.filter((r) => ((JSON.parse(r.Tags ?? '') as { customer?: string }).customer ?? '') === c.group)), c.group).toBe(c.costs.total_cost);
    for (const m of await usage(ctx, { ...window, by: 'model' })) expect(sum(rows.filter((r) => r.ServiceName === m.group))).toBe(m.costs.total_cost);
    expect(sum(rows.filter((r) => r.SkuId === 'anthropic/claude-sonnet-4-20250514/cache_write_input'))).not.toBe('0');
    expect(rows.filter((r) => (JSON.parse(r.Tags ?? '') as { workflow?: string }).workflow === 'refunds').length).toBeGreaterThan(0);
    // The long-context tier's price is its own row: two input unit prices for the same model.
    expect(new Set(rows.filter((r) => r.SkuId === 'anthropic/claude-sonnet-4-20250514/input').map((r) => r.ListUnitPrice)).size).toBe(2);
    // Tokens are priced per million, as providers list them; an unpriced model's usage is there, at 0.
    expect(rows.find((r) => r.SkuId === 'openai/gpt-4o/input')).toMatchObject({ PricingUnit: '1000000 Tokens', ListUnitPrice: '2.5', ConsumedUnit: 'Tokens' });
    expect(rows.find((r) => r.ServiceName === 'in-house-llm')).toMatchObject({ ListCost: '0', ListUnitPrice: '0', x_PriceSource: null });

    const pq = await exportSpans(ctx, { ...window, format: 'focus', out: path.join(out, 'focus.parquet') });
    expect(pq.rows).toBe(csv.rows);
    const types = Object.fromEntries(
      (await duck<{ column_name: string; column_type: string }>(`DESCRIBE SELECT * FROM read_parquet('${pq.file}')`)).map((c) => [
        c.column_name,
        c.column_type,
      ]),
    );
    for (const [c, [type]] of Object.entries(FOCUS_MANDATORY)) expect(types[c], c).toBe(PARQUET_TYPE[type]);
    for (const [c, type] of Object.entries(FOCUS_CONDITIONAL_ON_USAGE)) expect(types[c], c).toBe(PARQUET_TYPE[type]);
    expect(types.Tags).toBe('JSON');
    const [back] = await duck<{ n: number; billed: string; nulls: number }>(
      'SELECT count(*)::INTEGER AS n, CAST(sum(BilledCost) AS VARCHAR) AS billed, ' +
        `count(*) FILTER (WHERE ListUnitPrice IS NULL OR ServiceName IS NULL)::INTEGER AS nulls FROM read_parquet('${pq.file}')`,
    );
    expect({ n: back?.n, billed: formatDecimal(parseDecimal(back?.billed ?? '0')), nulls: back?.nulls }).toEqual({ n: csv.rows, billed: total, nulls: 0 });
    // No work files are left beside the outputs.
    expect(fs.readdirSync(out).filter((f) => f.startsWith('focus') || f.startsWith('.ti-export-'))).toEqual(['focus.csv', 'focus.parquet']);
    await expect(exportSpans(ctx, { ...window, format: 'focus', out: path.join(out, 'focus.xlsx') })).rejects.toThrow(/name it \.csv or \.parquet/);
  });

  it('prints no warning exporting a month of rows with each writer (no MaxListenersExceededWarning)', async () => {
    const { orgId } = await t.newKey('busy');
    // 24,000 rows: a dozen chunks of 2,000, each filling the file stream's buffer.
    await store.insertLines(lines(orgId, 24_000, 'y'.repeat(300), 'bz'), 24_000);
    for (const [format, file] of [
      ['ndjson', 'busy.ndjson'],
      ['focus', 'busy-focus.csv'],
      ['focus', 'busy-focus.parquet'],
    ] as const) {
      const { stderr } = await run(
        process.execPath,
        [CLI, 'export', '--org', 'busy', '--month', '2026-10', '--format', format, '--out', path.join(out, file)],
        {
          env: { ...process.env, DATA_DIR: t.dir },
          maxBuffer: 1 << 24,
        },
      );
      expect(stderr, file).toBe('');
    }
  });
});

describe("export from ClickHouse, Parquet by DuckDB's writer", () => {
  it('writes the same columns and rows', async () => {
    const store = new ClickHouseSpanStore({ url: `${inject('clickhouseHttpUrl').replace('http://', 'http://default:@')}/ti_export_${Date.now()}` });
    await store.start();
    onTestFinished(async () => {
      await store.query(`DROP DATABASE IF EXISTS ${store.database}`).catch(() => undefined);
      await store.close();
    });
    await store.insertLines(lines('org_ch', 100), 100);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ti-export-ch-')), 'ch.parquet');
    const { sql, params } = exportQuery('clickhouse', { orgId: 'org_ch', from: Date.parse('2026-10-01'), to: Date.parse('2026-11-01') });
    expect(await writeExport(exportLines(store.queryStream(sql, params)), exportWriter('parquet', file))).toBe(100);
    const back = await readParquet(file);
    expect(back).toEqual({ n: 100, total: '125.0000000000000001', columns: SPAN_COLUMNS.map(([n]) => n), text: 'a "quoted", multi\nline ✓ text' });

    // FOCUS rows from ClickHouse, costs exact: the fixture's costs come without token counts, so no unit price
    // makes them and each span's two buckets are rows of their own.
    const focus = path.join(path.dirname(file), 'ch-focus.parquet');
    const window = { orgId: 'org_ch', orgName: 'ch', from: Date.parse('2026-10-01'), to: Date.parse('2026-11-01') };
    expect(await writeExport(focusLines(focusRecords(store, window)), focusWriter('parquet', focus))).toBe(200);
    const [sums] = (
      await (
        await (await DuckDBInstance.create(':memory:')).connect()
      ).runAndReadAll(
        'SELECT CAST(sum(BilledCost) AS VARCHAR) AS billed, CAST(sum(PricingQuantity) AS VARCHAR) AS q, ' +
          `count(DISTINCT Tags)::INTEGER AS traces FROM read_parquet('${focus}')`,
      )
    ).getRowObjectsJson();
    expect({ ...sums, billed: formatDecimal(parseDecimal(String(sums?.billed))) }).toMatchObject({ billed: '125.0000000000000001', traces: 25 });
  });
});
