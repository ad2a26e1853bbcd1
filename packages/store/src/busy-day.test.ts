import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { COST_COLUMNS, payloadToRows, type SpanRow } from '@trace-ingest/shared/rows';
import { buf, firstPrices, pricer, scanning } from '../../../test/rollup-traffic.js';
import { makePayload, makeSpan, makeTrace } from '../../../test/factories.js';
import { DuckDbSpanStore } from './duckdb.js';
import type { DuckDbFile } from './duckdb-file.js';
import { advanceFromTouchesSql } from './duckdb-top-lists.js';
import { readHistory, readSpend } from './forecast.js';
import { countGroups, dailyCosts, GROUPS, groupLabels, reportRoute, usageReport, type GroupBy } from './reports.js';
import type { CostChange, SpanStore } from './span-store.js';
import { TOP_LISTS } from './top-lists.js';

const DAY = 86_400_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const NOW = Date.parse('2026-11-26T15:42:10Z');
const TODAY = Date.parse('2026-11-26T00:00:00Z');
const MONTH = Date.parse('2026-11-01T00:00:00Z');

/** Traces of today up to NOW (most of the rows), a few of the days before, over a few customers and models. */
function busyDay(): SpanRow[] {
  const price = pricer(firstPrices);
  const rows: SpanRow[] = [];
  for (let t = 0; t < 120; t++) {
    // Two in three traces today, the rest spread over the 40 days before.
    const start = t % 3 === 0 ? TODAY - (1 + (t % 40)) * DAY + t * 60_000 : NOW - (120 - t) * 300_000;
    const spans = [0, 1, 2].map((i) =>
      makeSpan({
        spanId: `s${t}-${i}`,
        ...(i === 0 ? {} : { parentSpanId: `s${t}-0` }),
        spanType: i === 0 ? 'agent' : 'llm',
        name: 'chat',
        startTime: start + i * 1000,
        endTime: start + i * 1000 + 500,
        ...(i === 0 ? {} : { provider: 'openai', modelId: t % 2 === 0 ? 'gpt-4o' : 'claude-sonnet-4', usage: { inputTokens: 100 + t, outputTokens: 10 + i } }),
      }),
    );
    const trace = makeTrace({
      traceId: `t${t}`,
      traceName: 'support',
      customer: { id: `cust-${t % 4}`, name: `Customer ${t % 4}` },
      sessionId: `sess-${t % 6}`,
    });
    rows.push(...payloadToRows(makePayload({ traces: [{ ...trace, spans }] }), { orgId: 'org_a', keyPrefix: 'ti_test', receivedAt: start }, (s) => price(s)));
  }
  return rows;
}

/** The store, with the SQL (and the params) of every report query it runs recorded. */
function recording(store: SpanStore): { store: SpanStore; sql: string[]; params: (readonly unknown[])[] } {
  const sql: string[] = [];
  const params: (readonly unknown[])[] = [];
  const wrapped = Object.assign(Object.create(store) as SpanStore, {
    query: (q: string, p?: readonly unknown[]) => {
      sql.push(q);
      params.push(p ?? []);
      return store.query(q, p);
    },
  });
  return { store: wrapped, sql, params };
}

/** Whether a statement is the bounded count of a cut day's side. */
const isProbe = (q: string) => /^SELECT count\(\*\) AS n FROM \(SELECT 1 AS x FROM spans .* LIMIT \d+\) t$/.test(q);

/** Statements that read the spans table other than the bounded counts of a cut day's sides. */
const spanReads = (sql: readonly string[]) => sql.filter((q) => /\bFROM spans\b/.test(q) && !isProbe(q));

const GROUPINGS: (readonly [GroupBy, GroupBy?])[] = [...(Object.keys(GROUPS) as GroupBy[]).map((g) => [g] as const), ['day', 'model'], ['customer', 'session']];

