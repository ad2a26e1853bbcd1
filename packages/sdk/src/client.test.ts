import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { describe, expect, it, onTestFinished } from 'vitest';
import { TraceIngest, type TraceIngestError } from './client.js';
import type { TraceV1 } from './types.js';

/** A local HTTP listener that answers with the given status; it records each request's decoded body. */
async function listener(answer: (n: number) => { status: number; headers?: Record<string, string>; body?: unknown }) {
  const bodies: { traces: { traceId: string; spans: unknown[] }[] }[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let raw = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip') raw = zlib.gunzipSync(raw);
      bodies.push(JSON.parse(raw.toString('utf8')) as (typeof bodies)[number]);
      const a = answer(bodies.length);
      res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers });
      res.end(JSON.stringify(a.body ?? { accepted: 1 }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  onTestFinished(() => new Promise<void>((r) => server.close(() => r())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies };
}

const trace = (traceId: string, n: number): TraceV1 => ({
  traceId,
  traceName: 't',
  spans: Array.from({ length: n }, (_, i) => ({ spanId: `s${i}`, spanType: 'other' as const, name: 'n', startTime: 1, endTime: 1 })),
});

function make(url: string, opts: ConstructorParameters<typeof TraceIngest>[0] = {}) {
  const errors: TraceIngestError[] = [];
  const c = new TraceIngest({ baseUrl: url, apiKey: 'ti_test', flushOnExit: false, onError: (e) => errors.push(e), ...opts });
  onTestFinished(() => void c.shutdown(50));
  return { c, errors };
}

describe('TraceIngest', () => {
  it('reads its options from the environment', () => {
    const before = { ...process.env };
    onTestFinished(() => {
      process.env = before;
    });
    process.env['TRACE_INGEST_URL'] = 'http://example.test:4000/';
    process.env['TRACE_INGEST_API_KEY'] = 'ti_env';
    const c = new TraceIngest({ flushOnExit: false });
    onTestFinished(() => void c.shutdown(10));
    expect(c.baseUrl).toBe('http://example.test:4000');
  });

  it('without a key, says so once and records nothing', async () => {
    const errors: TraceIngestError[] = [];
    const c = new TraceIngest({ apiKey: '', onError: (e) => errors.push(e) });
    c.send(trace('t', 2));
    c.startTrace({ name: 'x' }).startSpan({ name: 's' }).end();
    expect(errors.map((e) => e.code)).toEqual(['SDK_NO_API_KEY']);
    // Each span not sent is counted.
    expect(c.getStats()).toMatchObject({ queued: 0, sent: 0, dropped: 3 });
    expect(await c.shutdown()).toBe(true);
  });

  it('says "connection refused to <url>" at the first failure, once, while it keeps retrying', async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise<void>((r) => closed.close(() => r()));
    const warnings: string[] = [];
    const { c, errors } = make(url, { retry: { initialDelayMs: 20, maxDelayMs: 40, maxElapsedMs: 60_000 }, onWarning: (m) => warnings.push(m) });
    c.send(trace('t', 2));
    await c.flush(300);
    expect(warnings).toEqual([`connection refused to ${url} (check TRACE_INGEST_URL); retrying`]);
    // No span is lost yet: onError stays for spans that will not be sent.
    expect(errors).toEqual([]);
    expect(c.getStats().retried).toBeGreaterThan(1);
  });

  it('never throws into the application: bad input, a throwing onError, shutdown twice', async () => {
    const { url } = await listener(() => ({ status: 202 }));
    const c = new TraceIngest({
      baseUrl: url,
      apiKey: 'ti_test',
      flushOnExit: false,
      onError: () => {
        throw new Error('callback bug');
      },
    });
    expect(() => c.send(null as unknown as TraceV1)).not.toThrow();
    expect(() => c.send({ traceId: '', spans: [{}] } as unknown as TraceV1)).not.toThrow();
    expect(() => c.startTrace({}).startSpan({ name: 'x' }).end()).not.toThrow();
    expect(c.getStats().failed).toBe(2);
    expect(await c.shutdown()).toBe(true);
    expect(await c.shutdown()).toBe(true);
  });

  it('reports a 400 with the server error, code and issues, without retrying', async () => {
    const srv = await listener(() => ({
      status: 400,
      body: { error: 'payload failed validation', code: 'TI_ERR_VALIDATION', issues: [{ path: 'traces[0]', message: 'bad' }] },
    }));
    const { c, errors } = make(srv.url);
    c.send(trace('t', 3));
    expect(await c.flush()).toBe(true);
    expect(srv.bodies).toHaveLength(1);
    expect(errors[0]).toMatchObject({
      message: 'payload failed validation',
      code: 'TI_ERR_VALIDATION',
      status: 400,
      spans: 3,
      issues: [{ path: 'traces[0]', message: 'bad' }],
    });
  });

  it('retries a 503 with Retry-After and a 500 with backoff', async () => {
    const srv = await listener((n) =>
      n === 1
        ? { status: 503, headers: { 'retry-after': '0' }, body: { error: 'draining', code: 'TI_ERR_DRAINING' } }
        : n === 2
          ? { status: 500, body: { error: 'oops' } }
          : { status: 202 },
    );
    const { c, errors } = make(srv.url, { retry: { initialDelayMs: 10, maxDelayMs: 20 } });
    c.send(trace('t', 2));
    expect(await c.flush()).toBe(true);
    expect(errors).toEqual([]);
    expect(srv.bodies).toHaveLength(3);
    expect(c.getStats()).toMatchObject({ sent: 2, retried: 2, failed: 0 });
  });

  it('sends on a runtime without AbortSignal.any, and a timed-out request is retried', async () => {
    const any = AbortSignal.any;
    (AbortSignal as { any?: unknown }).any = undefined;
    onTestFinished(() => {
      AbortSignal.any = any;
    });
    let slow = true;
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (slow) {
          slow = false;
          return; // never answers: the client's request timeout fires
        }
        res.writeHead(202, { 'content-type': 'application/json' });
        res.end('{"accepted":1}');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    onTestFinished(() => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    });
    const { c, errors } = make(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, {
      requestTimeoutMs: 200,
      retry: { initialDelayMs: 10, maxDelayMs: 20 },
    });
    c.send(trace('t', 1));
    expect(await c.flush()).toBe(true);
    expect(errors).toEqual([]);
    expect(c.getStats()).toMatchObject({ sent: 1, retried: 1 });
  });

  it('reports a 413 as final', async () => {
    const srv = await listener(() => ({ status: 413, body: { error: 'too large', code: 'TI_ERR_PAYLOAD_TOO_LARGE' } }));
    const { c, errors } = make(srv.url);
    c.send(trace('t', 1));
    await c.flush();
    expect(srv.bodies).toHaveLength(1);
    expect(errors[0]?.code).toBe('TI_ERR_PAYLOAD_TOO_LARGE');
  });

  it('drop-newest keeps the oldest spans; drop-oldest keeps the newest; both count the drops', async () => {
    for (const policy of ['drop-newest', 'drop-oldest'] as const) {
      const srv = await listener(() => ({ status: 202 }));
      const { c, errors } = make(srv.url, { maxQueueSpans: 5, flushAt: 1000, flushIntervalMs: 60_000, whenQueueFull: policy });
      for (let i = 0; i < 8; i++) c.send(trace(`t${i}`, 1));
      expect(c.getStats()).toMatchObject({ queued: 5, dropped: 3 });
      expect(errors.map((e) => e.code)).toEqual(['SDK_QUEUE_FULL']);
      expect(await c.flush()).toBe(true);
      const ids = srv.bodies.flatMap((b) => b.traces.map((t) => t.traceId));
      expect(ids).toEqual(policy === 'drop-newest' ? ['t0', 't1', 't2', 't3', 't4'] : ['t3', 't4', 't5', 't6', 't7']);
    }
  });

  it('refuses a span too large for any request, alone', async () => {
    const srv = await listener(() => ({ status: 202 }));
    const { c, errors } = make(srv.url, { maxBodyBytes: 10_000 });
    const t = trace('t', 2);
    (t.spans[0] as { input?: string }).input = 'z'.repeat(20_000);
    c.send(t);
    expect(await c.flush()).toBe(true);
    expect(errors.map((e) => e.code)).toEqual(['SDK_SPAN_TOO_LARGE']);
    expect(c.getStats()).toMatchObject({ sent: 1, failed: 1 });
  });

  it('shutdown is bounded: what cannot be sent in time is reported', async () => {
    const { c, errors } = make('http://127.0.0.1:9', { retry: { initialDelayMs: 1000, maxDelayMs: 1000, maxElapsedMs: 60_000 } });
    c.send(trace('t', 4));
    const started = Date.now();
    expect(await c.shutdown(300)).toBe(false);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(c.getStats()).toMatchObject({ failed: 4, queued: 0, sent: 0 });
    expect(errors.at(-1)?.code).toBe('SDK_SHUTDOWN_TIMEOUT');
  });
});
