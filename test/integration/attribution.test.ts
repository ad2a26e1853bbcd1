import { context, trace as otelTrace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { createOpenAI } from '@ai-sdk/openai';
import { OpenTelemetry } from '@ai-sdk/otel';
import { setSession, setUser } from '@arizeai/openinference-core';
import { OpenAIInstrumentation } from '@arizeai/openinference-instrumentation-openai';
import { generateText, registerTelemetry } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { TraceIngest } from '@trace-ingest/sdk';
import { loadConfig } from '@trace-ingest/shared/config';
import { formatDecimal, parseDecimal } from '@trace-ingest/shared/decimal';
import { createContext, type CliContext } from '@trace-ingest/cli/program-context';
import { createConsoleToken } from '@trace-ingest/cli/actions/console';
import { usage } from '@trace-ingest/cli/actions/usage';
import { runCli } from '@trace-ingest/cli/program';
import { fakeOpenAi } from './support/fake-openai.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

const DAY = 86_400_000;
const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
// Spans made by the libraries carry the clock's time: the window is the days around now.
const FROM = day(Date.now() - DAY);
const TO = day(Date.now() + DAY);

describe('a trace is attributed to its customer and session however its spans arrive', () => {
  let t: TestServer;
  let ctx: CliContext;
  let token: string;
  beforeAll(async () => {
    t = await startTestServer({ CONSOLE_PORT: '0' });
    ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
    token = (await createConsoleToken(ctx, { name: 'finance' })).token;
  });
  afterAll(async () => {
    await ctx?.close();
    await t?.close();
  });

  /** The OpenTelemetry SDK as applications run it: a BatchSpanProcessor that exports when told to (or every 60 s). */
  function otel(key: string): NodeTracerProvider {
    const exporter = new OTLPTraceExporter({ url: `${t.url}/v1/traces`, headers: { authorization: `Bearer ${key}` } });
    const p = new NodeTracerProvider({
      resource: resourceFromAttributes({ 'service.name': 'support-api' }),
      spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 60_000 })],
    });
    onTestFinished(() => p.shutdown());
    return p;
  }

  /**
   * What every report says about an org's spans in the window: usage by
   * customer and by session, the console's customers page and the CLI's CSV,
   * each as group -> exact total cost; and the cost of all its spans.
   */
  async function reports(org: string, orgId: string) {
    await t.server.flush();
    const totals = (rows: { group: string; costs: { total_cost: string } }[]) => Object.fromEntries(rows.map((r) => [r.group, r.costs.total_cost]));
    const byCustomer = totals(await usage(ctx, { org, by: 'customer', from: FROM, to: TO }));
    const bySession = totals(await usage(ctx, { org, by: 'session', from: FROM, to: TO }));
    const res = await fetch(`http://127.0.0.1:${t.server.consolePort}/console/api/customers?org=${org}&from=${FROM}&to=${TO}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(200);
    const consoleCustomers = totals(((await res.json()) as { rows: { group: string; costs: { total_cost: string } }[] }).rows);
    const lines: string[] = [];
    const code = await runCli(['usage', '--org', org, '--from', FROM, '--to', TO, '--by', 'customer', '--csv'], {
      env: { DATA_DIR: t.dir },
      out: { out: (x) => lines.push(x), err: (x) => lines.push(`ERR ${x}`) },
    });
    expect(code).toBe(0);
    process.exitCode = 0;
    const [head, ...body] = lines.join('\n').trim().split('\n');
    const cols = (head ?? '').split(',');
    const csv = Object.fromEntries(
      body
        .map((l) => l.split(','))
        .filter((c) => c[0] !== 'TOTAL')
        .map((c) => [c[cols.indexOf('group')] ?? '', formatDecimal(parseDecimal(c[cols.indexOf('total_cost')] ?? '0'))]),
    );
    const [all] = await t.spans('SELECT CAST(sum(total_cost) AS VARCHAR) AS total, count(*) AS n FROM spans WHERE org_id = ?', [orgId]);
    return { byCustomer, bySession, consoleCustomers, csv, total: formatDecimal(parseDecimal(String(all?.total ?? '0'))), spans: Number(all?.n) };
  }

  async function expectAllUnder(org: string, orgId: string, customer: string, session: string, spans: number) {
    const r = await reports(org, orgId);
    expect(r.spans).toBe(spans);
    expect(parseDecimal(r.total)).toBeGreaterThan(0n);
    expect(r.byCustomer).toEqual({ [customer]: r.total });
    expect(r.bySession).toEqual({ [session]: r.total });
    expect(r.consoleCustomers).toEqual({ [customer]: r.total });
    expect(r.csv).toEqual({ [customer]: r.total });
    // Every stored span of the org carries the trace's customer and session.
    expect(await t.spans('SELECT DISTINCT customer_id, session_id FROM spans WHERE org_id = ?', [orgId])).toEqual([
      { customer_id: customer, session_id: session },
    ]);
  }

  /** An agent whose root carries the customer and session, and two priced chat calls under it. */
  function agentRun(p: NodeTracerProvider, rootFirst: boolean) {
    const tracer = p.getTracer('support-agent');
    const now = Date.now() - 60_000;
    const root = tracer.startSpan('invoke_agent support-bot', {
      startTime: now,
      attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'support-bot', 'enduser.id': 'cust-42', 'session.id': 'sess-1' },
    });
    const parent = otelTrace.setSpan(context.active(), root);
    const chat = (i: number) =>
      tracer.startSpan(
        'chat gpt-4o',
        {
          startTime: now + 10 + i,
          attributes: {
            'gen_ai.operation.name': 'chat',
            'gen_ai.provider.name': 'openai',
            'gen_ai.request.model': 'gpt-4o',
            'gen_ai.usage.input_tokens': 1000 + i,
            'gen_ai.usage.output_tokens': 200,
          },
        },
        parent,
      );
    const children = [chat(0), chat(1)];
    return {
      async run() {
        if (rootFirst) {
          root.end(now + 5);
          await p.forceFlush();
        }
        for (const c of children) c.end(now + 500);
        // The BatchSpanProcessor exports what has ended: the children, in a request of their own.
        await p.forceFlush();
        if (!rootFirst) {
          root.end(now + 1000);
          await p.forceFlush();
        }
      },
    };
  }

  it.each([
    ['children first, the root in a later request', false],
    ['the root first, the children in a later request', true],
  ] as const)('OpenTelemetry SDK, BatchSpanProcessor: %s', async (name, rootFirst) => {
    const org = rootFirst ? 'otel-root-first' : 'otel-children-first';
    const { key, orgId } = await t.newKey(org);
    const p = otel(key);
    await agentRun(p, rootFirst).run();
    await expectAllUnder(org, orgId, 'cust-42', 'sess-1', 3);
    // The trace's name is the root's, never the service's.
    expect(await t.spans('SELECT DISTINCT trace_name FROM spans WHERE org_id = ?', [orgId])).toEqual([{ trace_name: 'invoke_agent support-bot' }]);
    expect(name).toBeTruthy();
  });

  it('the v1 SDK sending one trace in three batches, the customer known only to the last', async () => {
    const { key, orgId } = await t.newKey('sdk-three-batches');
    const ti = new TraceIngest({ baseUrl: t.url, apiKey: key, flushOnExit: false });
    onTestFinished(() => void ti.shutdown(100));
    const now = Date.now() - 60_000;
    const chat = (id: string, parent: string | undefined) => ({
      spanId: id,
      ...(parent === undefined ? {} : { parentSpanId: parent }),
      spanType: 'llm' as const,
      name: 'chat',
      startTime: now,
      endTime: now + 400,
      provider: 'anthropic',
      modelId: 'claude-sonnet-4-20250514',
      usage: { inputTokens: 2000, cachedInputTokens: 500, outputTokens: 300 },
    });
    ti.send({ traceId: 'tr-three', traceName: 'background-step', spans: [chat('s1', 'root'), chat('s2', 'root')] });
    expect(await ti.flush()).toBe(true);
    ti.send({ traceId: 'tr-three', traceName: 'background-step', spans: [chat('s3', 'root')] });
    expect(await ti.flush()).toBe(true);
    ti.send({ traceId: 'tr-three', traceName: 'support', customer: { id: 'cust-9', name: 'Nine' }, sessionId: 'sess-9', spans: [chat('root', undefined)] });
    expect(await ti.flush()).toBe(true);
    await expectAllUnder('sdk-three-batches', orgId, 'cust-9', 'sess-9', 4);
    expect(await t.spans('SELECT DISTINCT trace_name, customer_name FROM spans WHERE org_id = ?', [orgId])).toEqual([
      { trace_name: 'support', customer_name: 'Nine' },
    ]);
  });

  it('the Vercel AI SDK 7 through @ai-sdk/otel: customer and session from the runtime context, its invoke_agent span not priced again', async () => {
    const { key, orgId } = await t.newKey('vercel-ai');
    const p = otel(key);
    const baseURL = await fakeOpenAi();
    // The README's recipe.
    registerTelemetry(
      new OpenTelemetry({
        tracer: p.getTracer('ai'),
        agentSpanName: 'functionId',
        enrichSpan: ({ spanType, runtimeContext }) =>
          spanType === 'operation' ? { 'enduser.id': String(runtimeContext?.userId), 'session.id': String(runtimeContext?.sessionId) } : undefined,
      }),
    );
    const openai = createOpenAI({ baseURL, apiKey: 'test' });
    const result = await generateText({
      model: openai('gpt-4o'),
      prompt: 'Where is my order?',
      runtimeContext: { userId: 'cust-7', sessionId: 'sess-7' },
      telemetry: { functionId: 'support-bot', includeRuntimeContext: { userId: true, sessionId: true } },
    });
    expect(result.text).toBe('On its way.');
    await p.forceFlush();
    await expectAllUnder('vercel-ai', orgId, 'cust-7', 'sess-7', 3);
    const rows = await t.spans(
      "SELECT name, span_type, priced, CAST(total_cost AS VARCHAR) AS cost FROM spans WHERE org_id = ? AND model_id <> '' ORDER BY name",
      [orgId],
    );
    // 200 uncached x 2.50 + 1000 cached x 1.25 + 300 x 10, per million: once, on the chat span.
    expect(rows).toEqual([
      { name: 'chat gpt-4o', span_type: 'llm', priced: true, cost: '0.004750000000000000' },
      { name: 'invoke_agent support-bot', span_type: 'agent', priced: true, cost: '0.000000000000000000' },
    ]);
    // The wrapper's repeated counts stay readable in its metadata.
    const [wrapper] = await t.spans("SELECT span_metadata_keys AS k FROM spans WHERE org_id = ? AND span_type = 'agent'", [orgId]);
    expect(wrapper?.k).toContain('gen_ai.usage.input_tokens');
  });

  it("OpenInference's OpenAI instrumentation: user.id and session.id from its context helpers", async () => {
    const { key, orgId } = await t.newKey('openinference');
    const p = otel(key);
    const baseURL = await fakeOpenAi();
    // As in an application: a context manager carries the ids set by setUser/setSession to the spans.
    const contexts = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(contexts);
    onTestFinished(() => {
      contexts.disable();
      context.disable();
    });
    const instrumentation = new OpenAIInstrumentation({ tracerProvider: p });
    instrumentation.manuallyInstrument(OpenAI);
    onTestFinished(() => instrumentation.disable());
    const client = new OpenAI({ baseURL, apiKey: 'test' });
    const withIds = setUser(setSession(context.active(), { sessionId: 'sess-5' }), { userId: 'cust-5' });
    await context.with(withIds, () => client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'Where is my order?' }] }));
    await context.with(withIds, () => client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'And the refund?' }] }));
    await p.forceFlush();
    await expectAllUnder('openinference', orgId, 'cust-5', 'sess-5', 2);
    const [cost] = await t.spans('SELECT CAST(sum(total_cost) AS VARCHAR) AS c FROM spans WHERE org_id = ?', [orgId]);
    expect(cost?.c).toBe('0.009500000000000000');
  });
});