describe('a range ending now, on a day that holds most rows', { timeout: 120_000 }, () => {
  let dir: string;
  let store: DuckDbSpanStore;
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-busy-day-'));
    store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb'), compactRows: 200, topListsPerDay: 3 });
    await store.start();
    const rows = busyDay();
    for (let i = 0; i < rows.length; i += 50) await store.insertLines(buf(rows.slice(i, i + 50)), rows.slice(i, i + 50).length);
  }, 60_000);
  afterEach(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const ranges = {
    today: { from: TODAY, to: NOW + 1 },
    'this month': { from: MONTH, to: NOW + 1 },
    '90 days': { from: NOW - 90 * DAY, to: NOW + 1 },
  };

  it('usageReport: every grouping equals the scan, and reads no span beyond the probes', async () => {
    const scan = scanning(store);
    for (const [name, range] of Object.entries(ranges)) {
      // The 90 days start on a day with no rows before the cut: that day is whole too.
      expect((await reportRoute(store, { orgId: 'org_a', ...range })).edges, name).toEqual([]);
      for (const [by, then] of GROUPINGS)
        for (const limit of then === undefined ? [undefined, 2] : [undefined]) {
          const f = { orgId: 'org_a', ...range, by, then, limit };
          const rec = recording(store);
          expect(await usageReport(rec.store, f), `${name} by ${by} ${then ?? ''} ${limit ?? ''}`).toEqual(await usageReport(scan, f));
          expect(spanReads(rec.sql), `${name} by ${by}`).toEqual([]);
        }
    }
  });

  it('countGroups and groupLabels: equal the scan, no span read', async () => {
    const scan = scanning(store);
    for (const range of [ranges.today, ranges['this month']]) {
      const f = { orgId: 'org_a', ...range, by: 'trace' as const };
      const rec = recording(store);
      expect(await countGroups(rec.store, f)).toBe(await countGroups(scan, f));
      const traces = ['t1', 't2', 't5', 't119'];
      expect(await groupLabels(rec.store, { ...f, groups: traces })).toEqual(await groupLabels(scan, { ...f, groups: traces }));
      const customers = { ...f, by: 'customer' as const, groups: ['cust-1', 'cust-2'] };
      expect(await groupLabels(rec.store, customers)).toEqual(await groupLabels(scan, customers));
      expect(spanReads(rec.sql)).toEqual([]);
    }
  });

  it('dailyCosts (the console series): equal the scan, no span read', async () => {
    const scan = scanning(store);
    for (const range of [ranges.today, ranges['this month']])
      for (const by of ['model', 'customer'] as const) {
        const rec = recording(store);
        const f = { orgId: 'org_a', ...range, by };
        expect(await dailyCosts(rec.store, f)).toEqual(await dailyCosts(scan, f));
        expect(spanReads(rec.sql)).toEqual([]);
      }
  });

  it('readSpend and readHistory (budget watcher, GET /v1/budget, forecast): equal the scan, no span read', async () => {
    const scan = scanning(store);
    for (const by of ['customer', 'model'] as const) {
      const rec = recording(store);
      expect(await readSpend(rec.store, 'org_a', NOW, by)).toEqual({ ...(await readSpend(scan, 'org_a', NOW, by)) });
      expect(await readHistory(rec.store, 'org_a', NOW)).toEqual(await readHistory(scan, 'org_a', NOW));
      expect(spanReads(rec.sql)).toEqual([]);
    }
  });

  it('rows started after the cut (a client clock ahead): the whole day less those rows, only they read from the spans', async () => {
    const late = busyDay()
      .slice(0, 3)
      .map((r) => ({ ...r, span_id: `${r.span_id}-late`, start_time: NOW + 3_600_000, end_time: NOW + 3_600_500, start_date: '2026-11-26' }));
    // A trace all of whose spans today are late: counted in the day, not in the range.
    const alone = late.map((r) => ({ ...r, trace_id: 't-late', span_id: `${r.span_id}-alone`, customer_id: 'cust-late' }));
    await store.insertLines(buf([...late, ...alone]), late.length + alone.length);
    const scan = scanning(store);
    const route = await reportRoute(store, { orgId: 'org_a', ...ranges['this month'] });
    expect(route).toEqual({ days: { from: '2026-11-01', to: '2026-11-27' }, edges: [], less: [{ from: NOW + 1, to: TODAY + DAY }] });
    for (const [name, range] of Object.entries(ranges))
      for (const [by, then] of GROUPINGS)
        for (const limit of then === undefined ? [undefined, 2] : [undefined]) {
          const f = { orgId: 'org_a', ...range, by, then, limit };
          const rec = recording(store);
          expect(await usageReport(rec.store, f), `${name} by ${by} ${then ?? ''} ${limit ?? ''}`).toEqual(await usageReport(scan, f));
          // The spans read are the slice after the cut alone.
          for (const [i, q] of rec.sql.entries()) if (spanReads([q]).length > 0) expect(rec.params[i], `${name} by ${by}: ${q}`).toContain(NOW + 1);
        }
    for (const range of [ranges.today, ranges['this month']]) {
      const f = { orgId: 'org_a', ...range, by: 'trace' as const };
      expect(await countGroups(store, f)).toBe(await countGroups(scan, f));
      for (const by of ['model', 'customer'] as const) expect(await dailyCosts(store, { ...f, by })).toEqual(await dailyCosts(scan, { ...f, by }));
    }
  });

  it('ranges cut inside a day on either side, with rows beyond the cuts: equal to the scan', async () => {
    const late = busyDay()
      .slice(3, 9)
      .map((r) => ({ ...r, span_id: `${r.span_id}-late`, start_time: NOW + 60_000, end_time: NOW + 60_500, start_date: '2026-11-26' }));
    await store.insertLines(buf(late), late.length);
    const scan = scanning(store);
    const cuts = [
      { from: TODAY + 3_600_000, to: NOW + 1 },
      { from: NOW - 2 * 3_600_000, to: NOW + 1 },
      { from: NOW - 9 * 3_600_000, to: NOW - 3_600_000 },
      { from: MONTH + 3_600_000, to: NOW - 300_000 },
      { from: TODAY - 5 * DAY + 7_200_000, to: NOW + 1 },
    ];
    for (const cut of cuts) {
      for (const [by, then] of GROUPINGS)
        for (const limit of then === undefined ? [undefined, 2] : [undefined]) {
          const f = { orgId: 'org_a', ...cut, by, then, limit };
          expect(await usageReport(store, f), `${JSON.stringify(cut)} by ${by} ${then ?? ''} ${limit ?? ''}`).toEqual(await usageReport(scan, f));
        }
      for (const customerId of [undefined, 'cust-1']) {
        const f = { orgId: 'org_a', ...cut, by: 'trace' as const, customerId };
        expect(await countGroups(store, f), JSON.stringify(f)).toBe(await countGroups(scan, f));
      }
      expect(await dailyCosts(store, { orgId: 'org_a', ...cut, by: 'model' })).toEqual(await dailyCosts(scan, { orgId: 'org_a', ...cut, by: 'model' }));
    }
  });
});

