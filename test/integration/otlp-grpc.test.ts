import fs from 'node:fs';
import http2 from 'node:http2';
import net from 'node:net';
import path from 'node:path';
import { Writable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import * as grpc from '@grpc/grpc-js';
import { CompressionAlgorithm } from '@opentelemetry/otlp-exporter-base';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { GRPC } from '@trace-ingest/shared/errors';
import { OtlpCodec } from '@trace-ingest/server/otlp-codec';
import { createPricing } from '@trace-ingest/store/pricing';
import { DuckDbSpanStore } from '@trace-ingest/store/duckdb';
import { exportCall } from '../grpc-client.js';
import { agentRun } from './support/agent-run.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';
import { expectedRowsOf, loadFixtures, normalize, OTLP_FIXTURES, readableSpans, usageFixtures, type OtlpDocument } from './support/otlp-documents.js';

/**
 * OTLP/gRPC (TraceService/Export on OTLP_GRPC_PORT) from the OpenTelemetry JS
 * SDK's own gRPC exporter, unchanged, against the same rows and costs the
 * OTLP/HTTP exporters leave; its answers as the OTLP specification's retry
 * rules read them; and the limits of the listener, with raw HTTP/2 where a
 * misbehaving client is needed.
 */

const codec = new OtlpCodec();
const EXPORT = codec.exportPath;

type Result = { code: number; error?: Error & { code?: number; metadata?: grpc.Metadata } };
const exportOnce = (exporter: SpanExporter, spans: ReadableSpan[]) => new Promise<Result>((resolve) => exporter.export(spans, resolve));

function grpcExporter(t: TestServer, key: string, compression = CompressionAlgorithm.NONE, form: 'x-api-key' | 'bearer' = 'x-api-key'): GrpcExporter {
  const metadata = new grpc.Metadata();
  if (form === 'x-api-key') metadata.set('x-api-key', key);
  else metadata.set('authorization', `Bearer ${key}`);
  const exporter = new GrpcExporter({ url: `http://127.0.0.1:${t.server.otlpGrpcPort}`, metadata, compression });
  onTestFinished(() => exporter.shutdown());
  return exporter;
}

/** The status a call ended with, as the OTLP specification's retry table reads it (RESOURCE_EXHAUSTED: only with RetryInfo). */
function specReading(error: Result['error']): { code: number | undefined; retryDelaySeconds?: number; retried: boolean } {
  const details = error?.metadata?.get('grpc-status-details-bin')[0];
  const rich = details instanceof Buffer ? codec.decodeGrpcStatusDetails(details) : undefined;
  const code = error?.code;
  const retried = [1, 4, 10, 11, 14, 15].includes(code ?? -1) || (code === GRPC.RESOURCE_EXHAUSTED && rich?.retryDelaySeconds !== undefined);
  return { code, ...(rich?.retryDelaySeconds === undefined ? {} : { retryDelaySeconds: rich.retryDelaySeconds }), retried };
}

/** Calls of Export the server saw end with a status, by its name. */
async function calls(t: TestServer, status: string): Promise<number> {
  const values = (await t.server.metrics.grpcRequests.get()).values;
  return values.filter((v) => v.labels.code === status).reduce((n, v) => n + v.value, 0);
}

/** The agent run of the OTLP/HTTP exporter test, its finished spans kept to be exported as often as a test likes. */
async function recordedRun(service: string): Promise<ReadableSpan[]> {
  const mem = new InMemorySpanExporter();
  const p = new NodeTracerProvider({ resource: resourceFromAttributes({ 'service.name': service }), spanProcessors: [new SimpleSpanProcessor(mem)] });
  onTestFinished(() => p.shutdown());
  await agentRun(p);
  return mem.getFinishedSpans();
}

/** Every column of an org's rows but those that name the org, its key and the time of arrival. */
async function rowsOf(t: TestServer, orgId: string): Promise<Record<string, unknown>[]> {
  const rows = await t.spans('SELECT * EXCLUDE (org_id, key_prefix, received_at) FROM spans WHERE org_id = ? ORDER BY trace_id, span_id', [orgId]);
  return rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, normalize(v)])));
}

