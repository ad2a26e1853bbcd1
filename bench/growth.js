// npm run bench -- --growth [--rows 1000000,10000000] [--batch 5000] [--keep] [--busy-day [--load-seconds 15] [--load-rate <spans/s>]] | --growth --reuse <dir>
// With CLICKHOUSE_URL set, the same against ClickHouse (one database per run, dropped afterwards).
//
// Does ingest and reporting stay flat as the store grows? Loads realistic rows (200 customers
// by a Zipf-like draw, 30 models over 6 providers, 90 days of start times in time order, ~5
// spans per trace, 1-3 KB input and output text on llm spans, priced by the real catalog)
// through the span store's own insert path (the flusher's: insertLines), and at 0 rows and at
// each --rows checkpoint measures, on the same store:
//   - insert (flush) cost per row: wall and CPU µs, median of the 20 inserts after the checkpoint (at the last one,
//     also of 20 more after closing and opening the store again: what the size costs apart from the loading process's state);
//   - the first ranking by trace and by session after the load (it rebuilds the top lists of the days the load changed);
//   - every `usage --by` grouping over 90 days, through the running server's admin socket (what
//     `trace-ingest usage` calls, without the CLI's ~0.3 s of start-up);
//   - every console endpoint over 90 days, and one trace's waterfall, over HTTP;
//   - `trace-ingest reprice` of the 30 days before the newest span (the CLI process, server stopped): time and peak RSS;
//   - the server's RSS after the reads, and the store's bytes on disk.
// --reuse <dir> measures the reads (and reprice) again on a DuckDB store kept by --keep, without loading:
// what a change to the read path does at 10M rows, in minutes instead of an hour.
// --busy-day: every row starts today, before now (a busy install's shape), and the reads are made for
// today, this month and the 90 days, each ending now (no reprice); then GET /v1/budget, and realistic
// bodies (`large`, starting now) through POST /ingest on 4 connections for --load-seconds (15): spans/s
// acknowledged and the share answered 503 (the write log full while the store catches up), with today's
// console pages read once a second meanwhile (median and slowest of each). --load-rate holds the load at a
// fixed rate of spans a second (an open loop) instead of as fast as 4 connections go: the rate it sustains.
// Times are medians of 3. Nothing is asserted; the table goes to stdout and the figures to
// bench/results/growth-<timestamp>.json.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { cli, freePort, memoryOf, root, rssSampler, runLoad, sleep, waitReady } from './procs.js';
import { prng } from './workloads.js';
import { traces } from './realistic.js';

const SERVER = path.join(root, 'packages/server/bin/trace-ingest-server.js');
const CLI = path.join(root, 'packages/cli/bin/trace-ingest.js');
const DAY = 86_400_000;
const GROUPS = ['customer', 'model', 'provider', 'day', 'span-type', 'trace', 'session', 'workflow'];

function options(argv) {
  const o = { rows: [1_000_000, 10_000_000], batch: 5000, keep: false, reuse: undefined, busyDay: false, loadSeconds: 15 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--growth') continue;
    else if (a === '--keep') o.keep = true;
    else if (a === '--busy-day') o.busyDay = true;
    else if (a === '--rows') o.rows = argv[++i].split(',').map(Number);
    else if (a === '--batch') o.batch = Number(argv[++i]);
    else if (a === '--load-seconds') o.loadSeconds = Number(argv[++i]);
    else if (a === '--load-rate') o.loadRate = Number(argv[++i]);
    else if (a === '--reuse') o.reuse = argv[++i];
    else throw new Error(`unknown argument "${a}" (growth: --rows a,b --batch n --keep --busy-day --load-seconds n --load-rate n, or --reuse <dir>)`);
  }
  if (o.rows.some((n) => !(n > 0)) || !(o.batch > 0)) throw new Error('--rows and --batch take positive numbers');
  o.rows.sort((a, b) => a - b);
  return o;
}

