// One measurement each of the service and of the floors, on the same workload and connections.
import { workload } from './workloads.js';
import {
  clickhouseQuery,
  countStored,
  cpuOf,
  reapedChildrenCpu,
  rssSampler,
  runChild,
  runLoad,
  sleep,
  startFloor,
  startService,
  threadCpuOf,
  walBytes,
} from './procs.js';

const WARMUP_SECONDS = 3;
// Ids of the warm-up requests, far above any measured run's (each request takes one id).
const WARMUP_FIRST_ID = 36 ** 10;

function loadFigures(load, countAcked = true) {
  const secs = load.duration;
  return {
    // The service says how many spans it accepted; a floor's 2xx stands for the whole body.
    spansPerSec: (countAcked ? load.ackedSpans : load.ok * load.spansPerRequest) / secs,
    mbPerSec: (load.ok * load.bodyBytes) / secs / 1e6,
    reqPerSec: load.ok / secs,
    p50: load.latency.p50,
    p90: load.latency.p90,
    p99: load.latency.p99,
    non2xx: load.non2xx,
    errors: load.errors + load.timeouts,
    status: load.status,
  };
}

/**
 * The service: load for the duration, then the end-to-end lag until every acknowledged
 * span is in the store. DuckDB (one process per file): SIGTERM at once, the drain flushes
 * the write log, lag = time until the process exits, then the file is opened and counted.
 * ClickHouse: poll `count() FINAL` until it reaches the acknowledged spans, then SIGTERM.
 * `rate` (req/s over all connections): a fixed request rate instead of a closed loop.
 */
export async function measureService(name, mode, o, { replicas = 1, rate } = {}) {
  const grpc = workload(name).grpc;
  const svc = await startService({ mode, replicas, grpc, nodeArgs: o.serverNodeArgs ?? [] });
  // An OTLP/gRPC workload is sent to the servers' gRPC listeners.
  const targets = grpc ? { grpcTargets: svc.grpcTargets } : {};
  try {
    const samplers = svc.servers.map((s) => rssSampler(s.proc.pid));
    // Server CPU from here (ready, idle) to its exit: request path, flusher and store alike.
    const cpuAtStart = svc.servers.reduce((n, s) => n + (cpuOf(s.proc.pid) ?? 0), 0);
    const threadsAtStart = svc.servers.map((s) => threadCpuOf(s.proc.pid));
    // A fixed-rate run measures a warm server: the JIT's first seconds are a start-up cost,
    // not latency under load. The warm-up's spans are counted in the store check below.
    const warm = rate
      ? await runLoad({
          urls: svc.urls,
          ...targets,
          key: svc.key,
          workload: name,
          connections: o.connections,
          duration: WARMUP_SECONDS,
          rate,
          startId: WARMUP_FIRST_ID,
        })
      : undefined;
    const load = await runLoad({ urls: svc.urls, ...targets, key: svc.key, workload: name, connections: o.connections, duration: o.duration, rate });
    const acked = load.ackedSpans + (warm?.ackedSpans ?? 0);
    const unacked = (load.idsIssued - load.ackedRequests + (warm ? warm.idsIssued - warm.ackedRequests : 0)) * load.spansPerRequest;
    const t0 = performance.now();
    const walAtEnd = svc.servers.reduce((n, s) => n + walBytes(s.dir), 0);
    let lagMs;
    let stored;
    if (svc.env.CLICKHOUSE_URL) {
      const db = new URL(svc.env.CLICKHOUSE_URL).pathname.slice(1);
      const deadline = Date.now() + 600_000;
      for (;;) {
        stored = Number(await clickhouseQuery(svc.env.CLICKHOUSE_URL, `SELECT count() FROM ${db}.spans FINAL`));
        if (stored >= acked || Date.now() > deadline) break;
        await sleep(20);
      }
      lagMs = performance.now() - t0;
    }
    const cpuAtLoadEnd = svc.servers.reduce((n, s) => n + (cpuOf(s.proc.pid) ?? 0), 0);
    const threadsAtLoadEnd = svc.servers.map((s) => threadCpuOf(s.proc.pid));
    const reapedBefore = reapedChildrenCpu();
    const t1 = performance.now();
    const exits = await svc.stop();
    // The servers are the only children that exit between these two reads.
    const cpuTotal = reapedChildrenCpu() - reapedBefore - cpuAtStart;
    const drainMs = performance.now() - t1;
    if (lagMs === undefined) lagMs = drainMs;
    const peakRss = Math.max(...samplers.map((x) => x.stop()));
    stored = await countStored(svc.env);
    const crashed = exits.filter((e) => e.code !== 0);
    return {
      ...loadFigures(load),
      // Only for a fixed rate: the rate asked of the paced generator and the connections it used for it.
      ...(load.rate ? { targetReqPerSec: load.rate, connections: load.connections } : {}),
      peakRssMb: peakRss / 2 ** 20,
      // The headline: server CPU (user + system) per stored span, load and drain.
      cpuUsPerSpan: stored > 0 ? (cpuTotal * 1e6) / stored : NaN,
      cpuSeconds: cpuTotal,
      cpuDrainSeconds: cpuTotal + cpuAtStart - cpuAtLoadEnd,
      // The load's CPU (not the drain's) by kind of thread, in µs per span acknowledged during it.
      threadCpuUsPerSpan: threadSplit(threadsAtStart, threadsAtLoadEnd, load.ackedSpans),
      lagMs,
      drainMs,
      walMbAtEnd: walAtEnd / 1e6,
      ackedSpans: acked,
      stored,
      // Requests cut off when the load stopped may still have been accepted: stored may exceed acked by that much.
      lostSpans: Math.max(0, acked - stored),
      unackedStored: stored - acked,
      maxUnacked: unacked,
      ...(warm ? { warmupSeconds: WARMUP_SECONDS } : {}),
      exitCodes: exits.map((e) => e.code ?? e.signal),
      crashed: crashed.length > 0,
    };
  } finally {
    await svc.cleanup();
  }
}

