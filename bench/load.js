// The load generator, in its own process so it never shares the server's thread.
// argv[2] is a JSON config file: { urls, key, workload, connections, duration, startId, rate }.
// `rate` (optional): requests per second over all connections (autocannon's overallRate) instead of
// keeping every connection busy. Prints one JSON object: autocannon's figures plus the spans the
// server acknowledged.
import fs from 'node:fs';
import autocannon from 'autocannon';
import { stamp, workload } from './workloads.js';

const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const { body, slots, spans } = workload(cfg.workload);

// One shared template: stamped in place, then copied by autocannon into the request buffer
// (synchronously, in setupRequest's caller), so every request gets its own ids.
let next = cfg.startId ?? 0;
let built = 0;
let ackedSpans = 0;
let ackedRequests = 0;
const request = {
  method: 'POST',
  path: '/ingest',
  headers: { 'content-type': 'application/json', authorization: `Bearer ${cfg.key}` },
  setupRequest: (req) => {
    built++;
    return { ...req, body: stamp(body, slots, next++) };
  },
  onResponse: (status, resBody) => {
    if (status < 200 || status > 299) return;
    ackedRequests++;
    // The service answers {"accepted": n}; the floors answer the same.
    const m = /"accepted"\s*:\s*(\d+)/.exec(resBody);
    ackedSpans += m ? Number(m[1]) : spans;
  },
};

const result = await autocannon({
  url: cfg.urls.length === 1 ? cfg.urls[0] : cfg.urls,
  connections: cfg.connections,
  duration: cfg.duration,
  requests: [request],
  timeout: cfg.timeout ?? 60,
  // autocannon splits overallRate over the connections (integers; fewer connections when the rate is
  // below their number). Its coordinated-omission correction is off: it assumes a 1 ms interval
  // between requests (Math.ceil(1 / per-connection rate)) and adds made-up samples below each
  // latency, which pulls p50 down. The latencies are each request's own send-to-answer times.
  ...(cfg.rate ? { overallRate: Math.max(1, Math.round(cfg.rate)), ignoreCoordinatedOmission: true } : {}),
});

process.stdout.write(
  JSON.stringify({
    requests: result.requests.total,
    ok: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    status: Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([k, v]) => [k, v.count])),
    duration: result.duration,
    connections: result.connections,
    rate: cfg.rate ? Math.max(1, Math.round(cfg.rate)) : undefined,
    latency: { p50: result.latency.p50, p90: result.latency.p90, p99: result.latency.p99, max: result.latency.max },
    bytesSent: result.requests.total * body.length,
    bodyBytes: body.length,
    spansPerRequest: spans,
    ackedRequests,
    ackedSpans,
    // Ids handed out: an upper bound on the spans the server can have seen (requests cut off at the end included).
    idsIssued: built,
    nextId: next,
  }),
);
