// npm run bench [-- --quick] [--workloads small,large] [--connections 16] [--duration 10] [--runs 3] [--modes fsync,memory]
// Starts the real server (built dist/) as a child process, drives it from another process with
// autocannon, and measures side by side the floors on the same payloads.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { WORKLOADS } from './workloads.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const SERVER = path.join(root, 'packages/server/bin/trace-ingest-server.js');
const CLI = path.join(root, 'packages/cli/bin/trace-ingest.js');

function args() {
  const a = process.argv.slice(2);
  const get = (name, def) => {
    const i = a.indexOf(`--${name}`);
    return i >= 0 ? a[i + 1] : def;
  };
  const quick = a.includes('--quick');
  return {
    quick,
    workloads: get('workloads', quick ? 'tiny,small' : 'tiny,small,large,max').split(','),
    connections: Number(get('connections', quick ? '4' : '16')),
    duration: Number(get('duration', quick ? '2' : '10')),
    runs: Number(get('runs', quick ? '1' : '3')),
    modes: get('modes', quick ? 'fsync' : 'fsync,memory').split(','),
    // Replicas on shared backends: needs DATABASE_URL, REDIS_URL and CLICKHOUSE_URL in the environment.
    replicas: get('replicas', '1').split(',').map(Number),
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function waitReady(url) {
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {
      // not up yet
    }
    await sleep(50);
  }
  throw new Error(`server at ${url} did not become ready`);
}

function rssSampler(pid) {
  let peak = 0;
  const read = () => {
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (m) peak = Math.max(peak, Number(m[1]) * 1024);
    } catch {
      // exited
    }
  };
  const t = setInterval(read, 50);
  return { stop: () => (clearInterval(t), read(), peak) };
}

function runLoad(cfg) {
  // Bodies of several MB do not fit in argv: hand the config over in a file.
  const file = path.join(os.tmpdir(), `ti-bench-load-${process.pid}-${Date.now()}.json`);
  fs.writeFileSync(file, JSON.stringify(cfg));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(root, 'bench/load.js'), file], { stdio: ['ignore', 'pipe', 'inherit'] });
    child.once('exit', () => fs.rmSync(file, { force: true }));
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`load generator exited ${code}`))));
  });
}

function cli(env, ...a) {
  return execFileSync(process.execPath, [CLI, ...a], { env: { ...process.env, ...env }, encoding: 'utf8' });
}

async function countStored(env) {
  if (env.CLICKHOUSE_URL) {
    const u = new URL(env.CLICKHOUSE_URL);
    const db = u.pathname.slice(1);
    const res = await fetch(`${u.protocol}//${u.host}/?user=${encodeURIComponent(decodeURIComponent(u.username) || 'default')}&password=${encodeURIComponent(decodeURIComponent(u.password))}`, { method: 'POST', body: `SELECT count() FROM ${db}.spans FINAL` });
    return Number((await res.text()).trim());
  }
  const { DuckDBInstance } = await import('@duckdb/node-api');
  const inst = await DuckDBInstance.create(path.join(env.DATA_DIR, 'spans.duckdb'));
  const conn = await inst.connect();
  const r = await conn.runAndReadAll('SELECT count(*)::BIGINT AS n FROM spans');
  const n = Number(r.getRowObjectsJson()[0].n);
  conn.closeSync();
  inst.closeSync();
  return n;
}

/** Leaves the shared servers as they were: the run's ClickHouse database, PostgreSQL schema and Redis keys go. */
async function dropRun(env, run) {
  if (env.CLICKHOUSE_URL) {
    const u = new URL(env.CLICKHOUSE_URL);
    await fetch(`${u.protocol}//${u.host}/?user=${encodeURIComponent(decodeURIComponent(u.username) || 'default')}&password=${encodeURIComponent(decodeURIComponent(u.password))}`, { method: 'POST', body: `DROP DATABASE IF EXISTS ${run}` });
  }
  if (env.DATABASE_URL) {
    const { default: pg } = await import('pg');
    const base = new URL(env.DATABASE_URL);
    base.searchParams.delete('schema');
    const client = new pg.Client({ connectionString: base.toString() });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS ${run} CASCADE`);
    await client.end();
  }
  if (env.REDIS_URL) {
    const { Redis } = await import('ioredis');
    const redis = new Redis(env.REDIS_URL);
    const keys = await redis.keys(`${run}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  }
}

