import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeLine, encodeRow, spanToRow, SPAN_COLUMNS, UNPRICED, type SpanCosts, type SpanRow } from '@trace-ingest/shared/rows';
import type { Span, Trace } from '@trace-ingest/shared/schema';
import {
  applyClickHouseMigrations,
  bindParams,
  ddlSettingsFor,
  needsUnquotedCosts,
  unquoteCosts,
  type ClickHouseExecutor,
} from '@trace-ingest/store/clickhouse';
import { weighted } from '@trace-ingest/store/clickhouse-rollups';
import { ClickHouseDeriver, InProcessLease } from '@trace-ingest/store/clickhouse-derive';
import { ClickHouseTopLists } from '@trace-ingest/store/clickhouse-top-lists';
import { usageReport } from '@trace-ingest/store/reports';
import type { SpanStore } from '@trace-ingest/store/span-store';
import { applyRetentionTtl } from '@trace-ingest/store/clickhouse-retention';
import { startClickHouse, type ClickHouseTestServer } from './support/clickhouse-server.js';

/**
 * The same migrations and insert form on a current engine: chdb, an
 * in-process ClickHouse 26.x. It is a 500 MB test tool, installed outside the
 * repo and found through CHDB_MODULE_DIR.
 */
interface ChdbSession {
  query(sql: string, format?: string): string;
  cleanup(): void;
}
interface Chdb {
  Session: new (dir: string) => ChdbSession;
}

/** Where `npm run test:fresh` installs chdb when CHDB_MODULE_DIR does not say. */
const DEFAULT_CHDB_DIR = path.join(os.homedir(), '.cache/trace-ingest/chdb/node_modules/chdb');

function loadChdb(): Chdb {
  const given = process.env.CHDB_MODULE_DIR;
  const dir = given === undefined || given === '' ? DEFAULT_CHDB_DIR : given;
  if (!fs.existsSync(path.join(dir, 'package.json'))) {
    throw new Error(
      `chdb is not installed at ${dir}, and the schema must be checked on a current ClickHouse too: ` +
        'run `npm run test:fresh` (it installs chdb outside the repo), or install it and set CHDB_MODULE_DIR to its module folder',
    );
  }
  return createRequire(import.meta.url)(path.resolve(dir)) as Chdb;
}

const parseLines = <T>(text: string): T[] =>
  text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as T);

/** The migration runner's view of a chdb session, current database `database`. */
function executor(session: ChdbSession): ClickHouseExecutor {
  return {
    async command({ query, clickhouse_settings }) {
      const settings = Object.entries(clickhouse_settings ?? {}).map(([k, v]) => `${k} = ${v}`);
      // The statements end in their own SETTINGS (table settings), so query settings go through SET.
      for (const s of settings) session.query(`SET ${s}`);
      return session.query(query);
    },
    async query({ query }) {
      const text = session.query(`${query} SETTINGS output_format_json_quote_64bit_integers = 0`, 'JSONEachRow');
      return { json: async <T>() => parseLines<T>(text) };
    },
  };
}

let seq = 0;
const span = (partial: Partial<Span> = {}): Span => ({
  spanId: `s-${++seq}`,
  spanType: 'llm',
  name: `n${seq}`,
  startTime: Date.UTC(2026, 0, 31, 23, 0),
  endTime: Date.UTC(2026, 1, 1, 1, 0),
  ...partial,
});
const rowsOf = (t: Trace, costs: SpanCosts, receivedAt: number, orgId = 'org_chdb'): SpanRow[] =>
  t.spans.map((s) => spanToRow(t, s, { orgId, keyPrefix: 'ti_x', receivedAt }, costs));
const canonicalDecimal = (s: string) => (s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s);
const SELECT_ALL = SPAN_COLUMNS.map(([name, kind]) => (kind === 'decimal' ? `toString(${name}) AS ${name}` : name)).join(', ');

