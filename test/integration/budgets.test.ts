import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { TraceIngest } from '@trace-ingest/sdk';
import { loadConfig } from '@trace-ingest/shared/config';
import { formatDecimal, parseDecimal } from '@trace-ingest/shared/decimal';
import { createContext, type CliContext } from '@trace-ingest/cli/program-context';
import { budgetEvents, setBudget } from '@trace-ingest/cli/actions/budgets';
import { createConsoleToken } from '@trace-ingest/cli/actions/console';
import { usage, usageForecast } from '@trace-ingest/cli/actions/usage';
import { runCli } from '@trace-ingest/cli/program';
import { ClickHouseSpanStore } from '@trace-ingest/store/clickhouse';
import { PostgresControlStore } from '@trace-ingest/store/control-store-postgres';
import { makeSpan, makeTrace } from '../factories.js';
import { startChildServer, type ChildServer } from './support/child-server.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';
import { verifySignature } from './support/webhook.js';

const month = () => new Date().toISOString().slice(0, 7);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Alert {
  id: string;
  type: string;
  org: { id: string; name: string };
  customer: string | null;
  model?: string | null;
  budgetUsd: string;
  spentUsd: string;
  threshold: number;
  month: string;
  projectedUsd?: string;
  crossesOn?: string | null;
  day?: string;
  costUsd?: string;
  baselineUsd?: string;
  signatureOk: boolean;
}

/** GET a JSON answer with a bearer token. */
async function getJson<T>(url: string, token: string): Promise<T> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  expect(res.status, url).toBe(200);
  return (await res.json()) as T;
}

/**
 * A webhook receiver: it verifies each post's signature with the secret it
 * is given and answers with `status()` (or holds the answer for `holdMs()`).
 */
async function receiver() {
  const got: Alert[] = [];
  // Each budget signs with its own secret.
  const secrets: string[] = [];
  let status = 200;
  let holdMs = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const header = String(req.headers['x-trace-ingest-signature']);
      const alert = {
        ...(JSON.parse(body.toString('utf8')) as Omit<Alert, 'signatureOk'>),
        signatureOk: secrets.some((s) => verifySignature(header, body, s)),
      };
      got.push(alert);
      // The answer is the status set when the POST arrived, so a test that counts arrivals knows what each was told.
      const answer = status;
      setTimeout(() => {
        res.statusCode = answer;
        res.end();
      }, holdMs);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  onTestFinished(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    got,
    /** The distinct alerts (a delivery repeated after a crash carries the same id). */
    distinct: () => [...new Map(got.map((a) => [a.id, a])).values()],
    addSecret: (s: string | undefined) => {
      expect(s).toMatch(/^whsec_/);
      secrets.push(s ?? '');
    },
    setStatus: (s: number) => (status = s),
    setHoldMs: (ms: number) => (holdMs = ms),
  };
}

