import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '@trace-ingest/shared/config';
import { buildOpenApiDocument } from '@trace-ingest/shared/openapi';
import { createContext, type CliContext } from '@trace-ingest/cli/program-context';
import { setBudget } from '@trace-ingest/cli/actions/budgets';
import { createConsoleToken, revokeConsoleToken } from '@trace-ingest/cli/actions/console';
import { usage } from '@trace-ingest/cli/actions/usage';
import { runCli } from '@trace-ingest/cli/program';
import { ClickHouseSpanStore } from '@trace-ingest/store/clickhouse';
import { countGroups, usageReport, usageTotals, type UsageRow } from '@trace-ingest/store/reports';
import { formatDecimal, parseDecimal } from '@trace-ingest/shared/decimal';
import { sharedDecimals, usd } from '../../packages/console/src/money.js';
import { makeSpan, makeTrace } from '../factories.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

// Debian's chromium, driven by playwright-core: no browser is downloaded.
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const SHOTS = path.resolve(import.meta.dirname, '../../test-results/console');

const FROM = '2026-01-10';
const TO = '2026-01-16';
const day = (d: number, h = 12) => Date.UTC(2026, 0, d, h, 0, 0);

/** Five days of a known mix: three customers (one with a comma in its id), two priced models, one unpriced. */
function batches() {
  const traces = [];
  for (let d = 10; d <= 14; d++) {
    const t0 = day(d);
    traces.push(
      makeTrace({
        traceId: `agent-run-${d}`,
        traceName: 'support agent',
        customer: { id: d % 2 === 0 ? 'c1' : 'acme, inc' },
        spans: [
          makeSpan({ spanId: `root-${d}`, spanType: 'agent', name: 'answer ticket', startTime: t0, endTime: t0 + 4200 }),
          makeSpan({
            spanId: `plan-${d}`,
            parentSpanId: `root-${d}`,
            name: 'plan',
            startTime: t0 + 100,
            endTime: t0 + 1300,
            provider: 'openai',
            modelId: 'gpt-4o',
            usage: { inputTokens: 1200 * d, cachedInputTokens: 300, outputTokens: 210 + d },
          }),
          makeSpan({ spanId: `tool-${d}`, parentSpanId: `root-${d}`, spanType: 'tool', name: 'search orders', startTime: t0 + 1350, endTime: t0 + 2000 }),
          makeSpan({
            spanId: `write-${d}`,
            parentSpanId: `root-${d}`,
            name: 'write reply',
            startTime: t0 + 2050,
            endTime: t0 + 4100,
            provider: 'anthropic',
            modelId: 'claude-sonnet-4-20250514',
            usage: { inputTokens: 3000 + d, cacheWriteInputTokens: 500, outputTokens: 700 },
          }),
        ],
      }),
      makeTrace({
        traceId: `batch-${d}`,
        customer: { id: 'c2', name: 'Globex Ltd' },
        spans: [
          makeSpan({
            spanId: `emb-${d}`,
            name: 'classify',
            startTime: t0 + 5000,
            endTime: t0 + 5600,
            provider: 'openai',
            modelId: d % 2 === 0 ? 'gpt-4o-mini' : 'in-house-llm',
            usage: { inputTokens: 40_000 + d, outputTokens: 900 },
          }),
        ],
      }),
    );
  }
  return [{ version: 'v1' as const, traces }];
}

async function launch(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
}

async function cells(page: Page, table: string, col: string): Promise<Record<string, string>> {
  return page.$$eval(
    `[data-table="${table}"] tbody tr`,
    (rows, c) =>
      Object.fromEntries(rows.map((r) => [r.getAttribute('data-key') ?? '', r.querySelector(`td[data-col="${c}"]`)?.getAttribute('data-value') ?? ''])),
    col,
  );
}

/** What a money column shows (rounded for the eye, without its unpriced note) and the exact value in its title. */
async function shown(page: Page, table: string, col: string): Promise<Record<string, { text: string; title: string }>> {
  return page.$$eval(
    `[data-table="${table}"] tbody tr`,
    (rows, c) =>
      Object.fromEntries(
        rows.map((r) => {
          const td = r.querySelector(`td[data-col="${c}"]`);
          return [r.getAttribute('data-key') ?? '', { text: td?.firstChild?.textContent ?? '', title: td?.getAttribute('title') ?? '' }];
        }),
      ),
    col,
  );
}