describe('the insert path on a day that holds most rows', { timeout: 120_000 }, () => {
  let dir: string;
  let store: DuckDbSpanStore;
  let statements: string[];
  /** The store's monotonic clock (ms): how long since an org's lists were read. */
  let clock: number;
  /** Past the five minutes after a read in which the writer advances every day it touches: the next read advances. */
  const lookAway = () => {
    clock += 300_001;
  };
  /** Today's traces of the busy day, the store's file, and today ranked by trace and by session (limit 3), with a scan to compare. */
  const todayCase = () => {
    const rows = busyDay().filter((r) => r.start_date === '2026-11-26');
    const count = { orgId: 'org_a', from: TODAY, to: TODAY + DAY, by: 'trace' as const };
    const f = { ...count, limit: 3 };
    return {
      byTrace: (t: number) => rows.filter((r) => r.trace_id === `t${t}`),
      file: (store as unknown as { file: DuckDbFile }).file,
      count,
      f,
      bySession: { ...f, by: 'session' as const },
      scan: scanning(store),
    };
  };
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-busy-insert-'));
    clock = 0;
    store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb'), compactRows: 200, topListsPerDay: 3, monotonicNow: () => clock });
    await store.start();
    statements = [];
    // Every write statement goes through the store's file (duckdb-file.ts), on the writer or beside it.
    const inner = (store as unknown as { file: { run: (sql: string) => Promise<number>; runOn: (conn: unknown, sql: string) => Promise<void> } }).file;
    const run = inner.run.bind(inner);
    inner.run = (sql: string) => {
      statements.push(sql);
      return run(sql);
    };
    const runOn = inner.runOn.bind(inner);
    inner.runOn = (conn: unknown, sql: string) => {
      statements.push(sql);
      return runOn(conn, sql);
    };
  }, 60_000);
  afterEach(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('looks up no stored trace for a batch of new traces, only the rows since a known one began, and folds only what was written since', async () => {
    const rows = busyDay().filter((r) => r.start_date === '2026-11-26');
    const byTrace = (t: number) => rows.filter((r) => r.trace_id === `t${t}`);
    // Whole new traces: nothing to look up.
    const first = [1, 2, 4, 5].flatMap(byTrace);
    await store.insertLines(buf(first), first.length);
    const known = () => statements.filter((s) => s.startsWith('CREATE OR REPLACE TEMP TABLE ti_known')).at(-1) ?? '';
    expect(known()).toContain(' AND false ');
    // A late span of a stored trace (its root brings the customer): the lookup reads from that trace's first start on.
    const late = byTrace(7).slice(1);
    await store.insertLines(buf(late), late.length);
    const root = byTrace(7).slice(0, 1);
    await store.insertLines(buf(root), root.length);
    expect(known()).toContain(` AND t.last_start >= ${Math.min(...late.map((r) => r.start_time))} `);
    // Enough batches for a fold: traces and sessions fold by rowid, the narrow rollups by day.
    for (let t = 8; t < 120; t += 2) {
      const b = [...byTrace(t), ...byTrace(t + 1)];
      if (b.length > 0) await store.insertLines(buf(b), b.length);
    }
    const folds = statements.filter((s) => s.startsWith('DELETE FROM traces') || s.startsWith('DELETE FROM sessions_daily'));
    expect(folds.length).toBeGreaterThan(0);
    for (const s of folds) expect(s).toMatch(/WHERE rowid >= \d+$/);
    const scan = scanning(store);
    for (const by of ['trace', 'session', 'customer', 'model'] as const) {
      const f = { orgId: 'org_a', from: TODAY, to: TODAY + DAY, by };
      expect(await usageReport(store, f), by).toEqual(await usageReport(scan, f));
    }
    const [t7] = await store.query("SELECT DISTINCT customer_id FROM spans WHERE trace_id = 't7'");
    expect(t7).toEqual({ customer_id: 'cust-3' });
  });
  it("brings today's trace list up to date from its list and touches, reading none of today's rollup rows", async () => {
    const rows = busyDay().filter((r) => r.start_date === '2026-11-26');
    const byTrace = (t: number) => rows.filter((r) => r.trace_id === `t${t}`);
    const price = pricer(firstPrices);
    // A later span of a stored trace, costly enough to lift it from below the list of three to the top.
    const late = (t: number, inputTokens: number) =>
      payloadToRows(
        makePayload({
          traces: [
            makeTrace({
              traceId: `t${t}`,
              spans: [
                makeSpan({
                  spanId: `late-${t}-${inputTokens}`,
                  parentSpanId: `s${t}-0`,
                  startTime: NOW - 1000,
                  endTime: NOW - 500,
                  provider: 'openai',
                  modelId: 'gpt-4o',
                  usage: { inputTokens, outputTokens: 10 },
                }),
              ],
            }),
          ],
        }),
        { orgId: 'org_a', keyPrefix: 'ti_test', receivedAt: NOW },
        (x) => price(x),
      );
    const first = [1, 2, 4, 5, 7, 8].flatMap(byTrace);
    await store.insertLines(buf(first), first.length);
    const count = { orgId: 'org_a', from: TODAY, to: TODAY + DAY, by: 'trace' as const };
    const f = { ...count, limit: 3 };
    const scan = scanning(store);
    expect(await usageReport(store, f)).toEqual(await usageReport(scan, f));
    // Between two reads, one batch or several (a trace touched twice: its last touch holds its row).
    const reads = [[[...byTrace(10), ...late(1, 900_000)]], [late(2, 5)], [[...late(4, 2_000_000), ...late(10, 1)], late(4, 3), byTrace(11)]];
    for (const batches of reads) {
      lookAway();
      for (const batch of batches) {
        statements = [];
        await store.insertLines(buf(batch), batch.length);
        // The touch takes what was stored of the batch's traces from the lookup the insert makes anyway: it reads no rollup row.
        const touch = statements.find((s) => s.startsWith('INSERT INTO trace_top_touches')) ?? '';
        expect(touch).toContain('LEFT JOIN ti_known_days');
        expect(touch).not.toMatch(/FROM traces\b/);
      }
      statements = [];
      const ranked = await usageReport(store, f);
      expect(ranked).toEqual(await usageReport(scan, f));
      expect(await countGroups(store, count)).toBe(await countGroups(scan, count));
      const advance = statements.filter((s) => s.includes('ti_dadv_'));
      expect(advance.length).toBeGreaterThan(0);
      for (const s of advance) expect(s).not.toMatch(/FROM traces WHERE org_id = 'org_a' AND start_date = DATE '2026-11-26'/);
      expect(statements.some((s) => s.includes('ti_top_day'))).toBe(false);
    }
    expect((await usageReport(store, f))[0]?.group).toBe('t4');
    // Written to and not read for a while (within the hour after a read): once a day holds ten lists' worth of new
    // touches, the writer advances it after its write, so the day stays marked and a read takes in at most that many
    // touches (no rebuild).
    clock += 3_000_000;
    statements = [];
    for (let t = 12; t < 70; t++) if (byTrace(t).length > 0) await store.insertLines(buf(byTrace(t)), byTrace(t).length);
    expect(statements.filter((s) => s.startsWith('CREATE OR REPLACE TEMP TABLE ti_dadv_touched')).length).toBeGreaterThan(0);
    const today = "start_date = DATE '2026-11-26'";
    const state = `SELECT (SELECT count(*) FROM trace_top_days WHERE ${today})::INTEGER AS marks, (SELECT count(*) FROM trace_top_touches)::INTEGER AS touches`;
    const [before] = await store.query(state);
    expect(before?.marks).toBe(1);
    expect(before?.touches).toBeGreaterThan(0);
    expect(before?.touches).toBeLessThanOrEqual(30);
    statements = [];
    expect(await usageReport(store, f)).toEqual(await usageReport(scan, f));
    expect(await countGroups(store, count)).toBe(await countGroups(scan, count));
    expect(statements.some((s) => s.includes('ti_top_day'))).toBe(false);
    expect(await store.query(state)).toEqual([{ marks: 1, touches: 0 }]);
    // Not read for over an hour: the writer leaves the day, which is unmarked once its touches also outgrow a quarter of
    // its traces (writes then pay nothing for its list), and rebuilt by the next read.
    clock += 3_700_000;
    statements = [];
    for (let t = 70; t < 120; t++) if (byTrace(t).length > 0) await store.insertLines(buf(byTrace(t)), byTrace(t).length);
    expect(statements.some((s) => s.includes('ti_dadv_'))).toBe(false);
    expect(await store.query(state)).toEqual([{ marks: 0, touches: 0 }]);
    statements = [];
    expect(await usageReport(store, f)).toEqual(await usageReport(scan, f));
    expect(await countGroups(store, count)).toBe(await countGroups(scan, count));
    expect(statements.some((s) => s.includes('ti_top_day'))).toBe(true);
    expect(await store.query(state)).toEqual([{ marks: 1, touches: 0 }]);
  });
  it('ranks a day touched since its last read while an insert holds the writer, and gives way to a write of the same rows', async () => {
    const { byTrace, file, count, f, bySession, scan } = todayCase();
    const first = [1, 2, 4, 5, 7, 8].flatMap(byTrace);
    await store.insertLines(buf(first), first.length);
    expect(await usageReport(store, f)).toEqual(await usageReport(scan, f));
    expect(await usageReport(store, bySession)).toEqual(await usageReport(scan, bySession));
    // Costlier traces (more tokens) than the listed ones, written after the read: today's lists are touched.
    const more = [10, 11].flatMap(byTrace);
    lookAway();
    await store.insertLines(buf(more), more.length);
    let release = () => {};
    const held = file.exclusive(() => new Promise<void>((r) => (release = r)));
    try {
      statements = [];
      const ranked = await Promise.race([usageReport(store, f), sleep(20_000).then(() => 'waited for the writer')]);
      expect(ranked).toEqual(await usageReport(scan, f));
      expect((ranked as { group: string }[]).map((r) => r.group)).toContain('t11');
      expect(await countGroups(store, count)).toBe(await countGroups(scan, count));
      expect(statements.some((s) => s.startsWith('CREATE OR REPLACE TEMP TABLE ti_dadv_touched'))).toBe(true);
      const sessions = await Promise.race([usageReport(store, bySession), sleep(20_000).then(() => 'waited for the writer')]);
      expect(sessions).toEqual(await usageReport(scan, bySession));
      expect(statements.some((s) => s.startsWith('CREATE OR REPLACE TEMP TABLE ti_sadv_touched'))).toBe(true);
    } finally {
      release();
      await held;
    }
    // The writer advancing the same day at the same moment (its transaction open): the read's advance beside it conflicts,
    // is rolled back, and the read then waits for the writer, whose advance took the touches in.
    const late = [13, 14].flatMap(byTrace);
    lookAway();
    await store.insertLines(buf(late), late.length);
    let commit: (() => void) | undefined;
    const advancing = file.exclusive(() =>
      file.transaction(async () => {
        for (const sql of advanceFromTouchesSql(TOP_LISTS.trace, "'org_a'", '2026-11-26', 3)) await file.run(sql);
        await new Promise<void>((r) => (commit = r));
      }),
    );
    while (commit === undefined) await sleep(10);
    statements = [];
    const read = usageReport(store, f);
    while (!statements.includes('ROLLBACK')) await sleep(10);
    commit();
    await advancing;
    const after = await read;
    expect(after).toEqual(await usageReport(scan, f));
    expect(after.map((r) => r.group)).toContain('t13');
    expect(await store.query('SELECT count(*)::INTEGER AS n FROM trace_top_touches')).toEqual([{ n: 0 }]);
    // A write unmarks the day between the read's look and its advance beside the writer: the advance tells the read to
    // go through the writer, which rebuilds the day, rather than rank the stale list.
    const more2 = [16, 17].flatMap(byTrace);
    lookAway();
    await store.insertLines(buf(more2), more2.length);
    const lists = (store as unknown as { lists: { advanceBeside: (l: unknown, org: string, range: string, days: number) => Promise<boolean> } }).lists;
    const range = "org_id = 'org_a' AND start_date >= DATE '2026-11-26' AND start_date < DATE '2026-11-27'";
    await file.exclusive(() => file.run("DELETE FROM trace_top_days WHERE org_id = 'org_a' AND start_date = DATE '2026-11-26'"));
    expect(await lists.advanceBeside(TOP_LISTS.trace, "'org_a'", range, 1)).toBe(false);
    statements = [];
    expect(await usageReport(store, f)).toEqual(await usageReport(scan, f));
    expect(statements.some((s) => s.includes('ti_top_day'))).toBe(true);
  });
  it('advances every day a write touched in its transaction while its lists are being read: a read finds them current and writes nothing', async () => {
    const { byTrace, file, count, f, bySession, scan } = todayCase();
    const first = [1, 2, 4, 5, 7, 8].flatMap(byTrace);
    await store.insertLines(buf(first), first.length);
    for (const q of [f, bySession]) expect(await usageReport(store, q)).toEqual(await usageReport(scan, q));
    const touches =
      'SELECT (SELECT count(*) FROM trace_top_touches)::INTEGER AS trace, ' +
      '(SELECT count(*) FROM session_top_touches WHERE fresh IS NOT NULL)::INTEGER AS session';
    // Costlier traces than the listed ones, a minute after the read: the writer takes them into both lists itself.
    clock += 60_000;
    const more = [10, 11].flatMap(byTrace);
    statements = [];
    await store.insertLines(buf(more), more.length);
    expect(await store.query(touches)).toEqual([{ trace: 0, session: 0 }]);
    // Before the write commits: DuckDB may checkpoint at that commit, and a read must not find the touches meanwhile.
    const commit = statements.lastIndexOf('COMMIT');
    for (const t of ['ti_dadv_touched', 'ti_sadv_touched']) {
      const advance = statements.findIndex((q) => q.startsWith(`CREATE OR REPLACE TEMP TABLE ${t}`));
      expect(advance, t).toBeGreaterThan(-1);
      expect(advance, t).toBeLessThan(commit);
      expect(statements.indexOf('BEGIN TRANSACTION'), t).toBeLessThan(advance);
      expect(statements.filter((q) => q === 'BEGIN TRANSACTION').length, t).toBe(1);
    }
    // The reads neither write nor wait for the writer (held here, as by an insert or a checkpoint of DuckDB's).
    let release = () => {};
    const held = file.exclusive(() => new Promise<void>((r) => (release = r)));
    try {
      statements = [];
      for (const q of [f, bySession]) {
        const ranked = await Promise.race([usageReport(store, q), sleep(20_000).then(() => 'waited for the writer')]);
        expect(ranked).toEqual(await usageReport(scan, q));
      }
      expect((await usageReport(store, f)).map((r) => r.group)).toContain('t11');
      expect(await countGroups(store, count)).toBe(await countGroups(scan, count));
      expect(statements).toEqual([]);
    } finally {
      release();
      await held;
    }
    // Five minutes without a read: a write leaves its touches to the next read (or to ten lists' worth of them).
    lookAway();
    const late = [13, 14].flatMap(byTrace);
    await store.insertLines(buf(late), late.length);
    const [left] = await store.query(touches);
    expect(left?.trace).toBeGreaterThan(0);
    for (const q of [f, bySession]) expect(await usageReport(store, q)).toEqual(await usageReport(scan, q));
  });
  it("reruns a write whose advance meets a read's advance of the same day, and still counts the sessions it brought as new", async () => {
    const price = pricer(firstPrices);
    let n = 0;
    /** One trace of one costed span today in a session. */
    const call = (session: string, inputTokens: number) =>
      payloadToRows(
        makePayload({
          traces: [
            makeTrace({
              traceId: `rr-${++n}`,
              sessionId: session,
              spans: [
                makeSpan({
                  spanId: `rr-${n}`,
                  startTime: NOW - 60_000 + n,
                  endTime: NOW - 59_000 + n,
                  provider: 'openai',
                  modelId: 'gpt-4o',
                  usage: { inputTokens, outputTokens: 10 },
                }),
              ],
            }),
          ],
        }),
        { orgId: 'org_a', keyPrefix: 'ti_test', receivedAt: NOW },
        (x) => price(x),
      );
    const file = (store as unknown as { file: DuckDbFile }).file;
    const today = { orgId: 'org_a', from: TODAY, to: TODAY + DAY, by: 'session' as const };
    const scan = scanning(store);
    const insert = (rows: SpanRow[]) => store.insertLines(buf(rows), rows.length);
    await insert(Array.from({ length: 6 }, (_, i) => call(`s${i}`, 1000 * (i + 1))).flat());
    expect(await usageReport(store, { ...today, limit: 3 })).toEqual(await usageReport(scan, { ...today, limit: 3 }));
    // Touches left by a write nobody was reading, then a read of another day: the org is read again, today is not.
    lookAway();
    await insert(call('s0', 10));
    await usageReport(store, { ...today, from: TODAY - DAY, to: TODAY, limit: 3 });
    // A read's advance of today beside the writer, open: the write's own advance of today conflicts with it.
    const conn = await file.connect();
    try {
      await file.runOn(conn, 'BEGIN TRANSACTION');
      await file.runOn(conn, "DELETE FROM session_top_touches WHERE org_id = 'org_a' AND start_date = DATE '2026-11-26'");
      statements = [];
      const write = insert([...call('new-1', 20), ...call('s1', 30)]);
      while (statements.filter((q) => q === 'BEGIN TRANSACTION').length < 2) await sleep(5);
      await file.runOn(conn, 'ROLLBACK');
      await write;
    } finally {
      conn.closeSync();
    }
    expect(statements.filter((q) => q === 'BEGIN TRANSACTION').length).toBeGreaterThan(1);
    expect(await countGroups(store, today)).toBe(await countGroups(scan, today));
    const [counted] = await store.query(
      "SELECT (SELECT group_count FROM session_top_days WHERE start_date = DATE '2026-11-26')::INTEGER AS marked, " +
        "(SELECT count(DISTINCT session_id) FROM spans WHERE start_date = DATE '2026-11-26')::INTEGER AS sessions",
    );
    expect(counted?.marked).toBe(counted?.sessions);
    for (const limit of [1, 3]) expect(await usageReport(store, { ...today, limit })).toEqual(await usageReport(scan, { ...today, limit }));
  });
  it("brings today's session list up to date from its list and touches, reading today's rollup rows only of sessions that could enter the list", async () => {
    const price = pricer(firstPrices);
    let n = 0;
    /** One trace of one costed span in a session, today (or `at`), with a customer. */
    const call = (session: string, inputTokens: number, at = NOW - 60_000, customer = 'cust-a') =>
      payloadToRows(
        makePayload({
          traces: [
            makeTrace({
              traceId: `tr-${++n}`,
              sessionId: session,
              customer: { id: customer },
              spans: [
                makeSpan({
                  spanId: `sp-${n}`,
                  startTime: at,
                  endTime: at + 500,
                  provider: 'openai',
                  modelId: 'gpt-4o',
                  usage: { inputTokens, outputTokens: 10 },
                }),
              ],
            }),
          ],
        }),
        { orgId: 'org_a', keyPrefix: 'ti_test', receivedAt: NOW },
        (x) => price(x),
      );
    const insert = async (rows: SpanRow[]) => {
      lookAway();
      statements = [];
      await store.insertLines(buf(rows), rows.length);
    };
    const scan = scanning(store);
    const today = { orgId: 'org_a', from: TODAY, to: TODAY + DAY, by: 'session' as const };
    const twoDays = { ...today, from: TODAY - DAY };
    const expectAsScan = async (when: string) => {
      statements = [];
      // The range of two days first: its read rebuilds a day before it advances today (a rebuild writes a neighbour's rows).
      for (const range of [twoDays, today]) {
        for (const limit of [1, 3])
          expect(await usageReport(store, { ...range, limit }), `${when}: limit ${limit}`).toEqual(await usageReport(scan, { ...range, limit }));
        expect(await countGroups(store, range), `${when}: sessions counted`).toBe(await countGroups(scan, range));
      }
      const [counted] = await store.query(
        "SELECT (SELECT group_count FROM session_top_days WHERE start_date = DATE '2026-11-26')::INTEGER AS marked, " +
          "(SELECT count(DISTINCT session_id) FROM spans WHERE start_date = DATE '2026-11-26')::INTEGER AS sessions",
      );
      expect(counted?.marked, `${when}: today's sessions counted in its mark`).toBe(counted?.sessions);
    };
    /** The advance's read of today's rollup rows (WHERE false when no session had to be read). */
    const lookup = () => statements.find((s) => s.startsWith('CREATE OR REPLACE TEMP TABLE ti_sadv_found')) ?? '';
    const readsToday = /FROM sessions_daily WHERE org_id = 'org_a' AND start_date = DATE '2026-11-26'/;
    // Twelve sessions today, one of them (multi) yesterday too: the list keeps three a day.
    await insert([
      ...Array.from({ length: 12 }, (_, i) => call(`s${i}`, 1000 * (i + 1))).flat(),
      ...call('multi', 500, NOW - DAY - 3_600_000),
      ...call('erased', 700, NOW - 120_000, 'cust-e'),
    ]);
    await expectAsScan('first');
    // Small sums into sessions below the list, and a small new session: nothing could enter, nothing is read.
    await insert([...call('s0', 10), ...call('s1', 20), ...call('fresh-1', 5)]);
    const touch = statements.find((s) => s.startsWith('INSERT INTO session_top_touches')) ?? '';
    expect(touch).toContain('LEFT JOIN ti_new_session_id');
    expect(touch).not.toMatch(/FROM sessions_daily\b/);
    await expectAsScan('small sums');
    expect(lookup()).toContain('WHERE false');
    expect(statements.filter((s) => s.includes('ti_sadv_')).some((s) => readsToday.test(s))).toBe(false);
    // They keep what was added to them, taken in already: the next read finds the day current and advances nothing.
    const carried = 'SELECT session_id FROM session_top_touches WHERE fresh IS NULL AND spans > 0 ORDER BY session_id';
    expect(await store.query(carried)).toEqual([{ session_id: 's0' }, { session_id: 's1' }]);
    await expectAsScan('nothing new');
    expect(statements.some((s) => s.includes('ti_sadv_'))).toBe(false);
    // A session below the list grows twice, with an unrelated write read between: what it carries adds up until its
    // bound (the floor plus both) reaches the list, and it is read and ranked third.
    await insert(call('s4', 2500));
    await expectAsScan('carried once');
    expect(await store.query(carried)).toContainEqual({ session_id: 's4' });
    await insert(call('fresh-3', 5));
    await expectAsScan('carried through another advance');
    await insert(call('s4', 2700));
    await expectAsScan('carried twice');
    expect((await usageReport(store, { ...today, limit: 3 }))[2]?.group).toBe('s4');
    // A session below the list that could now lead it: its row of today is read, and it ranks first.
    await insert(call('s2', 50_000));
    await expectAsScan('a session lifted');
    expect(lookup()).toMatch(readsToday);
    expect((await usageReport(store, { ...today, limit: 1 }))[0]?.group).toBe('s2');
    // A listed session grows, a costly new one enters, the one of two days gets its first span today.
    await insert([...call('s11', 100), ...call('fresh-2', 90_000), ...call('multi', 10)]);
    await expectAsScan('new and listed');
    expect((await usageReport(store, { ...today, limit: 1 }))[0]?.group).toBe('fresh-2');
    // Today's touches of the session of two days, then yesterday rebuilt (its costs rewritten): it writes that
    // session's row of today from the rollups, which hold those touches already.
    await insert(call('multi', 30_000));
    const [y] = await store.query("SELECT * FROM spans WHERE session_id = 'multi' AND start_date = DATE '2026-11-25'");
    const costs = Object.fromEntries([...COST_COLUMNS, 'priced', 'price_source'].map((c) => [c, y?.[c] === undefined ? undefined : String(y[c])]));
    await store.updateCosts([
      {
        ...costs,
        priced: y?.priced === true,
        org_id: 'org_a',
        trace_id: String(y?.trace_id),
        span_id: String(y?.span_id),
        start_time: Number(y?.start_time),
      } as CostChange,
    ]);
    await expectAsScan('a neighbour rebuilt');
    // A session erased with its customer, then sent again: new to the day once more.
    await store.erase('org_a', { kind: 'customer', id: 'cust-e' }, false);
    await expectAsScan('erased');
    await insert(call('erased', 10, NOW - 60_000, 'cust-f'));
    await expectAsScan('sent again');
  });
  it('builds the next day of an org whose lists are read at its first write, and keeps it current without a read', async () => {
    const price = pricer(firstPrices);
    let n = 0;
    /** Traces of one costed span each, at `at`, in sessions of four. */
    const traces = (count: number, at: number) =>
      Array.from({ length: count }, () => {
        n++;
        return payloadToRows(
          makePayload({
            traces: [
              makeTrace({
                traceId: `nd-${n}`,
                sessionId: `nds-${Math.floor(n / 4)}`,
                customer: { id: `cust-${n % 3}` },
                spans: [
                  makeSpan({
                    spanId: `nd-${n}`,
                    startTime: at + n,
                    endTime: at + n + 500,
                    provider: 'openai',
                    modelId: 'gpt-4o',
                    usage: { inputTokens: 100 + ((n * 7919) % 5000), outputTokens: 10 },
                  }),
                ],
              }),
            ],
          }),
          { orgId: 'org_a', keyPrefix: 'ti_test', receivedAt: NOW },
          (x) => price(x),
        );
      }).flat();
    const insert = async (rows: SpanRow[]) => store.insertLines(buf(rows), rows.length);
    const marks = async (day: string) =>
      (
        await store.query(
          `SELECT (SELECT count(*) FROM trace_top_days WHERE start_date = DATE '${day}')::INTEGER AS trace, ` +
            `(SELECT count(*) FROM session_top_days WHERE start_date = DATE '${day}')::INTEGER AS session`,
        )
      )[0];
    const scan = scanning(store);
    await insert(traces(20, TODAY - DAY + 3_600_000));
    // Nobody reads the org's lists yet: a new day is not built.
    await insert(traces(5, TODAY + 3_600_000));
    expect(await marks('2026-11-26')).toEqual({ trace: 0, session: 0 });
    for (const by of ['trace', 'session'] as const) await usageReport(store, { orgId: 'org_a', from: TODAY - 2 * DAY, to: TODAY, by, limit: 3 });
    expect(await marks('2026-11-25')).toEqual({ trace: 1, session: 1 });
    // Tomorrow's first write (the day after the last read one) builds it after the write.
    const tomorrow = TODAY + DAY;
    statements = [];
    await insert(traces(5, tomorrow + 3_600_000));
    expect(statements.some((q) => q.includes('ti_top_day'))).toBe(true);
    expect(await marks('2026-11-27')).toEqual({ trace: 1, session: 1 });
    // A write to a day before the last read one (a backfill) or far beyond it builds nothing: a read does when it comes.
    statements = [];
    await insert([...traces(3, TODAY - 5 * DAY), ...traces(3, TODAY + 10 * DAY)]);
    expect(statements.some((q) => q.includes('ti_top_day'))).toBe(false);
    expect(await marks('2026-11-21')).toEqual({ trace: 0, session: 0 });
    expect(await marks('2026-12-06')).toEqual({ trace: 0, session: 0 });
    // The day fills unread: the writer advances it, so its first read rebuilds nothing and equals a scan.
    statements = [];
    for (let i = 0; i < 12; i++) await insert(traces(15, tomorrow + 7_200_000 + i * 60_000));
    for (const t of ['ti_dadv_touched', 'ti_sadv_touched'])
      expect(
        statements.some((q) => q.startsWith(`CREATE OR REPLACE TEMP TABLE ${t}`)),
        t,
      ).toBe(true);
    statements = [];
    for (const by of ['trace', 'session'] as const)
      for (const limit of [1, 3]) {
        const f = { orgId: 'org_a', from: tomorrow, to: tomorrow + DAY, by, limit };
        expect(await usageReport(store, f), `${by} ${limit}`).toEqual(await usageReport(scan, f));
        expect(await countGroups(store, f), `${by} counted`).toBe(await countGroups(scan, f));
      }
    expect(statements.some((q) => q.includes('ti_top_day'))).toBe(false);
    // Nobody has read the org's lists for over an hour: the day after is left to its first read.
    clock += 3_700_000;
    statements = [];
    await insert(traces(5, tomorrow + DAY + 3_600_000));
    expect(statements.some((q) => q.includes('ti_top_day'))).toBe(false);
    expect(await marks('2026-11-28')).toEqual({ trace: 0, session: 0 });
  });
});
