// npm run bench [-- --quick] [--workloads small,otlp,grpc] [--connections 16] [--duration 10] [--runs 3]
//                  [--modes fsync,memory] [--replicas 1] [--no-abuse | --abuse-only]
//                  [--latency | --no-latency] [--latency-rate 100]
//                  [--server-cpus 1 --load-cpus 0] [--server-node-options "--max-semi-space-size=64"]
// Starts the real server (built dist/) as a child process, drives it from another process with
// autocannon, and measures the floors side by side on the same payloads. See bench/README.md.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { measureAbuse } from './abuse.js';
import { measureFloor, measureService, measureStoreFloor } from './measure.js';
import { pinCpus, root } from './procs.js';
import { median, medians, printReport, writeJson, fmt } from './report.js';
import { WORKLOAD_NAMES } from './workloads.js';

function options(argv) {
  const known = new Set([
    'quick',
    'workloads',
    'connections',
    'duration',
    'runs',
    'modes',
    'replicas',
    'no-abuse',
    'abuse-only',
    'latency',
    'no-latency',
    'latency-rate',
    'server-cpus',
    'load-cpus',
    'server-node-options',
  ]);
  const flags = new Set(['quick', 'no-abuse', 'abuse-only', 'latency', 'no-latency']);
  const v = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m || !known.has(m[1])) throw new Error(`unknown argument "${argv[i]}"`);
    v[m[1]] = flags.has(m[1]) ? true : (m[2] ?? argv[++i]);
  }
  const quick = v.quick === true;
  const o = {
    quick,
    workloads: (v.workloads ?? (quick ? 'tiny,small,otlp,grpc' : 'tiny,small,otlp,grpc,large,max')).split(','),
    connections: Number(v.connections ?? (quick ? 4 : 16)),
    duration: Number(v.duration ?? (quick ? 2 : 10)),
    runs: Number(v.runs ?? (quick ? 1 : 3)),
    modes: (v.modes ?? 'fsync,memory').split(','),
    // Replicas on shared backends: needs DATABASE_URL, REDIS_URL and CLICKHOUSE_URL in the environment.
    replicas: (v.replicas ?? '1').split(',').map(Number),
    abuse: v['no-abuse'] !== true,
    abuseOnly: v['abuse-only'] === true,
    // Fixed-rate runs after the closed-loop ones, at half of the median req/s just measured (or at
    // --latency-rate): every workload with --latency (or --latency-rate), none with --no-latency,
    // otherwise `small` in full runs and none with --quick.
    latencyRate: v['latency-rate'] === undefined ? undefined : Number(v['latency-rate']),
    // `taskset -c` lists: the server and floors on some cores, the load generators on others (scaling with cores).
    serverCpus: v['server-cpus'],
    loadCpus: v['load-cpus'],
    // Node/V8 flags for the server process alone, e.g. "--max-semi-space-size=64".
    serverNodeArgs: v['server-node-options'] === undefined ? [] : v['server-node-options'].split(/\s+/).filter(Boolean),
  };
  const latencyAll = v.latency === true || v['latency-rate'] !== undefined;
  o.latency = v['no-latency'] === true ? [] : latencyAll ? [...o.workloads] : quick ? [] : o.workloads.filter((w) => w === 'small');
  for (const w of o.workloads) if (!WORKLOAD_NAMES.includes(w)) throw new Error(`unknown workload "${w}" (known: ${WORKLOAD_NAMES.join(', ')})`);
  for (const m of o.modes) if (m !== 'fsync' && m !== 'memory') throw new Error(`unknown mode "${m}" (fsync, memory)`);
  for (const k of ['connections', 'duration', 'runs']) if (!(o[k] > 0)) throw new Error(`--${k} must be a positive number`);
  if (o.latencyRate !== undefined && !(o.latencyRate >= 1)) throw new Error('--latency-rate must be a number of requests per second, at least 1');
  if (v.latency === true && v['no-latency'] === true) throw new Error('--latency and --no-latency exclude each other');
  return o;
}

