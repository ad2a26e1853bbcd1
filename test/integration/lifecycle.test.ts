import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { payloadToRows } from '@trace-ingest/shared/rows';
import { RetentionJob } from '../../packages/server/src/retention.js';
import { Metrics } from '../../packages/server/src/metrics.js';
import { DERIVED_TABLES, derivedTable } from '@trace-ingest/store/clickhouse-derive';
import { ClickHouseSpanStore } from '@trace-ingest/store/clickhouse';
import { SqliteControlStore } from '@trace-ingest/store/control-store-sqlite';
import { DuckDbSpanStore } from '@trace-ingest/store/duckdb';
import type { SpanStore } from '@trace-ingest/store/span-store';
import { makePayload, makeSpan, makeTrace } from '../factories.js';
import { buf, expectRollupsEqualScan, pricer, firstPrices, traffic } from '../rollup-traffic.js';
import { startClickHouse, type ClickHouseTestServer } from './support/clickhouse-server.js';

/**
 * Retention and erasure on both span stores (DuckDB in a temp dir, the
 * Debian ClickHouse server): rows and texts expire on a clock the test sets,
 * rollups keep the costs of expired rows, and an erasure leaves no span,
 * rollup row or trace row of what it erased.
 */

const at = (day: string, hour = 12) => Date.parse(`${day}T${String(hour).padStart(2, '0')}:00:00Z`);
const silent = pino({ level: 'silent' });

function tmpDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-life-'));
  onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function controlStore(): Promise<SqliteControlStore> {
  const keys = new SqliteControlStore(path.join(tmpDir(), 'keys.sqlite'));
  await keys.start();
  onTestFinished(() => keys.close());
  return keys;
}

/** Two spans a day with texts, on three days, for one org. */
function textRows(orgId: string) {
  const traces = ['2026-10-04', '2026-10-05', '2026-10-06', '2026-10-07'].map((day) =>
    makeTrace({
      traceId: `t-${day}`,
      customer: { id: 'cust-1' },
      spans: [0, 1].map((i) =>
        makeSpan({
          spanId: `s-${day}-${i}`,
          startTime: at(day, 10 + i),
          endTime: at(day, 10 + i) + 500,
          modelId: 'gpt-4o',
          usage: { inputTokens: 1000, outputTokens: 100 },
          input: `prompt of ${day}`,
          output: `answer of ${day}`,
          toolCatalog: '[{"name":"search"}]',
          sources: '[{"url":"https://example.com"}]',
          safetyMetadata: '{"flagged":false}',
        }),
      ),
    }),
  );
  return payloadToRows(makePayload({ traces }), { orgId, keyPrefix: 'ti_test', receivedAt: at('2026-10-08') }, pricer(firstPrices));
}

const num = (v: unknown) => Number(v ?? 0);