describe('OTLP/gRPC from the OpenTelemetry JS SDK', () => {
  let t: TestServer;
  const logLines: Record<string, unknown>[] = [];
  beforeAll(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString('utf8').split('\n')) if (line !== '') logLines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    t = await startTestServer({ OTLP_GRPC_PORT: '0', LOG_LEVEL: 'info' }, {}, undefined, pino({ level: 'info' }, sink));
  });
  afterAll(async () => t.close());

  it.each([CompressionAlgorithm.NONE, CompressionAlgorithm.GZIP])(
    'stores the spans of the gRPC exporter (compression %s) row for row as the protobuf exporter over HTTP does',
    async (compression) => {
      const spans = await recordedRun(`svc-grpc-${compression}`);
      const viaHttp = await t.newKey();
      const viaGrpc = await t.newKey();
      expect((await exportOnce(new ProtoExporter({ url: `${t.url}/v1/traces`, headers: { 'x-api-key': viaHttp.key } }), spans)).code).toBe(0);
      const before = await calls(t, 'OK');
      const result = await exportOnce(grpcExporter(t, viaGrpc.key, compression, 'bearer'), spans);
      expect(result.error).toBeUndefined();
      expect(result.code).toBe(0);
      expect(await calls(t, 'OK')).toBe(before + 1);

      const grpcRows = await rowsOf(t, viaGrpc.orgId);
      expect(grpcRows).toHaveLength(3);
      expect(grpcRows).toEqual(await rowsOf(t, viaHttp.orgId));
      // 234 uncached × 2.50 + 1000 cached × 1.25 + 567 × 10, per million.
      expect(grpcRows.find((r) => r.span_type === 'llm')).toMatchObject({ model_id: 'gpt-4o-2024-08-06', total_cost: '0.007505000000000000', priced: true });
    },
  );

  // The golden documents of the alias families, as the SDK holds them, through both exporters.
  for (const [name, fx] of usageFixtures()) {
    it(`prices ${name} exactly as its golden rows and the HTTP exporter's rows say (gzip and not)`, async () => {
      const spans = readableSpans(fx.request);
      const viaHttp = await t.newKey();
      expect((await exportOnce(new ProtoExporter({ url: `${t.url}/v1/traces`, headers: { 'x-api-key': viaHttp.key } }), spans)).code).toBe(0);
      const httpRows = await rowsOf(t, viaHttp.orgId);
      expect(expectedRowsOf(fx, httpRows).got).toEqual(fx.expect.rows);
      for (const compression of [CompressionAlgorithm.NONE, CompressionAlgorithm.GZIP]) {
        const viaGrpc = await t.newKey();
        const result = await exportOnce(grpcExporter(t, viaGrpc.key, compression), spans);
        expect(result.error, compression).toBeUndefined();
        const grpcRows = await rowsOf(t, viaGrpc.orgId);
        expect(expectedRowsOf(fx, grpcRows).got, compression).toEqual(fx.expect.rows);
        expect(grpcRows, compression).toEqual(httpRows);
      }
    });
  }

  it('logs one line per call and counts the batch as the HTTP routes do, never the key', async () => {
    const { key, orgId, prefix } = await t.newKey();
    const accepted = async () => (await t.server.metrics.spansAccepted.get()).values[0]?.value ?? 0;
    const ok200 = async () => (await t.server.metrics.requests.get()).values.find((v) => v.labels.status === '200' && v.labels.code === '')?.value ?? 0;
    const [spansBefore, okBefore] = [await accepted(), await ok200()];
    const metadata = new grpc.Metadata();
    metadata.set('x-api-key', key);
    metadata.set('x-request-id', 'req-grpc-1');
    const exporter = new GrpcExporter({ url: `http://127.0.0.1:${t.server.otlpGrpcPort}`, metadata });
    onTestFinished(() => exporter.shutdown());
    expect((await exportOnce(exporter, await recordedRun('svc-log'))).code).toBe(0);
    expect(await accepted()).toBe(spansBefore + 3);
    expect(await ok200()).toBe(okBefore + 1);
    const lines = logLines.filter((l) => l.reqId === 'req-grpc-1');
    expect(lines).toEqual([
      expect.objectContaining({ msg: 'request', transport: 'grpc', path: EXPORT, grpcStatus: 'OK', orgId, keyPrefix: prefix, level: 30 }),
    ]);
    expect(JSON.stringify(logLines)).not.toContain(key);
  });

  it('answers a bad key with UNAUTHENTICATED, which the exporter does not retry', async () => {
    const before = await calls(t, 'UNAUTHENTICATED');
    const result = await exportOnce(grpcExporter(t, 'ti_' + 'x'.repeat(43)), await recordedRun('svc-bad-key'));
    expect(result.code).toBe(1);
    expect(result.error?.message).toMatch(/unknown or revoked API key/);
    expect(specReading(result.error)).toEqual({ code: GRPC.UNAUTHENTICATED, retried: false });
    // One call: the exporter gave up at once, as it must.
    expect(await calls(t, 'UNAUTHENTICATED')).toBe(before + 1);
    const missing = await exportOnce(new GrpcExporter({ url: `http://127.0.0.1:${t.server.otlpGrpcPort}` }), await recordedRun('svc-no-key'));
    expect(missing.error?.message).toMatch(/Bearer <key>" or "x-api-key: <key>"/);
  });

  it('answers a used-up quota with RESOURCE_EXHAUSTED and no RetryInfo: final by the specification, not retried', async () => {
    await t.keys.createPlan({ name: 'grpc-no-quota', monthlySpans: 0, rateLimitRps: 100 });
    const { key, orgId } = await t.newKey('grpc-no-quota-org', 'grpc-no-quota');
    const before = await calls(t, 'RESOURCE_EXHAUSTED');
    const result = await exportOnce(grpcExporter(t, key), await recordedRun('svc-quota'));
    expect(result.code).toBe(1);
    expect(result.error?.message).toMatch(/monthly span quota of 0 spans is exceeded.*upgrade the plan/);
    expect(specReading(result.error)).toEqual({ code: GRPC.RESOURCE_EXHAUSTED, retried: false });
    expect(await calls(t, 'RESOURCE_EXHAUSTED')).toBe(before + 1);
    expect(await t.spans('SELECT span_id FROM spans WHERE org_id = ?', [orgId])).toHaveLength(0);
  });

  it('answers a rate limit with UNAVAILABLE and a RetryInfo delay (the exporter itself does not retry gRPC failures)', async () => {
    await t.keys.createPlan({ name: 'grpc-slow', monthlySpans: 1_000_000, rateLimitRps: 1 });
    const { key } = await t.newKey('grpc-slow-org', 'grpc-slow');
    const spans = await recordedRun('svc-rate');
    const exporter = grpcExporter(t, key);
    const before = await calls(t, 'UNAVAILABLE');
    let result = await exportOnce(exporter, spans);
    for (let i = 0; i < 5 && result.code === 0; i++) result = await exportOnce(exporter, spans);
    expect(result.error?.message).toMatch(/rate limit of 1 requests per second for this API key exceeded/);
    expect(specReading(result.error)).toEqual({ code: GRPC.UNAVAILABLE, retryDelaySeconds: 1, retried: true });
    // @opentelemetry/exporter-trace-otlp-grpc 0.223 reports every gRPC error as final: one call, no retry.
    expect(await calls(t, 'UNAVAILABLE')).toBe(before + 1);
  });
});