async function until<T>(what: string, fn: () => T | Promise<T>, ok: (v: T) => boolean, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  let last: T = await fn();
  while (!ok(last)) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}: last ${JSON.stringify(last)}`);
    await sleep(50);
    last = await fn();
  }
  return last;
}

/** gpt-4o input at $2.50 per million tokens: `usd` dollars of it, in one span (ending at `now`). */
function spend(traceId: string, usd: number, customer?: string, now = Date.now()) {
  return {
    version: 'v1',
    traces: [
      makeTrace({
        traceId,
        ...(customer === undefined ? {} : { customer: { id: customer } }),
        spans: [makeSpan({ spanId: 's1', startTime: now - 1000, endTime: now, provider: 'openai', modelId: 'gpt-4o', usage: { inputTokens: usd * 400_000 } })],
      }),
    ],
  };
}

describe('budgets and spend alerts (SQLite, DuckDB)', () => {
  let t: TestServer;
  let ctx: CliContext;
  const env = { BUDGET_CHECK_MS: '100', WEBHOOK_TIMEOUT_MS: '400', FLUSH_INTERVAL_MS: '50', CONSOLE_PORT: '0' };
  beforeAll(async () => {
    t = await startTestServer(env);
    ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
  });
  afterAll(async () => {
    await ctx?.close();
    await t?.close();
  });

  it('alerts once per threshold, signed, from /ingest and from /v1/traces; GET /v1/budget and the SDK equal usage to the cent', async () => {
    const { key } = await t.newKey('acme', undefined, ['ingest', 'budget:read']);
    const hook = await receiver();
    const set = await setBudget(ctx, { org: 'acme', monthlyUsd: '10', alertAt: '50,100', webhook: hook.url });
    expect(set.secret).toMatch(/^whsec_/);
    hook.addSecret(set.secret);
    // A customer budget too, crossed through OTLP.
    hook.addSecret((await setBudget(ctx, { org: 'acme', customer: 'cust-7', monthlyUsd: '2', alertAt: '100', webhook: hook.url })).secret);

    expect((await t.post(spend('t1', 6), { key })).status).toBe(202);
    await until(
      'the 50% alert',
      () => hook.distinct().length,
      (n) => n >= 1,
    );
    const now = Date.now();
    const otlp = {
      resourceSpans: [
        {
          scopeSpans: [
            {
              spans: [
                {
                  traceId: '5b8efff798038103d269b633813fc60c',
                  spanId: 'eee19b7ec3c1b174',
                  name: 'chat gpt-4o',
                  startTimeUnixNano: `${now - 500}000000`,
                  endTimeUnixNano: `${now}000000`,
                  attributes: [
                    { key: 'gen_ai.operation.name', value: { stringValue: 'chat' } },
                    { key: 'gen_ai.provider.name', value: { stringValue: 'openai' } },
                    { key: 'gen_ai.request.model', value: { stringValue: 'gpt-4o' } },
                    { key: 'gen_ai.usage.input_tokens', value: { intValue: 1_800_000 } },
                    { key: 'enduser.id', value: { stringValue: 'cust-7' } },
                  ],
                },
              ],
            },
          ],
        },
      ],
    };
    const res = await fetch(`${t.url}/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify(otlp),
    });
    expect(res.status).toBe(200);
    // $6 + $4.50 = $10.50: the org's 100%; cust-7's $4.50 is past its $2.
    const alerts = await until(
      'three alerts',
      () => hook.distinct(),
      (a) => a.length >= 3,
    );
    await sleep(500);
    expect(hook.distinct()).toHaveLength(3);
    for (const a of alerts) expect(a.signatureOk).toBe(true);
    const summary = alerts.map((a) => [a.customer, a.threshold, a.budgetUsd, a.month]).sort();
    expect(summary).toEqual(
      [
        [null, 50, '10', month()],
        [null, 100, '10', month()],
        ['cust-7', 100, '2', month()],
      ].sort(),
    );
    expect(alerts.find((a) => a.customer === 'cust-7')?.spentUsd).toBe('4.5');

    // The budget check for apps: what `usage --month` says, to the cent.
    const byCustomer = await usage(ctx, { org: 'acme', month: month(), by: 'customer' });
    const total = formatDecimal(byCustomer.reduce((s, r) => s + parseDecimal(r.costs.total_cost), 0n));
    expect(total).toBe('10.5');
    const answer = await until(
      'GET /v1/budget to see the spend',
      async () =>
        (await fetch(`${t.url}/v1/budget?customer=cust-7`, { headers: { authorization: `Bearer ${key}` } })).json() as Promise<Record<string, unknown>>,
      (a) => (a.org as { spentUsd: string } | undefined)?.spentUsd === total,
    );
    expect(answer).toMatchObject({
      month: month(),
      org: { budgetUsd: '10', spentUsd: '10.5', remainingUsd: '-0.5', crossed: [50, 100] },
      customer: { id: 'cust-7', budgetUsd: '2', spentUsd: byCustomer.find((r) => r.group === 'cust-7')?.costs.total_cost, crossed: [100] },
    });
    const ti = new TraceIngest({ baseUrl: t.url, apiKey: key, flushOnExit: false });
    onTestFinished(() => void ti.shutdown(100));
    // The same answer, read again: only the moment it was computed differs.
    expect(await ti.budget('cust-7')).toEqual({ ...answer, asOf: expect.any(Number) });
    expect(await ti.budget('no-such-customer')).toMatchObject({ customer: { id: 'no-such-customer', budgetUsd: null, spentUsd: '0', crossed: [] } });
    // Refused without a key, as /ingest is.
    const anon = await fetch(`${t.url}/v1/budget`);
    expect(anon.status).toBe(401);
    expect(((await anon.json()) as { error: string }).error).toBeTruthy();

    const metrics = await (await fetch(`${t.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/trace_ingest_budget_spend_usd\{org="[^"]+",budget="bud_[^"]+",customer=""\} 10\.5/);
    // A customer's budget by its id: customer ids are labels only with METRICS_CUSTOMER_LABELS.
    expect(metrics).toMatch(/trace_ingest_budget_usd\{org="[^"]+",budget="bud_[^"]+",customer=""\} 2/);
    expect(metrics).not.toContain('cust-7');
    expect(metrics).not.toContain(set.secret);
    const events = await budgetEvents(ctx, { org: 'acme' });
    expect(events).toHaveLength(3);
    for (const e of events) expect(e.delivered).toMatch(/^\d{4}-/);
  });

  it("the most specific budget governs a customer: alerts, GET /v1/budget, the SDK and the console say the customer's own", async () => {
    const { key } = await t.newKey('rule-org', undefined, ['ingest', 'budget:read']);
    const hook = await receiver();
    hook.addSecret((await setBudget(ctx, { org: 'rule-org', allCustomers: true, monthlyUsd: '3', alertAt: '50,80,100', webhook: hook.url })).secret);
    hook.addSecret((await setBudget(ctx, { org: 'rule-org', customer: 'vip', monthlyUsd: '5', alertAt: '50,80,100', webhook: hook.url })).secret);
    // vip: $4 is 80% of its own $5 (and would be 133% of the $3 every customer has); small: $2 is 66% of $3.
    expect((await t.post(spend('t-vip', 4, 'vip'), { key })).status).toBe(202);
    expect((await t.post(spend('t-small', 2, 'small'), { key })).status).toBe(202);
    await until(
      'three alerts',
      () => hook.distinct().length,
      (n) => n >= 3,
    );
    await t.server.flush();
    await sleep(500);
    const alerts = hook.distinct().map((a) => [a.customer, a.budgetUsd, a.threshold]);
    expect(alerts.sort()).toEqual(
      [
        ['small', '3', 50],
        ['vip', '5', 50],
        ['vip', '5', 80],
      ].sort(),
    );
    const events = await budgetEvents(ctx, { org: 'rule-org' });
    expect(events.map((e) => [e.customer, e.budgetUsd, e.threshold]).sort()).toEqual(alerts.sort());

    // The API and the SDK: each customer against the budget that governs it.
    const api = (c: string) => getJson<{ customer: { budgetUsd: string; crossed: number[] } }>(`${t.url}/v1/budget?customer=${c}`, key);
    expect((await api('vip')).customer).toMatchObject({ budgetUsd: '5', spentUsd: '4', remainingUsd: '1', crossed: [50, 80] });
    expect((await api('small')).customer).toMatchObject({ budgetUsd: '3', spentUsd: '2', crossed: [50] });
    expect((await api('nobody-yet')).customer).toMatchObject({ budgetUsd: '3', spentUsd: '0', crossed: [] });
    const ti = new TraceIngest({ baseUrl: t.url, apiKey: key, flushOnExit: false });
    onTestFinished(() => void ti.shutdown(100));
    expect((await ti.budget('vip'))?.customer).toMatchObject({ budgetUsd: '5', crossed: [50, 80] });

    // The console: the customers page's budget bars.
    const token = (await createConsoleToken(ctx, { name: 'rule' })).token;
    const page = await getJson<{ budgets: Record<string, { budgetUsd: string; crossed: number[] }> }>(
      `http://127.0.0.1:${t.server.consolePort}/console/api/customers?org=rule-org`,
      token,
    );
    expect(page.budgets.vip).toMatchObject({ budgetUsd: '5', crossed: [50, 80] });
    expect(page.budgets.small).toMatchObject({ budgetUsd: '3', crossed: [50] });
  });

  it('budgets events: "delivered" stays empty without a webhook; "attempts" counts the POSTs made', async () => {
    const { key } = await t.newKey('events-org', undefined, ['ingest', 'budget:read']);
    const hook = await receiver();
    // The org's budget has no webhook; the customer's posts to a receiver that fails twice, then takes it.
    await setBudget(ctx, { org: 'events-org', monthlyUsd: '1', alertAt: '100' });
    hook.addSecret((await setBudget(ctx, { org: 'events-org', customer: 'c1', monthlyUsd: '1', alertAt: '100', webhook: hook.url })).secret);
    hook.setStatus(503);
    expect((await t.post(spend('t-ev', 2, 'c1'), { key })).status).toBe(202);
    await until(
      'two failed posts',
      () => hook.got.length,
      (n) => n >= 2,
    );
    hook.setStatus(200);
    const delivered = await until(
      'delivery',
      async () => (await budgetEvents(ctx, { org: 'events-org' })).find((e) => e.customer === 'c1'),
      (e) => /^\d{4}-/.test(e?.delivered ?? ''),
    );
    await sleep(300);
    expect(delivered?.attempts).toBe(hook.got.length);
    expect(hook.got.length).toBeGreaterThanOrEqual(3);
    const quiet = (await budgetEvents(ctx, { org: 'events-org' })).find((e) => e.customer === '(org)');
    expect(quiet).toMatchObject({ delivered: '', attempts: 0, lastError: '' });
  });

  it('the month-end forecast: `usage`, GET /v1/budget, the SDK and the console give the same figures', async () => {
    const { key, orgId } = await t.newKey('forecast-org', undefined, ['ingest', 'budget:read']);
    await setBudget(ctx, { org: 'forecast-org', monthlyUsd: '40', alertAt: '100' });
    const now = Date.now();
    // A complete day of spend (yesterday) and some today, for two customers.
    expect((await t.post(spend('t-y1', 3, 'fa', now - 86_400_000), { key })).status).toBe(202);
    expect((await t.post(spend('t-y2', 1, 'fb', now - 86_400_000), { key })).status).toBe(202);
    expect((await t.post(spend('t-t1', 0.5, 'fa', now), { key })).status).toBe(202);
    await t.server.flush();
    await sleep(400);
    const cli = await usageForecast(ctx, orgId);
    expect(cli.org?.dailyRateUsd).toBe('4');
    // The API answers from the last check's reads: it is there within a few checks.
    const api = await until(
      'GET /v1/budget to see the same forecast',
      () => getJson<{ org: { forecast: unknown }; customer: { forecast: unknown } }>(`${t.url}/v1/budget?customer=fa`, key),
      (a) => JSON.stringify(a.org.forecast) === JSON.stringify(cli.org),
    );
    expect(api.org.forecast).toEqual(cli.org);
    expect(api.customer.forecast).toEqual(cli.customers.fa);
    expect(cli.customers.fa?.dailyRateUsd).toBe('3');
    const ti = new TraceIngest({ baseUrl: t.url, apiKey: key, flushOnExit: false });
    onTestFinished(() => void ti.shutdown(100));
    expect((await ti.budget('fa'))?.customer?.forecast).toEqual(cli.customers.fa);

    const token = (await createConsoleToken(ctx, { name: 'forecast' })).token;
    const base = `http://127.0.0.1:${t.server.consolePort}/console/api`;
    expect((await getJson<{ forecast: unknown }>(`${base}/overview?org=forecast-org`, token)).forecast).toEqual(api.org.forecast);
    const customers = await getJson<{ forecasts: Record<string, unknown> }>(`${base}/customers?org=forecast-org`, token);
    expect(customers.forecasts.fa).toEqual(cli.customers.fa);

    // The command prints the same projection under its table.
    const lines: string[] = [];
    const code = await runCli(['usage', '--org', 'forecast-org', '--by', 'customer'], {
      env: { DATA_DIR: t.dir },
      out: { out: (l) => lines.push(l), err: (l) => lines.push(l) },
    });
    expect(code).toBe(0);
    const text = lines.join('\n');
    expect(text).toContain(`projected ${month()} month-end: ${cli.org?.projectedUsd} USD at a daily run rate of 4 USD`);
    expect(text).toMatch(new RegExp(`│ fa +│ [0-9.]+ +│ ${(cli.customers.fa?.projectedUsd ?? '').replace('.', '\\.')} +│`));
  });

  it("counts a late span of last month in last month: this month's budget neither moves nor alerts", async () => {
    const { key } = await t.newKey('late-org', undefined, ['ingest', 'budget:read']);
    const hook = await receiver();
    hook.addSecret((await setBudget(ctx, { org: 'late-org', monthlyUsd: '1', alertAt: '100', webhook: hook.url })).secret);
    const monthStart = Date.parse(`${month()}-01T00:00:00Z`);
    const late = spend('t-late', 5);
    const s = late.traces[0]?.spans[0];
    if (s === undefined) throw new Error('no span');
    Object.assign(s, { startTime: monthStart - 3_600_000, endTime: monthStart - 3_000_000 });
    expect((await t.post(late, { key })).status).toBe(202);
    await t.server.flush();
    await sleep(800);
    const answer = (await (await fetch(`${t.url}/v1/budget`, { headers: { authorization: `Bearer ${key}` } })).json()) as { org: { spentUsd: string } };
    expect(answer.org.spentUsd).toBe('0');
    expect((await budgetEvents(ctx, { org: 'late-org' })).filter((e) => e.month === month())).toEqual([]);
    expect(hook.got.filter((a) => a.month === month())).toEqual([]);
  });

  it('delivers to a receiver that was down, with backoff, and once', async () => {
    const { key } = await t.newKey('down-org');
    const hook = await receiver();
    hook.setStatus(503);
    const set = await setBudget(ctx, { org: 'down-org', monthlyUsd: '1', alertAt: '100', webhook: hook.url });
    hook.addSecret(set.secret);
    expect((await t.post(spend('t-down', 2), { key })).status).toBe(202);
    await until(
      'failed attempts',
      () => hook.got.length,
      (n) => n >= 2,
    );
    const [pending] = await budgetEvents(ctx, { org: 'down-org' });
    expect(pending).toMatchObject({ delivered: 'retrying', lastError: expect.stringMatching(/503/) as unknown });
    hook.setStatus(200);
    await until(
      'delivery',
      async () => (await budgetEvents(ctx, { org: 'down-org' }))[0]?.delivered ?? '',
      (d) => /^\d{4}-/.test(d),
    );
    expect(hook.distinct()).toHaveLength(1);
    expect(hook.got.every((a) => a.signatureOk)).toBe(true);
  });

  it('neither loses nor repeats an alert across a restart in the middle of its delivery', async () => {
    const { key } = await t.newKey('restart-org');
    const hook = await receiver();
    // The receiver takes longer than the webhook timeout: the server is stopped while it waits.
    hook.setHoldMs(5000);
    const set = await setBudget(ctx, { org: 'restart-org', monthlyUsd: '1', alertAt: '100', webhook: hook.url });
    hook.addSecret(set.secret);
    expect((await t.post(spend('t-restart', 3), { key })).status).toBe(202);
    await until(
      'the first delivery attempt',
      () => hook.got.length,
      (n) => n >= 1,
    );
    await ctx.close();
    await t.server.shutdown();
    hook.setHoldMs(0);
    t = await startTestServer(env, {}, t.dir);
    ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
    await until(
      'delivery after the restart',
      async () => (await budgetEvents(ctx, { org: 'restart-org' }))[0]?.delivered ?? '',
      (d) => /^\d{4}-/.test(d),
    );
    await sleep(500);
    // Posted again after the restart, with the same id: one alert for a receiver that deduplicates by id.
    expect(hook.got.length).toBeGreaterThanOrEqual(2);
    expect(hook.distinct()).toHaveLength(1);
    expect(await budgetEvents(ctx, { org: 'restart-org' })).toHaveLength(1);
  });
});

