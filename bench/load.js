// The load generator, in its own process so it never shares the server's thread.
// argv[2] is a JSON config file: { urls, grpcTargets, key, workload, startAt, connections, duration, startId, rate, timeout }.
// With `grpcTargets` (host:port of OTLP/gRPC listeners): TraceService/Export calls instead (grpcLoop).
// Without `rate`: a closed loop with autocannon (every connection always has one request outstanding).
// With `rate` (requests per second over all connections): an open-loop generator on node:http that
// sends request i at t0 + i/rate and measures its latency from that scheduled time (see openLoop).
// Prints one JSON object: the request counts, latencies and the spans the server acknowledged.
import fs from 'node:fs';
import http from 'node:http';
import { clearImmediate, setImmediate } from 'node:timers';
import autocannon from 'autocannon';
import { stamp, workload } from './workloads.js';

const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const { body, slots, spans, path: reqPath, contentType } = workload(cfg.workload, { startAt: cfg.startAt });
const timeoutSecs = cfg.timeout ?? 60;

// One shared template, stamped in place with a request counter: every request gets its own ids.
let next = cfg.startId ?? 0;
let built = 0;
let ackedSpans = 0;
let ackedRequests = 0;

function onAnswer(status, resBody) {
  if (status < 200 || status > 299) return;
  ackedRequests++;
  // The service answers {"accepted": n}; the floors answer the same.
  const m = /"accepted"\s*:\s*(\d+)/.exec(resBody);
  ackedSpans += m ? Number(m[1]) : spans;
}

const headers = { 'content-type': contentType, authorization: `Bearer ${cfg.key}` };

/** Closed loop: autocannon keeps `connections` requests outstanding for `duration` seconds. */
async function closedLoop() {
  const result = await autocannon({
    url: cfg.urls.length === 1 ? cfg.urls[0] : cfg.urls,
    connections: cfg.connections,
    duration: cfg.duration,
    requests: [
      {
        method: 'POST',
        path: reqPath,
        headers,
        // autocannon copies the returned body into the request buffer synchronously (in setupRequest's caller).
        setupRequest: (req) => {
          built++;
          return { ...req, body: stamp(body, slots, next++) };
        },
        onResponse: onAnswer,
      },
    ],
    timeout: timeoutSecs,
  });
  return {
    requests: result.requests.total,
    ok: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    status: Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([k, v]) => [k, v.count])),
    duration: result.duration,
    connections: result.connections,
    latency: { p50: result.latency.p50, p90: result.latency.p90, p99: result.latency.p99, max: result.latency.max },
    bytesSent: result.requests.total * body.length,
  };
}

/** Nearest-rank percentiles (ms) of the first `n` values of `xs`; null when there are none. */
function percentiles(xs, n) {
  const s = xs.subarray(0, n).sort();
  const at = (p) => (n === 0 ? null : s[Math.max(0, Math.ceil((p / 100) * n) - 1)]);
  return { p50: at(50), p90: at(90), p99: at(99), max: at(100) };
}

/**
 * Open loop at a fixed rate, as wrk2 does: request i is due at t0 + i/rate for i < rate × duration.
 * A tight timer loop hands every due request to a free connection at once; when all `connections`
 * are busy, due requests wait in a FIFO queue (that queueing is part of what is measured). Its latency runs
 * from its scheduled time, not from when it was sent, to the end of the answer, so a slow answer
 * cannot hide the requests it delayed (no coordinated omission). After the last scheduled time the
 * queue is still sent and the answers awaited, up to `timeout` seconds; what is left is aborted
 * (or never sent) and counted as timeouts.
 */
