import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import express from 'express';
import { pino } from 'pino';
import { describe, expect, it, onTestFinished } from 'vitest';
import {
  BufferFullError,
  ERROR_CODES,
  QuotaExceededError,
  ServiceUnavailableError,
  UnauthorizedError,
  refusalReason,
  type ErrorCode,
} from '@trace-ingest/shared/errors';
import { DEFAULT_OTLP_MAPPING } from '@trace-ingest/shared/otlp-genai';
import { UNPRICED } from '@trace-ingest/shared/rows';
import type { ResolvedKey } from '@trace-ingest/store/control-store-types';
import { makePayload, makeResolvedKey, makeSpan, makeTrace } from '../../../test/factories.js';
import { createApp, errorMiddleware, type AppDeps } from './app.js';
import { presentedKey } from './auth.js';
import { BodySlots } from './body.js';
import { Metrics } from './metrics.js';
import { OtlpCodec } from './otlp-codec.js';
import { MemoryRateLimiter } from './rate-limit.js';

// The HTTP surface in process: createApp over fakes that record what the
// handler did or fail the way a store, the write log or a limit fails.
// The real server with its real parts is tested in test/integration/.

const KEY = 'ti_' + 'k'.repeat(43);
const RESOLVED: ResolvedKey = makeResolvedKey(KEY);

interface Harness {
  url: string;
  deps: AppDeps;
  appended: { lines: Buffer; rows: number }[];
  counted: number[];
  notified: () => number;
  post(body: unknown, headers?: Record<string, string>): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }>;
}

