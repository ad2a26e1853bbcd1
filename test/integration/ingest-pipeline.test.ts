import http from 'node:http';
import net from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { utcMonth } from '@trace-ingest/shared/ids';
import { makeBulkPayload, makePayload, makeSpan, makeTrace } from '../factories.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

const LIMIT = 64 * 1024;

/** A raw request, so a test controls the headers and the body's framing exactly. */
function rawRequest(
  url: string,
  opts: { headers: Record<string, string>; chunks?: Buffer[]; path?: string; method?: string },
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = http.request({ host: u.hostname, port: u.port, path: opts.path ?? '/ingest', method: opts.method ?? 'POST', headers: opts.headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', (e: NodeJS.ErrnoException) => (e.code === 'EPIPE' || e.code === 'ECONNRESET' ? undefined : reject(e)));
    for (const c of opts.chunks ?? []) req.write(c);
    req.end();
  });
}

describe('POST /ingest pipeline', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ INGEST_MAX_BODY_BYTES: String(LIMIT) });
  });
  afterAll(async () => t.close());

  describe('authentication', () => {
    it('accepts both header forms and a lower-case scheme', async () => {
      const { key } = await t.newKey();
      expect((await t.post(makePayload(), { key })).status).toBe(202);
      expect((await t.post(makePayload(), { headers: { 'x-api-key': key } })).status).toBe(202);
      expect((await t.post(makePayload(), { headers: { authorization: `bearer ${key}` } })).status).toBe(202);
    });

    it.each([
      ['no key', {}],
      ['an unknown key', { authorization: 'Bearer ti_' + 'x'.repeat(43) }],
      ['a malformed key', { 'x-api-key': 'hello' }],
      ['another scheme', { authorization: 'Basic dGk6eA==' }],
    ])('answers 401 for %s without echoing it', async (_n, headers: Record<string, string>) => {
      const res = await t.post(makePayload(), { headers });
      expect(res.status).toBe(401);
      const body = await res.text();
      expect(JSON.parse(body)).toHaveProperty('error');
      expect(body).not.toContain('x'.repeat(43));
    });

    it('rejects a revoked key on its next request', async () => {
      const { key, prefix } = await t.newKey();
      expect((await t.post(makePayload(), { key })).status).toBe(202);
      await t.keys.revokeKey(prefix);
      expect((await t.post(makePayload(), { key })).status).toBe(401);
    });
  });

  describe('size', () => {
    it('answers 413 by Content-Length before checking the key', async () => {
      const res = await rawRequest(t.url, { headers: { 'content-type': 'application/json', 'content-length': String(LIMIT + 1) } });
      expect(res.status).toBe(413);
      expect(JSON.parse(res.body).error).toMatch(/exceeds the limit of 65536 bytes/);
    });

    it('cuts a chunked body off at the limit', async () => {
      const { key } = await t.newKey();
      const chunk = Buffer.alloc(16 * 1024, 0x20);
      const res = await rawRequest(t.url, {
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'transfer-encoding': 'chunked' },
        chunks: Array.from({ length: 8 }, () => chunk),
      });
      expect(res.status).toBe(413);
      expect(res.headers.connection).toBe('close');
    });

    it('accepts a body exactly at the limit', async () => {
      const { key } = await t.newKey();
      const base = JSON.stringify(makePayload());
      const raw = base + ' '.repeat(LIMIT - Buffer.byteLength(base));
      expect(Buffer.byteLength(raw)).toBe(LIMIT);
      expect((await t.post(undefined, { key, raw })).status).toBe(202);
      expect((await t.post(undefined, { key, raw: raw + ' ' })).status).toBe(413);
    });

    it('accepts gzip and limits the inflated size too', async () => {
      const { key } = await t.newKey();
      const ok = await t.post(undefined, { key, raw: gzipSync(JSON.stringify(makePayload())), headers: { 'content-encoding': 'gzip' } });
      expect(ok.status).toBe(202);
      const bomb = gzipSync(Buffer.alloc(LIMIT * 50, 0x20));
      expect(bomb.length).toBeLessThan(LIMIT);
      const res = await t.post(undefined, { key, raw: bomb, headers: { 'content-encoding': 'gzip' } });
      expect(res.status).toBe(413);
      const bad = await t.post(undefined, { key, raw: 'not gzip', headers: { 'content-encoding': 'gzip' } });
      expect(bad.status).toBe(400);
    });
  });

  describe('order of checks', () => {
    it('checks the key before parsing', async () => {
      expect((await t.post(undefined, { raw: '{nope' })).status).toBe(401);
    });

    it('checks the rate limit before parsing', async () => {
      await t.keys.createPlan({ name: 'rps1', monthlySpans: 1000, rateLimitRps: 1 });
      const { key } = await t.newKey(undefined, 'rps1');
      expect((await t.post(undefined, { key, raw: '{nope' })).status).toBe(400);
      const res = await t.post(undefined, { key, raw: '{nope' });
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    });

    it('checks the quota before parsing', async () => {
      await t.keys.createPlan({ name: 'zero', monthlySpans: 0, rateLimitRps: 100 });
      const { key } = await t.newKey(undefined, 'zero');
      const res = await t.post(undefined, { key, raw: '{nope' });
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBeNull();
    });

    it('checks the content type before reading the body', async () => {
      const { key } = await t.newKey();
      const res = await t.post(makePayload(), { key, headers: { 'content-type': 'text/plain' } });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toMatch(/application\/json/);
    });
  });

  describe('rate limit', () => {
    it('answers 429 with an integer Retry-After once the per-key budget is spent, per key', async () => {
      await t.keys.createPlan({ name: 'rps3', monthlySpans: 1_000_000, rateLimitRps: 3 });
      const a = await t.newKey(undefined, 'rps3');
      const b = await t.newKey(undefined, 'rps3');
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await t.post(makePayload(), { key: a.key })).status);
      expect(statuses).toEqual([202, 202, 202, 429]);
      expect((await t.post(makePayload(), { key: b.key })).status).toBe(202);
      await new Promise((r) => setTimeout(r, 1100));
      expect((await t.post(makePayload(), { key: a.key })).status).toBe(202);
    });
  });

  describe('monthly quota', () => {
    it('takes a batch that starts under the quota whole, then refuses until the plan is upgraded', async () => {
      await t.keys.createPlan({ name: 'q3', monthlySpans: 3, rateLimitRps: 100 });
      await t.keys.createPlan({ name: 'q10', monthlySpans: 10, rateLimitRps: 100 });
      const org = `quota-${Date.now()}`;
      const { key, orgId } = await t.newKey(org, 'q3');
      expect((await t.post(makeBulkPayload(1, 2), { key })).status).toBe(202);
      expect((await t.post(makeBulkPayload(1, 2), { key })).status).toBe(202);
      expect(await t.keys.getMonthUsage(orgId, utcMonth(Date.now()))).toBe(4);
      const refused = await t.post(makePayload(), { key });
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBeNull();
      expect(((await refused.json()) as { error: string }).error).toMatch(/quota.*exceeded.*upgrade the plan/i);
      await t.keys.setOrgPlan(org, 'q10');
      expect((await t.post(makePayload(), { key })).status).toBe(202);
    });
  });

  describe('errors', () => {
    it('answers unknown routes and wrong methods with JSON', async () => {
      const nf = await fetch(`${t.url}/nope`);
      expect(nf.status).toBe(404);
      expect(await nf.json()).toHaveProperty('error');
      const na = await fetch(`${t.url}/ingest`);
      expect(na.status).toBe(405);
      expect(na.headers.get('allow')).toBe('POST');
      expect(await na.json()).toHaveProperty('error');
    });

    it('refuses nesting no v1 payload has before parsing it, and still takes ordinary batches', async () => {
      const { key } = await t.newKey();
      const deep = `{"version":"v1","traces":${'['.repeat(20_000)}${']'.repeat(20_000)}}`;
      const unclosed = '['.repeat(60_000);
      for (const raw of [deep, unclosed]) {
        const res = await t.post(undefined, { key, raw });
        expect(res.status).toBe(400);
        const body = (await res.json()) as { error: string; code: string; issues: { path: string; message: string }[] };
        expect(body.code).toBe('TI_ERR_VALIDATION');
        expect(body.issues[0]?.message).toMatch(/deeper than \d+ levels/);
      }
      // Brackets inside strings are text, not nesting.
      const bracketed = makePayload({ traces: [makeTrace({ spans: [makeSpan({ input: '['.repeat(1000), output: '{'.repeat(1000) })] })] });
      expect((await t.post(bracketed, { key })).status).toBe(202);
    });

    it('reports health and readiness', async () => {
      expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
      expect((await fetch(`${t.url}/readyz`)).status).toBe(200);
    });
  });

  describe('rows', () => {
    it('stores one row per span with the trace fields copied onto it', async () => {
      const { key, orgId, prefix } = await t.newKey();
      const trace = makeTrace({
        traceId: 'rows-trace',
        traceName: 'checkout',
        agentName: 'planner',
        workflowName: 'wf',
        workflowRunId: 'run-7',
        sessionId: 'sess-1',
        customer: { id: 'cust-9', name: 'Acme', imageUrl: 'https://acme.test/logo.png' },
        metadata: { env: 'prod' },
        spans: [
          makeSpan({ spanId: 'a', modelId: 'gpt-4o', usage: { inputTokens: 10, outputTokens: 5 } }),
          makeSpan({ spanId: 'b', parentSpanId: 'a', spanType: 'tool', status: 'error', errorMessage: 'boom' }),
        ],
      });
      const res = await t.post(makePayload({ traces: [trace] }), { key });
      expect(await res.json()).toEqual({ accepted: 2 });
      const rows = await t.spans("SELECT * FROM spans WHERE trace_id = 'rows-trace' ORDER BY span_id");
      expect(rows).toHaveLength(2);
      for (const r of rows) {
        expect(r).toMatchObject({
          org_id: orgId,
          key_prefix: prefix,
          trace_name: 'checkout',
          agent_name: 'planner',
          workflow_name: 'wf',
          workflow_run_id: 'run-7',
          session_id: 'sess-1',
          customer_id: 'cust-9',
          customer_name: 'Acme',
          customer_image_url: 'https://acme.test/logo.png',
          trace_metadata_keys: ['env'],
          trace_metadata_values: ['prod'],
        });
      }
      expect(rows[0]).toMatchObject({ span_id: 'a', model_id: 'gpt-4o', input_tokens: '10', output_tokens: '5', status: 'ok' });
      expect(rows[1]).toMatchObject({ span_id: 'b', parent_span_id: 'a', span_type: 'tool', status: 'error', error_message: 'boom' });
    });
  });
});