/** What test/integration/support/console-layout.browser.js measures in the page. */
interface Layout {
  overflow: number;
  scrolling: number;
  offScreen: string[];
  hiddenCols: string[];
  budgets: boolean[];
  money: { table: string; col: string; cells: { value: string; text: string; visible: boolean }[] }[];
  stretched: string[];
  brokenWords: string[];
}
const LAYOUT_PROBE = fs.readFileSync(path.resolve(import.meta.dirname, 'support/console-layout.browser.js'), 'utf8');

/** The shown form and title a money cell of `exact` has, in a column of `column`'s figures (one precision for them all). */
const moneyCell = (exact: string, column: readonly string[]) => ({ text: usd(exact, sharedDecimals(column)), title: `$${exact} (exact)` });

function expectedBy(rows: UsageRow[], total: UsageRow, pick: (r: UsageRow) => string | number): Record<string, string> {
  return Object.fromEntries([...rows.map((r) => [r.group, String(pick(r))]), ['TOTAL', String(pick(total))]]);
}

async function cliCsv(dir: string, by: string): Promise<string> {
  const lines: string[] = [];
  const code = await runCli(['usage', '--org', 'acme', '--from', FROM, '--to', TO, '--by', by, '--csv'], {
    env: { DATA_DIR: dir },
    out: { out: (t) => lines.push(t), err: (t) => lines.push(`ERR ${t}`) },
  });
  expect(code).toBe(0);
  return lines.join('\n').trim();
}