async function harness(over: Partial<AppDeps> = {}): Promise<Harness> {
  const appended: { lines: Buffer; rows: number }[] = [];
  const counted: number[] = [];
  let notified = 0;
  const deps: AppDeps = {
    maxBodyBytes: 64 * 1024,
    auth: {
      authenticate: (src) => (presentedKey(src) === KEY ? Promise.resolve(RESOLVED) : Promise.reject(new UnauthorizedError())),
    },
    limiter: new MemoryRateLimiter(),
    quota: {
      check: () => Promise.resolve(),
      add: (_org, batches) => {
        for (const b of batches) counted.push(b.spans);
        return Promise.resolve();
      },
      close: () => Promise.resolve(),
    },
    pricing: { refresh: () => Promise.resolve(), price: () => UNPRICED },
    log: {
      append: (lines, rows) => {
        appended.push({ lines, rows });
        return Promise.resolve();
      },
    },
    flusher: { notify: () => void notified++ },
    slots: new BodySlots(2),
    metrics: new Metrics(),
    logger: pino({ level: 'silent' }),
    isDraining: () => false,
    checkReady: () => Promise.resolve(),
    otlp: { codec: new OtlpCodec(), mapping: DEFAULT_OTLP_MAPPING },
    ...over,
  };
  const server = http.createServer(createApp(deps));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    deps,
    appended,
    counted,
    notified: () => notified,
    async post(body, headers = {}) {
      const res = await fetch(`${url}/ingest`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}`, ...headers },
        body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body),
      });
      return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
    },
  };
}

/** The value of one labelled series in the Prometheus text. */
async function metric(h: Harness, series: string): Promise<number> {
  const text = await h.deps.metrics.registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

function expectRefusal(r: { status: number; body: Record<string, unknown> }, code: ErrorCode): void {
  expect(ERROR_CODES[code].status).toContain(r.status);
  expect(r.body.code).toBe(code);
  expect(typeof r.body.error).toBe('string');
  expect((r.body.error as string).length).toBeGreaterThan(10);
}

describe('POST /ingest in process', () => {
  it('accepts a batch: appends its lines, wakes the flusher, counts the spans', async () => {
    const h = await harness();
    const r = await h.post(makePayload({ traces: [makeTrace({ spans: [makeSpan(), makeSpan()] })] }));
    expect(r.status).toBe(202);
    expect(r.body).toEqual({ accepted: 2 });
    expect(h.appended).toHaveLength(1);
    expect(h.appended[0]?.rows).toBe(2);
    expect(
      h.appended[0]?.lines
        .toString()
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { org_id: string }).org_id),
    ).toEqual(['org_1', 'org_1']);
    expect(h.notified()).toBe(1);
    expect(h.counted).toEqual([2]);
    expect(r.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(await metric(h, 'trace_ingest_spans_accepted_total')).toBe(2);
  });

  it('checks in the contract order: size before key, key before limits, limits before the body', async () => {
    const quotaChecked: string[] = [];
    const h = await harness({
      maxBodyBytes: 100,
      quota: {
        check: (org) => {
          quotaChecked.push(org);
          return Promise.reject(new QuotaExceededError(1000));
        },
        add: () => Promise.resolve(),
        close: () => Promise.resolve(),
      },
    });
    // Too large and no key: the size answers.
    expectRefusal(await h.post('x'.repeat(200), { authorization: '' }), 'TI_ERR_PAYLOAD_TOO_LARGE');
    // No key and a body that is not JSON: the key answers, the body is never read.
    expectRefusal(await h.post('not json', { authorization: '' }), 'TI_ERR_UNAUTHORIZED');
    expect(quotaChecked).toEqual([]);
    // A key over its quota with a body that is not JSON: the quota answers.
    const q = await h.post('not json');
    expectRefusal(q, 'TI_ERR_QUOTA_EXCEEDED');
    expect(q.headers.get('retry-after')).toBeNull();
    expect(quotaChecked).toEqual(['org_1']);
    expect(h.appended).toEqual([]);
  });

  it('maps each way a batch fails to its status, code and refusal metric', async () => {
    const h = await harness();
    const cases: [Promise<{ status: number; headers: Headers; body: Record<string, unknown> }>, ErrorCode][] = [
      [h.post('{"version":'), 'TI_ERR_INVALID_JSON'],
      [h.post({ version: 'v1', traces: [] }), 'TI_ERR_VALIDATION'],
      [h.post('{}', { 'content-type': 'text/plain' }), 'TI_ERR_CONTENT_TYPE'],
      [h.post('{}', { 'content-encoding': 'zstd-nope' }), 'TI_ERR_CONTENT_ENCODING'],
      [h.post(Buffer.from('not gzip at all'), { 'content-encoding': 'gzip' }), 'TI_ERR_CONTENT_ENCODING'],
      [h.post('{}', { authorization: 'Bearer ti_short' }), 'TI_ERR_UNAUTHORIZED'],
    ];
    for (const [pending, code] of cases) expectRefusal(await pending, code);
    const v = await h.post({ version: 'v1', traces: [] });
    expect(Array.isArray(v.body.issues)).toBe(true);
    expect(await metric(h, 'trace_ingest_batches_rejected_total{reason="validation"}')).toBe(6);
    expect(await metric(h, 'trace_ingest_batches_rejected_total{reason="auth"}')).toBe(1);
    expect(await metric(h, 'trace_ingest_requests_total{status="400",code="TI_ERR_INVALID_JSON"}')).toBe(1);
    expect(h.appended).toEqual([]);
  });

  it('takes a gzip body and refuses one that expands past the limit', async () => {
    const h = await harness({ maxBodyBytes: 4096 });
    const ok = await h.post(gzipSync(JSON.stringify(makePayload())), { 'content-encoding': 'gzip' });
    expect(ok.status).toBe(202);
    const bomb = await h.post(gzipSync(Buffer.alloc(1 << 20, 0x20)), { 'content-encoding': 'gzip' });
    expectRefusal(bomb, 'TI_ERR_PAYLOAD_TOO_LARGE');
    expect(await metric(h, 'trace_ingest_batches_rejected_total{reason="size"}')).toBe(1);
  });

  it('answers 429 with Retry-After once the key spends its rate', async () => {
    const h = await harness({
      auth: { authenticate: () => Promise.resolve({ ...RESOLVED, rateLimitRps: 1 }) },
    });
    expect((await h.post(makePayload())).status).toBe(202);
    const r = await h.post(makePayload());
    expectRefusal(r, 'TI_ERR_RATE_LIMITED');
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await metric(h, `trace_ingest_batches_rejected_total{reason="${refusalReason('TI_ERR_RATE_LIMITED')}"}`)).toBe(1);
  });

  it('answers 503 with Retry-After while draining, when the write log is full and when the key store is away', async () => {
    let draining = true;
    let logFull = false;
    let storeAway = false;
    const h = await harness({
      isDraining: () => draining,
      auth: {
        authenticate: () =>
          storeAway ? Promise.reject(new ServiceUnavailableError('key store (PostgreSQL) is unreachable; retry shortly', 2)) : Promise.resolve(RESOLVED),
      },
      log: { append: () => (logFull ? Promise.reject(new BufferFullError(3)) : Promise.resolve()) },
    });
    const d = await h.post(makePayload());
    expectRefusal(d, 'TI_ERR_DRAINING');
    expect(d.headers.get('retry-after')).toBe('1');
    draining = false;
    logFull = true;
    const f = await h.post(makePayload());
    expectRefusal(f, 'TI_ERR_BUFFER_FULL');
    expect(f.headers.get('retry-after')).toBe('3');
    logFull = false;
    storeAway = true;
    const s = await h.post(makePayload());
    expectRefusal(s, 'TI_ERR_UNAVAILABLE');
    expect(s.headers.get('retry-after')).toBe('2');
    expect(await metric(h, 'trace_ingest_batches_rejected_total{reason="draining"}')).toBe(1);
    expect(await metric(h, 'trace_ingest_batches_rejected_total{reason="buffer_full"}')).toBe(1);
    expect(await metric(h, 'trace_ingest_batches_rejected_total{reason="error"}')).toBe(1);
  });

  it('answers 500 without the cause when something unexpected fails, and logs it', async () => {
    const logged: string[] = [];
    const h = await harness({
      log: { append: () => Promise.reject(new Error('EIO: disk on fire at /secret/path')) },
      logger: pino({ level: 'error' }, { write: (line: string) => void logged.push(line) }),
    });
    const r = await h.post(makePayload());
    expectRefusal(r, 'TI_ERR_INTERNAL');
    expect(JSON.stringify(r.body)).not.toContain('secret');
    expect(logged.join('')).toContain('disk on fire');
    expect(logged.join('')).not.toContain(KEY);
    expect(h.counted).toEqual([]);
  });
});

describe('the error middleware', () => {
  it("answers a failed read as the request's failure, not a batch's", async () => {
    const app = express();
    app.get('/v1/usage', () => {
      throw new Error('ClickHouse went away at /secret/path');
    });
    app.use(errorMiddleware(pino({ level: 'silent' }), new Metrics()));
    const server = app.listen(0, '127.0.0.1');
    onTestFinished(() => void server.close());
    await new Promise((r) => server.once('listening', r));
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/usage`);
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({
      error: "internal error; the request failed in the server, retry it (the server's log has the cause)",
      code: 'TI_ERR_INTERNAL',
    });
  });
});

