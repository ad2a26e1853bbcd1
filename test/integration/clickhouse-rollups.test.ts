import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClickHouseSpanStore, type ClickHouseSpanStoreOptions } from '@trace-ingest/store/clickhouse';
import { ClickHouseDeriver, InProcessLease } from '@trace-ingest/store/clickhouse-derive';
import type { SpanStore } from '@trace-ingest/store/span-store';
import { countGroups, groupLabels, RefreshScope, reportRoute, reprice, usageReport } from '@trace-ingest/store/reports';
import type { SpanRow } from '@trace-ingest/shared/rows';
import { buf, derived, expectListsRankAsScan, expectRollupsEqualScan, tieCuts, firstPrices, pricer, scanning, traffic } from '../rollup-traffic.js';
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
  async function freshStore(opts: Partial<ClickHouseSpanStoreOptions> = {}): Promise<ClickHouseSpanStore> {
    db = `rollups_${randomBytes(4).toString('hex')}`;
    const store = new ClickHouseSpanStore({ url: ch.urlFor(db), requestTimeoutMs: 20_000, ...opts });
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
      for (const t of ['spans', 'usage_daily_d', 'traces_d']) await command(`OPTIMIZE TABLE ${t} FINAL`);
      await expectRollupsEqualScan(store);
    } finally {
      await store.close();
    }
    // Each check waits for the derivation of the days just written.
  }, 300_000);

  it("puts every span of a trace under its root's customer and session, whichever request brought them first", async () => {
    const store = await freshStore();
    try {
      for (const b of traffic(11)) await store.insertLines(buf(b.rows), b.rows.length);
      await derived(store);
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

  it("ranks a range's traces from per-day lists, as a scan does, through late spans on another day, an erasure and retention", async () => {
    // Lists of three a day, built by each check's derivation.
    const opts = { topListsPerDay: 3 };
    let store = await freshStore(opts);
    try {
      await expectListsRankAsScan(() => store, {
        restart: async () => {
          await store.close();
          store = new ClickHouseSpanStore({ url: ch.urlFor(db), requestTimeoutMs: 20_000, ...opts });
          await store.start();
        },
        keys: async () => {
          const [lists] = await store.query('SELECT uniqExact(trace_id, start_date) AS n FROM trace_tops');
          const [all] = await store.query('SELECT uniqExact(trace_id, start_date) AS n FROM traces');
          return { lists: Number(lists?.n), traces: Number(all?.n) };
        },
      });
      // The erased customer's traces are gone from every build of the lists, not only from the current ones.
      const [erased] = await store.query("SELECT count() AS n FROM trace_tops WHERE substring(customer_c, 17) = 'cust-2'");
      expect(Number(erased?.n)).toBe(0);
      // A built list is current until its day is derived again, and the derivation builds it again at once.
      expect(await store.topLists.outOfDate('trace')).toEqual([]);
      const [row] = traffic(5)[0]!.rows;
      await store.insertLines(buf([{ ...row!, span_id: 'one-more' }]), 1);
      expect(await store.topLists.ready('trace', 'org_a', '2026-10-01', '2026-10-12')).toBe(true);
      await derived(store);
      expect(await store.topLists.outOfDate('trace')).toEqual([]);
      expect(await store.topLists.outOfDate('session')).toEqual([]);
    } finally {
      await store.close();
    }
  }, 120_000);

  it('takes a slice beyond a cut away from a day only while the derived rows hold every span of that day', async () => {
    const store = await freshStore();
    try {
      for (const b of traffic(3)) await store.insertLines(buf(b.rows), b.rows.length);
      await derived(store);
      const [day] = await store.query("SELECT max(start_time) AS hi FROM spans WHERE org_id = 'org_a' AND start_date = '2026-10-05'");
      const range = { orgId: 'org_a', from: Date.parse('2026-10-01T00:00:00Z'), to: Number(day?.hi) };
      const slice = { from: range.to, to: Date.parse('2026-10-06T00:00:00Z') };
      expect((await reportRoute(store, range)).less).toEqual([slice]);
      // A span beyond the cut, not derived yet: the rows before the cut are read from the spans instead.
      const late = traffic(3)[0]!
        .rows.slice(0, 1)
        .map((r) => ({ ...r, span_id: 'late-1', start_time: range.to + 1, end_time: range.to + 2, start_date: '2026-10-05' }));
      await store.insertLines(buf(late), late.length);
      expect(await store.rollupsBehind('org_a', '2026-10-05')).toBe(true);
      const behind = await reportRoute(store, range);
      expect(behind.less).toEqual([]);
      expect(behind.edges).toEqual([{ from: Date.parse('2026-10-05T00:00:00Z'), to: range.to }]);
      await derived(store);
      expect(await store.rollupsBehind('org_a', '2026-10-05')).toBe(false);
      expect((await reportRoute(store, range)).less).toEqual([slice]);
      const scan = scanning(store);
      for (const by of ['customer', 'trace'] as const)
        expect(await usageReport(store, { ...range, by }), by).toEqual(await usageReport(scan, { ...range, by }));
    } finally {
      await store.close();
    }
  }, 120_000);

  it('ranks without writing: a read of days whose lists are not built reads the derived rows, and builds nothing', async () => {
    const store = await freshStore({ topListsPerDay: 3 });
    try {
      for (const b of traffic(5)) await store.insertLines(buf(b.rows), b.rows.length);
      // The rollups derived, the lists not yet (a pass between its derivation and its lists).
      await new ClickHouseDeriver({ query: (sql) => store.query(sql), command }, new InProcessLease()).settle();
      const window = { orgId: 'org_a', from: Date.parse('2026-09-20T00:00:00Z'), to: Date.parse('2026-10-20T00:00:00Z') };
      // The server's count of INSERT statements (this file's own server; nothing derives in the background), and the mutations.
      const written = async () => (await store.query("SELECT value AS n FROM system.events WHERE event = 'InsertQuery'"))[0]?.n;
      const mutations = async () => (await store.query('SELECT count() AS n FROM system.mutations WHERE database = currentDatabase()'))[0]?.n;
      const page = async (s: SpanStore) => {
        const scope = new RefreshScope();
        const [rows, count, sessions] = await Promise.all([
          usageReport(s, { ...window, by: 'trace', limit: 3 }, scope),
          countGroups(s, { ...window, by: 'trace' }, scope),
          usageReport(s, { ...window, by: 'session', limit: 2 }, scope),
        ]);
        return { rows, count, sessions, labels: await groupLabels(s, { ...window, by: 'trace', groups: rows.map((r) => r.group) }, scope) };
      };
      const scan = await page(scanning(store));
      expect(scan.count).toBe(60);
      const expectReadOnly = async () => {
        const [before, m] = [await written(), await mutations()];
        const read = await page(store);
        expect(read.rows).toEqual(scan.rows);
        expect(read.sessions).toEqual(scan.sessions);
        expect(read.count).toBe(scan.count);
        expect(Object.keys(read.labels).sort()).toEqual(scan.rows.map((r) => r.group).sort());
        expect(await written()).toEqual(before);
        expect(await mutations()).toBe(m);
      };
      expect(await store.topLists.ready('trace', 'org_a', '2026-09-20', '2026-10-20')).toBe(false);
      await expectReadOnly();
      const [none] = await store.query('SELECT count() AS n FROM trace_tops');
      expect(Number(none?.n)).toBe(0);
      // The derivation builds the lists; the reads then take them, and still write nothing.
      await derived(store);
      const [built] = await store.query('SELECT count() AS n FROM trace_tops');
      expect(Number(built?.n)).toBeGreaterThan(0);
      expect(await store.topLists.ready('trace', 'org_a', '2026-09-20', '2026-10-20')).toBe(true);
      await expectReadOnly();
      // Spans written since, not yet derived: the reads stay on the derived rows and lists as they are.
      const [row] = traffic(5)[0]!.rows;
      await store.insertLines(buf([{ ...row!, span_id: 'one-more' }]), 1);
      await expectReadOnly();
    } finally {
      await store.close();
    }
  }, 60_000);

  it("finds a trace of two days whose first day's list was built before its second day had rows", async () => {
    const store = await freshStore({ topListsPerDay: 3 });
    try {
      const [template] = traffic(5)[0]!.rows;
      const at = (day: string, hour: number) => Date.parse(`2026-10-${day}T${String(hour).padStart(2, '0')}:00:00Z`);
      const row = (trace: string, span: string, start: number, cost: string): SpanRow => ({
        ...template!,
        trace_id: trace,
        span_id: span,
        parent_span_id: '',
        start_time: start,
        end_time: start + 1000,
        start_date: new Date(start).toISOString().slice(0, 10),
        total_cost: cost,
        output_cost: cost,
        input_cost: '0',
      });
      // A cheap trace of one day, below the first day's three costliest.
      const rows = [row('late', 'a', at('05', 23), '1')];
      for (const [i, day] of ['05', '06'].entries()) for (let k = 0; k < 4; k++) rows.push(row(`one-${day}-${k}`, 'x', at(day, 10), String(10 + i * 4 + k)));
      await store.insertLines(buf(rows), rows.length);
      await derived(store);
      const f = { orgId: 'org_a', from: at('05', 0), to: at('07', 0), by: 'trace' as const, limit: 3 };
      const [held] = await store.query("SELECT count() AS n FROM trace_tops WHERE trace_id = 'late'");
      expect(Number(held?.n)).toBe(0);
      // The trace's costly span on the next day: only that day changed, and its derivation alone.
      await store.insertLines(buf([row('late', 'b', at('06', 1), '100')]), 1);
      expect(await store.pendingDerivation('org_a')).toEqual([{ org: 'org_a', day: '2026-10-06' }]);
      await derived(store);
      // Its build found the trace of two days, and the first day's list was built again to hold it, in the same pass.
      expect(await store.topLists.outOfDate('trace')).toEqual([]);
      const [now] = await store.query(
        "SELECT count() AS n FROM trace_tops WHERE trace_id = 'late' AND (start_date, build) IN " +
          "(SELECT list_day, max(build) FROM top_list_marks WHERE list = 'trace' GROUP BY list_day)",
      );
      expect(Number(now?.n)).toBe(2);
      const ranked = await usageReport(store, f);
      expect(ranked[0]).toMatchObject({ group: 'late', spans: 2, costs: { total_cost: '101' } });
      expect(ranked).toEqual(await usageReport(scanning(store), f));
    } finally {
      await store.close();
    }
  }, 60_000);
});
