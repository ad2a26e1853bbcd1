import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { loadConfig } from '@trace-ingest/shared/config';
import { rollupsNaming } from '@trace-ingest/shared/lifecycle';
import { payloadToRows } from '@trace-ingest/shared/rows';
import { createContext } from '@trace-ingest/cli/program-context';
import { budgetEvents, setBudget } from '@trace-ingest/cli/actions/budgets';
import { createConsoleToken } from '@trace-ingest/cli/actions/console';
import { auditList, erase } from '@trace-ingest/cli/actions/lifecycle';
import { openBudgets } from '@trace-ingest/store/budgets';
import { CUSTOMER_TABLES } from '@trace-ingest/store/customer-erasure';
import { secretBoxFor } from '@trace-ingest/store/secret-box';
import { derivedTable } from '@trace-ingest/store/clickhouse-derive';
import { ClickHouseSpanStore } from '@trace-ingest/store/clickhouse';
import { DuckDbSpanStore } from '@trace-ingest/store/duckdb';
import { PostgresControlStore } from '@trace-ingest/store/control-store-postgres';
import { countGroups, usageReport } from '@trace-ingest/store/reports';
import type { SpanStore } from '@trace-ingest/store/span-store';
import { TOP_LISTS } from '../../packages/store/src/top-lists.js';
import { makePayload, makeSpan, makeTrace } from '../factories.js';
import { buf, derived, firstPrices, pricer } from '../rollup-traffic.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

/**
 * An erased customer leaves nothing behind: every table of both control
 * stores (SQLite, PostgreSQL) and both span stores (DuckDB, ClickHouse) is
 * listed from the database itself, each of its text columns searched for
 * the customer's id after the erasure, and a table with a column naming
 * customers must be one that erasure reaches.
 */

const ERASED = 'cust-erase-5e1f9a';
const KEPT = 'cust-kept-77d0c3';
const DAY = 86_400_000;

/** The span-store tables an erasure of a customer reaches: what `erase` deletes from, by the erased traces and by the id, and the top lists it rebuilds. */
const SPAN_TABLES_ERASED = new Set([
  'spans',
  'traces',
  ...rollupsNaming('customer').map((r) => r.table),
  ...Object.values(TOP_LISTS).flatMap((l) => [l.table, l.marks, l.touches]),
  // ClickHouse keeps each derived table's rows per derivation behind a view of its name.
  ...['traces', ...rollupsNaming('customer').map((r) => r.table)].map(derivedTable),
]);
const CONTROL_TABLES_ERASED = new Set(CUSTOMER_TABLES.map((t) => t.table));

/** A column whose name says it holds a customer. */
const namesCustomers = (column: string) => /customer/i.test(column);

interface Column {
  table: string;
  column: string;
  /** An SQL expression that is true when the column holds `id` somewhere in its value; undefined for columns that cannot. */
  holds?: string;
}

/** Spans of two customers over three days (texts, sessions, workflows, names), for one org. */
function payload(now: number) {
  const traces = [ERASED, KEPT].flatMap((customer) =>
    [0, 1, 2].map((d) =>
      makeTrace({
        traceId: `trace-${customer}-${d}`,
        traceName: `chat of ${customer}`,
        sessionId: `session-${customer}`,
        workflowName: 'support',
        workflowRunId: `run-${d}`,
        customer: { id: customer, name: `Name of ${customer}` },
        spans: [0, 1].map((i) =>
          makeSpan({
            spanId: `s-${d}-${i}`,
            startTime: now - d * DAY - 3_600_000 + i,
            endTime: now - d * DAY - 3_600_000 + i + 500,
            provider: 'openai',
            modelId: 'gpt-4o',
            usage: { inputTokens: 400_000, outputTokens: 1000 },
            input: `question from ${customer}`,
            output: 'an answer',
          }),
        ),
      }),
    ),
  );
  return makePayload({ traces });
}