describe('cost console in a real browser (DuckDB)', () => {
  let t: TestServer;
  let ctx: CliContext;
  let browser: Browser;
  let token: string;
  let consoleUrl: string;

  beforeAll(async () => {
    fs.mkdirSync(SHOTS, { recursive: true });
    t = await startTestServer({ CONSOLE_PORT: '0' });
    const { key } = await t.newKey('acme');
    await t.newKey('other-org');
    for (const b of batches()) expect((await t.post(b, { key })).status).toBe(202);
    await t.server.flush();
    consoleUrl = `http://127.0.0.1:${t.server.consolePort}/console/`;
    ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
    token = (await createConsoleToken(ctx, { name: 'finance' })).token;
    browser = await launch();
  });
  afterAll(async () => {
    await browser?.close();
    await ctx?.close();
    await t?.close();
  });

  async function signedIn(viewport = { width: 1366, height: 900 }): Promise<Page> {
    const context = await browser.newContext({ viewport, acceptDownloads: true });
    const page = await context.newPage();
    await page.goto(`${consoleUrl}#/overview?org=acme&from=${FROM}&to=${TO}`);
    await page.fill('input[name=token]', token);
    await page.click('button[type=submit]');
    await page.waitForSelector('[data-page="overview"]');
    return page;
  }

  it('serves nothing new on the ingest port, and no data without a token', async () => {
    expect((await fetch(`${t.url}/console/`)).status).toBe(404);
    expect((await fetch(`${t.url}/console/api/orgs`)).status).toBe(404);
    const api = `http://127.0.0.1:${t.server.consolePort}/console/api/overview?org=acme`;
    const variants: Record<string, string>[] = [{}, { authorization: 'Bearer tic_not-a-real-token-at-all-0000' }, { authorization: `Basic ${token}` }];
    for (const headers of variants) {
      const res = await fetch(api, { headers });
      expect(res.status).toBe(401);
      expect(res.headers.get('content-type')).toMatch(/application\/json/);
      expect(((await res.json()) as { error: string }).error).toMatch(/console token create/);
    }
  });

  it('says what to fix in a bad query, as JSON', async () => {
    const api = `http://127.0.0.1:${t.server.consolePort}/console/api`;
    const auth = { headers: { authorization: `Bearer ${token}` } };
    const cases: [string, number, RegExp][] = [
      ['overview', 400, /org: is required/],
      ['overview?org=acme&from=2026-13-01', 400, /not a calendar date/],
      ['overview?org=acme&from=2026-02-01&to=2026-02-30', 400, /not a calendar date/],
      ['overview?org=acme&from=20260101', 400, /from: must be a date YYYY-MM-DD/],
      [`customers?org=acme&from=${TO}&to=${FROM}`, 400, /must not be before/],
      ['models?org=acme&from=2024-01-01&to=2026-01-01', 400, /at most 366 days/],
      ['overview?org=nobody', 404, /unknown org "nobody"/],
      ['traces/no-such-trace?org=acme', 404, /no trace "no-such-trace"/],
      ['nothing-here', 404, /no console API route/],
    ];
    for (const [p, status, error] of cases) {
      const res = await fetch(`${api}/${p}`, auth);
      expect(res.status, p).toBe(status);
      expect(((await res.json()) as { error: string }).error, p).toMatch(error);
    }
    const post = await fetch(`${api}/orgs`, { method: 'POST', ...auth });
    expect(post.status).toBe(405);
  });

  it('refuses a wrong token in the page and shows no figures', async () => {
    const page = await (await browser.newContext()).newPage();
    await page.goto(consoleUrl);
    await page.waitForSelector('input[name=token]');
    await page.screenshot({ path: path.join(SHOTS, 'sign-in.png') });
    await page.fill('input[name=token]', 'tic_this-token-was-never-created-0000');
    await page.click('button[type=submit]');
    await expect.poll(() => page.textContent('[role=alert]')).toMatch(/Refused: missing, invalid or revoked console token/);
    await page.screenshot({ path: path.join(SHOTS, 'sign-in-refused.png') });
    expect(await page.$('[data-page]')).toBeNull();
    await page.context().close();
  });

  it('overview: totals, per-model costs and month to date equal `trace-ingest usage` to the cent', async () => {
    const page = await signedIn();
    const byModel = await usage(ctx, { org: 'acme', from: FROM, to: TO, by: 'model' });
    const total = usageTotals(byModel);
    expect(await page.textContent('[data-kpi="range-cost"] .kpi-value')).toBe(usd(total.costs.total_cost ?? '0'));
    expect(await page.getAttribute('[data-kpi="range-cost"] .kpi-value', 'title')).toBe(`$${total.costs.total_cost} (exact)`);
    expect((await page.textContent('[data-kpi="range-spans"] .kpi-value'))?.replace(/,/g, '')).toBe(String(total.spans));
    expect(await cells(page, 'overview-models', 'total_cost')).toEqual(expectedBy(byModel, total, (r) => r.costs.total_cost ?? ''));
    const shownCosts = await shown(page, 'overview-models', 'total_cost');
    const costColumn = expectedBy(byModel, total, (r) => r.costs.total_cost ?? '');
    for (const [key, exact] of Object.entries(costColumn)) expect(shownCosts[key]).toEqual(moneyCell(exact, Object.values(costColumn)));
    // Unpriced spans are said beside the cost, never left as a bare $0.
    const unpriced = await page.$$eval('[data-table="overview-models"] tbody tr', (rows) =>
      Object.fromEntries(
        rows.map((r) => [r.getAttribute('data-key') ?? '', r.querySelector('td[data-col="total_cost"] .unpriced')?.getAttribute('data-unpriced') ?? '0']),
      ),
    );
    expect(unpriced).toEqual(expectedBy(byModel, total, (r) => r.unpricedSpans));
    expect(unpriced['in-house-llm']).not.toBe('0');
    expect(await page.textContent('[data-kpi="quota"] .kpi-label')).toMatch(/^Received this month/);
    expect(await page.textContent('[data-kpi-note="months"]')).toMatch(/by the month they were received; the range above, by their start time/);
    const icon = await page.evaluate<string>("new URL(document.querySelector('link[rel=icon]').getAttribute('href'), location.href).href");
    expect((await fetch(icon)).headers.get('content-type')).toMatch(/^image\/svg\+xml/);
    // The range pickers read and show ISO days, whatever the browser's locale.
    expect([await page.inputValue('input[name=from]'), await page.inputValue('input[name=to]')]).toEqual([FROM, TO]);
    expect(await page.getAttribute('input[name=from]', 'type')).toBe('text');
    expect(await cells(page, 'overview-models', 'spans')).toEqual(expectedBy(byModel, total, (r) => r.spans));

    // Per day: the chart's table equals the CLI by day.
    const byDay = await usage(ctx, { org: 'acme', from: FROM, to: TO, by: 'day' });
    const days = await cells(page, 'overview-days', 'cost');
    for (const r of byDay) expect(days[r.group]).toBe(r.costs.total_cost);
    expect(days['2026-01-16']).toBe('0');
    // Two stacked charts were drawn.
    expect(await page.$$eval('canvas', (cs) => cs.filter((c) => c.width > 0 && c.height > 0).length)).toBe(2);

    const month = new Date().toISOString().slice(0, 7);
    const org = await t.keys.getOrg('acme');
    const counted = await t.keys.getMonthUsage(org?.id ?? '', month);
    expect((await page.textContent('[data-kpi="quota"] .kpi-value'))?.replace(/,/g, '')).toBe(`${counted} / 100000000 spans`);

    // The by-model CSV is the CLI's CSV, byte for byte.
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('[data-csv="overview-models"]')]);
    expect(fs.readFileSync(await download.path(), 'utf8').trim()).toBe(await cliCsv(t.dir, 'model'));
    await page.screenshot({ path: path.join(SHOTS, 'overview.png'), fullPage: true });
    await page.context().close();
  });

  it('customers: figures, sorting, sparklines and CSV match the CLI', async () => {
    const page = await signedIn();
    await page.click('[data-nav="customers"]');
    await page.waitForSelector('[data-page="customers"]');
    const rows = await usage(ctx, { org: 'acme', from: FROM, to: TO, by: 'customer' });
    const total = usageTotals(rows);
    expect(rows.map((r) => r.group).sort()).toEqual(['acme, inc', 'c1', 'c2']);
    expect(await cells(page, 'customers', 'total_cost')).toEqual(expectedBy(rows, total, (r) => r.costs.total_cost ?? ''));
    expect(await cells(page, 'customers', 'spans')).toEqual(expectedBy(rows, total, (r) => r.spans));
    expect(await cells(page, 'customers', 'input_tokens')).toEqual(expectedBy(rows, total, (r) => r.tokens.input_tokens));
    expect(await cells(page, 'customers', 'output_tokens')).toEqual(expectedBy(rows, total, (r) => r.tokens.output_tokens));
    expect(await page.$$eval('[data-table="customers"] tbody tr:not(.total) svg.spark polyline', (p) => p.length)).toBe(3);
    // The names clients sent, beside the ids.
    expect(await cells(page, 'customers', 'customer_name')).toMatchObject({ c2: 'Globex Ltd', c1: '', 'acme, inc': '' });

    // Sorted by cost, largest first; one click on the heading turns it around.
    const order = () => page.$$eval('[data-table="customers"] tbody tr:not(.total)', (trs) => trs.map((r) => r.getAttribute('data-key')));
    expect(await order()).toEqual(rows.map((r) => r.group));
    await page.click('[data-table="customers"] th[data-col="total_cost"] button');
    expect(await order()).toEqual(rows.map((r) => r.group).reverse());

    const [download] = await Promise.all([page.waitForEvent('download'), page.click('[data-csv="customers"]')]);
    const csv = fs.readFileSync(await download.path(), 'utf8').trim();
    expect(csv).toBe(await cliCsv(t.dir, 'customer'));
    expect(csv).toContain('"acme, inc"');
    await page.screenshot({ path: path.join(SHOTS, 'customers.png'), fullPage: true });
    await page.context().close();
  });

  it('models: cost per model and provider, prices in force with their source, the line that prices an unpriced model', async () => {
    const page = await signedIn();
    await page.click('[data-nav="models"]');
    await page.waitForSelector('[data-page="models"]');
    const byModel = await usage(ctx, { org: 'acme', from: FROM, to: TO, by: 'model' });
    // One row per (model, provider); summed per model, exactly, they are the CLI's rows.
    const perModel = new Map<string, bigint>();
    for (const [key, cost] of Object.entries(await cells(page, 'models', 'total_cost'))) {
      const model = key === 'TOTAL' ? 'TOTAL' : key.slice(0, key.lastIndexOf('|'));
      perModel.set(model, (perModel.get(model) ?? 0n) + parseDecimal(cost));
    }
    const expected = new Map([
      ...byModel.map((r): [string, bigint] => [r.group, parseDecimal(r.costs.total_cost ?? '0')]),
      ['TOTAL', parseDecimal(usageTotals(byModel).costs.total_cost ?? '0')],
    ]);
    expect(perModel).toEqual(expected);
    const sources = await cells(page, 'models', 'price_source');
    expect(sources['gpt-4o|openai']).toMatch(/^catalog:genai-prices@/);
    expect(sources['in-house-llm|openai']).toBe('unpriced');
    const prices = await cells(page, 'models', 'input_per_mtok');
    expect(prices['gpt-4o|openai']).toBe('2.5');

    const fix = await page.textContent('[data-table="unpriced"] tr[data-key="in-house-llm|openai"] td[data-col="fix"] code');
    expect(fix).toBe('trace-ingest prices set in-house-llm --provider openai --input <USD per 1M input tokens> --output <USD per 1M output tokens>');
    expect(await page.getAttribute('[data-table="unpriced"] tr[data-key="in-house-llm|openai"] td[data-col="spans"]', 'data-value')).toBe(
      String(byModel.find((r) => r.group === 'in-house-llm')?.unpricedSpans),
    );
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('[data-csv="unpriced"]')]);
    expect(fs.readFileSync(await download.path(), 'utf8')).toContain(`in-house-llm,openai,2,trace-ingest prices set in-house-llm --provider openai`);
    await page.screenshot({ path: path.join(SHOTS, 'models.png'), fullPage: true });

    // The line works: run it with prices filled in, reprice, and the page shows the override as the source.
    const cli = (args: string[]) => runCli(args, { env: { DATA_DIR: t.dir }, out: { out: () => undefined, err: () => undefined } });
    expect(await cli(['prices', 'set', 'in-house-llm', '--provider', 'openai', '--input', '0.1', '--output', '0.4'])).toBe(0);
    expect(await cli(['reprice', '--org', 'acme', '--from', FROM, '--to', TO, '--model', 'in-house-llm'])).toBe(0);
    await page.reload();
    await page.waitForSelector('[data-page="models"]');
    expect((await cells(page, 'models', 'price_source'))['in-house-llm|openai']).toMatch(/^override:/);

    // The second catalog's word beside a disputed price: in January the priority-tier prices it lists for gpt-4o
    // were not in force (the release adopts them from its snapshot date, 2026-07-24, on); Claude Sonnet 4's
    // long-context tier was (adopted from 2025-08-12, the day Anthropic priced it), so nothing is disputed there.
    expect((await cells(page, 'models', 'second_catalog'))['gpt-4o|openai']).toMatch(
      /^⚠ litellm@8442b939a6ea\/2026-07-24: priority input 4\.25, priority output 17, priority cache read 2\.125$/,
    );
    expect((await cells(page, 'models', 'second_catalog'))['claude-sonnet-4-20250514|anthropic']).toBe('');
    expect(await page.$('[data-table="unpriced"] tr[data-key="in-house-llm|openai"]')).toBeNull();
    await page.context().close();
  });

  it('trace view: a waterfall of the spans with the cost of each', async () => {
    const page = await signedIn();
    await page.click('[data-nav="traces"]');
    await page.waitForSelector('[data-page="traces"]');
    const byTrace = await usage(ctx, { org: 'acme', from: FROM, to: TO, by: 'trace' });
    const traceCosts = await cells(page, 'traces', 'total_cost');
    for (const r of byTrace) expect(traceCosts[r.group]).toBe(r.costs.total_cost);
    // Each trace with its name and customer.
    expect(await cells(page, 'traces', 'trace_name')).toMatchObject({ 'agent-run-14': 'support agent', 'agent-run-13': 'support agent' });
    expect(await cells(page, 'traces', 'customer')).toMatchObject({ 'agent-run-14': 'c1', 'agent-run-13': 'acme, inc', 'batch-12': 'c2' });
    await page.click('[data-table="traces"] a:text("agent-run-14")');
    await page.waitForSelector('[data-page="trace"]');
    expect(await page.$$eval('[data-waterfall] li', (li) => li.map((l) => l.getAttribute('data-span')))).toEqual(['root-14', 'plan-14', 'tool-14', 'write-14']);
    const stored = await t.spans("SELECT span_id, CAST(total_cost AS VARCHAR) AS c FROM spans WHERE trace_id = 'agent-run-14'");
    const spanCosts = await cells(page, 'trace-spans', 'cost');
    for (const s of stored) expect(spanCosts[String(s.span_id)]).toBe(formatDecimal(parseDecimal(String(s.c))));
    // The tokens of every priced bucket are shown, so they account for each span's cost.
    expect(await cells(page, 'trace-spans', 'cached_input_tokens')).toMatchObject({ 'plan-14': '300' });
    expect(await cells(page, 'trace-spans', 'cache_write_input_tokens')).toMatchObject({ 'write-14': '500' });
    expect(Object.keys(await cells(page, 'trace-spans', 'reasoning_tokens'))).toContain('plan-14');
    expect(await page.getAttribute('[data-trace-total]', 'title')).toBe(`$${byTrace.find((r) => r.group === 'agent-run-14')?.costs.total_cost} (exact)`);
    // Bars are placed by start time: the tool call starts after the planning call ends.
    const lefts = await page.$$eval('[data-waterfall] .wf-bar', (bars) =>
      bars.map((b) => parseFloat((b as unknown as { style: { left: string } }).style.left)),
    );
    expect(lefts[0]).toBe(0);
    expect(lefts[2]).toBeGreaterThan(lefts[1] ?? 0);
    await page.screenshot({ path: path.join(SHOTS, 'trace.png'), fullPage: true });
    await page.context().close();
  });

  it('is readable on a phone, every cost on screen and whole', async () => {
    const page = await signedIn({ width: 390, height: 844 });
    const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
    expect(overflow).toBeLessThanOrEqual(0);
    /** Each money cell of the table: inside the viewport, showing what its title says, rounded to its column's precision. */
    const costsVisible = async (table: string) => {
      const cells = await page.$$eval(`[data-table="${table}"] td.money`, (tds) =>
        tds.map((td) => {
          const box = td.getBoundingClientRect();
          const text = (td.firstChild?.textContent ?? '').trim();
          return {
            visible: box.width > 0 && box.right <= (globalThis as unknown as { innerWidth: number }).innerWidth + 1,
            text,
            value: td.getAttribute('data-value') ?? '',
            col: td.getAttribute('data-col') ?? '',
          };
        }),
      );
      expect(cells.length).toBeGreaterThan(0);
      // One precision per column.
      const inColumn = (col: string) => cells.filter((c) => c.col === col && c.value !== '').map((c) => c.value);
      for (const c of cells.filter((x) => x.value !== ''))
        expect(c).toEqual({ visible: true, text: usd(c.value, sharedDecimals(inColumn(c.col))), value: c.value, col: c.col });
    };
    await costsVisible('overview-models');
    await page.screenshot({ path: path.join(SHOTS, 'overview-phone.png'), fullPage: true });
    for (const [nav, table] of [
      ['customers', 'customers'],
      ['traces', 'traces'],
      ['models', 'models'],
    ] as const) {
      await page.click(`[data-nav="${nav}"]`);
      await page.waitForSelector(`[data-page="${nav}"]`);
      await costsVisible(table);
      await page.screenshot({ path: path.join(SHOTS, `${nav}-phone.png`), fullPage: true });
    }
    await page.context().close();
  });

  it('answers every console path of the OpenAPI document with the fields it documents', async () => {
    const doc = buildOpenApiDocument() as {
      paths: Record<string, { get: { responses: { '200': { content: { 'application/json': { schema: { $ref: string } } } } } } }>;
      components: { schemas: Record<string, { required?: string[] }> };
    };
    const paths = Object.keys(doc.paths).filter((p) => p.startsWith('/console/api/'));
    expect(paths.length).toBe(6);
    for (const p of paths) {
      const url = `http://127.0.0.1:${t.server.consolePort}${p.replace('{traceId}', 'agent-run-12')}?org=acme&from=${FROM}&to=${TO}`;
      const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status, p).toBe(200);
      const name = doc.paths[p]?.get.responses['200'].content['application/json'].schema.$ref.split('/').pop() ?? '';
      const body = (await res.json()) as Record<string, unknown>;
      for (const field of doc.components.schemas[name]?.required ?? []) expect(body, `${p} ${field}`).toHaveProperty(field);
    }
  });

  it('stops answering a revoked token on its next request', async () => {
    const own = await createConsoleToken(ctx, { name: 'short-lived', org: 'acme' });
    const api = `http://127.0.0.1:${t.server.consolePort}/console/api`;
    const get = (p: string) => fetch(`${api}/${p}`, { headers: { authorization: `Bearer ${own.token}` } });
    expect((await get('orgs')).status).toBe(200);
    expect(((await (await get('orgs')).json()) as { orgs: { name: string }[] }).orgs.map((o) => o.name)).toEqual(['acme']);
    // An org-limited token cannot read another org.
    expect((await get('overview?org=other-org')).status).toBe(404);
    await revokeConsoleToken(ctx, own.prefix);
    expect((await get('orgs')).status).toBe(401);
  });

  it("shows this month's spend against the org's and each customer's budget", async () => {
    await setBudget(ctx, { org: 'acme', monthlyUsd: '250', alertAt: '80,100' });
    await setBudget(ctx, { org: 'acme', customer: 'c1', monthlyUsd: '19.99', alertAt: '100' });
    const page = await signedIn();
    const kpi = await page.waitForSelector('[data-kpi="budget"] [data-budget]');
    // The spans of this test started in January 2026: nothing is spent this month.
    expect(await kpi.getAttribute('data-budget')).toBe('0/250');
    expect(await kpi.textContent()).toContain('$0.00 of $250.00 this month (0%)');
    await page.click('[data-nav="customers"]');
    await page.waitForSelector('[data-page="customers"]');
    const bars = await page.$$eval('[data-table="customers"] tbody tr:not(.total)', (trs) =>
      Object.fromEntries(trs.map((r) => [r.getAttribute('data-key'), r.querySelector('[data-budget]')?.getAttribute('data-budget') ?? null])),
    );
    expect(bars).toEqual({ c1: '0/19.99', c2: null, 'acme, inc': null });
    await page.screenshot({ path: path.join(SHOTS, 'budgets.png'), fullPage: true });
    await page.context().close();
  });
  it('fits at 1280 px and at 390 px: every column, money figure, budget bar, forecast and customer on screen; one precision per money column', async () => {
    // A customer with a long id in the range, and spend of yesterday and today, so this month has a forecast.
    const { key } = await t.newKey('acme');
    const longCustomer = 'customer-with-a-rather-long-identifier-from-the-crm-0001';
    const now = Date.now();
    const recent = [now - 86_400_000, now - 1000].map((t0, i) =>
      makeTrace({
        traceId: `recent-${i}`,
        customer: { id: 'c1' },
        spans: [makeSpan({ spanId: 'r', startTime: t0, endTime: t0 + 500, provider: 'openai', modelId: 'gpt-4o', usage: { inputTokens: 2_000_000 } })],
      }),
    );
    const long = makeTrace({
      traceId: 'long-customer-trace',
      customer: { id: longCustomer },
      spans: [
        makeSpan({ spanId: 'l', startTime: day(15), endTime: day(15) + 900, provider: 'openai', modelId: 'gpt-4o', usage: { inputTokens: 700 } }),
        // Unpriced: the models page shows the command lines that price it.
        makeSpan({
          spanId: 'u',
          startTime: day(15),
          endTime: day(15) + 90,
          provider: 'acme-labs',
          modelId: 'acme-internal-summarizer-v2',
          usage: { inputTokens: 9 },
        }),
      ],
    });
    expect((await t.post({ version: 'v1', traces: [...recent, long] }, { key })).status).toBe(202);
    await t.server.flush();
    const api = `http://127.0.0.1:${t.server.consolePort}/console/api`;
    const get = async <T>(p: string) => (await (await fetch(`${api}/${p}`, { headers: { authorization: `Bearer ${token}` } })).json()) as T;
    const overview = await get<{ forecast: { projectedUsd: string } | null }>(`overview?org=acme&from=${FROM}&to=${TO}`);
    expect(overview.forecast?.projectedUsd).toMatch(/^\d/);
    const customers = await get<{ forecasts: Record<string, { projectedUsd: string }> }>(`customers?org=acme&from=${FROM}&to=${TO}`);
    expect(Object.keys(customers.forecasts)).toContain('c1');

    const pages = ['overview', 'customers', 'models', 'traces', 'trace/agent-run-14'];
    for (const viewport of [
      { width: 1280, height: 900 },
      { width: 390, height: 844 },
    ]) {
      const page = await signedIn(viewport);
      for (const p of pages) {
        const name = p.split('/')[0] ?? p;
        await page.goto(`${consoleUrl}#/${p}?org=acme&from=${FROM}&to=${TO}`);
        await page.waitForSelector(`[data-page="${name}"]`);
        await page.waitForSelector('main[aria-busy="false"]');
        const where = `${name} at ${viewport.width} px`;
        const layout = await page.evaluate<Layout>(`${LAYOUT_PROBE}\nprobeLayout()`);
        expect(layout.overflow, where).toBeLessThanOrEqual(0);
        expect(layout.scrolling, where).toBe(0);
        expect(layout.offScreen, where).toEqual([]);
        expect(
          layout.budgets.every((b) => b),
          where,
        ).toBe(true);
        expect(layout.stretched, where).toEqual([]);
        expect(layout.brokenWords, where).toEqual([]);
        // Every column at 1280 px; on a phone only token counts and such may go, never money, customers or traces.
        if (viewport.width === 1280) expect(layout.hiddenCols, where).toEqual([]);
        for (const c of ['total_cost', 'customer', 'group', 'trace_id', 'budget', 'projected', 'cost', 'input_per_mtok', 'price_source'])
          expect(layout.hiddenCols, `${where}: ${c}`).not.toContain(c);
        for (const m of layout.money) {
          const values = m.cells.map((c) => c.value).filter((v) => v !== '');
          const d = sharedDecimals(values);
          for (const c of m.cells) {
            expect(c.visible, `${where} ${m.table}.${m.col}`).toBe(true);
            if (c.value !== '') expect(c.text, `${where} ${m.table}.${m.col}`).toBe(usd(c.value, d));
          }
          expect(new Set(m.cells.filter((c) => c.value !== '').map((c) => c.text.split('.')[1]?.length)).size, `${where} ${m.table}.${m.col}`).toBe(1);
        }
        if (name === 'overview') expect(await page.getAttribute('[data-kpi="forecast"] .kpi-value', 'data-value'), where).toBe(overview.forecast?.projectedUsd);
        if (name === 'models') expect(await page.$$eval('.fix code', (c) => c.length), where).toBeGreaterThanOrEqual(2);
        if (name === 'customers') {
          expect(await cells(page, 'customers', 'projected'), where).toMatchObject({ c1: customers.forecasts.c1?.projectedUsd });
          expect(await page.$$eval('[data-table="customers"] td[data-col="group"]', (tds) => tds.map((td) => td.textContent))).toContain(longCustomer);
        }
        await page.screenshot({ path: path.join(SHOTS, `${name}-${viewport.width}.png`), fullPage: true });
      }
      await page.context().close();
    }
  });
});