async function openLoop() {
  const rate = cfg.rate;
  const interval = 1000 / rate; // ms between scheduled sends
  const total = Math.ceil(rate * cfg.duration);
  if (!(total >= 1) || total > 10_000_000) throw new Error(`fixed rate ${rate} req/s × ${cfg.duration} s: ${total} requests is out of bounds`);
  const timeoutMs = timeoutSecs * 1000;

  // A fixed pool of `connections` slots, spread over the urls (replicas) round-robin; one keep-alive
  // agent per url with exactly as many sockets as it has slots, so the agent never queues by itself
  // (lifo: at low rates the most recently used sockets are reused and idle ones may time out unused).
  const targets = cfg.urls.map((u) => {
    const url = new URL(u);
    return { hostname: url.hostname, port: Number(url.port || 80), slots: 0, agent: undefined };
  });
  const free = [];
  for (let c = 0; c < cfg.connections; c++) {
    const t = targets[c % targets.length];
    t.slots++;
    free.push(t);
  }
  for (const t of targets) if (t.slots > 0) t.agent = new http.Agent({ keepAlive: true, maxSockets: t.slots, maxFreeSockets: t.slots, scheduling: 'lifo' });
  const reqHeaders = { ...headers, 'content-length': String(body.length) };

  const latencies = new Float64Array(total); // scheduled time → end of the answer, per answered request
  const sendDelays = new Float64Array(total); // scheduled time → handed to node:http (timer lateness + queueing)
  let answered = 0;
  let sent = 0; // requests handed to node:http: 0 .. sent-1
  let due = 0; // requests whose scheduled time has passed: sent .. due-1 are queued
  let ok = 0;
  let non2xx = 0;
  let errors = 0;
  let timeouts = 0;
  let inFlight = 0;
  let lastEnd = 0;
  const status = {};
  const live = new Map(); // request in flight → its settle function

  const t0 = performance.now();
  const scheduleEnd = t0 + cfg.duration * 1000;
  let finish;
  const finished = new Promise((r) => (finish = r));
  let stopped = false;
  let timer;

  const maybeDone = () => {
    if (!stopped && due === total && sent === total && inFlight === 0) stop();
  };

  function send() {
    const target = free.shift();
    const scheduled = t0 + sent * interval;
    // stamp() writes into the shared template; the send is asynchronous, so each request gets a copy.
    const payload = Buffer.from(stamp(body, slots, next++));
    built++;
    sendDelays[sent++] = performance.now() - scheduled;
    inFlight++;
    let settled = false;
    const settle = (kind) => {
      if (settled) return false;
      settled = true;
      live.delete(req);
      if (kind === 'error') errors++;
      else if (kind === 'timeout') timeouts++;
      inFlight--;
      free.push(target);
      if (!stopped) setImmediate(pump);
      return true;
    };
    const req = http.request(
      { hostname: target.hostname, port: target.port, path: reqPath, method: 'POST', agent: target.agent, headers: reqHeaders },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => {
          if (text.length < 4096) text += c;
        });
        res.on('end', () => {
          const end = performance.now();
          if (!settle('answer')) return;
          latencies[answered++] = end - scheduled;
          lastEnd = Math.max(lastEnd, end);
          const code = res.statusCode;
          status[code] = (status[code] ?? 0) + 1;
          if (code >= 200 && code <= 299) ok++;
          else non2xx++;
          onAnswer(code, text);
          maybeDone();
        });
        res.on('error', () => settle('error') && maybeDone());
      },
    );
    live.set(req, settle);
    req.setNoDelay(true);
    req.setTimeout(timeoutMs, () => {
      settle('timeout');
      req.destroy();
      maybeDone();
    });
    req.on('error', () => settle('error') && maybeDone());
    req.end(payload);
  }

  function pump() {
    while (!stopped && sent < due && free.length > 0) send();
  }

  function tick() {
    timer = undefined;
    if (stopped) return;
    const now = performance.now();
    while (due < total && t0 + due * interval <= now) due++;
    pump();
    if (due < total) {
      // setTimeout has a 1 ms granularity: sleep while the next send is at least 1 ms away, then spin.
      const wait = t0 + due * interval - performance.now();
      timer = wait >= 1 ? { t: setTimeout(tick, Math.floor(wait)) } : { i: setImmediate(tick) };
    } else {
      maybeDone();
    }
  }

  function stop() {
    stopped = true;
    if (timer?.t) clearTimeout(timer.t);
    if (timer?.i) clearImmediate(timer.i);
    timer = undefined;
    finish();
  }

  // Bounded: `timeout` s after the last scheduled time, what is still in flight is cut off and what
  // is still queued is never sent; both count as timeouts.
  let cutOff = false;
  const deadline = setTimeout(
    () => {
      if (stopped) return;
      cutOff = true;
      stopped = true;
      timeouts += total - sent;
      for (const [req, settle] of [...live]) {
        settle('timeout');
        req.destroy();
      }
      stop();
    },
    scheduleEnd - t0 + timeoutMs,
  );

  tick();
  await finished;
  clearTimeout(deadline);
  const endedAt = cutOff ? performance.now() : Math.max(scheduleEnd, lastEnd);
  for (const t of targets) t.agent?.destroy();

  return {
    requests: answered,
    ok,
    non2xx,
    errors,
    timeouts,
    status,
    duration: (endedAt - t0) / 1000,
    connections: cfg.connections,
    latency: percentiles(latencies, answered),
    // scheduled time → handed to node:http: the generator's own lateness plus the wait for a free connection
    sendDelay: percentiles(sendDelays, sent),
    scheduled: total,
    unsent: total - sent,
    bytesSent: sent * body.length,
  };
}

