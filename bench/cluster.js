// npm run bench -- --cluster [--replicas 1,3] [--runs 3] [--duration 15] [--connections 12] [--workload small]
// Replicas of the real server on one PostgreSQL, one Redis and one ClickHouse (DATABASE_URL, REDIS_URL,
// CLICKHOUSE_URL): the cluster's stored rows/s with each number of replicas, how much the replicas'
// flushes overlap in time, the CPU per row of the replicas and of ClickHouse, and the delay from the last
// span stored to every derived table agreeing with the spans. See bench/README.md, "Cluster".
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { clickhouseQuery, cpuOf, root, runLoad, sleep, startService } from './procs.js';
import { fmt, median } from './report.js';
import { WORKLOAD_NAMES } from './workloads.js';

function options(argv) {
  const v = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m) throw new Error(`unknown argument "${argv[i]}"`);
    if (m[1] === 'cluster') continue;
    if (!['replicas', 'runs', 'duration', 'connections', 'workload'].includes(m[1])) throw new Error(`unknown argument "${argv[i]}"`);
    v[m[1]] = m[2] ?? argv[++i];
  }
  const o = {
    replicas: (v.replicas ?? '1,3').split(',').map(Number),
    runs: Number(v.runs ?? 3),
    duration: Number(v.duration ?? 15),
    // A multiple of every replica count, so each replica gets as many connections.
    connections: Number(v.connections ?? 12),
    workload: v.workload ?? 'small',
  };
  if (!WORKLOAD_NAMES.includes(o.workload) || o.workload === 'grpc')
    throw new Error(`--workload: one of ${WORKLOAD_NAMES.filter((w) => w !== 'grpc').join(', ')}`);
  for (const n of o.replicas) if (!(Number.isInteger(n) && n >= 1)) throw new Error('--replicas: numbers of replicas, e.g. 1,3');
  for (const k of ['runs', 'duration', 'connections']) if (!(o[k] > 0)) throw new Error(`--${k} must be a positive number`);
  for (const k of ['DATABASE_URL', 'REDIS_URL', 'CLICKHOUSE_URL'])
    if (!process.env[k]) throw new Error(`--cluster needs ${k} (the replicas share PostgreSQL, Redis and ClickHouse)`);
  return o;
}

/** The pid of the local process listening on a TCP port, from /proc (undefined when it is elsewhere or not visible). */
export function listenerPid(port) {
  const inodes = new Set();
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text;
    try {
      text = fs.readFileSync(f, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const c = line.trim().split(/\s+/);
      // local address "hex-ip:hex-port", state 0A = LISTEN, inode in the tenth column.
      if (c.length >= 10 && c[3] === '0A' && parseInt(c[1].split(':')[1], 16) === port) inodes.add(c[9]);
    }
  }
  if (inodes.size === 0) return undefined;
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let fds;
    try {
      fds = fs.readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let link;
      try {
        link = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const m = /^socket:\[(\d+)\]$/.exec(link);
      if (m && inodes.has(m[1])) return Number(pid);
    }
  }
  return undefined;
}

/**
 * How the replicas' flushes (each an interval [end - ms, end] from its debug line) overlap: seconds with
 * exactly k flushes at once, the mean number at once while any runs (1.0 if something serialised them
 * cluster-wide), and the share of each replica's flush time during which another replica flushed too.
 */
export function flushOverlap(intervalsByReplica) {
  const events = [];
  intervalsByReplica.forEach((xs, r) => xs.forEach(([a, b]) => events.push([a, 1, r], [b, -1, r])));
  events.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  const atOnce = [];
  const active = new Array(intervalsByReplica.length).fill(0);
  const overlapped = new Array(intervalsByReplica.length).fill(0);
  let n = 0;
  let last;
  for (const [t, d, r] of events) {
    if (last !== undefined && t > last) {
      atOnce[n] = (atOnce[n] ?? 0) + (t - last) / 1000;
      if (n >= 2) active.forEach((a, i) => (overlapped[i] += a > 0 ? (t - last) / 1000 : 0));
    }
    n += d;
    active[r] += d;
    last = t;
  }
  const busy = intervalsByReplica.map((xs) => xs.reduce((s, [a, b]) => s + (b - a) / 1000, 0));
  const any = atOnce.slice(1).reduce((s, x) => s + (x ?? 0), 0);
  const weighted = atOnce.reduce((s, x, k) => s + (x ?? 0) * k, 0);
  return {
    flushes: intervalsByReplica.map((xs) => xs.length),
    busySeconds: busy,
    secondsAtOnce: Array.from(atOnce, (x) => x ?? 0),
    meanAtOnce: any > 0 ? weighted / any : 0,
    maxAtOnce: atOnce.length - 1,
    overlappedShare: busy.map((b, i) => (b > 0 ? overlapped[i] / b : 0)),
  };
}

