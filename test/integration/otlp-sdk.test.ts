import { CompressionAlgorithm } from '@opentelemetry/otlp-exporter-base';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  InMemorySpanExporter,
  NodeTracerProvider,
  SimpleSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-node';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { agentRun, NOON } from './support/agent-run.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

/**
 * The OpenTelemetry JS SDK and its two OTLP/HTTP exporters, unchanged, sending
 * to the server: the rows they leave and their exact costs.
 */
describe('OTLP/HTTP from the OpenTelemetry JS SDK', () => {
  let t: TestServer;
  let key: string;
  beforeAll(async () => {
    t = await startTestServer();
    ({ key } = await t.newKey('otel-org'));
  });
  afterAll(async () => t.close());

  function provider(exporter: SpanExporter, service: string): NodeTracerProvider {
    const p = new NodeTracerProvider({
      resource: resourceFromAttributes({ 'service.name': service, 'deployment.environment.name': 'test' }),
      spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 60_000 })],
    });
    onTestFinished(() => p.shutdown());
    return p;
  }

  it.each([
    ['JSON', 'none'],
    ['JSON', 'gzip'],
    ['protobuf', 'none'],
    ['protobuf', 'gzip'],
  ] as const)('stores and prices the spans of the %s exporter (compression %s)', async (format, compression) => {
    const opts = {
      url: `${t.url}/v1/traces`,
      headers: (format === 'JSON' ? { 'x-api-key': key } : { authorization: `Bearer ${key}` }) as Record<string, string>,
      compression: compression === 'gzip' ? CompressionAlgorithm.GZIP : CompressionAlgorithm.NONE,
    };
    const exporter = format === 'JSON' ? new JsonExporter(opts) : new ProtoExporter(opts);
    const traceId = await agentRun(provider(exporter, `svc-${format}-${compression}`));

    const rows = await t.spans(
      `SELECT span_type, name, parent_span_id = '' AS root, trace_name, agent_name, session_id, customer_id, provider, model_id, status, error_message,
              start_time::VARCHAR AS start_time, end_time::VARCHAR AS end_time, input_tokens::INTEGER AS input_tokens,
              cached_input_tokens::INTEGER AS cached_input_tokens,
              output_tokens::INTEGER AS output_tokens, total_tokens::INTEGER AS total_tokens,
              input_cost::VARCHAR AS i, cached_input_cost::VARCHAR AS c, output_cost::VARCHAR AS o, total_cost::VARCHAR AS total, priced,
              input, output, span_metadata_keys, span_metadata_values, trace_metadata_keys, trace_metadata_values
       FROM spans WHERE trace_id = ? ORDER BY start_time`,
      [traceId],
    );
    expect(rows).toHaveLength(3);
    const [agent, chat, tool] = rows;
    for (const r of rows) {
      expect(r).toMatchObject({ trace_name: 'invoke_agent support-bot', agent_name: 'support-bot', session_id: 'sess-1', customer_id: 'cust-42' });
      expect(r.trace_metadata_keys).toEqual(expect.arrayContaining(['service.name', 'deployment.environment.name']));
      expect(r.trace_metadata_values).toContain(`svc-${format}-${compression}`);
    }
    expect(agent).toMatchObject({
      span_type: 'agent',
      root: true,
      start_time: String(NOON),
      end_time: String(NOON + 1000),
      priced: false,
      total: '0.000000000000000000',
    });
    // 234 uncached × 2.50 + 1000 cached × 1.25 + 567 × 10, per million.
    expect(chat).toMatchObject({
      span_type: 'llm',
      root: false,
      provider: 'openai',
      model_id: 'gpt-4o-2024-08-06',
      input_tokens: 234,
      cached_input_tokens: 1000,
      output_tokens: 567,
      total_tokens: 1801,
      i: '0.000585000000000000',
      c: '0.001250000000000000',
      o: '0.005670000000000000',
      total: '0.007505000000000000',
      priced: true,
      start_time: String(NOON + 10),
      end_time: String(NOON + 810),
    });
    expect(String(chat?.input)).toContain('Où est ma commande ?');
    expect(String(chat?.output)).toContain('En route.');
    expect(chat?.span_metadata_keys).toEqual(['http.response.status_code']);
    expect(chat?.span_metadata_values).toEqual(['200']);
    expect(tool).toMatchObject({ span_type: 'tool', status: 'error', error_message: 'order service timed out', priced: false });
  });

  /** Finished spans of one agent run, kept in memory so a test can export them as often as it likes. */
  async function recordedRun(): Promise<ReadableSpan[]> {
    const mem = new InMemorySpanExporter();
    const p = new NodeTracerProvider({ resource: resourceFromAttributes({ 'service.name': 'svc-recorded' }), spanProcessors: [new SimpleSpanProcessor(mem)] });
    onTestFinished(() => p.shutdown());
    await agentRun(p);
    return mem.getFinishedSpans();
  }

  const exportOnce = (exporter: SpanExporter, spans: ReadableSpan[]) =>
    new Promise<{ code: number; error?: Error }>((resolve) => exporter.export(spans, resolve));

  it('stores spans sent again (an exporter retrying after a lost answer) once', async () => {
    const spans = await recordedRun();
    const traceId = spans[0]?.spanContext().traceId ?? '';
    const proto = new ProtoExporter({ url: `${t.url}/v1/traces`, headers: { 'x-api-key': key } });
    const json = new JsonExporter({ url: `${t.url}/v1/traces`, headers: { 'x-api-key': key } });
    expect((await exportOnce(proto, spans)).code).toBe(0);
    expect((await exportOnce(proto, spans)).code).toBe(0);
    expect((await exportOnce(json, spans)).code).toBe(0);
    expect(await t.spans('SELECT span_id FROM spans WHERE trace_id = ?', [traceId])).toHaveLength(3);
  });

  it('a bad key is a final failure for the exporter: one request, no retries', async () => {
    const spans = await recordedRun();
    const count = async () =>
      (await t.server.metrics.httpRequests.get()).values
        .filter((v) => v.labels.route === '/v1/traces' && v.labels.status === '401')
        .reduce((n, v) => n + v.value, 0);
    const before = await count();
    const exporter = new ProtoExporter({ url: `${t.url}/v1/traces`, headers: { 'x-api-key': 'ti_' + 'x'.repeat(43) } });
    const result = await exportOnce(exporter, spans);
    expect(result.code).toBe(1);
    expect(await count()).toBe(before + 1);
  });
});