describe('quota across a restart', () => {
  let t: TestServer | undefined;
  afterEach(async () => t?.close());

  it('keeps counting the month after the server restarts', async () => {
    const first = await startTestServer();
    onTestFinished(() => first.close());
    await first.keys.createPlan({ name: 'q2', monthlySpans: 2, rateLimitRps: 100 });
    const { key } = await first.newKey('restart-org', 'q2');
    expect((await first.post(makeBulkPayload(1, 2), { key })).status).toBe(202);
    await first.server.shutdown();
    t = await startTestServer({}, {}, first.dir);
    expect((await t.post(makePayload(), { key })).status).toBe(429);
  });
});

describe('drain', () => {
  it('answers 503 to new batches while draining, then flushes and closes', async () => {
    const t = await startTestServer({ DRAIN_GRACE_MS: '400' });
    onTestFinished(() => t.close());
    const { key } = await t.newKey();
    expect((await t.post(makePayload({ traces: [makeTrace({ traceId: 'before-drain' })] }), { key })).status).toBe(202);
    const done = t.server.shutdown();
    const res = await t.post(makePayload(), { key });
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: string }).error).toMatch(/shutting down/);
    expect((await fetch(`${t.url}/readyz`)).status).toBe(503);
    await done;
    await t.server.shutdown();
    const { DuckDbSpanStore } = await import('@trace-ingest/store/duckdb');
    const store = new DuckDbSpanStore({ file: t.config.duckdbFile });
    await store.start();
    onTestFinished(() => store.close());
    expect(await store.query("SELECT span_id FROM spans WHERE trace_id = 'before-drain'")).toHaveLength(1);
  });
});