describe('alerts of where the month is heading, on a set day (SQLite, DuckDB)', () => {
  // 20 October 2026, noon: eleven days left after today.
  const NOW = Date.UTC(2026, 9, 20, 12);
  const DAY = 86_400_000;
  let t: TestServer;
  let ctx: CliContext;
  beforeAll(async () => {
    t = await startTestServer({ BUDGET_CHECK_MS: '100', WEBHOOK_TIMEOUT_MS: '400', FLUSH_INTERVAL_MS: '50', CONSOLE_PORT: '0' }, { now: () => NOW });
    ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
  });
  afterAll(async () => {
    await ctx?.close();
    await t?.close();
  });

  it('projected to exceed, once a month; spend anomalies of a customer and a model, once a day: signed, to the same webhooks', async () => {
    const { key, orgId } = await t.newKey('heading', undefined, ['ingest', 'budget:read']);
    const hook = await receiver();
    hook.addSecret((await setBudget(ctx, { org: 'heading', monthlyUsd: '50', alertAt: '100', webhook: hook.url })).secret);
    hook.addSecret((await setBudget(ctx, { org: 'heading', allCustomers: true, monthlyUsd: '27', alertAt: '100', webhook: hook.url })).secret);
    // 6 to 19 October: steady and spiky spend $1 a day each on gpt-4o; today steady $0.50, spiky $6.
    const traces = [];
    for (let d = 1; d <= 14; d++) for (const c of ['steady', 'spiky']) traces.push(...spend(`t-${c}-${d}`, 1, c, NOW - d * DAY).traces);
    traces.push(...spend('t-steady-0', 0.5, 'steady', NOW - 60_000).traces, ...spend('t-spiky-0', 6, 'spiky', NOW - 60_000).traces);
    expect((await t.post({ version: 'v1', traces }, { key })).status).toBe(202);
    await until(
      'four alerts',
      () => hook.distinct().length,
      (n) => n >= 4,
    );
    await t.server.flush();
    // More spend and more checks: still projected over, still anomalous, and no alert again.
    expect((await t.post(spend('t-spiky-more', 0.25, 'spiky', NOW - 30_000), { key })).status).toBe(202);
    await t.server.flush();
    await sleep(800);
    expect(hook.got).toHaveLength(4);
    expect(hook.got.every((a) => a.signatureOk)).toBe(true);
    const by = (type: string, subject: string | null) => hook.got.find((a) => a.type === type && (a.customer ?? a.model ?? null) === subject);
    // The org: $34.50 spent; 28 + max(6.50, 2) + 2 * 11 = $56.50 projected against $50, reached on the 28th ((50 - 34.5) / 2 = 7.75 days after today).
    expect(by('budget.projected_to_exceed', null)).toMatchObject({ budgetUsd: '50', spentUsd: '34.5', projectedUsd: '56.5', crossesOn: '2026-10-28' });
    // spiky, under the every-customer budget: 14 + 6 + 11 = $31 against $27; steady's $26 is not over.
    expect(by('budget.projected_to_exceed', 'spiky')).toMatchObject({ budgetUsd: '27', spentUsd: '20', projectedUsd: '31', crossesOn: '2026-10-27' });
    expect(by('budget.projected_to_exceed', 'steady')).toBeUndefined();
    // spiky's $6 today against a $1 median; gpt-4o's $6.50 against $2.
    expect(by('spend.anomaly', 'spiky')).toMatchObject({ day: '2026-10-20', costUsd: '6', baselineUsd: '1', model: null, budgetUsd: '27' });
    expect(hook.got.find((a) => a.type === 'spend.anomaly' && a.model === 'gpt-4o')).toMatchObject({
      customer: null,
      costUsd: '6.5',
      baselineUsd: '2',
      budgetUsd: '50',
    });
    const events = await budgetEvents(ctx, { org: 'heading' });
    expect(events.map((e) => e.kind).sort()).toEqual(['anomaly', 'anomaly', 'projected', 'projected']);
    for (const e of events) expect(e).toMatchObject({ attempts: 1, delivered: expect.stringMatching(/^\d{4}-/) as unknown });

    // The same day's figures everywhere: the API, `usage`'s forecast and the console.
    const api = await getJson<{ org: { forecast: unknown }; customer: { forecast: unknown } }>(`${t.url}/v1/budget?customer=spiky`, key);
    const cli = await usageForecast(ctx, orgId, NOW);
    expect(api.org.forecast).toEqual(cli.org);
    // With the last $0.25: 28 + 6.75 + 22.
    expect(api.org.forecast).toMatchObject({ projectedUsd: '56.75', dailyRateUsd: '2', crossesOn: '2026-10-28', errorPct: null });
    expect(api.customer.forecast).toEqual(cli.customers.spiky);
    expect(api.customer.forecast).toMatchObject({ projectedUsd: '31.25', crossesOn: '2026-10-27' });
    const token = (await createConsoleToken(ctx, { name: 'heading' })).token;
    const base = `http://127.0.0.1:${t.server.consolePort}/console/api`;
    expect((await getJson<{ forecast: unknown }>(`${base}/overview?org=heading`, token)).forecast).toEqual(cli.org);
    expect((await getJson<{ forecasts: Record<string, unknown> }>(`${base}/customers?org=heading`, token)).forecasts).toEqual(cli.customers);
  });
});

