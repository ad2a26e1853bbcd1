import fs from 'node:fs';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { makePayload, makeSpan, makeTrace } from '../factories.js';
import { freePort } from './support/child-server.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

describe('operations endpoints', () => {
  let t: TestServer;
  let key: string;
  const lines: Record<string, unknown>[] = [];
  beforeAll(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
        cb();
      },
    });
    t = await startTestServer({ LOG_LEVEL: 'info' }, {}, undefined, pino({ level: 'info' }, sink));
    ({ key } = await t.newKey());
  });
  afterAll(async () => t.close());

  it('exposes Prometheus metrics for accepted and refused batches, without secrets', async () => {
    await t.post(makePayload({ traces: [makeTrace({ spans: [makeSpan({ modelId: 'no-such-model-xyz', provider: 'acme' })] })] }), { key });
    await t.post(makePayload(), { key: 'ti_' + 'z'.repeat(43) });
    await t.post(undefined, { key, raw: '{' });
    await t.server.flush();
    const res = await fetch(`${t.metricsUrl}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    for (const name of [
      'trace_ingest_http_requests_total{route="/ingest",method="POST",status="202"}',
      'trace_ingest_spans_accepted_total',
      'trace_ingest_batches_rejected_total{reason="auth"} 1',
      'trace_ingest_batches_rejected_total{reason="validation"} 1',
      'trace_ingest_request_duration_seconds_bucket',
      'trace_ingest_buffer_bytes',
      'trace_ingest_buffer_rows',
      'trace_ingest_rows_flushed_total',
      'trace_ingest_rows_per_flush_bucket',
      'trace_ingest_backlog_flushes_total',
      'trace_ingest_flush_duration_seconds_bucket',
      'trace_ingest_store_errors_total',
      'trace_ingest_dead_letter_rows_total',
      'trace_ingest_unpriced_spans_by_model_total{provider="acme",model="no-such-model-xyz"} 1',
      'trace_ingest_process_resident_memory_bytes',
    ]) {
      expect(text).toContain(name);
    }
    expect(text).not.toContain(key);
    expect(text).not.toContain('z'.repeat(43));
  });

  it('logs one line per request with request id, org and key prefix, never the key', async () => {
    const res = await t.post(makePayload(), { key, headers: { 'x-request-id': 'req-abc-123' } });
    expect(res.headers.get('x-request-id')).toBe('req-abc-123');
    const line = lines.find((l) => l.reqId === 'req-abc-123');
    expect(line).toMatchObject({ msg: 'request', method: 'POST', path: '/ingest', status: 202 });
    expect(typeof line?.durationMs).toBe('number');
    expect(line?.orgId).toMatch(/^org_/);
    expect(line?.keyPrefix).toBe(key.slice(0, 12));
    expect(JSON.stringify(lines)).not.toContain(key);
  });

  it('serves the OpenAPI document that is committed as docs/openapi.json', async () => {
    const res = await fetch(`${t.url}/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const committed = JSON.parse(fs.readFileSync(new URL('../../docs/openapi.json', import.meta.url), 'utf8')) as unknown;
    expect(await res.json()).toEqual(committed);
  });
});

describe('METRICS_PORT', () => {
  it('serves /metrics on its own listener, never on the ingest port', async () => {
    const port = await freePort();
    const t = await startTestServer({ METRICS_PORT: String(port) });
    onTestFinished(() => t.close());
    expect((await fetch(`${t.url}/metrics`)).status).toBe(404);
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('trace_ingest_spans_accepted_total');
  });
});

describe('write log cap', () => {
  it('answers 503 with Retry-After when full, reports not ready, and recovers after a flush', async () => {
    const t = await startTestServer({ BUFFER_MAX_BYTES: '20000' });
    onTestFinished(() => t.close());
    const { key } = await t.newKey();
    let status = 202;
    let res: Response | undefined;
    for (let i = 0; i < 200 && status === 202; i++) {
      res = await t.post(makePayload(), { key });
      status = res.status;
    }
    expect(status).toBe(503);
    expect(res?.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect(((await res?.json()) as { error: string }).error).toMatch(/buffer is full/);
    expect((await fetch(`${t.url}/readyz`)).status).toBe(503);
    const metrics = await (await fetch(`${t.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/^trace_ingest_buffer_full_total 1$/m);
    expect(metrics).toMatch(/^trace_ingest_batches_rejected_total\{reason="buffer_full"\} 1$/m);
    await t.server.flush();
    expect((await fetch(`${t.url}/readyz`)).status).toBe(200);
    expect((await t.post(makePayload(), { key })).status).toBe(202);
  });
});