function lifecycleCases(name: string, open: () => Promise<{ store: SpanStore; settle: () => Promise<void> }>) {
  describe(name, () => {
    it('deletes rows past their days and empties texts past their text days, on the clock it is given; the rollups as the store keeps them', async () => {
      const { store, settle } = await open();
      const keys = await controlStore();
      const org = await keys.createOrg({ name: 'acme' });
      const other = await keys.createOrg({ name: 'beta' });
      await keys.setOrgRetention('acme', { days: 35, textDays: 33 });
      await keys.setOrgRetention('beta', { days: 0, textDays: 0 });
      const rows = [...textRows(org.id), ...textRows(other.id)];
      await store.insertLines(buf(rows), rows.length);
      await settle();
      const costBefore = await store.query(
        `SELECT CAST(sum(total_cost) AS ${store.kind === 'clickhouse' ? 'String' : 'VARCHAR'}) AS c, sum(spans) AS n FROM usage_daily WHERE org_id = ?`,
        [org.id],
      );

      const metrics = new Metrics({ defaultMetrics: false });
      // 9 November: rows before 5 October (35 days) go, texts before 7 October (33 days) are emptied.
      const job = new RetentionJob(keys, store, metrics, silent, { defaults: { days: 400, textDays: 30 }, intervalMs: 3_600_000, now: () => at('2026-11-09') });
      await job.runOnce();
      await settle();

      const byDay = await store.query(
        store.kind === 'clickhouse'
          ? 'SELECT toString(start_date) AS d, input, output, tool_catalog, sources, safety_metadata FROM spans FINAL WHERE org_id = ? ORDER BY span_id'
          : 'SELECT CAST(start_date AS VARCHAR) AS d, input, output, tool_catalog, sources, safety_metadata FROM spans WHERE org_id = ? ORDER BY span_id',
        [org.id],
      );
      expect(byDay.map((r) => r.d)).toEqual(['2026-10-05', '2026-10-05', '2026-10-06', '2026-10-06', '2026-10-07', '2026-10-07']);
      for (const r of byDay.slice(0, 4)) expect(r).toMatchObject({ input: '', output: '', tool_catalog: '', sources: '', safety_metadata: '' });
      for (const r of byDay.slice(4))
        expect(r).toMatchObject({ input: 'prompt of 2026-10-07', output: 'answer of 2026-10-07', sources: '[{"url":"https://example.com"}]' });
      // The other org keeps everything.
      const [beta] = await store.query(`SELECT count() AS n FROM spans${store.kind === 'clickhouse' ? ' FINAL' : ''} WHERE org_id = ? AND input <> ''`, [
        other.id,
      ]);
      expect(num(beta?.n)).toBe(8);
      // The expired day's trace rows are gone with its spans.
      const traces = await store.query('SELECT DISTINCT trace_id FROM traces WHERE org_id = ? ORDER BY trace_id', [org.id]);
      expect(traces.map((t) => t.trace_id)).toEqual(['t-2026-10-05', 't-2026-10-06', 't-2026-10-07']);
      const costAfter = await store.query(
        `SELECT CAST(sum(total_cost) AS ${store.kind === 'clickhouse' ? 'String' : 'VARCHAR'}) AS c, sum(spans) AS n FROM usage_daily WHERE org_id = ?`,
        [org.id],
      );
      if (store.kind === 'clickhouse') {
        // ClickHouse derives every rollup from the spans kept: the expired day's rows (which name customers) go with them.
        const [kept] = await store.query('SELECT toString(sum(total_cost)) AS c, count() AS n FROM spans FINAL WHERE org_id = ?', [org.id]);
        expect(costAfter).toEqual([kept]);
        expect(num(costAfter[0]?.n)).toBe(6);
      } else {
        // DuckDB keeps the expired day's costs in its daily rollup.
        expect(costAfter).toEqual(costBefore);
        expect(num(costAfter[0]?.n)).toBe(8);
      }
      expect(await metrics.registry.getSingleMetricAsString('trace_ingest_retention_deleted_rows_total')).toMatch(/ 2$/);

      // Again: nothing left to do. A span that arrives already past the cut goes on the next pass.
      const late = textRows(org.id).filter((r) => r.span_id === 's-2026-10-04-0');
      await store.insertLines(buf(late), 1);
      await job.runOnce();
      await settle();
      const [left] = await store.query(`SELECT count(*) AS n FROM spans WHERE org_id = ? AND start_time < ?`, [org.id, at('2026-10-05', 0)]);
      expect(num(left?.n)).toBe(0);
    });

    it('erases a customer, a trace and a session from spans, every rollup and the trace table; a dry run and a second run change nothing', async () => {
      const { store, settle } = await open();
      for (const b of traffic(11)) await store.insertLines(buf(b.rows), b.rows.length);
      await expectRollupsEqualScan(store);

      const dry = await store.erase('org_a', { kind: 'customer', id: 'cust-2' }, true);
      expect(dry.spans).toBeGreaterThan(0);
      expect(dry.traces).toBeGreaterThan(0);
      expect(dry.rollupRows).toBeGreaterThan(0);
      await expectRollupsEqualScan(store);
      expect(await store.erase('org_a', { kind: 'customer', id: 'cust-2' }, true)).toEqual(dry);

      expect(await store.erase('org_a', { kind: 'customer', id: 'cust-2' }, false)).toEqual(dry);
      await settle();
      for (const t of ['spans', 'usage_daily', 'customers_daily', 'sessions_daily']) {
        const [r] = await store.query(`SELECT count() AS n FROM ${t} WHERE customer_id = ?`, ['cust-2']);
        expect(num(r?.n), t).toBe(0);
      }
      const erasedTraces = await store.query('SELECT count(*) AS n FROM traces WHERE trace_id IN (SELECT trace_id FROM spans WHERE customer_id = ?)', [
        'cust-2',
      ]);
      expect(num(erasedTraces[0]?.n)).toBe(0);
      await expectRollupsEqualScan(store);
      expect(await store.erase('org_a', { kind: 'customer', id: 'cust-2' }, false)).toEqual({ spans: 0, traces: 0, rollupRows: 0 });

      const trace = await store.erase('org_a', { kind: 'trace', id: 'trace-7' }, false);
      expect(trace.spans).toBeGreaterThan(0);
      await settle();
      const [t7] = await store.query("SELECT count(*) AS n FROM traces WHERE trace_id = 'trace-7'");
      expect(num(t7?.n)).toBe(0);

      const session = await store.erase('org_a', { kind: 'session', id: 'sess-1' }, false);
      expect(session.spans).toBeGreaterThan(0);
      await settle();
      for (const t of ['spans', 'sessions_daily']) {
        const [r] = await store.query(`SELECT count() AS n FROM ${t} WHERE session_id = 'sess-1'`);
        expect(num(r?.n), t).toBe(0);
      }
      await expectRollupsEqualScan(store);
      // Another org's spans with the same customer id are not touched.
      expect(await store.erase('org_b', { kind: 'customer', id: 'cust-1' }, false)).toEqual({ spans: 0, traces: 0, rollupRows: 0 });
    });
  });
}

