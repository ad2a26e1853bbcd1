import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { encodeRow, payloadToRows, UNPRICED, type SpanCosts } from '@trace-ingest/shared/rows';
import { ClickHouseSpanStore, applyClickHouseMigrations, bindParams } from '@trace-ingest/store/clickhouse';
import { SpanStoreRejectedError } from '@trace-ingest/store/span-store';
import { makePayload, makeSpan, makeTrace } from '../factories.js';
import { startClickHouse, type ClickHouseServer } from './support/clickhouse-server.js';

const ctx = { orgId: 'org_ch', keyPrefix: 'ti_prefix123', receivedAt: 1_767_000_000_000 };
const costs: SpanCosts = { ...UNPRICED, input_cost: '0.000000000000000001', output_cost: '12345678901234567890.123456789012345678', total_cost: '12345678901234567890.123456789012345679', priced: true, price_source: 'catalog:test' };
const lines = (rows: ReturnType<typeof payloadToRows>) => Buffer.from(rows.map((r) => encodeRow(r) + '\n').join(''));
const urlFor = (db: string) => inject('clickhouseHttpUrl').replace('http://', 'http://default:@') + '/' + db;

describe('ClickHouseSpanStore on clickhouse-server 18.16', () => {
  const db = `ti_test_${randomBytes(4).toString('hex')}`;
  let store: ClickHouseSpanStore;
  beforeAll(async () => {
    store = new ClickHouseSpanStore({ url: urlFor(db) });
    await store.start();
  });
  afterAll(async () => {
    await store.query(`DROP DATABASE IF EXISTS ${db}`).catch(() => undefined);
    await store.close();
    await store.close();
  });

  it('applies migrations idempotently, also from several instances at once', async () => {
    const others = Array.from({ length: 3 }, () => new ClickHouseSpanStore({ url: urlFor(db) }));
    await Promise.all(others.map((s) => s.start()));
    await Promise.all(others.map((s) => s.close()));
    const versions = await store.query('SELECT DISTINCT version FROM schema_migrations ORDER BY version');
    expect(versions.map((v) => v.version)).toEqual(['0001_spans']);
  });

  it('round-trips every column exactly', async () => {
    const payload = makePayload({
      traces: [
        makeTrace({
          traceId: 'ch-1',
          traceName: "it's \\ a \"trace\"\n",
          customer: { id: 'c-1', name: 'Ünïcode 😀' },
          metadata: { env: 'prod', 'a\tb': 'line\nbreak' },
          spans: [makeSpan({ spanId: 's-1', modelId: 'gpt-4o', provider: 'openai', usage: { inputTokens: 7, reasoningTokens: 3 }, ttftMs: 1.25, chunkOffsets: [1, 2], rateLimit: { tokensRemaining: 5 }, input: 'x'.repeat(1_000_000), metadata: { k: 'v' } })],
        }),
      ],
    });
    await store.insertLines(lines(payloadToRows(payload, ctx, () => costs)), 1);
    const [row] = await store.query('SELECT *, toString(total_cost) AS total_text, toString(input_cost) AS input_text, length(input) AS input_len FROM spans FINAL WHERE trace_id = ?', ['ch-1']);
    expect(row).toMatchObject({
      org_id: 'org_ch',
      trace_name: "it's \\ a \"trace\"\n",
      customer_name: 'Ünïcode 😀',
      trace_metadata_keys: ['env', 'a\tb'],
      trace_metadata_values: ['prod', 'line\nbreak'],
      span_id: 's-1',
      start_date: '2026-11-01',
      input_tokens: 7,
      reasoning_tokens: 3,
      ttft_ms: 1.25,
      chunk_offsets: [1, 2],
      rate_limit_tokens_remaining: 5,
      rate_limit_tokens_limit: null,
      priced: 1,
      price_source: 'catalog:test',
      input_text: '0.000000000000000001',
      total_text: '12345678901234567890.123456789012345679',
      input_len: 1_000_000,
    });
  });

  it('shows a retried insert once with FINAL', async () => {
    const rows = payloadToRows(makePayload({ traces: [makeTrace({ traceId: 'ch-dup', spans: [makeSpan(), makeSpan()] })] }), ctx, () => UNPRICED);
    await store.insertLines(lines(rows), 2);
    await store.insertLines(lines(rows), 2);
    const [r] = await store.query("SELECT count() AS n FROM spans FINAL WHERE trace_id = 'ch-dup'");
    expect(r?.n).toBe(2);
  });

  it('refuses bad rows with SpanStoreRejectedError', async () => {
    const bad = Buffer.from(JSON.stringify({ org_id: 'o', start_time: 'yesterday' }) + '\n');
    await expect(store.insertLines(bad, 1)).rejects.toBeInstanceOf(SpanStoreRejectedError);
  });

  it('binds hostile parameters safely', async () => {
    for (const v of ["'; DROP TABLE spans; --", 'back\\slash', 'new\nline', '😀', "\\'"]) {
      const [r] = await store.query('SELECT ? AS v, length(?) AS n', [v, v]);
      expect(r?.v).toBe(v);
    }
    expect(bindParams("SELECT '?' AS q, ?", [1])).toBe("SELECT '?' AS q, 1");
    expect(() => bindParams('SELECT ?', [])).toThrow(/placeholders/);
    await expect(applyClickHouseMigrations).toBeTypeOf('function');
  });
});

describe('ClickHouse outage', () => {
  let ch: ClickHouseServer;
  beforeAll(async () => {
    ch = await startClickHouse();
  });
  afterAll(async () => ch.dispose());

  it('fails inserts with a retryable error while down and succeeds after restart', async () => {
    const store = new ClickHouseSpanStore({ url: ch.urlFor('outage'), requestTimeoutMs: 2000 });
    await store.start();
    const rows = payloadToRows(makePayload(), ctx, () => UNPRICED);
    await ch.stop();
    const err = await store.insertLines(lines(rows), 1).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(SpanStoreRejectedError);
    await ch.start();
    await store.insertLines(lines(rows), 1);
    const [r] = await store.query('SELECT count() AS n FROM spans FINAL');
    expect(r?.n).toBe(1);
    await store.close();
  });
});
