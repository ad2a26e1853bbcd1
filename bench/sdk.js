// The client SDK: µs per recorded span in the application, end-to-end send
// rate against the real server, and memory while the server is down.
//
//   npx tsc -b && node --expose-gc bench/sdk.js [spans]
import { TraceIngest, openaiUsage } from '../packages/sdk/dist/index.js';
import { countStored, freePort, startService } from './procs.js';

const N = Number(process.argv[2] ?? 100_000);
const gc = globalThis.gc ?? (() => {});
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const input = 'Summarize the customer conversation below in two sentences. '.repeat(8);
const output = 'The customer cannot log in after the update; support reset the password. '.repeat(4);
const usage = openaiUsage({
  prompt_tokens: 1200,
  completion_tokens: 300,
  prompt_tokens_details: { cached_tokens: 1024 },
  completion_tokens_details: { reasoning_tokens: 100 },
});

/** n llm spans under traces of 10, yielding to the event loop every 1000 so the sender runs. */
async function record(client, n) {
  let trace;
  for (let i = 0; i < n; i++) {
    if (i % 10 === 0) trace = client.startTrace({ name: 'chat', customer: `cust-${i % 100}` });
    trace.startSpan({ name: 'completion', provider: 'openai', model: 'gpt-4o-mini', input }).end({ output, usage });
    if (i % 1000 === 999) await new Promise((r) => setTimeout(r, 0));
  }
}

// 1. Recording cost in the application: the sender parked, the queue large enough.
const recordUs = [];
for (let run = 0; run < 5; run++) {
  const c = new TraceIngest({
    baseUrl: 'http://127.0.0.1:9',
    apiKey: 'ti_bench',
    flushAt: 1e9,
    flushAtBytes: 1e12,
    flushIntervalMs: 3_600_000,
    maxQueueSpans: 1e9,
    maxQueueBytes: 1e12,
    flushOnExit: false,
    onError: () => {},
  });
  const n = Math.min(N, 50_000);
  const t0 = process.hrtime.bigint();
  let trace;
  for (let i = 0; i < n; i++) {
    if (i % 10 === 0) trace = c.startTrace({ name: 'chat', customer: `cust-${i % 100}` });
    trace.startSpan({ name: 'completion', provider: 'openai', model: 'gpt-4o-mini', input }).end({ output, usage });
  }
  recordUs.push(Number(process.hrtime.bigint() - t0) / 1000 / n);
  await c.shutdown(0);
  gc();
}

// 2. End to end against the real server (fsync durability).
const svc = await startService({ mode: 'fsync' });
let sendResult;
try {
  let requests = 0;
  let bytes = 0;
  const counted = async (url, init) => {
    requests++;
    bytes += init.body.byteLength ?? init.body.length;
    return fetch(url, init);
  };
  const c = new TraceIngest({
    baseUrl: svc.urls[0],
    apiKey: svc.key,
    fetch: counted,
    flushOnExit: false,
    maxQueueSpans: N,
    maxQueueBytes: 1e12,
    onError: (e) => console.error(e.message),
  });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await record(c, N);
  const ok = await c.flush(600_000);
  const secs = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  await svc.stop();
  const stored = await countStored(svc.env);
  sendResult = { ok, secs, rate: N / secs, cpuUsPerSpan: (cpu.user + cpu.system) / N, requests, mibSent: bytes / 1048576, stored, stats: c.getStats() };
} finally {
  await svc.cleanup();
}

// 3. The server down: default queue bounds, N spans ended.
gc();
const before = process.memoryUsage();
const down = new TraceIngest({
  baseUrl: `http://127.0.0.1:${await freePort()}`,
  apiKey: 'ti_bench',
  flushOnExit: false,
  onError: () => {},
  retry: { maxElapsedMs: 3_600_000 },
});
const tDown = performance.now();
await record(down, N);
const downSecs = (performance.now() - tDown) / 1000;
gc();
const after = process.memoryUsage();
const s = down.getStats();
await down.shutdown(0);

console.log(`SDK, ${N} llm spans of ~${Math.round((input.length + output.length + 250) / 100) / 10} KB`);
console.log(`  record (span.end, sender parked): ${median(recordUs).toFixed(1)} µs/span (median of 5 runs of ${Math.min(N, 50_000)})`);
console.log(
  `  send to the real server: ${sendResult.rate.toFixed(0)} spans/s end to end (${sendResult.secs.toFixed(1)} s), ` +
    `client CPU ${sendResult.cpuUsPerSpan.toFixed(1)} µs/span, ${sendResult.requests} requests, ${sendResult.mibSent.toFixed(1)} MiB gzip'd, ` +
    `stored ${sendResult.stored}/${N}, flush ${sendResult.ok ? 'complete' : 'TIMED OUT'}`,
);
console.log(
  `  server down, default bounds: ${s.queued} queued + ${s.inFlight} in flight, ${s.dropped} dropped in ${downSecs.toFixed(1)} s; ` +
    `heap +${((after.heapUsed - before.heapUsed) / 1048576).toFixed(1)} MiB, RSS +${((after.rss - before.rss) / 1048576).toFixed(1)} MiB`,
);
if (sendResult.stored !== N) process.exitCode = 1;
