import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import type { TraceIngestError } from '@trace-ingest/sdk';
import { TraceIngest, anthropicUsage, openaiChatUsage, type TraceIngestOptions, type TraceV1 } from '@trace-ingest/sdk';
import { startTestServer, type TestServer } from './support/ingest-server.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** A client whose requests are counted (the real fetch underneath) and whose errors are kept. */
function client(t: { url: string }, key: string, opts: TraceIngestOptions = {}) {
  const errors: TraceIngestError[] = [];
  const requests: { status: number | 'error'; bytes: number }[] = [];
  const counted: typeof fetch = async (input, init) => {
    const bytes = init?.body instanceof Uint8Array ? init.body.byteLength : typeof init?.body === 'string' ? Buffer.byteLength(init.body) : 0;
    try {
      const res = await fetch(input, init);
      requests.push({ status: res.status, bytes });
      return res;
    } catch (e) {
      requests.push({ status: 'error', bytes });
      throw e;
    }
  };
  const c = new TraceIngest({ baseUrl: t.url, apiKey: key, onError: (e) => errors.push(e), fetch: counted, flushOnExit: false, ...opts });
  onTestFinished(() => void c.shutdown(100));
  return { c, errors, requests };
}

function bulkTrace(traceId: string, spans: number, input = ''): TraceV1 {
  const t0 = Date.now();
  return {
    traceId,
    traceName: 'bulk',
    spans: Array.from({ length: spans }, (_, i) => ({
      spanId: `s${i}`,
      spanType: 'tool' as const,
      name: `step ${i}`,
      startTime: t0,
      endTime: t0 + 1,
      ...(input === '' ? {} : { input }),
    })),
  };
}

const count = async (t: TestServer, traceId: string): Promise<number> => {
  const [row] = await t.spans('SELECT count(*)::INTEGER AS n FROM spans WHERE trace_id = ?', [traceId]);
  return Number(row?.['n']);
};

