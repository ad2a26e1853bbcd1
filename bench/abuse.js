// Memory and abuse, measured (not asserted): each case on a fresh server (fsync mode),
// reporting the answers, how long they took, the server's peak RSS, whether it survived,
// and the latency of an ordinary `small` request sent while (or right after) the abuse runs.
/* global AbortSignal */
import net from 'node:net';
import { memoryOf, rssSampler, runLoad, sleep, startService } from './procs.js';
import { stamp, workload } from './workloads.js';

let probeId = 1e9;

/** One ordinary small batch: status and latency. */
async function probe(url, key) {
  const w = workload('small');
  const body = stamp(Buffer.from(w.body), w.slots, probeId++);
  const t0 = performance.now();
  try {
    const res = await fetch(`${url}/ingest`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body,
      signal: AbortSignal.timeout(120_000),
    });
    await res.arrayBuffer();
    return { status: res.status, ms: performance.now() - t0 };
  } catch (e) {
    return { status: `error: ${e.cause?.code ?? e.name}`, ms: performance.now() - t0 };
  }
}

async function post(url, key, body) {
  const t0 = performance.now();
  try {
    const res = await fetch(`${url}/ingest`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body,
      signal: AbortSignal.timeout(120_000),
    });
    const text = await res.text();
    return { status: res.status, ms: performance.now() - t0, answer: text.slice(0, 120) };
  } catch (e) {
    return { status: `error: ${e.cause?.code ?? e.name}`, ms: performance.now() - t0 };
  }
}

/** A body declared in full by Content-Length, then sent one byte every `everyMs`. Resolves when the server answers or closes. */
function trickle(url, key, body, everyMs, capMs) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const t0 = performance.now();
    const sock = net.connect(Number(port), hostname);
    let answer = '';
    let sent = 0;
    let timer;
    const done = (how) => {
      clearInterval(timer);
      sock.destroy();
      resolve({ ms: performance.now() - t0, bytesSent: sent, status: /^HTTP\/1\.1 (\d+)/.exec(answer)?.[1] ?? how });
    };
    sock.on('connect', () => {
      sock.write(
        `POST /ingest HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\n` +
          `Authorization: Bearer ${key}\r\nContent-Length: ${body.length}\r\n\r\n`,
      );
      timer = setInterval(() => {
        if (sent < body.length && !sock.destroyed) sock.write(body.subarray(sent, ++sent));
      }, everyMs);
    });
    sock.on('data', (c) => {
      answer += c;
      if (answer.includes('\r\n\r\n')) done('answered');
    });
    sock.on('close', () => done('closed without an answer'));
    sock.on('error', () => done('reset'));
    setTimeout(() => done(`still open after ${capMs} ms`), capMs).unref();
  });
}

async function withServer(env, fn) {
  const svc = await startService({ mode: 'fsync', extraEnv: env });
  const s = svc.servers[0];
  const rss = rssSampler(s.proc.pid, 20);
  try {
    const r = await fn(s.url, svc.key);
    await sleep(200);
    const alive = s.proc.exitCode === null && (await probe(s.url, svc.key)).status === 202;
    const now = memoryOf(s.proc.pid);
    return { ...r, peakRssMb: rss.stop() / 2 ** 20, rssAfterMb: now ? now.rss / 2 ** 20 : null, alive, exit: s.proc.exitCode };
  } finally {
    rss.stop();
    await svc.stop();
    await svc.cleanup();
  }
}