async function adminPost(socketPath, route, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: route, method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let out = '';
      res.on('data', (c) => (out += c));
      res.on('end', () => (res.statusCode === 200 ? resolve(JSON.parse(out)) : reject(new Error(`${route}: ${res.statusCode} ${out.slice(0, 300)}`))));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function timed(fn, runs = 3) {
  const ms = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await fn();
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

function diskBytes(dir) {
  let total = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    total += e.isDirectory() ? diskBytes(p) : fs.statSync(p).size;
  }
  return total;
}

async function main() {
  const o = options(process.argv.slice(2));
  const { DuckDbSpanStore } = await import(path.join(root, 'packages/store/dist/duckdb.js'));
  const { ClickHouseSpanStore } = await import(path.join(root, 'packages/store/dist/clickhouse.js'));
  const { payloadToRows, encodeLine } = await import(path.join(root, 'packages/shared/dist/rows.js'));
  const { PriceEngine } = await import(path.join(root, 'packages/shared/dist/price-engine.js'));
  const { adoptionsInForce } = await import(path.join(root, 'packages/store/dist/pricing.js'));
  if (o.reuse !== undefined && (process.env.CLICKHOUSE_URL || !fs.existsSync(path.join(o.reuse, 'spans.duckdb'))))
    throw new Error(`--reuse takes a data dir kept by --keep of a DuckDB run (${o.reuse} has no spans.duckdb)`);
  const dir = o.reuse ?? fs.mkdtempSync(path.join(os.tmpdir(), 'ti-growth-'));
  const run = `growth_${Date.now()}`;
  const env = { DATA_DIR: dir, LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' };
  if (process.env.CLICKHOUSE_URL) env.CLICKHOUSE_URL = process.env.CLICKHOUSE_URL.replace(/\/[^/]*$/, `/${run}`);
  const kind = env.CLICKHOUSE_URL ? 'clickhouse' : 'duckdb';
  if (o.reuse === undefined) {
    // A plan without practical limits: the busy day's HTTP load measures backpressure (503), not a quota's 429.
    cli(env, 'plans', 'create', 'bench', '--monthly-spans', '1000000000000', '--rate-limit', '1000000');
    cli(env, 'orgs', 'create', 'bench', '--plan', 'bench');
  }
  const orgId = JSON.parse(cli(env, 'orgs', 'list', '--json')).find((x) => x.name === 'bench').id;
  const { key } = JSON.parse(cli(env, 'keys', 'create', '--org', 'bench', '--scope', 'ingest,budget:read', '--json'));
  const { token } = JSON.parse(cli(env, 'console', 'token', 'create', '--org', 'bench', '--json'));
  // Priced as the server prices (the release's adopted prices included), so the reprice measured changes nothing.
  const engine = await PriceEngine.create({ adoptions: adoptionsInForce([]) });
  const price = (span) => engine.price(span, orgId);
  const openStore = async () => {
    const s =
      kind === 'clickhouse'
        ? new ClickHouseSpanStore({ url: env.CLICKHOUSE_URL })
        : new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb'), threads: 1, memoryLimit: '1GiB' });
    await s.start();
    return s;
  };

  const now = Date.now();
  const today = Math.floor(now / DAY) * DAY;
  // The busy day's rows start today, up to a minute before the run began.
  const end = o.busyDay ? now - 60_000 : today;
  const from = end - 90 * DAY;
  const monthStart = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), 1);
  // The ranges read: the 90 days before today; or today, this month and 90 days, each up to the time of
  // the read (the HTTP load of an earlier checkpoint wrote rows after the run began: a range ending at
  // the run's start would be cut inside today, with rows after the cut).
  const rangesAt = (t) =>
    o.busyDay
      ? [
          { name: 'today', from: today, to: t + 1 },
          { name: 'month', from: monthStart, to: t + 1 },
          { name: '90 days', from: t - 90 * DAY, to: t + 1 },
        ]
      : [{ name: '', from, to: end }];
  const rand = prng(42);
  // Beyond the last checkpoint: the 40 inserts measured there.
  const total = o.rows.at(-1) + 41 * o.batch;
  const source = traces(total, end, rand, o.busyDay ? end - today : 90 * DAY);
  let store = await openStore();
  let stored = 0;
  let sampleTrace = '';
  // The start of the newest trace stored: the month repriced is the 30 days before it.
  let lastStart = 0;
  const results = [];
  const loadStart = performance.now();

  /** Inserts one batch as the flusher would; returns its wall and CPU µs per row. */
  const insertBatch = async () => {
    const lines = [];
    let n = 0;
    while (n < o.batch && stored + n < total) {
      const { value: trace, done } = source.next();
      if (done) break;
      if (sampleTrace === '' && stored > o.batch) sampleTrace = trace.traceId;
      lastStart = trace.spans[0].startTime;
      for (const r of payloadToRows({ version: 'v1', traces: [trace] }, { orgId, keyPrefix: 'ti_bench', receivedAt: Date.now() }, price)) {
        lines.push(encodeLine(r));
        n++;
      }
    }
    if (n === 0) return undefined;
    const buf = Buffer.from(lines.join('\n') + '\n');
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await store.insertLines(buf, n);
    const wall = performance.now() - t0;
    const c = process.cpuUsage(c0);
    stored += n;
    return { wallUs: (wall * 1000) / n, cpuUs: (c.user + c.system) / n };
  };

  /** The costs of the next 20 inserts. */
  const twentyInserts = async () => {
    const flush = [];
    for (let i = 0; i < 20; i++) {
      const f = await insertBatch();
      if (f !== undefined) flush.push(f);
    }
    return flush;
  };

  const measureReads = async () => {
    await store.close();
    const port = await freePort();
    const consolePort = await freePort();
    const server = spawn(process.execPath, [SERVER], {
      env: { ...process.env, ...env, PORT: String(port), METRICS_PORT: '0', HOST: '127.0.0.1', CONSOLE_PORT: String(consolePort), DRAIN_GRACE_MS: '0' },
      stdio: ['ignore', fs.openSync(path.join(dir, `server-${stored}.log`), 'a'), 'inherit'],
    });
    const exited = new Promise((r) => server.once('exit', r));
    const figures = { usage: {}, console: {}, firstRanking: {}, errors: [] };
    // A read that fails is reported and the run goes on (the server's log is kept beside the store).
    const timedOr = async (what, fn, runs) => {
      try {
        return await timed(fn, runs);
      } catch (e) {
        figures.errors.push(`${what}: ${e.message}`);
        console.error(`  growth: ${what} failed: ${e.message}`);
        return NaN;
      }
    };
    try {
      await waitReady(`http://127.0.0.1:${port}`, server);
      const sock = path.join(dir, 'admin.sock');
      // The first ranking after a load also rebuilds the top lists of the days the load changed (DuckDB).
      const ranges = rangesAt(Date.now());
      const r0 = ranges[0];
      for (const by of ['trace', 'session'])
        figures.firstRanking[by] = await timedOr(
          `first --by ${by}`,
          () => adminPost(sock, '/v1/usage', { orgId, from: r0.from, to: r0.to, by, limit: 1000 }),
          1,
        );
      const get = async (p) => {
        const res = await fetch(`http://127.0.0.1:${consolePort}/console/api/${p}`, { headers: { authorization: `Bearer ${token}` } });
        if (!res.ok) throw new Error(`console ${p}: ${res.status} ${(await res.text()).slice(0, 300)}`);
        return res.json();
      };
      for (const r of ranges) {
        const at = (what) => (r.name === '' ? what : `${r.name}: ${what}`);
        for (const by of GROUPS)
          figures.usage[at(by)] = await timedOr(at(`--by ${by}`), () => adminPost(sock, '/v1/usage', { orgId, from: r.from, to: r.to, by, limit: 1000 }));
        // The console takes whole days: the last one is today's (the busy day) or the day before today.
        const lastDay = o.busyDay ? today : end - DAY;
        const q = `org=bench&from=${new Date(r.from).toISOString().slice(0, 10)}&to=${new Date(lastDay).toISOString().slice(0, 10)}`;
        for (const page of ['overview', 'customers', 'models', 'traces'])
          figures.console[at(page)] = await timedOr(at(`console ${page}`), () => get(`${page}?${q}`));
      }
      if (sampleTrace !== '')
        figures.console['one trace'] = await timedOr('console one trace', () => get(`traces/${encodeURIComponent(sampleTrace)}?org=bench`));
      if (o.busyDay) {
        // What an app asks before a model call: this month's spend against the budget.
        figures.budget = await timedOr('GET /v1/budget', async () => {
          const res = await fetch(`http://127.0.0.1:${port}/v1/budget`, { headers: { authorization: `Bearer ${key}` } });
          if (!res.ok) throw new Error(`${res.status} ${(await res.text()).slice(0, 300)}`);
          return res.json();
        });
        // Realistic bodies (large: 2 KB texts) starting now, through POST /ingest, 4 connections: the share answered 503.
        // Alongside, today's console pages read once a second, as a dashboard left open would.
        let loading = true;
        const underLoad = { overview: [], customers: [], models: [], traces: [] };
        const todayQ = `org=bench&from=${new Date(today).toISOString().slice(0, 10)}&to=${new Date(today).toISOString().slice(0, 10)}`;
        const reading = (async () => {
          while (loading) {
            const t0 = performance.now();
            for (const page of Object.keys(underLoad)) {
              const t = performance.now();
              try {
                const at = new Date().toISOString();
                await get(`${page}?${todayQ}`);
                const ms = performance.now() - t;
                underLoad[page].push(ms);
                // A slow read's start, to find what held it in the server's log (kept beside the store).
                if (ms > 1000) console.error(`  growth: console ${page} under load took ${Math.round(ms)} ms from ${at}`);
              } catch (e) {
                figures.errors.push(`console ${page} under load: ${e.message}`);
              }
            }
            await sleep(Math.max(0, 1000 - (performance.now() - t0)));
          }
        })();
        const load = await runLoad({
          urls: [`http://127.0.0.1:${port}`],
          key,
          workload: 'large',
          startAt: Date.now(),
          connections: 4,
          duration: o.loadSeconds,
          // `large` requests carry 1,000 spans each.
          ...(o.loadRate > 0 ? { rate: o.loadRate / 1000 } : {}),
        });
        loading = false;
        await reading;
        figures.consoleUnderLoad = Object.fromEntries(
          Object.entries(underLoad).map(([page, xs]) => [page, { median: median(xs), max: xs.length > 0 ? Math.max(...xs) : NaN, reads: xs.length }]),
        );
        const answered = load.ok + load.non2xx;
        figures.load = {
          ackedSpansPerSec: load.ackedSpans / load.duration,
          requests: answered,
          share503: answered > 0 ? (load.status['503'] ?? 0) / answered : NaN,
          status: load.status,
          errors: load.errors + load.timeouts,
        };
      }
      figures.serverRss = memoryOf(server.pid)?.rss ?? NaN;
    } finally {
      server.kill('SIGTERM');
      await exited;
    }
    figures.diskBytes = kind === 'duckdb' ? diskBytes(dir) : NaN;
    if (o.busyDay) {
      store = await openStore();
      return figures;
    }
    // reprice of the last month, the CLI process alone (nothing changes: the same catalog priced the rows).
    const t0 = performance.now();
    const child = spawn(
      process.execPath,
      [CLI, 'reprice', '--org', 'bench', '--from', new Date(lastStart - 30 * DAY).toISOString(), '--to', new Date(lastStart + 1).toISOString()],
      { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] },
    );
    const rss = rssSampler(child.pid, 20);
    const code = await new Promise((r) => child.once('exit', r));
    figures.reprice = { ms: performance.now() - t0, peakRss: rss.stop(), exit: code };
    figures.diskBytes = kind === 'duckdb' ? diskBytes(dir) : NaN;
    store = await openStore();
    return figures;
  };

  if (o.reuse !== undefined) {
    const [r] = await store.query('SELECT count(*) AS n, max(start_time) AS t FROM spans');
    const [t] = await store.query('SELECT trace_id FROM traces ORDER BY start_date, trace_id LIMIT 1');
    stored = Number(r?.n ?? 0);
    lastStart = Number(r?.t ?? 0);
    sampleTrace = String(t?.trace_id ?? '');
    results.push({ rows: stored, storedAtMeasure: stored, flushWallUs: NaN, flushCpuUs: NaN, ...(await measureReads()) });
  }
  const checkpoints = o.reuse === undefined ? [0, ...o.rows] : [];
  for (const cp of checkpoints) {
    while (stored < cp) {
      if ((await insertBatch()) === undefined) break;
      if (stored % (o.batch * 200) < o.batch)
        console.error(`  growth: ${stored} rows stored (${((stored / (performance.now() - loadStart)) * 1000).toFixed(0)} rows/s overall)`);
    }
    // The inserts right after the checkpoint: what a flush costs at this size (the last checkpoint keeps its rows).
    const flush = await twentyInserts();
    let reopened;
    if (cp === o.rows.at(-1)) {
      await store.close();
      store = await openStore();
      reopened = await twentyInserts();
    }
    const reads = cp === 0 ? undefined : await measureReads();
    const r = {
      rows: cp,
      storedAtMeasure: stored,
      flushWallUs: median(flush.map((f) => f.wallUs)),
      flushCpuUs: median(flush.map((f) => f.cpuUs)),
      flushReopenedWallUs: reopened === undefined ? NaN : median(reopened.map((f) => f.wallUs)),
      ...reads,
    };
    results.push(r);
    console.error(`  growth: checkpoint ${cp}: ${JSON.stringify(r)}`);
  }
  await store.close();
  print(kind, results, rangesAt(now));
  const out = path.join(root, 'bench/results');
  fs.mkdirSync(out, { recursive: true });
  fs.writeFileSync(path.join(out, `growth-${new Date().toISOString().replace(/[:.]/g, '-')}.json`), JSON.stringify({ kind, options: o, results }, null, 2));
  if (!o.keep && o.reuse === undefined) fs.rmSync(dir, { recursive: true, force: true });
  else console.error(`  growth: data kept in ${dir}`);
  if (env.CLICKHOUSE_URL && !o.keep) {
    const u = new URL(env.CLICKHOUSE_URL);
    await fetch(`${u.protocol}//${u.host}/`, { method: 'POST', body: `DROP DATABASE IF EXISTS ${run}` }).catch(() => undefined);
  }
  await sleep(0);
}