describe('slow large uploads', () => {
  it('hold the body slots but do not stall ordinary batches', async () => {
    const t = await startTestServer({ MAX_CONCURRENT_BODIES: '2', REQUEST_TIMEOUT_MS: '60000' });
    onTestFinished(() => t.close());
    const { key } = await t.newKey();
    const u = new URL(t.url);
    // Three uploads declaring 5 MB that send one byte and then nothing: two hold both slots, one waits.
    const sockets = Array.from({ length: 3 }, () => {
      const s = net.connect(Number(u.port), u.hostname);
      s.on('error', () => undefined);
      s.write(`POST /ingest HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nauthorization: Bearer ${key}\r\ncontent-length: 5000000\r\n\r\n{`);
      return s;
    });
    onTestFinished(() => {
      for (const s of sockets) s.destroy();
    });
    const slots = async () => {
      const text = await (await fetch(`${t.metricsUrl}/metrics`)).text();
      const value = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1]);
      return { held: value('trace_ingest_body_slots_held'), waiting: value('trace_ingest_body_slots_waiting') };
    };
    for (let i = 0; !(await slots()).waiting; i++) {
      if (i > 600) throw new Error(`the uploads never filled the slots: ${JSON.stringify(await slots())}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(await slots()).toEqual({ held: 2, waiting: 1 });
    // Needing a slot, this batch would wait behind the third upload for the request timeout.
    const res = await t.post(makePayload(), { key });
    expect(res.status).toBe(202);
    expect(await slots()).toEqual({ held: 2, waiting: 1 });
  });
});