describe('the other routes in process', () => {
  it('serves health, readiness and the OpenAPI document, and no metrics (they have a listener of their own)', async () => {
    let ready: Error | undefined = undefined;
    const h = await harness({ checkReady: () => (ready === undefined ? Promise.resolve() : Promise.reject(ready)) });
    expect(await (await fetch(`${h.url}/healthz`)).json()).toEqual({ status: 'ok' });
    expect(await (await fetch(`${h.url}/readyz`)).json()).toEqual({ status: 'ready' });
    ready = new Error('span store is unreachable');
    const notReady = await fetch(`${h.url}/readyz`);
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toEqual({ status: 'unavailable', error: 'span store is unreachable' });
    const doc = (await (await fetch(`${h.url}/openapi.json`)).json()) as { openapi: string };
    expect(doc.openapi).toBe('3.1.0');
    const m = await fetch(`${h.url}/metrics`);
    expect(m.status).toBe(404);
    expect(await m.text()).not.toContain('trace_ingest_requests_total');
  });

  it('says draining on /readyz while draining', async () => {
    const h = await harness({ isDraining: () => true });
    const r = await fetch(`${h.url}/readyz`);
    expect(r.status).toBe(503);
    expect(await r.json()).toMatchObject({ status: 'draining' });
  });

  it('answers unknown routes with 404 and wrong methods with 405 and Allow, as JSON', async () => {
    const h = await harness();
    const nf = await fetch(`${h.url}/v2/ingest`, { method: 'POST' });
    expect(nf.status).toBe(404);
    expect(await nf.json()).toMatchObject({ code: 'TI_ERR_NOT_FOUND' });
    // Metrics are on their own listener: /metrics is no route on the ingest port.
    expect((await fetch(`${h.url}/metrics`)).status).toBe(404);
    const get = await fetch(`${h.url}/ingest`);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expect(await get.json()).toMatchObject({ code: 'TI_ERR_METHOD_NOT_ALLOWED' });
    const post = await fetch(`${h.url}/healthz`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET');
    // Requests to other paths are not counted as ingest requests.
    expect(await metric(h, 'trace_ingest_requests_total{status="404",code="TI_ERR_NOT_FOUND"}')).toBe(0);
    expect(await metric(h, 'trace_ingest_http_requests_total{route="other",method="POST",status="404"}')).toBe(1);
  });

  it('echoes a well-formed X-Request-Id and replaces a malformed one', async () => {
    const h = await harness();
    expect((await fetch(`${h.url}/healthz`, { headers: { 'x-request-id': 'abc-123' } })).headers.get('x-request-id')).toBe('abc-123');
    expect((await fetch(`${h.url}/healthz`, { headers: { 'x-request-id': 'bad id\u00e9' } })).headers.get('x-request-id')).not.toBe('bad id\u00e9');
  });
});
