import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '@trace-ingest/shared/config';
import { createContext, type CliContext } from '@trace-ingest/cli/program-context';
import { setPrice } from '@trace-ingest/cli/actions/prices';
import { repriceSpans, sql, usage } from '@trace-ingest/cli/actions/usage';
import { ClickHouseSpanStore } from '@trace-ingest/store/clickhouse';
import { makeSpan, makeTrace } from '../factories.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

const NOON = Date.UTC(2026, 0, 15, 12, 0, 0);
const at = { startTime: NOON, endTime: NOON + 100 };

/** A known mix; expected figures are computed by hand from list prices. */
function batches() {
  const s1 = makeSpan({ spanId: 's1', ...at, provider: 'openai', modelId: 'gpt-4o', usage: { inputTokens: 1000, cachedInputTokens: 2000, outputTokens: 500 } });
  const s2 = makeSpan({
    spanId: 's2',
    ...at,
    provider: 'anthropic',
    modelId: 'claude-sonnet-4-20250514',
    usage: { inputTokens: 2000, cacheWriteInputTokens: 1000, cachedInputTokens: 4000, outputTokens: 1000 },
  });
  const s3 = makeSpan({ spanId: 's3', ...at, provider: 'openai', modelId: 'gpt-4o', usage: { inputTokens: 100_000, outputTokens: 10_000 } });
  const s4 = makeSpan({ spanId: 's4', ...at, modelId: 'ghost', usage: { inputTokens: 5 } });
  const t1 = makeTrace({ traceId: 'r1', customer: { id: 'c1' }, spans: [s1, s2] });
  const t2 = makeTrace({ traceId: 'r2', customer: { id: 'c2' }, spans: [s3, s4] });
  return [
    { version: 'v1' as const, traces: [t1, t2] },
    // Re-sent: must not count twice.
    {
      version: 'v1' as const,
      traces: [makeTrace({ traceId: 'r1', customer: { id: 'c1' }, spans: [s1] }), makeTrace({ traceId: 'r2', customer: { id: 'c2' }, spans: [s3] })],
    },
  ];
}

for (const store of ['duckdb', 'clickhouse'] as const) {
  describe(`reports on ${store}, with the server running`, () => {
    let t: TestServer;
    let ctx: CliContext;
    let clickhouse: ClickHouseSpanStore | undefined;
    /** ClickHouse derives its rollups in the background: the figures are read once they hold every span. */
    const settled = async () => clickhouse?.settle();
    beforeAll(async () => {
      const env: Record<string, string> = {};
      const parts: Parameters<typeof startTestServer>[1] = {};
      if (store === 'clickhouse') {
        env.CLICKHOUSE_URL = `${inject('clickhouseHttpUrl').replace('http://', 'http://default:@')}/ti_reports_${randomBytes(4).toString('hex')}`;
        parts.spanStore = clickhouse = new ClickHouseSpanStore({ url: env.CLICKHOUSE_URL });
      }
      t = await startTestServer(env, parts);
      const { key } = await t.newKey('acme');
      for (const b of batches()) expect((await t.post(b, { key })).status).toBe(202);
      await t.server.flush();
      await settled();
      ctx = createContext(loadConfig({ DATA_DIR: t.dir, ...env }));
    });
    afterAll(async () => {
      await ctx.close();
      await t.close();
    });

    it('reports cost by customer, exactly, one row per span', async () => {
      const rows = await usage(ctx, { org: 'acme', month: '2026-01', by: 'customer' });
      expect(rows.map((r) => [r.group, r.spans, r.unpricedSpans, r.costs.total_cost])).toEqual([
        ['c2', 2, 1, '0.35'],
        ['c1', 2, 0, '0.03595'],
      ]);
      expect(rows.find((r) => r.group === 'c1')?.costs).toMatchObject({
        input_cost: '0.0085',
        cached_input_cost: '0.0037',
        cache_write_input_cost: '0.00375',
        output_cost: '0.02',
      });
      expect(rows.find((r) => r.group === 'c1')?.tokens).toMatchObject({
        input_tokens: 3000,
        cached_input_tokens: 6000,
        cache_write_input_tokens: 1000,
        output_tokens: 1500,
      });
    });

    it('reports by model, for one customer, and for a date range', async () => {
      const byModel = await usage(ctx, { org: 'acme', month: '2026-01', by: 'model' });
      expect(byModel.map((r) => [r.group, r.spans, r.costs.total_cost])).toEqual([
        ['gpt-4o', 2, '0.36'],
        ['claude-sonnet-4-20250514', 1, '0.02595'],
        ['ghost', 1, '0'],
      ]);
      const c1 = await usage(ctx, { org: 'acme', from: '2026-01-15', to: '2026-01-15', by: 'model', customer: 'c1' });
      expect(c1.map((r) => r.group).sort()).toEqual(['claude-sonnet-4-20250514', 'gpt-4o']);
      expect(await usage(ctx, { org: 'acme', month: '2026-02', by: 'model' })).toEqual([]);
    });

    it('runs read-only SQL and refuses writes', async () => {
      const { rows, more } = await sql(ctx, store === 'clickhouse' ? 'SELECT count() AS n FROM spans FINAL' : 'SELECT count(*)::INTEGER AS n FROM spans');
      expect(Number(rows[0]?.n)).toBe(4);
      expect(more).toBe(false);
      // A query that returns more than the limit is read only that far, and says so.
      const big = store === 'clickhouse' ? 'SELECT number FROM system.numbers LIMIT 5000000' : 'SELECT * FROM range(5000000)';
      const capped = await sql(ctx, big, 3000);
      expect(capped.rows).toHaveLength(3000);
      expect(capped.more).toBe(true);
      await expect(sql(ctx, store === 'clickhouse' ? 'DROP TABLE spans' : 'DELETE FROM spans')).rejects.toThrow(/read/i);
      await expect(sql(ctx, 'SELECT 1; SELECT 2')).rejects.toThrow();
    });

    it('reprices after a price is added, idempotently', async () => {
      await setPrice(ctx, { model: 'ghost', input: '1000', output: '0' });
      const first = await repriceSpans(ctx, { org: 'acme', from: '2026-01-01' });
      expect(first).toMatchObject({ rowsScanned: 4, rowsChanged: 1, newlyPriced: 1, costBefore: '0.38595', costAfter: '0.39095', costDifference: '0.005' });
      const second = await repriceSpans(ctx, { org: 'acme', from: '2026-01-01' });
      expect(second).toMatchObject({ rowsChanged: 0, costDifference: '0' });
      await settled();
      const rows = await usage(ctx, { org: 'acme', month: '2026-01', by: 'model' });
      expect(rows.find((r) => r.group === 'ghost')).toMatchObject({ unpricedSpans: 0, costs: expect.objectContaining({ total_cost: '0.005' }) as unknown });
    });
  });
}