lifecycleCases('DuckDB', async () => {
  const store = new DuckDbSpanStore({ file: path.join(tmpDir(), 'spans.duckdb') });
  await store.start();
  onTestFinished(() => store.close());
  return { store, settle: async () => undefined };
});

describe('ClickHouse 18.16', () => {
  let ch: ClickHouseTestServer;
  beforeAll(async () => {
    ch = await startClickHouse();
  }, 60_000);
  afterAll(async () => ch?.dispose());
  it("writes each row with its org's retention as it stands, for the TTLs of current servers", async () => {
    const db = `life_${randomBytes(4).toString('hex')}`;
    const retention = new Map([['org_a', { days: 35, textDays: 7 }]]);
    const store = new ClickHouseSpanStore({ url: ch.urlFor(db), requestTimeoutMs: 20_000, retentionOf: (org) => retention.get(org) });
    await store.start();
    onTestFinished(() => store.close());
    const [first, second] = traffic(3);
    await store.insertLines(buf(first?.rows ?? []), first?.rows.length ?? 0);
    retention.set('org_a', { days: 0, textDays: 30 });
    await store.insertLines(buf(second?.rows ?? []), second?.rows.length ?? 0);
    const written = await store.query('SELECT retention_days AS d, text_days AS t, count() AS n FROM spans GROUP BY d, t ORDER BY d DESC, t');
    expect(written.map((r) => [r.d, r.t])).toEqual([
      [35, 7],
      [0, 30],
    ]);
  });

  lifecycleCases('mutations', async () => {
    const db = `life_${randomBytes(4).toString('hex')}`;
    const store = new ClickHouseSpanStore({ url: ch.urlFor(db), requestTimeoutMs: 20_000 });
    await store.start();
    onTestFinished(() => store.close());
    return {
      store,
      settle: async () => {
        // The derivation takes up every change; merges fold the spans' copies and the derivations' rows: the figures stay.
        await store.settle();
        for (const t of ['spans', ...DERIVED_TABLES.map(derivedTable)]) await store.query(`OPTIMIZE TABLE ${t} FINAL`).catch(() => undefined);
      },
    };
  });
});
