import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClickHouseSpanStore } from '@trace-ingest/store/clickhouse';
import { reprice, usageReport } from '@trace-ingest/store/reports';
import { buf, expectRollupsEqualScan, tieCuts, firstPrices, pricer, traffic } from '../rollup-traffic.js';
import { startClickHouse, type ClickHouseTestServer } from './support/clickhouse-server.js';

/**
 * The rollups as ClickHouse keeps them (materialized views into
 * SummingMergeTree and AggregatingMergeTree, on the Debian 18.16 server):
 * every report equal to a scan of the spans, as on DuckDB.
 */
describe('rollups (usage_daily, traces) on ClickHouse', () => {
  let ch: ClickHouseTestServer;
  beforeAll(async () => {
    ch = await startClickHouse();
  }, 60_000);
  afterAll(async () => ch?.dispose());

  let db = '';
  async function freshStore(): Promise<ClickHouseSpanStore> {
    db = `rollups_${randomBytes(4).toString('hex')}`;
    const store = new ClickHouseSpanStore({ url: ch.urlFor(db), requestTimeoutMs: 20_000 });
    await store.start();
    return store;
  }
  const command = async (sql: string) => {
    const res = await fetch(`http://127.0.0.1:${ch.httpPort}/?database=${db}`, { method: 'POST', body: sql });
    expect(res.status, await res.text()).toBe(200);
  };

  it('equal a scan of the spans through re-sent spans, a replayed log, a reprice and merges', async () => {
    const store = await freshStore();
    try {
      const batches = traffic(7);
      const sent = new Set<string>();
      for (const [i, b] of batches.entries()) {
        await store.insertLines(buf(b.rows), b.rows.length);
        for (const r of b.rows) sent.add(r.span_id);
        await expectRollupsEqualScan(store);
        const prev = batches[i - 1];
        if (prev !== undefined) await store.insertLines(buf(prev.rows), prev.rows.length);
      }
      for (const b of batches) await store.insertLines(buf(b.rows), b.rows.length);
      const [n] = await store.query('SELECT count() AS n, uniqExact(span_id) AS d FROM spans FINAL');
      expect(n).toEqual({ n: sent.size, d: sent.size });
      const cuts = tieCuts.checked;
      await expectRollupsEqualScan(store);
      // Unpriced traces cost the same (0): a ranking was cut between two of them.
      expect(tieCuts.checked).toBeGreaterThan(cuts);
      const moved = await reprice(store, pricer({ ...firstPrices, 'gpt-4o': '0.000005', 'mystery-model': '0.000001' }), {
        orgId: 'org_a',
        from: 0,
        to: Date.parse('2027-01-01T00:00:00Z'),
      });
      expect(moved.rowsChanged).toBeGreaterThan(0);
      await expectRollupsEqualScan(store);
      // Background merges fold the rows (and the weighted copies): the figures stay.
      for (const t of ['spans', 'usage_daily', 'traces']) await command(`OPTIMIZE TABLE ${t} FINAL`);
      await expectRollupsEqualScan(store);
    } finally {
      await store.close();
    }
  }, 120_000);

  it("puts every span of a trace under its root's customer and session, whichever request brought them first", async () => {
    const store = await freshStore();
    try {
      for (const b of traffic(11)) await store.insertLines(buf(b.rows), b.rows.length);
      const rows = await store.query(
        'SELECT trace_id, uniqExact(customer_id) AS customers, uniqExact(session_id) AS sessions FROM spans FINAL GROUP BY trace_id',
      );
      expect(rows).toHaveLength(60);
      for (const r of rows) expect(r, String(r.trace_id)).toMatchObject({ customers: 1, sessions: 1 });
      const spans = await store.query("SELECT customer_id, customer_name, session_id, trace_name FROM spans FINAL WHERE trace_id = 'trace-1'");
      for (const s of spans) expect(s).toEqual({ customer_id: 'cust-1', customer_name: 'Customer 1', session_id: 'sess-1', trace_name: 'support' });
      const byCustomer = await usageReport(store, { orgId: 'org_a', from: 0, to: Date.parse('2027-01-01T00:00:00Z'), by: 'customer' });
      const [none] = await store.query("SELECT count() AS n FROM spans FINAL WHERE customer_id = ''");
      expect(byCustomer.find((r) => r.group === '')?.spans ?? 0).toBe(Number(none?.n));
    } finally {
      await store.close();
    }
  }, 120_000);
});
