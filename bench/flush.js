// CPU per row of the DuckDB store's flush (`insertLines`, as the flusher calls it), in process:
// the `small` workload's rows (fresh ids per request, priced by the real engine) in batches of
// --batch rows, into a fresh store per variant, the variants' inserts interleaved batch by batch.
//
//   node bench/flush.js [--batches 20] [--batch 8192] [--warmup 2] [--profile] [--workload small]
//                       [--block-allocator 256MiB]   (DuckDB's block_allocator_memory, as the server sets it; default none)
//                       [--store label=path/to/duckdb.js ...]   (default: this tree's dist)
//                       [--clickhouse http://default:@127.0.0.1:8123]   (adds the ClickHouse store,
//                       into a fresh database: the CPU is this process's, the flusher's, not the server's)
//
// Prints per variant the median and quartiles of CPU µs per row (process.cpuUsage: every thread,
// DuckDB's included) and wall µs per row, and the CPU of every measured insert plus the close (its
// checkpoint) per row; --profile adds CPU per statement kind of the first variant.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stamp, workload } from './workloads.js';

const root = fileURLToPath(new URL('..', import.meta.url));

function options(argv) {
  const o = { batches: 20, batch: 8192, warmup: 2, profile: false, workload: 'small', stores: [], clickhouse: undefined, blockAllocator: undefined };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--batches') o.batches = Number(argv[++i]);
    else if (a === '--batch') o.batch = Number(argv[++i]);
    else if (a === '--warmup') o.warmup = Number(argv[++i]);
    else if (a === '--workload') o.workload = argv[++i];
    else if (a === '--profile') o.profile = true;
    else if (a === '--block-allocator') o.blockAllocator = argv[++i];
    else if (a === '--clickhouse') o.clickhouse = argv[++i];
    else if (a === '--store') {
      const [label, file] = argv[++i].split('=');
      o.stores.push({ label, file: path.resolve(file) });
    } else throw new Error(`unknown flag ${a}`);
  }
  if (o.stores.length === 0 && o.clickhouse === undefined) o.stores.push({ label: 'this', file: path.join(root, 'packages/store/dist/duckdb.js') });
  return o;
}

const o = options(process.argv.slice(2));
const { payloadToRows, encodeLine } = await import(path.join(root, 'packages/shared/dist/rows.js'));
const { PriceEngine } = await import(path.join(root, 'packages/shared/dist/price-engine.js'));
const engine = await PriceEngine.create({});
const orgId = 'org_bench';
const price = (span) => engine.price(span, orgId);

const w = workload(o.workload);
const body = Buffer.from(w.body);
let request = 0;
function batch() {
  const parts = [];
  let rows = 0;
  while (rows < o.batch) {
    const payload = JSON.parse(stamp(body, w.slots, request++).toString('utf8'));
    for (const r of payloadToRows(payload, { orgId, keyPrefix: 'ti_bench', receivedAt: Date.now() }, price)) {
      parts.push(encodeLine(r), '\n');
      rows++;
    }
  }
  return { lines: Buffer.from(parts.join(''), 'utf8'), rows };
}

const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * (s.length - 1) + 0.5))];
};

const variants = [];
let inserted = 0;
for (const s of o.stores) {
  const { DuckDbSpanStore } = await import(s.file);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-flush-'));
  const store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb'), threads: 1, blockAllocatorMemory: o.blockAllocator });
  await store.start();
  variants.push({ ...s, dir, store, cpu: [], wall: [], totalUs: 0, rows: 0 });
}
if (o.clickhouse !== undefined) {
  const { ClickHouseSpanStore } = await import(path.join(root, 'packages/store/dist/clickhouse.js'));
  const base = o.clickhouse.replace(/\/+$/, '');
  const database = `flush_${Date.now()}`;
  const res = await fetch(`${base.replace(/\/\/[^@/]*@/, '//')}/?query=${encodeURIComponent(`CREATE DATABASE ${database}`)}`, { method: 'POST' });
  if (!res.ok) throw new Error(`ClickHouse at ${o.clickhouse}: ${res.status} ${await res.text()}`);
  const store = new ClickHouseSpanStore({ url: `${base}/${database}`, requestTimeoutMs: 120_000 });
  await store.start();
  variants.push({ label: 'clickhouse', store, cpu: [], wall: [], totalUs: 0, rows: 0 });
}

const profile = new Map();
if (o.profile) {
  // The DuckDB store runs its statements through its file (DuckDbFile): wrapped there, every part of the store is profiled.
  const store = variants[0].store.file ?? variants[0].store;
  for (const method of ['run', 'rows']) {
    if (typeof store[method] !== 'function') throw new Error(`--profile: the ${variants[0].label} store has no ${method}() to wrap`);
    const orig = store[method].bind(store);
    store[method] = async (sql) => {
      const c0 = process.cpuUsage();
      try {
        return await orig(sql);
      } finally {
        const c = process.cpuUsage(c0);
        const key = sql.replace(/\s+/g, ' ').slice(0, 70);
        const p = profile.get(key) ?? { us: 0, n: 0 };
        p.us += c.user + c.system;
        p.n++;
        profile.set(key, p);
      }
    };
  }
}

for (let b = 0; b < o.warmup + o.batches; b++) {
  const { lines, rows } = batch();
  inserted += rows;
  // A different variant goes first each batch: neither always inserts into a warm cache.
  const order = b % 2 === 0 ? variants : [...variants].reverse();
  for (const v of order) {
    if (b === o.warmup && o.profile && v === variants[0]) profile.clear();
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await v.store.insertLines(lines, rows);
    const wall = performance.now() - t0;
    const c = process.cpuUsage(c0);
    if (b >= o.warmup) {
      v.totalUs += c.user + c.system;
      v.rows += rows;
      v.cpu.push((c.user + c.system) / rows);
      v.wall.push((wall * 1000) / rows);
    }
  }
}

for (const v of variants) {
  const [n] = await v.store.query(v.label === 'clickhouse' ? 'SELECT count() AS n FROM spans' : 'SELECT count(*)::BIGINT AS n FROM spans');
  const expected = inserted;
  const c0 = process.cpuUsage();
  await v.store.close();
  const c = process.cpuUsage(c0);
  v.totalUs += c.user + c.system;
  if (v.dir !== undefined) fs.rmSync(v.dir, { recursive: true, force: true });
  const f = (x) => x.toFixed(1);
  console.log(
    `${v.label.padEnd(10)} CPU µs/row median ${f(quantile(v.cpu, 0.5))} (q1 ${f(quantile(v.cpu, 0.25))}, q3 ${f(quantile(v.cpu, 0.75))})` +
      `  wall µs/row median ${f(quantile(v.wall, 0.5))}  all inserts and the close's checkpoint ${f(v.totalUs / v.rows)} CPU µs/row` +
      `  rows ${n.n}/${expected}`,
  );
  if (Number(n.n) !== expected) process.exitCode = 1;
}
if (o.profile) {
  const total = variants[0].rows;
  const rowsOut = [...profile.entries()].sort((a, b) => b[1].us - a[1].us);
  for (const [sql, p] of rowsOut) console.log(`${(p.us / total).toFixed(2).padStart(7)} µs/row  ${String(p.n).padStart(4)}x  ${sql}`);
}