describe('ClickHouse schema on chdb (a current ClickHouse)', () => {
  let session: ChdbSession;
  let dir: string;
  let db: ClickHouseExecutor;
  let ch: ClickHouseTestServer;
  let oldVersion: string;

  beforeAll(async () => {
    // The 18.16 server only answers which settings and transforms an old server gets.
    ch = await startClickHouse();
    oldVersion = (await (await fetch(`http://127.0.0.1:${ch.httpPort}/?query=SELECT%20version()`)).text()).trim();
    const chdb = loadChdb();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-chdb-'));
    session = new chdb.Session(dir);
    session.query('CREATE DATABASE IF NOT EXISTS trace_ingest');
    session.query('USE trace_ingest');
    db = executor(session);
  });

  /** The store's derivation, on the chdb session (the only writer: an in-process lease). */
  const deriver = (lists?: ClickHouseTopLists) =>
    new ClickHouseDeriver(
      {
        query: async (sql) => parseLines<Record<string, unknown>>(session.query(`${sql} SETTINGS output_format_json_quote_64bit_integers = 0`, 'JSONEachRow')),
        command: async (sql) => void session.query(sql),
      },
      new InProcessLease(),
      lists,
    );

  afterAll(async () => {
    session?.cleanup();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
    await ch?.dispose();
  });

  it('is a current engine, which gets neither the LowCardinality setting nor unquoted costs', async () => {
    const [v] = await (await db.query({ query: 'SELECT version() AS v', format: 'JSONEachRow' })).json<{ v: string }>();
    console.info(`chdb engine ${v?.v}; clickhouse-server ${oldVersion}`);
    expect(Number.parseInt(v?.v ?? '', 10)).toBeGreaterThanOrEqual(24);
    expect(ddlSettingsFor(v?.v ?? '')).toEqual({});
    expect(needsUnquotedCosts(v?.v ?? '')).toBe(false);
    expect(ddlSettingsFor(oldVersion)).toEqual({ allow_experimental_low_cardinality_type: 1 });
    expect(needsUnquotedCosts(oldVersion)).toBe(true);
  });

  it('applies the migrations, and again, with the same runner as the server', async () => {
    expect(await applyClickHouseMigrations(db, 'trace_ingest')).toEqual([
      '0001_spans',
      '0002_rollups',
      '0003_sessions_workflows_daily',
      '0004_retention_columns',
      '0005_customers_models_daily',
      '0006_top_lists',
      '0007_billing_dimensions',
      '0008_derived_tables',
      '0009_top_lists_derived',
    ]);
    expect(await applyClickHouseMigrations(db, 'trace_ingest')).toEqual([]);
    expect(session.query('SELECT version, count() FROM schema_migrations FINAL GROUP BY version ORDER BY version', 'CSV').trim()).toBe(
      '"0001_spans",1\n"0002_rollups",1\n"0003_sessions_workflows_daily",1\n"0004_retention_columns",1\n' +
        '"0005_customers_models_daily",1\n"0006_top_lists",1\n"0007_billing_dimensions",1\n"0008_derived_tables",1\n' +
        '"0009_top_lists_derived",1',
    );
    expect(session.query("SELECT engine, sorting_key, partition_key FROM system.tables WHERE database = 'trace_ingest' AND name = 'spans'", 'CSV').trim()).toBe(
      '"ReplacingMergeTree","org_id, start_date, trace_id, span_id","toYYYYMM(start_date)"',
    );
    const cols = parseLines<{ name: string; type: string; default_kind: string }>(
      session.query("SELECT name, type, default_kind FROM system.columns WHERE database = 'trace_ingest' AND table = 'spans'", 'JSONEachRow'),
    );
    expect(cols.filter((c) => c.default_kind === '').map((c) => c.name)).toEqual(SPAN_COLUMNS.map(([n]) => n));
    expect(cols.filter((c) => c.default_kind === 'ALIAS').map((c) => c.name)).toEqual(['trace_metadata', 'span_metadata']);
    expect(cols.find((c) => c.name === 'model_id')?.type).toBe('LowCardinality(String)');
  });

  it('takes the insert form the store sends (as is, and unquoted for old servers) and gives one row per span', () => {
    const t: Trace = {
      traceId: 'chdb-1',
      customer: { id: 'c', name: 'Zoë 😀' },
      metadata: { env: 'prod' },
      spans: [span({ usage: { inputTokens: 3 }, ttftMs: 1.5, chunkOffsets: [1, 2], metadata: { k: "it's" }, input: 'line\nbreak \\ "q"' }), span()],
    };
    const costs: SpanCosts = {
      ...UNPRICED,
      input_cost: '0.000000000000000001',
      total_cost: '12345678901234567890.123456789012345678',
      priced: true,
      price_source: 'catalog:x',
    };
    const rows = rowsOf(t, costs, 1);
    const lines = rows.map((r) => encodeRow(r)).join('\n');
    session.query(`INSERT INTO spans FORMAT JSONEachRow ${lines}`);
    session.query(`INSERT INTO spans FORMAT JSONEachRow ${unquoteCosts(lines)}`);
    const newer = rowsOf(t, { ...costs, total_cost: '7' }, 2);
    // The newest version in the write log's form, its empty values left out: the rows read back whole.
    session.query(`INSERT INTO spans FORMAT JSONEachRow ${newer.map((r) => encodeLine(r)).join('\n')}`);

    const got = parseLines<Record<string, unknown>>(
      session.query(
        bindParams(`SELECT ${SELECT_ALL} FROM spans FINAL WHERE trace_id = ? ORDER BY span_id SETTINGS output_format_json_quote_64bit_integers = 0`, [
          t.traceId,
        ]),
        'JSONEachRow',
      ),
    );
    expect(got).toHaveLength(2);
    for (const [i, want] of newer.entries()) {
      for (const [name, kind] of SPAN_COLUMNS) {
        const g = got[i]?.[name];
        const w = want[name];
        if (kind === 'decimal') expect([name, canonicalDecimal(String(g))]).toEqual([name, canonicalDecimal(String(w))]);
        else if (kind === 'bool') expect([name, g]).toEqual([name, w ? 1 : 0]);
        else expect([name, g]).toEqual([name, w]);
      }
    }
    expect(got[0]?.start_date).toBe('2026-01-31');
    const meta = session.query(
      bindParams('SELECT span_metadata, trace_metadata FROM spans FINAL WHERE trace_id = ? ORDER BY span_id LIMIT 1', [t.traceId]),
      'JSONEachRow',
    );
    expect(JSON.parse(meta)).toEqual({ span_metadata: [['k', "it's"]], trace_metadata: [['env', 'prod']] });
  });

  it('derives the rollups from the distinct spans on a current engine: a retried batch, a child before its root, a reprice', async () => {
    const root = span({ usage: { inputTokens: 10, outputTokens: 4 } });
    const t: Trace = { traceId: 'chdb-rollup', customer: { id: 'cust-a' }, spans: [root, span({ parentSpanId: root.spanId })] };
    const costs: SpanCosts = { ...UNPRICED, input_cost: '0.25', total_cost: '0.25', priced: true, price_source: 'catalog:x' };
    const rows = rowsOf(t, costs, 10);
    const [first, child] = rows;
    if (first === undefined || child === undefined) throw new Error('no row');
    // The child alone first, without the customer (another replica took it), then the whole batch twice (a retry), then the root repriced.
    session.query(`INSERT INTO spans FORMAT JSONEachRow ${weighted({ ...child, customer_id: '', received_at: 5 }, 1)}`);
    for (let i = 0; i < 2; i++) session.query(`INSERT INTO spans FORMAT JSONEachRow ${rows.map((r) => weighted(r, 1)).join('\n')}`);
    session.query(`INSERT INTO spans FORMAT JSONEachRow ${weighted({ ...first, input_cost: '1', total_cost: '1', received_at: 20 }, 1)}`);
    await deriver().settle();
    const byCustomer = () =>
      session
        .query(
          'SELECT customer_id, sum(spans), sum(input_tokens), toString(sum(total_cost)) FROM usage_daily ' +
            "WHERE org_id = 'org_chdb' AND customer_id IN ('cust-a', '') GROUP BY customer_id ORDER BY customer_id",
          'CSV',
        )
        .trim();
    const scan = () =>
      session
        .query(
          'SELECT customer_id, count(), sum(input_tokens), toString(sum(total_cost)) FROM spans FINAL ' +
            "WHERE trace_id = 'chdb-rollup' GROUP BY customer_id ORDER BY customer_id",
          'CSV',
        )
        .trim();
    expect(byCustomer()).toBe(scan());
    expect(byCustomer()).toBe('"cust-a",2,10,"1.25"');
    const traces = () => session.query("SELECT sumMerge(spans), toString(sumMerge(total_cost)) FROM traces WHERE trace_id = 'chdb-rollup'", 'CSV').trim();
    expect(traces()).toBe('2,"1.25"');
    for (const table of ['usage_daily_d', 'traces_d', 'spans']) session.query(`OPTIMIZE TABLE ${table} FINAL`);
    expect(byCustomer()).toBe(scan());
    expect(traces()).toBe('2,"1.25"');
  });

  it('ranks traces and sessions on a current engine as a scan does, cuts between equal costs included', async () => {
    const day = Date.UTC(2026, 2, 10);
    const rows: string[] = [];
    // Costs with ties (0.5 three times, 0 twice), sessions of one to three traces.
    for (const [i, cost] of ['0.5', '1.25', '0.5', '0', '2', '0.5', '0', '0.75'].entries()) {
      const t: Trace = {
        traceId: `rank-${i}`,
        sessionId: `sess-${i % 3}`,
        spans: [span({ startTime: day + i * 60_000, endTime: day + i * 60_000 + 1000 })],
      };
      const costs: SpanCosts = { ...UNPRICED, input_cost: cost, total_cost: cost, priced: true, price_source: 'catalog:x' };
      for (const r of t.spans.map((x) => spanToRow(t, x, { orgId: 'org_rank', keyPrefix: 'ti_x', receivedAt: 1 }, costs))) rows.push(weighted(r, 1));
    }
    session.query(`INSERT INTO spans FORMAT JSONEachRow ${rows.join('\n')}`);
    const query = async (sql: string, params: readonly unknown[] = []) =>
      parseLines<Record<string, unknown>>(session.query(`${bindParams(sql, params)} SETTINGS output_format_json_quote_64bit_integers = 0`, 'JSONEachRow'));
    // Top lists of three a day: rankings of up to three read them, longer ones cut the traces table.
    const topLists = new ClickHouseTopLists(
      {
        query,
        command: async (sql) => void session.query(sql),
        mutate: async (table, action) => void session.query(`ALTER TABLE ${table} ${action} SETTINGS mutations_sync = 1`),
      },
      3,
    );
    // The derivation builds the lists of the days it derives.
    await deriver(topLists).settle();
    const read = (rollups: boolean, lists = false) => ({ kind: 'clickhouse', rollups, query, ...(lists ? { topLists } : {}) }) as unknown as SpanStore;
    const f = { orgId: 'org_rank', from: day, to: day + 86_400_000 };
    const expectRanksAsScan = async (range: { from: number; to: number }, groups: { trace: number; session: number }) => {
      for (const by of ['trace', 'session'] as const)
        for (let limit = 1; limit <= 8; limit++) {
          const scan = await usageReport(read(false), { ...f, ...range, by, limit });
          expect(await usageReport(read(true), { ...f, ...range, by, limit }), `${by} limit ${limit}`).toEqual(scan);
          expect(await usageReport(read(true, true), { ...f, ...range, by, limit }), `${by} limit ${limit}, lists`).toEqual(scan);
          expect(scan.length).toBe(Math.min(limit, groups[by]));
        }
    };
    await expectRanksAsScan(f, { trace: 8, session: 3 });
    expect((await usageReport(read(true), { ...f, by: 'trace', limit: 4 })).map((r) => r.group)).toEqual(['rank-4', 'rank-1', 'rank-7', 'rank-0']);
    // A free trace of the first day gets a costly span the next day: over both days it ranks first, on the lists too.
    const late: Trace = {
      traceId: 'rank-3',
      spans: [span({ spanId: 'rank-3-late', startTime: day + 86_400_000 + 60_000, endTime: day + 86_400_000 + 61_000 })],
    };
    const costs: SpanCosts = { ...UNPRICED, input_cost: '5', total_cost: '5', priced: true, price_source: 'catalog:x' };
    session.query(
      `INSERT INTO spans FORMAT JSONEachRow ${rowsOf(late, costs, 2, 'org_rank')
        .map((r) => weighted(r, 1))
        .join('\n')}`,
    );
    await deriver(topLists).settle();
    // The late span names no session: it takes its trace's (sess-0), as the derivation resolves trace-level fields.
    await expectRanksAsScan({ from: day, to: day + 2 * 86_400_000 }, { trace: 8, session: 3 });
    expect((await usageReport(read(true, true), { ...f, to: day + 2 * 86_400_000, by: 'trace', limit: 1 }))[0]).toMatchObject({
      group: 'rank-3',
      spans: 2,
      costs: { total_cost: '5' },
    });
  });

  it('gives every span of a trace its resolved fields on a current engine, the root read before the spans that lack them', async () => {
    const day = Date.UTC(2026, 3, 7, 10, 0);
    const root = span({ spanId: 'order-a', startTime: day, endTime: day + 1000 });
    const known: Trace = { traceId: 'order-1', sessionId: 'sess-order', customer: { id: 'cust-order' }, spans: [root] };
    // Spans another replica stored without the trace's session and customer: one the same day after the root, one the next day.
    const bare: Trace = {
      traceId: 'order-1',
      spans: [
        span({ spanId: 'order-b', parentSpanId: root.spanId, startTime: day + 2000, endTime: day + 3000 }),
        span({ spanId: 'order-c', parentSpanId: root.spanId, startTime: day + 86_400_000, endTime: day + 86_401_000 }),
      ],
    };
    const rows = [...rowsOf(known, UNPRICED, 1, 'org_order'), ...rowsOf(bare, UNPRICED, 2, 'org_order')];
    session.query(`INSERT INTO spans FORMAT JSONEachRow ${rows.map((r) => weighted(r, 1)).join('\n')}`);
    // One stream reads the spans in the sort order, the root first, as a loaded server may.
    session.query('SET max_threads = 1');
    try {
      await deriver().settle();
    } finally {
      session.query('SET max_threads = 0');
    }
    expect(
      session
        .query("SELECT span_id, session_id, customer_id FROM spans FINAL WHERE org_id = 'org_order' AND trace_id = 'order-1' ORDER BY span_id", 'CSV')
        .trim(),
    ).toBe('"order-a","sess-order","cust-order"\n"order-b","sess-order","cust-order"\n"order-c","sess-order","cust-order"');
    expect(session.query("SELECT session_id, sum(spans) FROM sessions_daily WHERE org_id = 'org_order' GROUP BY session_id", 'CSV').trim()).toBe(
      '"sess-order",3',
    );
  });

  it('expires rows and texts by the TTLs of migration 0004 on a current engine, and the derived rollups hold what the spans held when derived', async () => {
    const version = session.query('SELECT version()', 'CSV').trim().replaceAll('"', '');
    expect(await applyRetentionTtl(db, version)).toBe(true);
    expect(await applyRetentionTtl(db, version)).toBe(false);
    expect(await applyRetentionTtl(db, '18.16.1')).toBe(false);
    const day = 86_400_000;
    const today = Math.floor(Date.now() / day) * day;
    const t: Trace = {
      traceId: 'chdb-ttl',
      customer: { id: 'cust-ttl' },
      spans: [100, 34, 10].map((ago) =>
        span({
          spanId: `ttl-${ago}`,
          startTime: today - ago * day + 3_600_000,
          endTime: today - ago * day + 3_600_001,
          input: `prompt ${ago}`,
          output: `answer ${ago}`,
        }),
      ),
    };
    const costs: SpanCosts = { ...UNPRICED, input_cost: '0.5', total_cost: '0.5', priced: true, price_source: 'catalog:x' };
    const lines = rowsOf(t, costs, 10).map((r) => weighted(r, 1, ',"retention_days":35,"text_days":33'));
    session.query(`INSERT INTO spans FORMAT JSONEachRow ${lines.join('\n')}`);
    await deriver().settle();
    session.query('OPTIMIZE TABLE spans FINAL');
    const left = session.query("SELECT span_id, input, output FROM spans FINAL WHERE trace_id = 'chdb-ttl' ORDER BY span_id", 'CSV').trim();
    // 100 days old: gone; 34 days old: kept without texts; 10 days old: as sent.
    expect(left).toBe('"ttl-10","prompt 10","answer 10"\n"ttl-34","",""');
    expect(session.query("SELECT sum(spans), toString(sum(total_cost)) FROM usage_daily WHERE customer_id = 'cust-ttl'", 'CSV').trim()).toBe('2,"1"');
  });
});