/** A client per connection for TraceService/Export (each its own HTTP/2 connection), round-robin over the listeners. */
async function grpcClients() {
  const grpc = await import('@grpc/grpc-js');
  // The server's own definition of the service (raw bytes both ways) and path, from the built server.
  const { traceServiceDefinition } = await import('../packages/server/dist/otlp-grpc.js');
  const { OtlpCodec } = await import('../packages/server/dist/otlp-codec.js');
  const Client = grpc.makeGenericClientConstructor(traceServiceDefinition(new OtlpCodec().exportPath), 'TraceService');
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${cfg.key}`);
  const clients = Array.from(
    { length: cfg.connections },
    (_, c) =>
      new Client(cfg.grpcTargets[c % cfg.grpcTargets.length], grpc.credentials.createInsecure(), {
        'grpc.use_local_subchannel_pool': 1,
        'grpc.max_send_message_length': -1,
      }),
  );
  const counts = { ok: 0, non2xx: 0, errors: 0, timeouts: 0, status: {} };
  /** One call with a fresh copy of the stamped body (stamp() writes into the shared template; the call is asynchronous). */
  const call = (client) => {
    const payload = Buffer.from(stamp(body, slots, next++));
    built++;
    return new Promise((resolve) =>
      client.Export(payload, metadata, { deadline: Date.now() + timeoutSecs * 1000 }, (err) => {
        const name = err ? (grpc.status[err.code] ?? String(err.code)) : 'OK';
        counts.status[name] = (counts.status[name] ?? 0) + 1;
        // An OK answer acknowledges every span of the request (the workload has no span the server rejects).
        if (!err) {
          counts.ok++;
          ackedRequests++;
          ackedSpans += spans;
        } else if (err.code === grpc.status.DEADLINE_EXCEEDED) counts.timeouts++;
        else if (err.code === grpc.status.UNAVAILABLE && /connect/i.test(err.details)) counts.errors++;
        else counts.non2xx++;
        resolve();
      }),
    );
  };
  const close = () => clients.forEach((c) => c.close());
  return { clients, call, counts, close };
}

/**
 * OTLP/gRPC: each of `connections` clients has one TraceService/Export call outstanding for `duration`
 * seconds (closed loop), or, with `rate`, client c sends its k-th call at t0 + (k × connections + c) / rate
 * and its latency runs from that scheduled time (a late answer delays that client's next calls, and the
 * delay is counted in their latency).
 */
async function grpcLoop() {
  const { clients, call, counts, close } = await grpcClients();
  const latencies = [];
  const t0 = performance.now();
  const end = t0 + cfg.duration * 1000;
  const total = cfg.rate ? Math.ceil(cfg.rate * cfg.duration) : Infinity;
  await Promise.all(
    clients.map(async (client, c) => {
      for (let k = 0; ; k++) {
        let started = performance.now();
        if (cfg.rate) {
          const i = k * clients.length + c;
          if (i >= total) break;
          const due = t0 + (i * 1000) / cfg.rate;
          if (due > started) await new Promise((r) => setTimeout(r, due - started));
          started = due;
        } else if (started >= end) break;
        await call(client);
        latencies.push(performance.now() - started);
      }
    }),
  );
  const duration = (performance.now() - t0) / 1000;
  close();
  const xs = Float64Array.from(latencies);
  return {
    requests: latencies.length,
    ok: counts.ok,
    non2xx: counts.non2xx,
    errors: counts.errors,
    timeouts: counts.timeouts,
    status: counts.status,
    duration,
    connections: cfg.connections,
    latency: percentiles(xs, xs.length),
    bytesSent: latencies.length * body.length,
  };
}

const result = cfg.grpcTargets ? await grpcLoop() : cfg.rate ? await openLoop() : await closedLoop();
process.stdout.write(
  JSON.stringify({
    ...result,
    rate: cfg.rate || undefined,
    bodyBytes: body.length,
    spansPerRequest: spans,
    ackedRequests,
    ackedSpans,
    // Ids handed out: an upper bound on the spans the server can have seen (requests cut off at the end included).
    idsIssued: built,
    nextId: next,
  }),
);