const PG_URL = process.env.TI_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.TI_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

describe('budgets across three replicas (PostgreSQL, Redis, ClickHouse)', () => {
  const id = randomBytes(4).toString('hex');
  const schema = `ti_budget_${id}`;
  const dbUrl = (() => {
    const u = new URL(PG_URL);
    u.searchParams.set('schema', schema);
    return u.toString();
  })();
  let replicas: ChildServer[] = [];
  let keys: PostgresControlStore;
  let spans: ClickHouseSpanStore;
  let clickhouseUrl = '';
  const dirs: string[] = [];

  beforeAll(async () => {
    clickhouseUrl = `${inject('clickhouseHttpUrl').replace('http://', 'http://default:@')}/ti_budget_${id}`;
    keys = new PostgresControlStore(dbUrl);
    await keys.start();
    spans = new ClickHouseSpanStore({ url: clickhouseUrl });
    await spans.start();
    for (let i = 0; i < 3; i++) dirs.push(fs.mkdtempSync(path.join(os.tmpdir(), `ti-budget-replica-${i}-`)));
  });
  afterAll(async () => {
    for (const r of replicas) {
      r.proc.kill('SIGTERM');
      await r.exited;
    }
    await keys?.close();
    await spans?.query(`DROP DATABASE IF EXISTS ti_budget_${id}`).catch(() => undefined);
    await spans?.close();
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client.end();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('records and delivers exactly one alert per threshold, whichever replicas see it', async () => {
    await keys.createOrg({ name: 'shared' });
    const { key } = await keys.createKey({ orgName: 'shared', scopes: ['ingest', 'budget:read'] });
    const hook = await receiver();
    // Replicas sharing PostgreSQL share the key that seals webhook secrets, and so does the CLI.
    const SECRETS_KEY = randomBytes(32).toString('base64');
    const ctx = createContext(loadConfig({ DATA_DIR: dirs[0] ?? '', DATABASE_URL: dbUrl, CLICKHOUSE_URL: clickhouseUrl, SECRETS_KEY }));
    onTestFinished(() => ctx.close());
    const set = await setBudget(ctx, { org: 'shared', monthlyUsd: '10', alertAt: '25,50,75,100', webhook: hook.url });
    hook.addSecret(set.secret);
    const env = {
      SECRETS_KEY,
      DATABASE_URL: dbUrl,
      REDIS_URL,
      REDIS_KEY_PREFIX: `ti-budget-${id}`,
      CLICKHOUSE_URL: clickhouseUrl,
      FLUSH_INTERVAL_MS: '50',
      BUDGET_CHECK_MS: '100',
    };
    replicas = await Promise.all(dirs.map((d) => startChildServer({ ...env, DRAIN_GRACE_MS: '0', DATA_DIR: d })));
    // $3 at a time through each replica in turn: 25% at $3, 50% at $6, 75% at $9, 100% at $12.
    for (let i = 0; i < 4; i++) {
      const r = replicas[i % 3] as ChildServer;
      const res = await fetch(`${r.url}/ingest`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify(spend(`t-${i}`, 3)),
      });
      expect(res.status).toBe(202);
      await sleep(300);
    }
    await until(
      'four alerts',
      () => hook.distinct().length,
      (n) => n >= 4,
      30_000,
    );
    await sleep(1000);
    expect(
      hook
        .distinct()
        .map((a) => a.threshold)
        .sort((a, b) => a - b),
    ).toEqual([25, 50, 75, 100]);
    expect(hook.got).toHaveLength(4);
    expect(hook.got.every((a) => a.signatureOk)).toBe(true);
    const events = await budgetEvents(ctx, { org: 'shared' });
    expect(events).toHaveLength(4);
    // Every replica answers the same budget check.
    for (const r of replicas) {
      const a = (await (await fetch(`${r.url}/v1/budget`, { headers: { authorization: `Bearer ${key}` } })).json()) as { org: { spentUsd: string } };
      expect(a.org.spentUsd).toBe('12');
    }
  }, 60_000);
});