describe('OTLP/gRPC keys: scopes, repeated credentials, failed-authentication limit', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ OTLP_GRPC_PORT: '0', AUTH_FAILURE_LIMIT: '3', TRUST_PROXY: 'loopback' });
  });
  afterAll(async () => t.close());
  /** One export of the agent run by the gRPC exporter with this metadata (a name given several values is sent several times). */
  const call = async (metadata: Record<string, string | string[]>): Promise<Result> => {
    const md = new grpc.Metadata();
    for (const [k, v] of Object.entries(metadata)) for (const x of Array.isArray(v) ? v : [v]) md.add(k, x);
    const exporter = new GrpcExporter({ url: `http://127.0.0.1:${t.server.otlpGrpcPort}`, metadata: md });
    onTestFinished(() => exporter.shutdown());
    return exportOnce(exporter, await recordedRun('svc-keys'));
  };

  it('refuses a key without the ingest scope with PERMISSION_DENIED, which the exporter does not retry', async () => {
    await t.keys.createOrg({ name: 'grpc-scopes' });
    const { key } = await t.keys.createKey({ orgName: 'grpc-scopes', scopes: ['budget:read'] });
    const before = await calls(t, 'PERMISSION_DENIED');
    const result = await call({ 'x-api-key': key });
    expect(result.error?.message).toMatch(/ingest/);
    expect(specReading(result.error)).toEqual({ code: GRPC.PERMISSION_DENIED, retried: false });
    expect(await calls(t, 'PERMISSION_DENIED')).toBe(before + 1);
  });

  it('refuses a key sent twice in the metadata with INVALID_ARGUMENT, as two HTTP headers', async () => {
    // A raw stream: the exporter rebuilds its metadata from a map and would send the key once.
    const { key } = await t.newKey();
    const { stream, trailers } = rawStream(t.server.otlpGrpcPort, { 'x-api-key': [key, key] });
    stream.end(frame(Buffer.alloc(0)));
    const answer = await trailers;
    expect(answer['grpc-status']).toBe(String(GRPC.INVALID_ARGUMENT));
    expect(decodeURIComponent(String(answer['grpc-message']))).toMatch(/two x-api-key headers/);
  });

  it('limits failed authentications per client, behind a trusted proxy by the x-forwarded-for metadata, and paces the refused', async () => {
    const { key } = await t.newKey();
    for (let i = 0; i < 3; i++) {
      const bad = await call({ 'x-api-key': 'ti_' + 'q'.repeat(43), 'x-forwarded-for': '203.0.113.7' });
      expect(specReading(bad.error).code).toBe(GRPC.UNAUTHENTICATED);
    }
    // Past the limit that client is refused before its key is looked at, good key or not, until the window ends.
    const limited = await call({ 'x-api-key': key, 'x-forwarded-for': '203.0.113.7' });
    expect(specReading(limited.error)).toEqual({ code: GRPC.UNAVAILABLE, retryDelaySeconds: expect.any(Number), retried: true });
    expect(limited.error?.message).toMatch(/failed authentication/i);
    // Another client behind the same proxy is not.
    expect((await call({ 'x-api-key': key, 'x-forwarded-for': '198.51.100.9' })).code).toBe(0);
  });
});

