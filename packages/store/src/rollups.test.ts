import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  addingTraffic,
  buf,
  expectListsRankAsScan,
  expectRollupsEqualScan,
  tieCuts,
  firstPrices,
  pricer,
  scanning,
  traffic,
} from '../../../test/rollup-traffic.js';
import { payloadToRows } from '@trace-ingest/shared/rows';
import { makePayload, makeSpan, makeTrace } from '../../../test/factories.js';
import { DuckDbSpanStore } from './duckdb.js';
import { countGroups, reprice, usageReport } from './reports.js';

// Each check compares a hundred reports with a scan: slow when the machine is shared with the integration tests.
describe('rollups (usage_daily, traces) on DuckDB', { timeout: 120_000 }, () => {
  let dir: string;
  let store: DuckDbSpanStore;
  /** The store's monotonic clock (ms): how long since an org's lists were read. */
  let clock: number;
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-rollups-'));
    clock = 0;
    // A small compaction threshold, so partial and folded rows both occur; top lists of three a day, so rankings of up to three read them.
    store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb'), compactRows: 150, topListsPerDay: 3, monotonicNow: () => clock });
    await store.start();
  });
  afterEach(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('equal a scan of the spans through re-sent spans, a replayed log, a reprice and compaction', async () => {
    const batches = traffic(7);
    const sent = new Set<string>();
    for (const [i, b] of batches.entries()) {
      await store.insertLines(buf(b.rows), b.rows.length);
      for (const r of b.rows) sent.add(r.span_id);
      await expectRollupsEqualScan(store);
      // A client re-sends the batch before: nothing changes.
      const prev = batches[i - 1];
      if (prev !== undefined) await store.insertLines(buf(prev.rows), prev.rows.length);
    }
    // The write log replayed from its start after a crash.
    for (const b of batches) await store.insertLines(buf(b.rows), b.rows.length);
    const [n] = await store.query('SELECT count(*)::INTEGER AS n, count(DISTINCT span_id)::INTEGER AS d FROM spans');
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
    expect(moved.newlyPriced).toBeGreaterThan(0);
    await expectRollupsEqualScan(store);
    await store.compactRollups();
    await expectRollupsEqualScan(store);
    const [folded] = await store.query('SELECT count(*)::INTEGER AS rows, count(DISTINCT (org_id, trace_id, start_date))::INTEGER AS keys FROM traces');
    expect(folded?.rows).toBe(folded?.keys);
  });

  it("puts every span of a trace under its root's customer and session, whichever request brought them first", async () => {
    for (const b of traffic(11)) await store.insertLines(buf(b.rows), b.rows.length);
    const rows = await store.query(
      'SELECT trace_id, count(DISTINCT customer_id)::INTEGER AS customers, count(DISTINCT session_id)::INTEGER AS sessions, max(trace_name) AS name ' +
        'FROM spans GROUP BY trace_id',
    );
    expect(rows).toHaveLength(60);
    for (const r of rows) expect(r, String(r.trace_id)).toMatchObject({ customers: 1, sessions: 1 });
    // Trace 1 has a customer and a session on its root; its children came in a request without them.
    const spans = await store.query("SELECT customer_id, customer_name, session_id, trace_name FROM spans WHERE trace_id = 'trace-1'");
    expect(spans.length).toBeGreaterThan(1);
    for (const s of spans) expect(s).toEqual({ customer_id: 'cust-1', customer_name: 'Customer 1', session_id: 'sess-1', trace_name: 'support' });
    // The cost of a trace whose customer arrived last moved to that customer: nothing of it stays under "no customer".
    const byCustomer = await usageReport(store, { orgId: 'org_a', from: 0, to: Date.parse('2027-01-01T00:00:00Z'), by: 'customer' });
    const none = byCustomer.find((r) => r.group === '');
    const customerless = await store.query("SELECT count(*)::INTEGER AS n FROM spans WHERE customer_id = ''");
    expect(none?.spans ?? 0).toBe(Number(customerless[0]?.n));
    const expected = await store.query(
      'SELECT count(*)::INTEGER AS n FROM spans WHERE trace_id IN ' +
        "(SELECT trace_id FROM spans WHERE parent_span_id = '' AND regexp_extract(trace_id, '\\d+')::INTEGER % 7 = 0)",
    );
    expect(none?.spans ?? 0).toBe(Number(expected[0]?.n));
  });

  it('keeps the lists of the days read current while new spans only add to them, ranking and counting as a scan does', async () => {
    const day = (d: string) => Date.parse(`2026-10-${d}T00:00:00Z`);
    const ranges = [
      { orgId: 'org_a', from: day('01'), to: day('12') },
      { orgId: 'org_a', from: day('05'), to: day('06') },
    ];
    const marked = async () => Number((await store.query('SELECT count(*)::INTEGER AS n FROM trace_top_days WHERE group_count > 0'))[0]?.n);
    const expectAsScan = async (when: string) => {
      const scan = scanning(store);
      for (const range of ranges) {
        for (const by of ['trace', 'session'] as const)
          for (const limit of [1, 2, 3]) {
            const f = { ...range, by, limit };
            expect(await usageReport(store, f), `${when}: ${by} limit ${limit} ${JSON.stringify(range)}`).toEqual(await usageReport(scan, f));
          }
        const f = { ...range, by: 'trace' as const };
        expect(await countGroups(store, f), `${when}: traces counted ${JSON.stringify(range)}`).toBe(await countGroups(scan, f));
      }
    };
    const [first, ...rest] = addingTraffic(5);
    await store.insertLines(buf(first!.rows), first!.rows.length);
    await expectAsScan('first batch');
    const days = await marked();
    expect(days).toBeGreaterThan(0);
    for (const [i, b] of rest.entries()) {
      // Every other batch comes more than five minutes after the last read: its touches are left to the next read.
      const looking = i % 2 === 0;
      if (!looking) clock += 300_001;
      await store.insertLines(buf(b.rows), b.rows.length);
      // The insert kept the marks and noted what it added to: the next read advances the lists, not rebuilds them; or,
      // with someone reading, the insert advanced them itself.
      expect(await marked(), `batch ${i}: marks kept`).toBeGreaterThanOrEqual(days);
      const [t] = await store.query('SELECT count(*)::INTEGER AS n FROM trace_top_touches');
      if (looking) expect(Number(t?.n), `batch ${i}: touches taken in by the insert`).toBe(0);
      else expect(Number(t?.n), `batch ${i}: touches noted`).toBeGreaterThan(0);
      await expectAsScan(`batch ${i}`);
      // A session's touch taken in and left unread stays, as no longer new (fresh NULL).
      const [after] = await store.query(
        'SELECT (SELECT count(*) FROM trace_top_touches)::INTEGER + (SELECT count(*) FROM session_top_touches WHERE fresh IS NOT NULL)::INTEGER AS n',
      );
      expect(after?.n, `batch ${i}: touches taken in`).toBe(0);
    }
    // Lists of three a day: a few rows a day, never every trace.
    const [lists] = await store.query('SELECT count(*)::INTEGER AS n FROM trace_tops');
    const [all] = await store.query('SELECT count(DISTINCT (trace_id, start_date))::INTEGER AS n FROM traces');
    expect(Number(lists?.n)).toBeLessThan(Number(all?.n));
  });

  it("moves the costs of a trace's earlier spans to the session its root names later, across midnight, in the session lists", async () => {
    const price = pricer(firstPrices);
    const rows = (trace: Parameters<typeof makeTrace>[0], receivedAt: number) =>
      payloadToRows(makePayload({ traces: [makeTrace(trace)] }), { orgId: 'org_a', keyPrefix: 'ti_test', receivedAt }, (x) => price(x));
    const at = (t: string) => Date.parse(`2026-10-${t}Z`);
    const call = (id: string, start: number, inputTokens: number) =>
      makeSpan({
        spanId: id,
        parentSpanId: 'late-root',
        startTime: start,
        endTime: start + 500,
        provider: 'openai',
        modelId: 'gpt-4o',
        usage: { inputTokens, outputTokens: 10 },
      });
    // Sessions of both days, and a trace whose costly children come first, before midnight, with no session yet.
    const first = [
      ...['a', 'b', 'c', 'd'].flatMap((x, i) =>
        rows({ traceId: `t-${x}`, sessionId: `sess-${x}`, spans: [call(`s-${x}`, at(`0${4 + (i % 2)}T12:00:00`), 100 + i)] }, 1),
      ),
      ...rows({ traceId: 'late', spans: [call('late-1', at('04T23:59:00'), 90_000), call('late-2', at('04T23:59:30'), 90_000)] }, 1),
    ];
    await store.insertLines(buf(first), first.length);
    const range = { orgId: 'org_a', from: at('04T00:00:00'), to: at('06T00:00:00'), by: 'session' as const };
    const withoutLists = Object.assign(Object.create(store) as DuckDbSpanStore, { topLists: undefined });
    expect(await usageReport(store, { ...range, limit: 2 })).toEqual(await usageReport(withoutLists, { ...range, limit: 2 }));
    // The root comes after midnight and names the session: the children of the day before move to it.
    const root = rows(
      {
        traceId: 'late',
        sessionId: 'sess-late',
        spans: [makeSpan({ spanId: 'late-root', spanType: 'agent', startTime: at('05T00:00:10'), endTime: at('05T00:01:00') })],
      },
      2,
    );
    await store.insertLines(buf(root), root.length);
    for (const limit of [1, 2, 3]) {
      const ranked = await usageReport(store, { ...range, limit });
      expect(ranked, `limit ${limit}`).toEqual(await usageReport(withoutLists, { ...range, limit }));
      expect(ranked[0]?.group).toBe('sess-late');
    }
  });

  it("ranks a range's traces from per-day lists, as a scan does, through late spans on another day, an erasure and retention", async () => {
    await expectListsRankAsScan(() => store, {
      restart: async () => {
        // After a restart the store still knows which days' lists a write must mark out of date.
        await store.close();
        store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb'), compactRows: 150, topListsPerDay: 3 });
        await store.start();
      },
      keys: async () => {
        const [lists] = await store.query('SELECT count(*)::INTEGER AS n FROM trace_tops');
        const [all] = await store.query('SELECT count(*)::INTEGER AS n FROM (SELECT DISTINCT trace_id, start_date FROM traces)');
        return { lists: Number(lists?.n), traces: Number(all?.n) };
      },
    });
  });
});