describe('console API on ClickHouse', () => {
  let t: TestServer;
  let ctx: CliContext;
  let token: string;
  let store: ClickHouseSpanStore;
  beforeAll(async () => {
    const url = `${inject('clickhouseHttpUrl').replace('http://', 'http://default:@')}/ti_console_${randomBytes(4).toString('hex')}`;
    store = new ClickHouseSpanStore({ url });
    t = await startTestServer({ CONSOLE_PORT: '0', CLICKHOUSE_URL: url }, { spanStore: store });
    const { key } = await t.newKey('acme');
    for (const b of batches()) expect((await t.post(b, { key })).status).toBe(202);
    await t.server.flush();
    // The rollups are derived in the background: every figure below is read once they hold every span.
    await store.settle();
    ctx = createContext(loadConfig({ DATA_DIR: t.dir, CLICKHOUSE_URL: url }));
    token = (await createConsoleToken(ctx, {})).token;
  });
  afterAll(async () => {
    await ctx?.close();
    await t?.close();
  });

  it('answers the same figures as `trace-ingest usage`', async () => {
    const get = async <T>(p: string): Promise<T> => {
      const res = await fetch(`http://127.0.0.1:${t.server.consolePort}/console/api/${p}`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      return (await res.json()) as T;
    };
    const q = `org=acme&from=${FROM}&to=${TO}`;
    const customers = await get<{ rows: UsageRow[]; total: UsageRow; daily: Record<string, string[]> }>(`customers?${q}`);
    expect(customers.rows).toEqual(await usage(ctx, { org: 'acme', from: FROM, to: TO, by: 'customer' }));
    expect(customers.daily.c2).toHaveLength(7);
    const overview = await get<{ rows: UsageRow[]; series: { day: string; model: string; spans: number; cost: string }[] }>(`overview?${q}`);
    expect(overview.rows).toEqual(await usage(ctx, { org: 'acme', from: FROM, to: TO, by: 'model' }));
    // The charts' series: spans and cost per day and model, as the report by day then model has them.
    const orgId = (await t.keys.getOrg('acme'))?.id ?? '';
    const byDayModel = await usageReport(store, { orgId, from: Date.parse(FROM), to: Date.parse(TO) + 86_400_000, by: 'day', then: 'model' });
    const bySeries = (a: { day: string; model: string }, b: { day: string; model: string }) => (a.day + a.model < b.day + b.model ? -1 : 1);
    expect(overview.series.length).toBeGreaterThan(7);
    expect([...overview.series].sort(bySeries)).toEqual(
      byDayModel.map((r) => ({ day: r.group, model: r.subgroup ?? '', spans: r.spans, cost: r.costs.total_cost })).sort(bySeries),
    );
    const trace = await get<{ spans: { spanId: string }[]; totalCost: string }>('traces/agent-run-12?org=acme');
    expect(trace.spans.map((s) => s.spanId)).toEqual(['root-12', 'plan-12', 'tool-12', 'write-12']);
    const byTrace = await usage(ctx, { org: 'acme', from: FROM, to: TO, by: 'trace' });
    expect(trace.totalCost).toBe(byTrace.find((r) => r.group === 'agent-run-12')?.costs.total_cost);

    // The traces list reads only the most expensive ones, and counts them all.
    const window = { orgId: (await t.keys.getOrg('acme'))?.id ?? '', from: Date.UTC(2026, 0, 10), to: Date.UTC(2026, 0, 17) };
    expect(await usageReport(store, { ...window, by: 'trace', limit: 3 })).toEqual(byTrace.slice(0, 3));
    expect(await countGroups(store, { ...window, by: 'trace' })).toBe(10);
    const traces = await get<{ rows: UsageRow[]; count: number; total: UsageRow }>(`traces?${q}`);
    expect(traces.count).toBe(10);
    expect(traces.rows).toEqual(byTrace);
    expect(traces.total.costs.total_cost).toBe(usageTotals(byTrace).costs.total_cost);
  });
});