/** One measurement of the service: load, then SIGTERM and time the drain until every span is in the store. */
async function measureService(workload, mode, o, replicas = 1) {
  const run = `bench_${Date.now()}`;
  const dataDirs = Array.from({ length: replicas }, () => fs.mkdtempSync(path.join(os.tmpdir(), 'ti-bench-')));
  const env = { DATA_DIR: dataDirs[0], LOG_LEVEL: 'warn' };
  if (process.env.CLICKHOUSE_URL) env.CLICKHOUSE_URL = process.env.CLICKHOUSE_URL.replace(/\/[^/]*$/, `/${run}`);
  if (replicas > 1) {
    if (!process.env.DATABASE_URL || !process.env.REDIS_URL || !process.env.CLICKHOUSE_URL) throw new Error('--replicas > 1 needs DATABASE_URL, REDIS_URL and CLICKHOUSE_URL');
    const db = new URL(process.env.DATABASE_URL);
    db.searchParams.set('schema', run);
    Object.assign(env, { DATABASE_URL: db.toString(), REDIS_URL: process.env.REDIS_URL, REDIS_KEY_PREFIX: run });
  }
  cli(env, 'plans', 'create', 'bench', '--monthly-spans', '1000000000000', '--rate-limit', '1000000');
  cli(env, 'orgs', 'create', 'bench', '--plan', 'bench');
  const { key } = JSON.parse(cli(env, 'keys', 'create', '--org', 'bench', '--json'));
  const servers = [];
  for (const dir of dataDirs) {
    const port = await freePort();
    const server = spawn(process.execPath, [SERVER], {
      env: { ...process.env, ...env, DATA_DIR: dir, PORT: String(port), HOST: '127.0.0.1', INGEST_DURABILITY: mode, DRAIN_GRACE_MS: '0', DRAIN_TIMEOUT_MS: '600000' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const url = `http://127.0.0.1:${port}`;
    servers.push({ server, url, exited: new Promise((r) => server.once('exit', r)) });
    await waitReady(url);
  }
  const samplers = servers.map((s) => rssSampler(s.server.pid));
  const { body, spans } = WORKLOADS[workload]();
  const load = await runLoad({ url: servers.length === 1 ? servers[0].url : servers.map((s) => s.url), key, body, connections: o.connections, duration: o.duration });
  const t0 = performance.now();
  for (const s of servers) s.server.kill('SIGTERM');
  await Promise.all(servers.map((s) => s.exited));
  const lagMs = performance.now() - t0;
  const peakRss = Math.max(...samplers.map((x) => x.stop()));
  const ok = load.requests - load.non2xx;
  const stored = await countStored(env);
  for (const d of dataDirs) fs.rmSync(d, { recursive: true, force: true });
  await dropRun(env, run);
  const secs = load.duration;
  return {
    spansPerSec: (ok * spans) / secs,
    mbPerSec: load.bytesSent / secs / 1e6,
    reqPerSec: load.requests / secs,
    p50: load.latency.p50,
    p90: load.latency.p90,
    p99: load.latency.p99,
    non2xx: load.non2xx + load.errors + load.timeouts,
    peakRssMb: peakRss / 2 ** 20,
    lagMs,
    stored,
    expected: ok * spans,
  };
}

async function measureFloor(workload, kind, o) {
  const child = spawn(process.execPath, [path.join(root, 'bench/floor-server.js'), kind], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((r) => child.stdout.once('data', (c) => r(Number(String(c).trim()))));
  const { body, spans } = WORKLOADS[workload]();
  const load = await runLoad({ url: `http://127.0.0.1:${port}`, key: 'x', body, connections: o.connections, duration: o.duration });
  child.kill('SIGTERM');
  const ok = load.requests - load.non2xx;
  return { spansPerSec: (ok * spans) / load.duration, mbPerSec: load.bytesSent / load.duration / 1e6 };
}

/** The direct bulk insert of the same rows into the store: the store's own ceiling. */
async function measureStoreFloor(workload) {
  const { payloadToRows, encodeRow, noPricing } = await import(path.join(root, 'packages/shared/dist/rows.js'));
  const { DuckDbSpanStore } = await import(path.join(root, 'packages/store/dist/duckdb.js'));
  const { body } = WORKLOADS[workload]();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-bench-store-'));
  const store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb') });
  await store.start();
  let lines = '';
  let rows = 0;
  for (let i = 0; rows < 20_000; i++) {
    const p = JSON.parse(body.replaceAll('[<id>]', `b${i}`));
    for (const r of payloadToRows(p, { orgId: 'o', keyPrefix: 'ti_bench', receivedAt: Date.now() }, noPricing)) {
      lines += encodeRow(r) + '\n';
      rows++;
    }
  }
  const t0 = performance.now();
  await store.insertLines(Buffer.from(lines), rows);
  const secs = (performance.now() - t0) / 1000;
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
  return { rowsPerSec: rows / secs };
}

const fmt = (n, d = 0) => (Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }) : '-');

async function main() {
  const o = args();
  if (!fs.existsSync(path.join(root, 'packages/server/dist/main.js'))) execFileSync('npx', ['tsc', '-b'], { cwd: root, stdio: 'inherit' });
  const results = [];
  for (const w of o.workloads) {
    const floors = { discard: [], parse: [] };
    const service = {};
    const keys = o.modes.flatMap((m) => o.replicas.map((n) => [m, n]));
    for (const [m, n] of keys) service[`${m}|${n}`] = [];
    for (let r = 0; r < o.runs; r++) {
      // Side by side, interleaved, so a noisy neighbour hits all of them alike.
      floors.discard.push(await measureFloor(w, 'discard', o));
      floors.parse.push(await measureFloor(w, 'parse', o));
      for (const [m, n] of keys) {
        const r1 = await measureService(w, m, o, n);
        service[`${m}|${n}`].push(r1);
        console.log(`  ${w} ${m}${n > 1 ? `×${n}` : ''} run ${r + 1}: ${fmt(r1.spansPerSec)} spans/s, p99 ${fmt(r1.p99)} ms, drain ${fmt(r1.lagMs)} ms, stored ${r1.stored}/${r1.expected}`);
      }
    }
    const store = await measureStoreFloor(w);
    const med = (xs, k) => median(xs.map((x) => x[k]));
    for (const [m, n] of keys) {
      const s = service[`${m}|${n}`];
      results.push({
        workload: w,
        mode: n > 1 ? `${m}×${n}` : m,
        replicas: n,
        connections: o.connections,
        runs: o.runs,
        spansPerSec: med(s, 'spansPerSec'),
        mbPerSec: med(s, 'mbPerSec'),
        reqPerSec: med(s, 'reqPerSec'),
        p50: med(s, 'p50'),
        p90: med(s, 'p90'),
        p99: med(s, 'p99'),
        non2xx: med(s, 'non2xx'),
        peakRssMb: med(s, 'peakRssMb'),
        lagMs: med(s, 'lagMs'),
        // Requests still in flight when the load stops are accepted but not counted by the load generator, so stored may exceed expected.
        lostSpans: Math.max(0, ...s.map((x) => x.expected - x.stored)),
        floorDiscardSpansPerSec: med(floors.discard, 'spansPerSec'),
        floorParseSpansPerSec: med(floors.parse, 'spansPerSec'),
        floorParseMbPerSec: med(floors.parse, 'mbPerSec'),
        floorStoreRowsPerSec: store.rowsPerSec,
      });
    }
  }
  const head = ['workload', 'mode', 'spans/s', 'MB/s', 'req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'non-2xx', 'peak RSS MB', 'drain lag ms', 'lost', '÷discard', '÷JSON.parse', 'MB/s ÷parse', '÷store insert'];
  const rows = results.map((r) => [
    r.workload, r.mode, fmt(r.spansPerSec), fmt(r.mbPerSec, 1), fmt(r.reqPerSec), fmt(r.p50, 1), fmt(r.p90, 1), fmt(r.p99, 1), fmt(r.non2xx), fmt(r.peakRssMb), fmt(r.lagMs), fmt(r.lostSpans),
    fmt(r.spansPerSec / r.floorDiscardSpansPerSec, 2), fmt(r.spansPerSec / r.floorParseSpansPerSec, 2), fmt(r.mbPerSec / r.floorParseMbPerSec, 2), fmt(r.spansPerSec / r.floorStoreRowsPerSec, 2),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => cells.map((c, i) => String(c).padStart(widths[i])).join('  ');
  console.log(`\ntrace-ingest bench: ${o.connections} connections, ${o.duration}s, medians of ${o.runs} run(s), ${os.cpus().length} cores, node ${process.version}`);
  console.log(line(head));
  for (const r of rows) console.log(line(r));
  console.log('\nfloors (spans/s): ' + results.filter((r) => r.mode === o.modes[0] || r.mode === `${o.modes[0]}×${o.replicas[0]}`).map((r) => `${r.workload}: discard ${fmt(r.floorDiscardSpansPerSec)}, JSON.parse ${fmt(r.floorParseSpansPerSec)}, DuckDB insert ${fmt(r.floorStoreRowsPerSec)} rows/s`).join('; '));
  const outDir = path.join(root, 'bench/results');
  fs.mkdirSync(outDir, { recursive: true });
  const file = path.join(outDir, `${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  fs.writeFileSync(file, JSON.stringify({ options: o, node: process.version, cpus: os.cpus().length, results }, null, 2));
  console.log(`results: ${file}`);
  if (results.some((r) => r.lostSpans > 0)) {
    console.error('some accepted spans are missing from the store');
    process.exitCode = 1;
  }
}

await main();