function print(kind, results, ranges) {
  const at = (r, what) => (r.name === '' ? what : `${r.name}: ${what}`);
  const cols = results.map((r) => (r.rows === 0 ? 'empty' : r.rows >= 1e6 ? `${r.rows / 1e6}M` : String(r.rows)));
  const ms = (v) => (Number.isFinite(v) ? `${v.toFixed(v < 10 ? 1 : 0)} ms` : '–');
  const us = (v) => (Number.isFinite(v) ? v.toFixed(0) : '–');
  const lines = [
    ['flush wall µs/row', ...results.map((r) => us(r.flushWallUs))],
    ['flush CPU µs/row', ...results.map((r) => us(r.flushCpuUs))],
    ['flush wall µs/row, store reopened', ...results.map((r) => us(r.flushReopenedWallUs))],
    ...['trace', 'session'].map((g) => [`first --by ${g} after load`, ...results.map((r) => ms(r.firstRanking?.[g]))]),
    ...ranges.flatMap((rg) => GROUPS.map((g) => [at(rg, `usage --by ${g}`), ...results.map((r) => ms(r.usage?.[at(rg, g)]))])),
    ...ranges.flatMap((rg) =>
      ['overview', 'customers', 'models', 'traces'].map((p) => [at(rg, `console ${p}`), ...results.map((r) => ms(r.console?.[at(rg, p)]))]),
    ),
    ['console one trace', ...results.map((r) => ms(r.console?.['one trace']))],
    ['GET /v1/budget', ...results.map((r) => ms(r.budget))],
    ['POST /ingest, 4 connections: spans/s', ...results.map((r) => (r.load ? r.load.ackedSpansPerSec.toFixed(0) : '–'))],
    ['POST /ingest, 4 connections: 503 share', ...results.map((r) => (r.load ? `${(100 * r.load.share503).toFixed(1)}%` : '–'))],
    ...['overview', 'customers', 'models', 'traces'].map((p) => [
      `console ${p} of today during the load: median / max`,
      ...results.map((r) => (r.consoleUnderLoad ? `${ms(r.consoleUnderLoad[p].median)} / ${ms(r.consoleUnderLoad[p].max)}` : '–')),
    ]),
    ['reprice 30 days', ...results.map((r) => (r.reprice ? `${(r.reprice.ms / 1000).toFixed(1)} s` : '–'))],
    ['reprice peak RSS', ...results.map((r) => (r.reprice ? `${(r.reprice.peakRss / 2 ** 20).toFixed(0)} MiB` : '–'))],
    ['server RSS after reads', ...results.map((r) => (r.serverRss ? `${(r.serverRss / 2 ** 20).toFixed(0)} MiB` : '–'))],
    ['store on disk', ...results.map((r) => (Number.isFinite(r.diskBytes) ? `${(r.diskBytes / 2 ** 30).toFixed(2)} GiB` : '–'))],
  ];
  const head = [`growth (${kind}${ranges.length > 1 ? ', one busy day' : ''})`, ...cols];
  const w = head.map((_, i) => Math.max(...[head, ...lines].map((l) => String(l[i]).length)));
  const fmtLine = (l) => l.map((c, i) => (i === 0 ? String(c).padEnd(w[i]) : String(c).padStart(w[i]))).join('  ');
  console.log(fmtLine(head));
  for (const l of lines) console.log(fmtLine(l));
  for (const r of results) for (const e of r.errors ?? []) console.log(`failed at ${r.rows} rows: ${e}`);
}

await main();