async function chNumber(url, sql) {
  return Number(await clickhouseQuery(url, sql));
}

/** One measurement: `n` replicas, a closed loop for the duration, until every acked span is stored and derived. */
async function measure(n, o, chPid) {
  const flushes = Array.from({ length: n }, () => []);
  const svc = await startService({
    mode: 'fsync',
    replicas: n,
    shared: true,
    extraEnv: { LOG_LEVEL: 'debug' },
    onLog: (i, line) => {
      if (!line.includes('"rows flushed"')) return;
      const x = JSON.parse(line);
      flushes[i].push([x.time - x.ms, x.time]);
    },
  });
  try {
    const url = svc.env.CLICKHOUSE_URL;
    const db = new URL(url).pathname.slice(1);
    const cpu = () => ({ replicas: svc.servers.reduce((s, x) => s + (cpuOf(x.proc.pid) ?? 0), 0), ch: chPid === undefined ? NaN : (cpuOf(chPid) ?? NaN) });
    const c0 = cpu();
    const t0 = performance.now();
    const load = await runLoad({ urls: svc.urls, key: svc.key, workload: o.workload, connections: o.connections, duration: o.duration });
    const acked = load.ackedSpans;
    let stored = 0;
    const deadline = Date.now() + 600_000;
    while (Date.now() < deadline) {
      stored = await chNumber(url, `SELECT count() FROM ${db}.spans FINAL`);
      if (stored >= acked) break;
      await sleep(20);
    }
    const storedAt = performance.now();
    const storedThen = stored;
    const c1 = cpu();
    // Every derived table agrees with the distinct spans (the day's rollups and the trace table), in one
    // query: requests cut off when the load stopped may still add spans after the acked ones are stored.
    const agree =
      `SELECT count() AS n, (SELECT sum(spans) FROM ${db}.usage_daily) = n AND (SELECT sum(spans) FROM ${db}.customers_daily) = n ` +
      `AND (SELECT sumMerge(spans) FROM ${db}.traces) = n FROM ${db}.spans FINAL FORMAT TSV`;
    let derived = false;
    while (Date.now() < deadline) {
      const [count, ok] = (await clickhouseQuery(url, agree)).split('\t').map(Number);
      stored = count;
      if ((derived = ok === 1)) break;
      await sleep(50);
    }
    const derivedAt = performance.now();
    const c2 = cpu();
    const overlap = flushOverlap(flushes);
    const exits = await svc.stop();
    const storeSeconds = (storedAt - t0) / 1000;
    return {
      replicas: n,
      ackedSpans: acked,
      stored,
      acceptedPerSec: acked / o.duration,
      storedPerSec: storedThen / storeSeconds,
      storeSeconds,
      non2xx: load.non2xx,
      errors: load.errors + load.timeouts,
      p99: load.latency.p99,
      lagMs: storedAt - t0 - o.duration * 1000,
      derivedLagMs: derived ? derivedAt - storedAt : NaN,
      replicaCpuUsPerRow: ((c1.replicas - c0.replicas) * 1e6) / storedThen,
      clickhouseCpuUsPerRow: ((c1.ch - c0.ch) * 1e6) / storedThen,
      deriveCpuSeconds: { replicas: c2.replicas - c1.replicas, clickhouse: c2.ch - c1.ch },
      flushMsMedian: median(flushes.flat().map(([a, b]) => b - a)),
      overlap,
      exitCodes: exits.map((e) => e.code ?? e.signal),
    };
  } finally {
    await svc.cleanup();
  }
}