export async function measureAbuse(o) {
  const requestTimeoutMs = o.quick ? 3000 : 10_000;
  const env = { REQUEST_TIMEOUT_MS: String(requestTimeoutMs), HEADERS_TIMEOUT_MS: String(Math.min(5000, requestTimeoutMs)) };
  const cases = [];
  const add = (name, what, r) => {
    cases.push({ name, what, ...r });
    console.log(`  abuse ${name}: ${JSON.stringify(r)}`);
  };

  // Slow clients: more tricklers than MAX_CONCURRENT_BODIES (4), and an ordinary batch sent meanwhile.
  const tricklers = 8;
  add(
    'trickle',
    `${tricklers} small bodies sent 1 byte / 50 ms; REQUEST_TIMEOUT_MS=${requestTimeoutMs}; an ordinary small batch sent 0.5 s in`,
    await withServer(env, async (url, key) => {
      const body = stamp(Buffer.from(workload('small').body), workload('small').slots, 2e9);
      const slow = Array.from({ length: tricklers }, () => trickle(url, key, body, 50, requestTimeoutMs + 30_000));
      await sleep(500);
      const during = await probe(url, key);
      const r = await Promise.all(slow);
      return {
        statuses: [...new Set(r.map((x) => String(x.status)))].join(','),
        cutOffMs: Math.max(...r.map((x) => x.ms)),
        bytesTrickled: Math.max(...r.map((x) => x.bytesSent)),
        probeStatus: during.status,
        probeMs: during.ms,
      };
    }),
  );

  // Many concurrent maximum bodies.
  add(
    'max×16',
    `16 connections sending ~${(workload('max').body.length / 2 ** 20).toFixed(1)} MiB bodies for ${o.quick ? 3 : o.duration} s`,
    await withServer(env, async (url, key) => {
      const load = await runLoad({ urls: [url], key, workload: 'max', connections: 16, duration: o.quick ? 3 : o.duration });
      return {
        statuses: Object.entries(load.status)
          .map(([k, v]) => `${k}×${v}`)
          .join(','),
        errors: load.errors + load.timeouts,
        p99Ms: load.latency.p99,
        spansPerSec: load.ackedSpans / load.duration,
      };
    }),
  );

  // Deeply nested JSON, valid and unterminated.
  const depth = 100_000;
  add(
    'nested',
    `{"version":"v1","traces":` + `[×${depth} ]×${depth}}`,
    await withServer(env, async (url, key) => {
      const r = await post(url, key, `{"version":"v1","traces":${'['.repeat(depth)}${']'.repeat(depth)}}`);
      const p = await probe(url, key);
      return { statuses: String(r.status), answerMs: r.ms, answer: r.answer, probeStatus: p.status, probeMs: p.ms };
    }),
  );
  add(
    'nested-open',
    `${depth * 50} × "[" and no closing bracket`,
    await withServer(env, async (url, key) => {
      const r = await post(url, key, '['.repeat(depth * 50));
      const p = await probe(url, key);
      return { statuses: String(r.status), answerMs: r.ms, answer: r.answer, probeStatus: p.status, probeMs: p.ms };
    }),
  );

  // Huge arrays just under the body limit: as `traces`, and as a span's chunkOffsets (max 200 items).
  const n = 4_900_000;
  add(
    'huge-traces',
    `"traces" with ${n.toLocaleString('en-US')} numbers (~9.8 MB)`,
    await withServer(env, async (url, key) => {
      const r = await post(url, key, `{"version":"v1","traces":[${'0,'.repeat(n)}0]}`);
      const p = await probe(url, key);
      return { statuses: String(r.status), answerMs: r.ms, answer: r.answer, probeStatus: p.status, probeMs: p.ms };
    }),
  );
  add(
    'huge-chunks',
    `one span with chunkOffsets of ${n.toLocaleString('en-US')} numbers`,
    await withServer(env, async (url, key) => {
      const r = await post(
        url,
        key,
        `{"version":"v1","traces":[{"traceId":"huge","traceName":"x","spans":[{"spanId":"s","spanType":"llm","name":"x",` +
          `"startTime":1,"endTime":2,"chunkOffsets":[${'0,'.repeat(n)}0]}]}]}`,
      );
      const p = await probe(url, key);
      return { statuses: String(r.status), answerMs: r.ms, answer: r.answer, probeStatus: p.status, probeMs: p.ms };
    }),
  );
  return { requestTimeoutMs, cases };
}