describe('OTLP/gRPC drain', () => {
  it('refuses new calls with UNAVAILABLE and a RetryInfo delay while a call in flight finishes and is stored', async () => {
    // A call is held in pricing, after admission and before the write log, until the drain has begun.
    let hold: () => void = () => undefined;
    const held = new Promise<void>((r) => (hold = r));
    let entered: () => void = () => undefined;
    const inPricing = new Promise<void>((r) => (entered = r));
    const dir = fs.mkdtempSync(path.join((await import('node:os')).tmpdir(), 'ti-grpc-drain-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    const { SqliteControlStore } = await import('@trace-ingest/store/control-store-sqlite');
    const keysForPricing = new SqliteControlStore(path.join(dir, 'trace-ingest.sqlite'), { busyTimeoutMs: 0 });
    await keysForPricing.start();
    onTestFinished(() => keysForPricing.close());
    const real = await createPricing(keysForPricing, {});
    let holding = false;
    const pricing = Object.assign(Object.create(real) as typeof real, {
      refresh: async () => {
        if (holding) {
          entered();
          await held;
        }
        await real.refresh();
      },
    });
    const t = await startTestServer({ OTLP_GRPC_PORT: '0', DRAIN_GRACE_MS: '1500' }, { pricing }, dir);
    const { key, orgId } = await t.newKey();
    holding = true;
    const inFlight = exportOnce(grpcExporter(t, key), await recordedRun('svc-in-flight'));
    await inPricing;
    holding = false;
    const shutdown = t.server.shutdown();

    const refused = await exportOnce(grpcExporter(t, key), await recordedRun('svc-late'));
    expect(refused.error?.message).toMatch(/shutting down/);
    expect(specReading(refused.error)).toEqual({ code: GRPC.UNAVAILABLE, retryDelaySeconds: 1, retried: true });
    const ready = await fetch(`${t.url}/readyz`);
    expect(ready.status).toBe(503);

    // After the grace the listener stops accepting connections; the call held since before it still runs.
    const port = t.server.otlpGrpcPort;
    const accepts = () =>
      new Promise<boolean>((resolve) => {
        const s = net.connect({ host: '127.0.0.1', port }, () => (s.destroy(), resolve(true)));
        s.once('error', () => resolve(false));
      });
    for (let i = 0; i < 200 && (await accepts()); i++) await new Promise((r) => setTimeout(r, 50));
    expect(await accepts()).toBe(false);
    hold();
    expect((await inFlight).code).toBe(0);
    await shutdown;
    await t.close();
    const store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb') });
    await store.start();
    onTestFinished(() => store.close());
    expect(await store.query('SELECT span_id FROM spans WHERE org_id = ?', [orgId])).toHaveLength(3);
  });
});

/** A raw client of TraceService/Export: bytes in, bytes out, any compression or metadata. */
const rawExport = (port: number, body: Buffer, metadata: Record<string, string>, options: grpc.ClientOptions = {}) =>
  exportCall(`127.0.0.1:${port}`, EXPORT, body, metadata, options);

/** An HTTP/2 stream of Export that sends what a test tells it to, as a broken or hostile client would. */
function rawStream(port: number, headers: Record<string, string | string[]>) {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  onTestFinished(() => session.destroy());
  const stream = session.request({ ':method': 'POST', ':path': EXPORT, 'content-type': 'application/grpc', te: 'trailers', ...headers });
  // The status comes in the trailers, or alone in the headers when the call is refused before an answer.
  const trailers = new Promise<Record<string, unknown>>((resolve) => {
    const seen = (h: Record<string, unknown>) => {
      if ('grpc-status' in h) resolve(h);
    };
    stream.on('response', seen);
    stream.on('trailers', seen);
    stream.on('close', () => resolve({}));
    stream.on('error', () => undefined);
    stream.resume();
  });
  return { session, stream, trailers };
}

const frame = (payload: Buffer, compressed = false) => Buffer.concat([Buffer.from([compressed ? 1 : 0]), u32(payload.length), payload]);
const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};

describe('OTLP/gRPC limits and answers', () => {
  let t: TestServer;
  let key: string;
  beforeAll(async () => {
    t = await startTestServer({
      OTLP_GRPC_PORT: '0',
      INGEST_MAX_BODY_BYTES: String(64 * 1024),
      HEADERS_TIMEOUT_MS: '800',
      REQUEST_TIMEOUT_MS: '800',
      OTLP_GRPC_MAX_STREAMS: '7',
    });
    ({ key } = await t.newKey());
  });
  afterAll(async () => t.close());

  const reasons = async (reason: string) => (await t.server.metrics.batchesRejected.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
  const statusOf = (e: grpc.ServiceError | undefined) => ({
    code: e?.code,
    details: e?.details,
    rich: (() => {
      const d = e?.metadata.get('grpc-status-details-bin')[0];
      return d instanceof Buffer ? codec.decodeGrpcStatusDetails(d) : undefined;
    })(),
  });
  const padded = (chars: number): Buffer => {
    const doc = structuredClone(
      loadFixtures<{ request: { body: OtlpDocument } }>(path.join(OTLP_FIXTURES, 'errors')).find(([n]) => n === '413-too-large')?.[1].request.body,
    );
    const span = doc?.resourceSpans?.[0]?.scopeSpans?.[0]?.spans?.[0];
    span?.attributes?.push({ key: 'pad', value: { stringValue: 'p'.repeat(chars) } });
    return codec.encodeRequestFromJson(doc);
  };

  it('answers an empty request with an empty ExportTraceServiceResponse, and a partly bad one with partial_success', async () => {
    const empty = await rawExport(t.server.otlpGrpcPort, Buffer.alloc(0), { 'x-api-key': key });
    expect(empty.error).toBeUndefined();
    expect(codec.decodeResponse(empty.response ?? Buffer.alloc(0))).toEqual({});
    const fx = loadFixtures<{ request: { body: OtlpDocument } }>(path.join(OTLP_FIXTURES, 'errors')).find(([n]) => n === '200-partial-success')?.[1];
    const partial = await rawExport(t.server.otlpGrpcPort, codec.encodeRequestFromJson(fx?.request.body), { 'x-api-key': key });
    expect(partial.error).toBeUndefined();
    const answer = codec.decodeResponse(partial.response ?? Buffer.alloc(0)) as { partialSuccess?: { rejectedSpans?: number; errorMessage?: string } };
    expect(answer.partialSuccess?.rejectedSpans).toBe(2);
    expect(answer.partialSuccess?.errorMessage).toMatch(/2 spans rejected.*endTimeUnixNano.*traceId must be 16 bytes/s);
  });

  it('answers a message over INGEST_MAX_BODY_BYTES, on the wire or once inflated, with INVALID_ARGUMENT saying what to fix', async () => {
    const before = await reasons('size');
    const wire = await rawExport(t.server.otlpGrpcPort, padded(70 * 1024), { 'x-api-key': key });
    const bomb = await rawExport(t.server.otlpGrpcPort, padded(300 * 1024), { 'x-api-key': key }, { 'grpc.default_compression_algorithm': 2 });
    for (const answer of [wire, bomb]) {
      expect(statusOf(answer.error)).toEqual({
        code: GRPC.INVALID_ARGUMENT,
        details: 'request body exceeds the limit of 65536 bytes (INGEST_MAX_BODY_BYTES); send smaller batches',
        rich: { code: GRPC.INVALID_ARGUMENT, message: 'request body exceeds the limit of 65536 bytes (INGEST_MAX_BODY_BYTES); send smaller batches' },
      });
    }
    expect(await reasons('size')).toBe(before + 2);
    // Under the limit once inflated: stored.
    const small = await rawExport(t.server.otlpGrpcPort, padded(30 * 1024), { 'x-api-key': key }, { 'grpc.default_compression_algorithm': 2 });
    expect(small.error).toBeUndefined();
  });

  it('refuses a bad key on the metadata alone, without waiting for the message', async () => {
    const { trailers } = rawStream(t.server.otlpGrpcPort, { authorization: 'Bearer ti_' + 'z'.repeat(43) });
    // Not the answer to a message that did not arrive within REQUEST_TIMEOUT_MS: the key decides first.
    expect((await trailers)['grpc-status']).toBe(String(GRPC.UNAUTHENTICATED));
  });

  it('checks the key before it reads the message', async () => {
    const answer = await rawExport(t.server.otlpGrpcPort, padded(70 * 1024), { authorization: 'Bearer ti_' + 'y'.repeat(43) });
    expect(statusOf(answer.error).code).toBe(GRPC.UNAUTHENTICATED);
    // Two different keys in the two forms are refused, as on the HTTP routes.
    const two = await rawExport(t.server.otlpGrpcPort, Buffer.alloc(0), { authorization: 'Bearer ti_' + 'y'.repeat(43), 'x-api-key': key });
    expect(statusOf(two.error)).toMatchObject({ code: GRPC.INVALID_ARGUMENT, details: expect.stringMatching(/carry different credentials/) });
  });

  it('answers undecodable protobuf and gzip with INVALID_ARGUMENT', async () => {
    const junk = await rawExport(t.server.otlpGrpcPort, Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]), { 'x-api-key': key });
    expect(statusOf(junk.error)).toMatchObject({
      code: GRPC.INVALID_ARGUMENT,
      details: expect.stringMatching(/not a valid OTLP ExportTraceServiceRequest in protobuf/),
    });
    const { stream, trailers } = rawStream(t.server.otlpGrpcPort, { 'x-api-key': key, 'grpc-encoding': 'gzip' });
    stream.end(frame(Buffer.from('not gzip at all'), true));
    const answer = await trailers;
    expect(answer['grpc-status']).toBe(String(GRPC.INVALID_ARGUMENT));
    expect(decodeURIComponent(String(answer['grpc-message']))).toMatch(/decompress.*send the message uncompressed or gzip-compressed/);
    const gz = await rawExport(t.server.otlpGrpcPort, gzipSync(Buffer.from('x')), { 'x-api-key': key });
    expect(statusOf(gz.error).code).toBe(GRPC.INVALID_ARGUMENT);
  });

  it('cuts off a sender whose message does not arrive within REQUEST_TIMEOUT_MS, and bounds the streams of a connection', async () => {
    const { session, stream, trailers } = rawStream(t.server.otlpGrpcPort, { 'x-api-key': key });
    stream.write(frame(Buffer.alloc(1000)).subarray(0, 500));
    const started = performance.now();
    const answer = await trailers;
    expect(performance.now() - started).toBeGreaterThanOrEqual(700);
    expect(answer['grpc-status']).toBe(String(GRPC.INVALID_ARGUMENT));
    expect(decodeURIComponent(String(answer['grpc-message']))).toMatch(/did not arrive within 800 ms; send smaller batches/);
    expect(session.remoteSettings.maxConcurrentStreams).toBe(7);
  });

  it('is ready only while its listener accepts connections', async () => {
    expect((await fetch(`${t.url}/readyz`)).status).toBe(200);
  });
});