/** CPU µs per span of each kind of thread between two threadCpuOf reads of each server (kinds summed over servers). */
function threadSplit(before, after, spans) {
  const out = {};
  for (const [i, a] of after.entries()) {
    const b = before[i];
    if (a === undefined || b === undefined) continue;
    for (const k of Object.keys(a)) out[k] = (out[k] ?? 0) + ((a[k] - b[k]) * 1e6) / spans;
  }
  return out;
}

/** Floor (a) `discard` or (b) `parse`: a bare node:http server in its own process, same load. */
export async function measureFloor(name, kind, o) {
  const floor = await startFloor(kind);
  try {
    const rss = rssSampler(floor.proc.pid);
    const cpu0 = cpuOf(floor.proc.pid) ?? NaN;
    const load = await runLoad({ urls: [floor.url], key: 'x', workload: name, connections: o.connections, duration: o.duration });
    const cpu = (cpuOf(floor.proc.pid) ?? NaN) - cpu0;
    // Per span handled: every answered body, the ones answered after the measured window included.
    const handled = (load.idsIssued ?? load.ok) * load.spansPerRequest;
    return { ...loadFigures(load, false), peakRssMb: rss.stop() / 2 ** 20, cpuUsPerSpan: (cpu * 1e6) / handled, cpuSeconds: cpu };
  } finally {
    await floor.stop();
  }
}

/** Floor (c): the same rows bulk-inserted straight into the store (DuckDB read_json, ClickHouse JSONEachRow). */
export function measureStoreFloor(name, o) {
  const rows = o.quick ? 5_000 : 20_000;
  return runChild('floor-store.js', { workload: name, rows, clickhouseUrl: process.env.CLICKHOUSE_URL });
}