async function main() {
  if (process.argv.includes('--growth')) {
    await import('./growth.js');
    return;
  }
  if (process.argv.includes('--budget-check')) {
    await import('./budget-check.js');
    return;
  }
  if (process.argv.includes('--derive')) {
    await import('./derive.js');
    return;
  }
  if (process.argv.includes('--cluster')) {
    await import('./cluster.js');
    return;
  }
  if (process.argv.includes('--busy-lists')) {
    await import('./busy-lists.js');
    return;
  }
  if (process.argv.includes('--checkpoint')) {
    await import('./checkpoint.js');
    return;
  }
  if (process.argv.includes('--retention')) {
    await import('./retention.js');
    return;
  }
  const o = options(process.argv.slice(2));
  pinCpus({ server: o.serverCpus, load: o.loadCpus });
  if (!fs.existsSync(path.join(root, 'packages/server/dist/main.js'))) execFileSync('npx', ['tsc', '-b'], { cwd: root, stdio: 'inherit' });
  const results = [];
  for (const w of o.abuseOnly ? [] : o.workloads) {
    const runs = { discard: [], parse: [], store: [] };
    const keys = o.modes.flatMap((m) => o.replicas.map((n) => [m, n]));
    const service = Object.fromEntries(keys.map(([m, n]) => [`${m}|${n}`, []]));
    for (let r = 0; r < o.runs; r++) {
      // Interleaved, so a noisy neighbour hits the floors and the service alike.
      runs.discard.push(await measureFloor(w, 'discard', o));
      runs.parse.push(await measureFloor(w, 'parse', o));
      runs.store.push(await measureStoreFloor(w, o));
      const f = (x) => fmt(x);
      console.log(
        `  ${w} floors run ${r + 1}: discard ${f(runs.discard.at(-1).spansPerSec)}, JSON.parse ${f(runs.parse.at(-1).spansPerSec)} spans/s ` +
          `(${fmt(runs.parse.at(-1).cpuUsPerSpan, 1)} µs CPU/span), store insert ${f(runs.store.at(-1).rowsPerSec)} rows/s ` +
          `(${fmt(runs.store.at(-1).cpuUsPerRow, 1)} µs CPU/row)`,
      );
      for (const [m, n] of keys) {
        const x = await measureService(w, m, o, { replicas: n });
        service[`${m}|${n}`].push(x);
        console.log(
          `  ${w} ${m}${n > 1 ? `×${n}` : ''} run ${r + 1}: ${fmt(x.cpuUsPerSpan, 1)} µs CPU/span ` +
            `(${fmt(x.cpuSeconds, 1)} s, drain ${fmt(x.cpuDrainSeconds, 1)} s), ${f(x.spansPerSec)} spans/s, ` +
            `p99 ${fmt(x.p99, 1)} ms, non-2xx ${x.non2xx}, errors ${x.errors}, ` +
            `peak RSS ${f(x.peakRssMb)} MiB, lag ${f(x.lagMs)} ms, WAL ${fmt(x.walMbAtEnd, 1)} MB, ` +
            `stored ${x.stored}/${x.ackedSpans} acked (+${x.unackedStored}, ≤ ${x.maxUnacked} cut off), exit ${x.exitCodes.join(',')}; ` +
            `during the load, µs CPU/span by thread: ${Object.entries(x.threadCpuUsPerSpan)
              .map(([k, us]) => `${k} ${fmt(us, 1)}`)
              .join(', ')}`,
        );
      }
    }
    const modeName = (m, n) => (n > 1 ? `${m}×${n}` : m);
    const summary = (xs) => ({ ...medians(xs), lostSpans: Math.max(...xs.map((x) => x.lostSpans)), crashed: xs.some((x) => x.crashed), runs: xs });
    // Latency at a fixed rate: half of the median req/s just measured for this workload and mode
    // (or --latency-rate), same connections, a fresh server per run, interleaved over the modes.
    const latency = [];
    if (o.latency.includes(w)) {
      const targets = keys.map(([m, n]) => {
        const maxReqPerSec = median(service[`${m}|${n}`].map((x) => x.reqPerSec));
        return { m, n, maxReqPerSec, rate: o.latencyRate ?? (maxReqPerSec > 0 ? Math.max(1, Math.round(maxReqPerSec / 2)) : undefined), xs: [] };
      });
      for (const t of targets) if (t.rate === undefined) console.log(`  ${w} ${modeName(t.m, t.n)}: no 2xx answers in the closed-loop runs, no fixed-rate run`);
      for (let r = 0; r < o.runs; r++) {
        for (const t of targets.filter((x) => x.rate !== undefined)) {
          const x = await measureService(w, t.m, o, { replicas: t.n, rate: t.rate });
          t.xs.push(x);
          console.log(
            `  ${w} ${modeName(t.m, t.n)} at ${fmt(t.rate)} req/s run ${r + 1}: ` +
              `${fmt(x.reqPerSec, 1)} req/s (${x.connections} connections), ${fmt(x.spansPerSec)} spans/s, ` +
              `p50 ${fmt(x.p50, 1)} p90 ${fmt(x.p90, 1)} p99 ${fmt(x.p99, 1)} ms, non-2xx ${x.non2xx}, errors ${x.errors}, ` +
              `stored ${x.stored}/${x.ackedSpans} acked (+${x.unackedStored}, ≤ ${x.maxUnacked} cut off), exit ${x.exitCodes.join(',')}`,
          );
        }
      }
      for (const t of targets.filter((x) => x.xs.length > 0))
        latency.push({ mode: modeName(t.m, t.n), replicas: t.n, maxReqPerSec: t.maxReqPerSec, forced: o.latencyRate !== undefined, ...summary(t.xs) });
    }
    results.push({
      workload: w,
      connections: o.connections,
      floors: { discard: medians(runs.discard), parse: medians(runs.parse), store: medians(runs.store) },
      service: keys.map(([m, n]) => ({ mode: modeName(m, n), replicas: n, ...summary(service[`${m}|${n}`]) })),
      latency,
      rawFloors: runs,
    });
  }
  const abuse = o.abuse ? await measureAbuse(o) : undefined;
  printReport(o, results, abuse);
  console.log(`\nresults: ${writeJson(root, o, results, abuse)}`);
  // Correctness, not speed: an acknowledged span missing from the store, or a server that did not exit cleanly.
  const bad = results.flatMap((w) => [
    ...w.service.filter((s) => s.lostSpans > 0 || s.crashed).map((s) => `${w.workload} ${s.mode}`),
    ...w.latency.filter((s) => s.lostSpans > 0 || s.crashed).map((s) => `${w.workload} ${s.mode} at ${fmt(s.targetReqPerSec)} req/s`),
  ]);
  if (bad.length > 0) {
    console.error(`acknowledged spans missing from the store, or an unclean exit: ${bad.join(', ')}`);
    process.exitCode = 1;
  }
}

await main();
