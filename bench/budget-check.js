// npm run bench -- --budget-check [--rows 300000] [--runs 9]
// With CLICKHOUSE_URL set, the same against ClickHouse (one database per run, dropped afterwards).
//
// What one budget check reads, before and after forecasts and anomaly alerts, side by side on the
// same store: realistic rows (as the growth benchmark: 200 customers by a Zipf-like draw, 30
// models, 90 days before today) loaded through insertLines, then, medians of --runs:
//   - before: the month's spend by customer (usageReport, what a check read alone);
//   - after: the month, today and the 14 days before by customer in one read (readSpend), which
//     every check reads now; the same by model (read again at most every 12th check, when spend
//     moved); the org's daily cost of the three months before (readHistory, once a UTC day);
//   - for comparison, the month and today as two reports (usageReport): what one read replaces.
// Wall ms and CPU ms of this process (every thread of DuckDB's; ClickHouse's work is on its
// server, so its CPU here is the client's). Nothing is asserted; figures go to stdout.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { root } from './procs.js';
import { median } from './report.js';
import { prng } from './workloads.js';
import { traces } from './realistic.js';

const DAY = 86_400_000;

function options(argv) {
  const o = { rows: 300_000, runs: 9 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--budget-check') continue;
    else if (a === '--rows') o.rows = Number(argv[++i]);
    else if (a === '--runs') o.runs = Number(argv[++i]);
    else throw new Error(`unknown argument "${a}" (budget-check: --rows n --runs n)`);
  }
  if (!(o.rows > 0) || !(o.runs > 0)) throw new Error('--rows and --runs take positive numbers');
  return o;
}

/** Median wall and CPU ms of `runs` calls, after one call not counted (caches warm). */
async function measure(fn, runs) {
  await fn();
  const wall = [];
  const cpu = [];
  for (let i = 0; i < runs; i++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await fn();
    wall.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
  }
  return { wallMs: median(wall), cpuMs: median(cpu) };
}

async function main() {
  const o = options(process.argv.slice(2));
  const { DuckDbSpanStore } = await import(path.join(root, 'packages/store/dist/duckdb.js'));
  const { ClickHouseSpanStore } = await import(path.join(root, 'packages/store/dist/clickhouse.js'));
  const { payloadToRows, encodeLine } = await import(path.join(root, 'packages/shared/dist/rows.js'));
  const { PriceEngine } = await import(path.join(root, 'packages/shared/dist/price-engine.js'));
  const { usageReport } = await import(path.join(root, 'packages/store/dist/reports.js'));
  const { readHistory, readSpend } = await import(path.join(root, 'packages/store/dist/forecast.js'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-budget-check-'));
  const chUrl = process.env.CLICKHOUSE_URL?.replace(/\/[^/]*$/, `/budget_check_${Date.now()}`);
  const store = chUrl
    ? new ClickHouseSpanStore({ url: chUrl })
    : new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb'), threads: 1, memoryLimit: '1GiB' });
  await store.start();
  try {
    const orgId = 'org_bench';
    const engine = await PriceEngine.create({});
    const end = Math.floor(Date.now() / DAY) * DAY + DAY - 1;
    const source = traces(o.rows, end, prng(42));
    let stored = 0;
    const t0 = performance.now();
    while (stored < o.rows) {
      const lines = [];
      for (let n = 0; n < 5000 && stored + lines.length < o.rows;) {
        const { value: trace, done } = source.next();
        if (done) break;
        for (const r of payloadToRows({ version: 'v1', traces: [trace] }, { orgId, keyPrefix: 'ti_bench', receivedAt: Date.now() }, (s) =>
          engine.price(s, orgId),
        )) {
          lines.push(encodeLine(r));
          n++;
        }
      }
      if (lines.length === 0) break;
      await store.insertLines(Buffer.from(lines.join('\n') + '\n'), lines.length);
      stored += lines.length;
    }
    console.log(`${store.kind}: ${stored.toLocaleString('en-US')} rows over 90 days loaded in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    const now = Date.now();
    const d = new Date(now);
    const month = { orgId, from: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1), to: Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1), by: 'customer' };
    const today = Math.floor(now / DAY) * DAY;
    const rows = [
      ['before: the month by customer (every check)', () => usageReport(store, month)],
      ['after: month, today, 14 days by customer (every check)', () => readSpend(store, orgId, now, 'customer')],
      ['after: the same by model (at most every 12th check)', () => readSpend(store, orgId, now, 'model')],
      ['after: 3 months of daily cost (once a UTC day)', () => readHistory(store, orgId, now)],
      [
        'not taken: the month and today as two reports',
        () => Promise.all([usageReport(store, month), usageReport(store, { ...month, from: today, to: today + DAY })]),
      ],
    ];
    const out = [];
    for (const [name, fn] of rows) out.push({ read: name, ...(await measure(fn, o.runs)) });
    console.table(out.map((r) => ({ read: r.read, 'wall ms': r.wallMs.toFixed(1), 'CPU ms': r.cpuMs.toFixed(1) })));
    const per = out[1].cpuMs + out[2].cpuMs / 12;
    console.log(`CPU per check: before ${out[0].cpuMs.toFixed(1)} ms, after ${per.toFixed(1)} ms (${(per / out[0].cpuMs).toFixed(2)}x)`);
  } finally {
    if (chUrl) await store.query(`DROP DATABASE IF EXISTS ${store.database}`).catch(() => undefined);
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

await main();