async function main() {
  const o = options(process.argv.slice(2));
  const chPort = Number(new URL(process.env.CLICKHOUSE_URL).port || 8123);
  const chPid = listenerPid(chPort);
  if (chPid === undefined) console.log(`ClickHouse's process is not visible here (port ${chPort}): its CPU is not measured`);
  const cores = os.availableParallelism();
  console.log(
    `cluster: ${o.workload}, ${o.connections} connections, ${o.duration} s, replicas ${o.replicas.join(' and ')}, ${o.runs} runs interleaved, ${cores} cores`,
  );
  const runs = Object.fromEntries(o.replicas.map((n) => [n, []]));
  for (let r = 0; r < o.runs; r++) {
    for (const n of o.replicas) {
      const x = await measure(n, o, chPid);
      runs[n].push(x);
      console.log(
        `  ×${n} run ${r + 1}: acked ${fmt(x.acceptedPerSec)} spans/s, stored ${fmt(x.storedPerSec)} rows/s ` +
          `(${x.stored}/${x.ackedSpans}, all stored ${fmt(x.lagMs)} ms after the load), derived +${fmt(x.derivedLagMs)} ms, ` +
          `CPU/row replicas ${fmt(x.replicaCpuUsPerRow, 1)} µs, ClickHouse ${fmt(x.clickhouseCpuUsPerRow, 1)} µs, ` +
          `flush median ${fmt(x.flushMsMedian, 1)} ms, flushes at once: mean ${fmt(x.overlap.meanAtOnce, 2)}, max ${x.overlap.maxAtOnce}, ` +
          `overlapped ${x.overlap.overlappedShare.map((s) => `${fmt(100 * s)}%`).join('/')}, non-2xx ${x.non2xx}, exit ${x.exitCodes.join(',')}`,
      );
    }
  }
  const med = (n, f) => median(runs[n].map(f));
  console.log(
    '\n| replicas | stored rows/s | acked spans/s | replica CPU µs/row | ClickHouse CPU µs/row | flushes at once (mean) | overlapped | derived after |',
  );
  console.log('|--:|--:|--:|--:|--:|--:|--:|--:|');
  for (const n of o.replicas)
    console.log(
      `| ${n} | ${fmt(med(n, (x) => x.storedPerSec))} | ${fmt(med(n, (x) => x.acceptedPerSec))} | ${fmt(
        med(n, (x) => x.replicaCpuUsPerRow),
        1,
      )} | ` +
        `${fmt(
          med(n, (x) => x.clickhouseCpuUsPerRow),
          1,
        )} | ${fmt(
          med(n, (x) => x.overlap.meanAtOnce),
          2,
        )} | ` +
        `${fmt(100 * med(n, (x) => median(x.overlap.overlappedShare)))}% | ${fmt(med(n, (x) => x.derivedLagMs))} ms |`,
    );
  // The cluster's rate where replicas and ClickHouse have cores of their own: each side's cores over its CPU per row.
  const base = o.replicas.at(-1);
  const rep = med(base, (x) => x.replicaCpuUsPerRow);
  const ch = med(base, (x) => x.clickhouseCpuUsPerRow);
  console.log(`\nprojection from ×${base}: rows/s ≈ min(replica cores × 1e6 / ${fmt(rep, 1)}, ClickHouse cores × 1e6 / ${fmt(ch, 1)})`);
  for (const [rc, cc] of [
    [2, 2],
    [8, 4],
    [16, 8],
    [32, 16],
  ])
    console.log(`  ${rc} replica cores, ${cc} ClickHouse cores: ${fmt(Math.min((rc * 1e6) / rep, (cc * 1e6) / ch))} rows/s`);
  const dir = path.join(root, 'bench', 'results');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `cluster-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  fs.writeFileSync(file, JSON.stringify({ options: o, cores, runs }, null, 2));
  console.log(`\nresults: ${file}`);
  const bad = Object.values(runs)
    .flat()
    .filter((x) => x.stored < x.ackedSpans || Number.isNaN(x.derivedLagMs) || x.exitCodes.some((c) => c !== 0));
  if (bad.length > 0) {
    console.error(`${bad.length} run(s) lost an acked span, never derived, or exited uncleanly`);
    process.exitCode = 1;
  }
}

await main();
