// npm run bench -- --derive [--days 300000,1000000] [--appends 5] [--append-rows 5000]   (CLICKHOUSE_URL)
//
// The ClickHouse derivation on one busy day: spans with realistic 1-3 KB texts (10 a trace, the
// trace's customer and session on every span) loaded into one day of a fresh database on the server
// of CLICKHOUSE_URL, then at each --days size: a flush of --append-rows new spans into that day,
// and the wall time of the derivation passes until every derived table agrees again (what a reader
// waits after a flush before the rollups show it), --appends times; with each statement's time
// when it took over 200 ms. The derivation derives each changed (org, day) whole, so these figures
// grow with the day: this benchmark is what a change to that shape is measured by.
import { spanToRow, UNPRICED } from '@trace-ingest/shared/rows';
import { URLSearchParams } from 'node:url';
import { applyClickHouseMigrations, needsUnquotedCosts, unquoteCosts } from '@trace-ingest/store/clickhouse';
import { weighted } from '@trace-ingest/store/clickhouse-rollups';
import { ClickHouseDeriver, InProcessLease } from '@trace-ingest/store/clickhouse-derive';
import { prng } from './workloads.js';

function options(argv) {
  const o = { days: [300_000, 1_000_000], appends: 5, appendRows: 5000 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--derive') continue;
    else if (a === '--days') o.days = argv[++i].split(',').map(Number);
    else if (a === '--appends') o.appends = Number(argv[++i]);
    else if (a === '--append-rows') o.appendRows = Number(argv[++i]);
    else throw new Error(`unknown argument "${a}" (derive: --days a,b --appends n --append-rows n)`);
  }
  if (o.days.some((n) => !(n > 0)) || !(o.appends > 0) || !(o.appendRows > 0)) throw new Error('--days, --appends and --append-rows take positive numbers');
  return o;
}

const o = options(process.argv.slice(2));
if (process.env.CLICKHOUSE_URL === undefined) throw new Error('--derive needs CLICKHOUSE_URL (a ClickHouse server; a database of its own is made there)');
const server = new URL(process.env.CLICKHOUSE_URL);
const auth =
  server.username === ''
    ? {}
    : { authorization: `Basic ${Buffer.from(`${decodeURIComponent(server.username)}:${decodeURIComponent(server.password)}`).toString('base64')}` };
const base = `${server.protocol}//${server.host}/`;
const DB = `bench_derive_${Date.now()}`;

async function post(sql, settings = {}, inDb = true) {
  const params = new URLSearchParams({ ...(inDb ? { database: DB } : {}), output_format_json_quote_64bit_integers: '0', ...settings });
  const res = await fetch(`${base}?${params}`, { method: 'POST', body: sql, headers: auth });
  const text = await res.text();
  if (!res.ok) throw new Error(`ClickHouse: ${text.slice(0, 400)}`);
  return text;
}
const rowsOf = (text) =>
  text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l));
const query = async (sql) => rowsOf(await post(`${sql} FORMAT JSONEachRow`));
const slow = [];
const command = async (sql) => {
  const t = performance.now();
  await post(sql);
  const ms = performance.now() - t;
  if (ms > 200) slow.push({ ms, sql: sql.replace(/\s+/g, ' ').slice(0, 60) });
};

const version = (await post('SELECT version()', {}, false)).trim();
const unquote = needsUnquotedCosts(version);
await post(`CREATE DATABASE ${DB}`, {}, false);
await applyClickHouseMigrations(
  {
    command: async ({ query: q, clickhouse_settings }) => post(q, clickhouse_settings ?? {}),
    query: async ({ query: q }) => ({ json: async () => rowsOf(await post(`${q} FORMAT JSONEachRow`)) }),
  },
  DB,
);

const WORDS = 'the model answered with a short summary of the tool results and a plan for the next step'.split(' ');
const rand = prng(7);
const text = (chars) => {
  let out = '';
  while (out.length < chars) out += WORDS[Math.floor(rand() * WORDS.length)] + ' ';
  return out.slice(0, chars);
};
const DAY = Date.UTC(2026, 5, 10);
const ORG = 'org_bench';
const PER_TRACE = 10;
let traces = 0;

/** `n` new spans in the day, 10 a trace, inserted 5,000 lines at a time as a flusher would. */
async function append(n) {
  let batch = [];
  const flush = async () => {
    if (batch.length === 0) return;
    const lines = batch.join('\n');
    await post(`INSERT INTO spans FORMAT JSONEachRow\n${unquote ? unquoteCosts(lines) : lines}`);
    batch = [];
  };
  for (let made = 0; made < n; made += PER_TRACE) {
    const t = traces++;
    const trace = { traceId: `bt-${t}`, sessionId: `sess-${t % 5000}`, customer: { id: `cust-${t % 300}`, name: `Customer ${t % 300}` }, spans: [] };
    for (let i = 0; i < PER_TRACE; i++) {
      const start = DAY + Math.floor(rand() * 86_000_000);
      trace.spans.push({
        spanId: `s${i}`,
        ...(i > 0 ? { parentSpanId: 's0' } : {}),
        spanType: 'llm',
        name: `step-${i}`,
        startTime: start,
        endTime: start + 1000,
        provider: 'openai',
        modelId: ['gpt-4o', 'gpt-4o-mini', 'claude-sonnet-4'][t % 3],
        usage: { inputTokens: 100 + (t % 50), outputTokens: 20 },
        input: text(1000 + Math.floor(rand() * 2000)),
        output: text(1000 + Math.floor(rand() * 2000)),
      });
    }
    for (const s of trace.spans) batch.push(weighted(spanToRow(trace, s, { orgId: ORG, keyPrefix: 'ti_bench', receivedAt: Date.now() }, UNPRICED), 1));
    if (batch.length >= 5000) await flush();
  }
  await flush();
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const deriver = new ClickHouseDeriver({ query, command }, new InProcessLease());
const results = [];
let stored = 0;
try {
  for (const size of o.days) {
    const t0 = performance.now();
    await append(size - stored);
    stored = size;
    console.error(`  derive: ${size} spans in the day (${((performance.now() - t0) / 1000).toFixed(0)} s to load)`);
    await deriver.settle(50);
    const passes = [];
    const statements = new Map();
    for (let r = 0; r < o.appends; r++) {
      await append(o.appendRows);
      stored += o.appendRows;
      slow.length = 0;
      const t = performance.now();
      await deriver.settle(50);
      passes.push(performance.now() - t);
      for (const s of slow) statements.set(s.sql, [...(statements.get(s.sql) ?? []), s.ms]);
    }
    results.push({ size, passes, statements });
    console.error(`  derive: day of ${size}: ${passes.map((p) => Math.round(p)).join(', ')} ms`);
  }
} finally {
  await post(`DROP DATABASE IF EXISTS ${DB}`, {}, false);
}

console.log(`derivation after a flush of ${o.appendRows} spans into one busy day (ClickHouse ${version}; medians of ${o.appends})`);
for (const r of results) {
  console.log(`  day of ${r.size.toLocaleString('en')} spans: ${Math.round(median(r.passes)).toLocaleString('en')} ms until every derived table agrees`);
  for (const [sql, ms] of [...r.statements].sort((a, b) => median(b[1]) - median(a[1])))
    console.log(`    ${Math.round(median(ms)).toLocaleString('en').padStart(7)} ms  ${sql}`);
}