describe('SDK against the real server', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(async () => t.close());

  it('records nested spans whose mapped usage is priced exactly as the README says', async () => {
    const { key } = await t.newKey();
    const { c, errors, requests } = client(t, key);
    const trace = c.startTrace({
      name: 'support-reply',
      agent: 'helper',
      workflow: 'tickets',
      session: 'sess-1',
      customer: { id: 'cust-9', name: 'Acme' },
      metadata: { plan: 'pro' },
    });
    const root = trace.startSpan({ name: 'answer', type: 'agent' });
    const o4 = root.startSpan({ name: 'draft', provider: 'openai', model: 'o4-mini', input: 'hello' });
    // The README's OpenAI example: 2,000 prompt tokens (1,500 cached), 800 completion (500 reasoning).
    o4.end({
      output: 'hi',
      usage: openaiChatUsage({
        prompt_tokens: 2000,
        completion_tokens: 800,
        total_tokens: 2800,
        prompt_tokens_details: { cached_tokens: 1500 },
        completion_tokens_details: { reasoning_tokens: 500 },
      }),
    });
    const sonnet = root.startSpan({ name: 'polish', provider: 'anthropic', model: 'claude-sonnet-4' });
    sonnet.end({ usage: anthropicUsage({ input_tokens: 1000, cache_read_input_tokens: 10000, cache_creation_input_tokens: 2000, output_tokens: 500 }) });
    root.end();
    expect(await c.flush()).toBe(true);
    expect(errors).toEqual([]);
    expect(c.getStats()).toMatchObject({ sent: 3, queued: 0, failed: 0, dropped: 0, retried: 0 });
    expect(requests.map((r) => r.status)).toEqual([202]);

    const rows = await t.spans(
      'SELECT span_id, parent_span_id, span_type, trace_name, agent_name, workflow_name, workflow_run_id, session_id, customer_id, customer_name, ' +
        'input_tokens::INTEGER AS input_tokens, cached_input_tokens::INTEGER AS cached_input_tokens, ' +
        'cache_write_input_tokens::INTEGER AS cache_write_input_tokens, output_tokens::INTEGER AS output_tokens, ' +
        'reasoning_tokens::INTEGER AS reasoning_tokens, total_cost::VARCHAR AS total FROM spans WHERE trace_id = ? ORDER BY start_time, span_type',
      [trace.traceId],
    );
    const byName = new Map(rows.map((r) => [r['span_id'] === root.spanId ? 'root' : r['span_id'] === o4.spanId ? 'o4' : 'sonnet', r]));
    expect(byName.get('root')).toMatchObject({
      parent_span_id: '',
      span_type: 'agent',
      trace_name: 'support-reply',
      agent_name: 'helper',
      workflow_name: 'tickets',
      session_id: 'sess-1',
      customer_id: 'cust-9',
      customer_name: 'Acme',
    });
    expect(String(byName.get('root')?.['workflow_run_id'])).toMatch(/^[0-9a-f]{32}$/);
    expect(byName.get('o4')).toMatchObject({
      parent_span_id: root.spanId,
      span_type: 'llm',
      input_tokens: 500,
      cached_input_tokens: 1500,
      output_tokens: 300,
      reasoning_tokens: 500,
      total: '0.004482500000000000',
    });
    expect(byName.get('sonnet')).toMatchObject({
      parent_span_id: root.spanId,
      input_tokens: 1000,
      cached_input_tokens: 10000,
      cache_write_input_tokens: 2000,
      output_tokens: 500,
      total: '0.021000000000000000',
    });
  });

  it('sends gzip bodies, one request at a time', async () => {
    const { key } = await t.newKey();
    let inFlight = 0;
    let maxInFlight = 0;
    const gz: string[] = [];
    const c = new TraceIngest({
      baseUrl: t.url,
      apiKey: key,
      flushAt: 50,
      flushOnExit: false,
      fetch: async (input, init) => {
        gz.push(String((init?.headers as Record<string, string>)['content-encoding']));
        maxInFlight = Math.max(maxInFlight, ++inFlight);
        try {
          return await fetch(input, init);
        } finally {
          inFlight--;
        }
      },
    });
    onTestFinished(() => void c.shutdown(100));
    for (let i = 0; i < 10; i++) c.send(bulkTrace(`conc-${i}`, 60, 'x'.repeat(200)));
    expect(await c.flush()).toBe(true);
    expect(c.getStats().sent).toBe(600);
    expect(maxInFlight).toBe(1);
    expect(new Set(gz)).toEqual(new Set(['gzip']));
    expect(await count(t, 'conc-9')).toBe(60);
  });

  it('splits a trace over the spans-per-trace limit into entries with the same traceId', async () => {
    const { key } = await t.newKey();
    const { c, errors, requests } = client(t, key, { flushAt: 100_000 });
    c.send(bulkTrace('huge', 4500));
    expect(await c.flush(30_000)).toBe(true);
    expect(errors).toEqual([]);
    expect(requests.every((r) => r.status === 202)).toBe(true);
    expect(c.getStats()).toMatchObject({ sent: 4500, failed: 0 });
    expect(await count(t, 'huge')).toBe(4500);
  });

  it('reports a span over a field limit alone and sends the rest', async () => {
    const { key } = await t.newKey();
    const { c, errors } = client(t, key);
    const trace = bulkTrace('limits', 3);
    (trace.spans[1] as { name: string }).name = 'n'.repeat(513);
    c.send(trace);
    expect(await c.flush()).toBe(true);
    expect(errors.map((e) => [e.code, e.spans])).toEqual([['SDK_INVALID_SPAN', 1]]);
    expect(errors[0]?.message).toMatch(/name must be at most 512 characters/);
    expect(c.getStats()).toMatchObject({ sent: 2, failed: 1 });
    expect(await count(t, 'limits')).toBe(2);
  });

  it('does not retry a quota 429 and reports the server error and code', async () => {
    await t.keys.createPlan({ name: 'sdk-q0', monthlySpans: 0, rateLimitRps: 100 });
    const { key } = await t.newKey(undefined, 'sdk-q0');
    const { c, errors, requests } = client(t, key);
    c.send(bulkTrace('quota', 5));
    expect(await c.flush()).toBe(true);
    expect(requests.map((r) => r.status)).toEqual([429]);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ code: 'TI_ERR_QUOTA_EXCEEDED', status: 429, spans: 5 });
    expect(errors[0]?.message).toMatch(/quota/i);
    expect(c.getStats()).toMatchObject({ sent: 0, failed: 5, retried: 0 });
  });

  it('does not retry a 401', async () => {
    const { c, errors, requests } = client(t, 'ti_not-a-key');
    c.send(bulkTrace('nokey', 2));
    expect(await c.flush()).toBe(true);
    expect(requests.map((r) => r.status)).toEqual([401]);
    expect(errors[0]).toMatchObject({ code: 'TI_ERR_UNAUTHORIZED', status: 401 });
  });

  it('waits Retry-After on a rate-limit 429 and loses nothing', async () => {
    await t.keys.createPlan({ name: 'sdk-rps1', monthlySpans: 1_000_000, rateLimitRps: 1 });
    const { key } = await t.newKey(undefined, 'sdk-rps1');
    const { c, errors, requests } = client(t, key, { flushAt: 1 });
    for (let i = 0; i < 3; i++) c.send(bulkTrace(`rl-${i}`, 1));
    const started = Date.now();
    expect(await c.flush(20_000)).toBe(true);
    expect(errors).toEqual([]);
    expect(requests.filter((r) => r.status === 429).length).toBeGreaterThanOrEqual(1);
    // Each 429 said Retry-After: 1, so the next attempt came at least a second later.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(c.getStats()).toMatchObject({ sent: 3, failed: 0 });
    expect(c.getStats().retried).toBe(requests.filter((r) => r.status === 429).length);
  });

  it('splits by body size under a small server body limit', async () => {
    const small = await startTestServer({ INGEST_MAX_BODY_BYTES: String(256 * 1024) });
    onTestFinished(() => small.close());
    const { key } = await small.newKey();
    const { c, errors, requests } = client(small, key, { maxBodyBytes: 256 * 1024, flushAt: 100_000, flushAtBytes: 1e9 });
    // Random text, so gzip cannot hide the size: the limit applies after decompression too.
    const input = Array.from({ length: 20_000 }, () => String.fromCharCode(97 + Math.floor(Math.random() * 26))).join('');
    c.send(bulkTrace('wide', 60, input));
    expect(await c.flush(30_000)).toBe(true);
    expect(errors).toEqual([]);
    expect(requests.length).toBeGreaterThanOrEqual(5);
    expect(requests.every((r) => r.status === 202)).toBe(true);
    expect(await count(small, 'wide')).toBe(60);
  });

  it('shutdown flushes what is queued, is idempotent, and drops what ends after it', async () => {
    const { key } = await t.newKey();
    const { c } = client(t, key, { flushAt: 100_000, flushIntervalMs: 600_000 });
    const trace = c.startTrace({ name: 'at-exit' });
    for (let i = 0; i < 20; i++) trace.startSpan({ name: `s${i}` }).end();
    expect(c.getStats().queued).toBe(20);
    const first = c.shutdown();
    expect(c.shutdown()).toBe(first);
    expect(await first).toBe(true);
    trace.startSpan({ name: 'late' }).end();
    expect(c.getStats()).toMatchObject({ sent: 20, dropped: 1, queued: 0 });
    expect(await count(t, trace.traceId)).toBe(20);
  });
});