/** Every (table, column) of a span store, with the test of whether it holds an id. */
async function spanColumns(store: SpanStore, database?: string): Promise<Column[]> {
  if (store.kind === 'duckdb') {
    const rows = await store.query(
      "SELECT table_name AS t, column_name AS c FROM information_schema.columns WHERE table_schema = 'main' AND table_name IN " +
        "(SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE')",
    );
    return rows.map((r) => ({ table: String(r.t), column: String(r.c), holds: `contains(CAST("${String(r.c)}" AS VARCHAR), ?)` }));
  }
  const rows = await store.query(
    'SELECT c.table AS t, c.name AS c, c.type AS type FROM system.columns c JOIN system.tables t ON t.database = c.database AND t.name = c.table ' +
      "WHERE c.database = ? AND t.engine NOT IN ('MaterializedView', 'View')",
    [database],
  );
  return rows.map((r) => {
    const [column, type] = [String(r.c), String(r.type)];
    const holds = /^(Nullable\(|LowCardinality\()?(String|FixedString)/.test(type)
      ? `position(toString(${column}), ?) > 0`
      : /^Array\((Nullable\()?String/.test(type)
        ? `arrayExists(x -> position(toString(x), ?) > 0, ${column})`
        : /^AggregateFunction\((min|max|any|anyLast), (Nullable\()?String/.test(type)
          ? `position(finalizeAggregation(${column}), ?) > 0`
          : undefined;
    return { table: String(r.t), column, ...(holds === undefined ? {} : { holds }) };
  });
}

/** The tables (and columns) where `id` is found. */
async function whereFound(columns: Column[], count: (table: string, cond: string, params: unknown[]) => Promise<number>, id: string): Promise<string[]> {
  const found: string[] = [];
  for (const c of columns) if (c.holds !== undefined && (await count(c.table, c.holds, [id])) > 0) found.push(`${c.table}.${c.column}`);
  return found;
}

/** Tables with a column naming customers that erasure does not reach. */
function unreached(columns: Column[], erased: ReadonlySet<string>): string[] {
  return [...new Set(columns.filter((c) => namesCustomers(c.column) && !erased.has(c.table)).map((c) => c.table))];
}

describe('erasure of a customer reaches every table (SQLite control store, DuckDB span store, through the running server)', () => {
  let t: TestServer;
  let store: DuckDbSpanStore;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-erase-'));
  beforeAll(async () => {
    // The server's own store, given to it: the test reads every table through it.
    store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb') });
    t = await startTestServer({ BUDGET_CHECK_MS: '100', FLUSH_INTERVAL_MS: '50', CONSOLE_PORT: '0' }, { spanStore: store }, dir);
  });
  afterAll(async () => {
    await t?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('leaves no row naming the customer: spans, rollups, trace table, top lists, alerts, budgets, the server memory', async () => {
    const { key } = await t.newKey('erasing', undefined, ['ingest', 'budget:read']);
    const ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
    onTestFinished(() => ctx.close());
    // Budgets that name the customer, and alerts of both customers (no webhook: kept, never posted).
    await setBudget(ctx, { org: 'erasing', customer: ERASED, monthlyUsd: '0.5', alertAt: '50,100' });
    await setBudget(ctx, { org: 'erasing', allCustomers: true, monthlyUsd: '0.5', alertAt: '100' });
    // A key that reads the budgets of the two customers only.
    await t.keys.createKey({ orgName: 'erasing', scopes: ['budget:read'], customers: [ERASED, KEPT] });
    expect((await t.post(payload(Date.now()), { key })).status).toBe(202);
    await t.server.flush();
    const orgId = (await t.keys.getOrg('erasing'))?.id ?? '';
    // The top lists of those (whole) days are built by a ranking.
    const today = Math.floor(Date.now() / DAY) * DAY;
    const window = { orgId, from: today - 5 * DAY, to: today + DAY };
    await usageReport(store, { ...window, by: 'trace', limit: 10 });
    await countGroups(store, { ...window, by: 'trace' });
    const events = async () => (await budgetEvents(ctx, { org: 'erasing' })).map((e) => e.customer);
    await expect.poll(events, { timeout: 10_000 }).toContain(ERASED);
    expect(await events()).toContain(KEPT);
    const token = (await createConsoleToken(ctx, {})).token;
    const customersPage = async () =>
      (await (
        await fetch(`http://127.0.0.1:${t.server.consolePort}/console/api/customers?org=erasing`, { headers: { authorization: `Bearer ${token}` } })
      ).json()) as { rows: { group: string }[]; budgets: Record<string, unknown>; forecasts: Record<string, unknown> };
    expect((await customersPage()).rows.map((r) => r.group)).toContain(ERASED);

    const spanCols = await spanColumns(store);
    const sqlite = new Database(t.config.sqliteFile, { readonly: true });
    onTestFinished(() => {
      sqlite.close();
    });
    const controlCols: Column[] = (sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).flatMap(({ name }) =>
      (sqlite.prepare(`PRAGMA table_info("${name}")`).all() as { name: string }[]).map((c) => ({
        table: name,
        column: c.name,
        holds: `instr(CAST("${c.name}" AS TEXT), ?) > 0`,
      })),
    );
    const countSpans = async (table: string, cond: string, params: unknown[]) =>
      Number((await store.query(`SELECT count(*) AS n FROM ${table} WHERE ${cond}`, params))[0]?.n);
    const countControl = async (table: string, cond: string, params: unknown[]) =>
      Number((sqlite.prepare(`SELECT count(*) AS n FROM "${table}" WHERE ${cond}`).get(...params) as { n: number }).n);
    // Before: the id is in the spans, every rollup naming customers, the trace table and top lists, the alerts and budgets.
    const before = [...(await whereFound(spanCols, countSpans, ERASED)), ...(await whereFound(controlCols, countControl, ERASED))];
    for (const table of ['spans', 'traces', 'usage_daily', 'customers_daily', 'sessions_daily', 'trace_tops', 'budgets', 'budget_events'])
      expect(
        before.some((f) => f.startsWith(`${table}.`)),
        `${table} holds the customer before`,
      ).toBe(true);

    const done = await erase(ctx, { org: 'erasing', kind: 'customer', id: ERASED, dryRun: false, actor: 'ops@test' });
    expect(done).toMatchObject({ spans: 6, traces: 3, controlRows: expect.any(Number) as unknown });
    expect(done.controlRows).toBeGreaterThanOrEqual(3);

    expect(unreached(spanCols, SPAN_TABLES_ERASED)).toEqual([]);
    expect(unreached(controlCols, CONTROL_TABLES_ERASED)).toEqual([]);
    expect(await whereFound(spanCols, countSpans, ERASED)).toEqual([]);
    expect(await whereFound(controlCols, countControl, ERASED)).toEqual([]);
    // The other customer is all there; the audit log keeps a digest only.
    expect((await whereFound(controlCols, countControl, KEPT)).sort()).toEqual(['api_keys.customers', 'budget_events.customer_id']);
    expect(await whereFound(spanCols, countSpans, KEPT)).toContain('customers_daily.customer_id');
    expect((await auditList(ctx, { org: 'erasing' }))[0]?.target).toMatch(/^customer sha256:[0-9a-f]{16}$/);
    // The server's memory: the budget API and the console no longer know the customer's spend.
    const answer = (await (await fetch(`${t.url}/v1/budget?customer=${ERASED}`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
      customer: { spentUsd: string; budgetUsd: string | null };
    };
    expect(answer.customer).toMatchObject({ spentUsd: '0' });
    const page = await customersPage();
    expect([page.rows.map((r) => r.group), Object.keys(page.budgets), Object.keys(page.forecasts)].flat()).not.toContain(ERASED);
    // Checks after the erasure record nothing new about it.
    await t.server.flush();
    await new Promise((r) => setTimeout(r, 500));
    expect(await whereFound(controlCols, countControl, ERASED)).toEqual([]);
  });
});

const PG_URL = process.env.TI_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

describe('erasure of a customer reaches every table (PostgreSQL control store, ClickHouse span store)', () => {
  const id = randomBytes(4).toString('hex');
  const schema = `ti_erase_${id}`;
  const database = `ti_erase_${id}`;
  const dbUrl = (() => {
    const u = new URL(PG_URL);
    u.searchParams.set('schema', schema);
    return u.toString();
  })();
  let keys: PostgresControlStore;
  let store: ClickHouseSpanStore;
  let client: pg.Client;
  let clickhouseUrl = '';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-erase-'));

  beforeAll(async () => {
    keys = new PostgresControlStore(dbUrl);
    await keys.start();
    clickhouseUrl = `${inject('clickhouseHttpUrl').replace('http://', 'http://default:@')}/${database}`;
    store = new ClickHouseSpanStore({ url: clickhouseUrl });
    await store.start();
    client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
  });
  afterAll(async () => {
    await keys?.close();
    await store?.query(`DROP DATABASE IF EXISTS ${database}`).catch(() => undefined);
    await store?.close();
    await client?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client?.end();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('leaves no row naming the customer in any table of either store', async () => {
    const org = await keys.createOrg({ name: 'erasing' });
    const now = Date.now();
    const rows = payloadToRows(payload(now), { orgId: org.id, keyPrefix: 'ti_test', receivedAt: now }, pricer(firstPrices));
    await store.insertLines(buf(rows), rows.length);
    await derived(store);
    const today = Math.floor(now / DAY) * DAY;
    const window = { orgId: org.id, from: today - 5 * DAY, to: today + DAY };
    await usageReport(store, { ...window, by: 'trace', limit: 10 });
    // Alerts of both customers, of every kind, and the erased customer's own budget.
    // Webhook secrets are sealed with a key every process of a PostgreSQL install shares.
    const config = loadConfig({ DATA_DIR: dir, DATABASE_URL: dbUrl, CLICKHOUSE_URL: clickhouseUrl, SECRETS_KEY: randomBytes(32).toString('base64') });
    const budgets = await openBudgets({ sqliteFile: config.sqliteFile, databaseUrl: dbUrl, secrets: secretBoxFor(config) });
    await budgets.start();
    onTestFinished(() => budgets.close());
    const own = (await budgets.set({ orgId: org.id, customerId: ERASED, monthlyUsd: '5', alertAt: [100], webhookUrl: null })).budget;
    const all = (await budgets.set({ orgId: org.id, customerId: '*', monthlyUsd: '5', alertAt: [100], webhookUrl: null })).budget;
    const month = new Date(now).toISOString().slice(0, 7);
    const alert = { orgId: org.id, month, spentUsd: '6', budgetUsd: '5', threshold: 100 };
    await budgets.record({ ...alert, budgetId: own.id, customerId: ERASED });
    await budgets.record({ ...alert, budgetId: own.id, customerId: ERASED, kind: 'projected', detail: { projectedUsd: '9', crossesOn: null } });
    await budgets.record({ ...alert, budgetId: own.id, customerId: ERASED, kind: 'anomaly', day: `${month}-02`, detail: { baselineUsd: '1' } });
    await budgets.record({ ...alert, budgetId: all.id, customerId: KEPT });
    await keys.createKey({ orgName: 'erasing', scopes: ['budget:read'], customers: [KEPT, ERASED] });

    const spanCols = await spanColumns(store, database);
    const countSpans = async (table: string, cond: string, params: unknown[]) =>
      Number((await store.query(`SELECT count() AS n FROM ${table} WHERE ${cond}`, params))[0]?.n);
    // Before: found in the spans, every rollup naming customers, the trace table's candidates and the top lists.
    const before = await whereFound(spanCols, countSpans, ERASED);
    for (const c of [
      'spans.customer_id',
      'usage_daily_d.customer_id',
      'customers_daily_d.customer_id',
      'sessions_daily_d.customer_id',
      'traces_d.customer_c',
      'trace_tops.customer_c',
    ])
      expect(before).toContain(c);

    const ctx = createContext(config);
    onTestFinished(() => ctx.close());
    const done = await erase(ctx, { org: 'erasing', kind: 'customer', id: ERASED, dryRun: false, actor: 'ops@test' });
    expect(done).toMatchObject({ spans: 6, traces: 3, controlRows: 5 });

    const { rows: cols } = await client.query<{ t: string; c: string }>(
      'SELECT table_name AS t, column_name AS c FROM information_schema.columns WHERE table_schema = $1',
      [schema],
    );
    const controlCols: Column[] = cols.map((r) => ({ table: r.t, column: r.c, holds: `position($1 in CAST("${r.c}" AS text)) > 0` }));
    const countControl = async (table: string, cond: string, params: unknown[]) =>
      Number((await client.query<{ n: string }>(`SELECT count(*) AS n FROM "${schema}"."${table}" WHERE ${cond}`, params)).rows[0]?.n);

    expect(unreached(spanCols, SPAN_TABLES_ERASED)).toEqual([]);
    expect(unreached(controlCols, CONTROL_TABLES_ERASED)).toEqual([]);
    expect(await whereFound(spanCols, countSpans, ERASED)).toEqual([]);
    expect(await whereFound(controlCols, countControl, ERASED)).toEqual([]);
    expect(await whereFound(spanCols, countSpans, KEPT)).toContain('spans.customer_id');
    expect((await whereFound(controlCols, countControl, KEPT)).sort()).toEqual(['api_keys.customers', 'budget_events.customer_id']);
  });
});
