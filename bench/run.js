// npm run bench [-- --quick] [--workloads small,large] [--connections 16] [--duration 10] [--runs 3]
//                  [--modes fsync,memory] [--replicas 1] [--no-abuse | --abuse-only]
// Starts the real server (built dist/) as a child process, drives it from another process with
// autocannon, and measures the floors side by side on the same payloads. See bench/README.md.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { measureAbuse } from './abuse.js';
import { measureFloor, measureService, measureStoreFloor } from './measure.js';
import { root } from './procs.js';
import { medians, printReport, writeJson, fmt } from './report.js';
import { WORKLOAD_NAMES } from './workloads.js';

function options(argv) {
  const known = new Set(['quick', 'workloads', 'connections', 'duration', 'runs', 'modes', 'replicas', 'no-abuse', 'abuse-only']);
  const flags = new Set(['quick', 'no-abuse', 'abuse-only']);
  const v = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m || !known.has(m[1])) throw new Error(`unknown argument "${argv[i]}"`);
    v[m[1]] = flags.has(m[1]) ? true : (m[2] ?? argv[++i]);
  }
  const quick = v.quick === true;
  const o = {
    quick,
    workloads: (v.workloads ?? (quick ? 'tiny,small' : 'tiny,small,large,max')).split(','),
    connections: Number(v.connections ?? (quick ? 4 : 16)),
    duration: Number(v.duration ?? (quick ? 2 : 10)),
    runs: Number(v.runs ?? (quick ? 1 : 3)),
    modes: (v.modes ?? 'fsync,memory').split(','),
    // Replicas on shared backends: needs DATABASE_URL, REDIS_URL and CLICKHOUSE_URL in the environment.
    replicas: (v.replicas ?? '1').split(',').map(Number),
    abuse: v['no-abuse'] !== true,
    abuseOnly: v['abuse-only'] === true,
  };
  for (const w of o.workloads) if (!WORKLOAD_NAMES.includes(w)) throw new Error(`unknown workload "${w}" (known: ${WORKLOAD_NAMES.join(', ')})`);
  for (const m of o.modes) if (m !== 'fsync' && m !== 'memory') throw new Error(`unknown mode "${m}" (fsync, memory)`);
  for (const k of ['connections', 'duration', 'runs']) if (!(o[k] > 0)) throw new Error(`--${k} must be a positive number`);
  return o;
}

async function main() {
  const o = options(process.argv.slice(2));
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
      console.log(`  ${w} floors run ${r + 1}: discard ${f(runs.discard.at(-1).spansPerSec)}, JSON.parse ${f(runs.parse.at(-1).spansPerSec)} spans/s, store insert ${f(runs.store.at(-1).rowsPerSec)} rows/s`);
      for (const [m, n] of keys) {
        const x = await measureService(w, m, o, n);
        service[`${m}|${n}`].push(x);
        console.log(
          `  ${w} ${m}${n > 1 ? `×${n}` : ''} run ${r + 1}: ${f(x.spansPerSec)} spans/s, p99 ${fmt(x.p99, 1)} ms, non-2xx ${x.non2xx}, errors ${x.errors}, ` +
            `peak RSS ${f(x.peakRssMb)} MiB, lag ${f(x.lagMs)} ms, WAL ${fmt(x.walMbAtEnd, 1)} MB, stored ${x.stored}/${x.ackedSpans} acked (+${x.unackedStored}, ≤ ${x.maxUnacked} cut off), exit ${x.exitCodes.join(',')}`,
        );
      }
    }
    results.push({
      workload: w,
      connections: o.connections,
      floors: { discard: medians(runs.discard), parse: medians(runs.parse), store: medians(runs.store) },
      service: keys.map(([m, n]) => {
        const xs = service[`${m}|${n}`];
        return { mode: n > 1 ? `${m}×${n}` : m, replicas: n, ...medians(xs), lostSpans: Math.max(...xs.map((x) => x.lostSpans)), crashed: xs.some((x) => x.crashed), runs: xs };
      }),
      rawFloors: runs,
    });
  }
  const abuse = o.abuse ? await measureAbuse(o) : undefined;
  printReport(o, results, abuse);
  console.log(`\nresults: ${writeJson(root, o, results, abuse)}`);
  // Correctness, not speed: an acknowledged span missing from the store, or a server that did not exit cleanly.
  const bad = results.flatMap((w) => w.service.filter((s) => s.lostSpans > 0 || s.crashed).map((s) => `${w.workload} ${s.mode}`));
  if (bad.length > 0) {
    console.error(`acknowledged spans missing from the store, or an unclean exit: ${bad.join(', ')}`);
    process.exitCode = 1;
  }
}

await main();