describe('SDK across a server outage', () => {
  it('loses nothing when the server comes back within the retry window', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-sdk-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    let t = await startTestServer({}, {}, dir);
    const port = t.server.port;
    const { key } = await t.newKey();
    await t.close();

    const { c, errors, requests } = client(t, key, { flushAt: 10, retry: { initialDelayMs: 100, maxDelayMs: 500, maxElapsedMs: 30_000 } });
    const trace = c.startTrace({ name: 'outage' });
    for (let i = 0; i < 50; i++) trace.startSpan({ name: `s${i}` }).end();
    await new Promise((r) => setTimeout(r, 1500));
    expect(c.getStats().retried).toBeGreaterThan(0);
    expect(c.getStats().sent).toBe(0);

    t = await startTestServer({ PORT: String(port) }, {}, dir);
    onTestFinished(() => t.close());
    expect(await c.flush(30_000)).toBe(true);
    expect(errors).toEqual([]);
    expect(c.getStats()).toMatchObject({ sent: 50, failed: 0, dropped: 0, queued: 0 });
    expect(requests.some((r) => r.status === 'error')).toBe(true);
    expect(await count(t, trace.traceId)).toBe(50);
  });

  it('gives up a batch after the retry window and reports it', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-sdk-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    const t = await startTestServer({}, {}, dir);
    await t.close();
    const { c, errors } = client(t, 'ti_x', { retry: { initialDelayMs: 50, maxDelayMs: 100, maxElapsedMs: 500 } });
    c.send(bulkTrace('gone', 3));
    expect(await c.flush(5_000)).toBe(true);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ code: 'SDK_TRANSPORT', spans: 3 });
    expect(errors[0]?.message).toMatch(/gave up after \d+ attempts/);
    expect(c.getStats()).toMatchObject({ failed: 3, sent: 0 });
  });

  it('keeps the queue bounded while the server is down (memory measured)', async () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-sdk-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    const t = await startTestServer({}, {}, dir);
    await t.close();
    const maxQueueBytes = 4 * 1024 * 1024;
    const { c, errors } = client(t, 'ti_x', { maxQueueSpans: 5_000, maxQueueBytes, retry: { initialDelayMs: 1000, maxDelayMs: 1000, maxElapsedMs: 600_000 } });
    gc();
    const before = process.memoryUsage().heapUsed;
    const trace = c.startTrace({ name: 'flood' });
    const total = 100_000;
    const text = 'y'.repeat(1000);
    for (let i = 0; i < total; i++) trace.startSpan({ name: 'step', input: text }).end();
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    const s = c.getStats();
    console.log(
      `SDK queue while the server is down: ${total} spans of ~1.1 KB ended, ${s.queued} queued + ${s.inFlight} in flight, ` +
        `${s.dropped} dropped; heap grew ${(grown / 1048576).toFixed(1)} MiB (queue bound ${maxQueueBytes / 1048576} MiB)`,
    );
    expect(s.queued).toBeLessThanOrEqual(5_000);
    expect(s.queued + s.inFlight + s.dropped).toBe(total);
    // Bounded by the queue (4 MiB of JSON, twice that as UTF-16 strings) plus one batch in flight, not by 100,000 spans (~110 MB).
    expect(grown).toBeLessThan(48 * 1024 * 1024);
    expect(errors.filter((e) => e.code === 'SDK_QUEUE_FULL')).toHaveLength(1);
  });
});

describe('SDK in a Node process that exits without flushing', () => {
  it('flushes on beforeExit', async () => {
    const t = await startTestServer();
    onTestFinished(() => t.close());
    const { key } = await t.newKey();
    const script = `
      import { TraceIngest } from '@trace-ingest/sdk';
      const c = new TraceIngest({ flushIntervalMs: 600000 });
      const trace = c.startTrace({ name: 'exit', traceId: 'exit-hook' });
      for (let i = 0; i < 7; i++) trace.startSpan({ name: 's' + i }).end();
    `;
    await new Promise<void>((resolve, reject) => {
      execFile(
        process.execPath,
        ['--input-type=module', '-e', script],
        { cwd: root, env: { ...process.env, TRACE_INGEST_URL: t.url, TRACE_INGEST_API_KEY: key }, timeout: 20_000 },
        (err, _out, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve()),
      );
    });
    expect(await count(t, 'exit-hook')).toBe(7);
  });
});
