import { describe, expect, it } from 'vitest';
import { cutCodePoints, DROPPED_KEY, mapExportRequest, nanosToMillis, TRUNCATED_KEY, type OtlpKeyValue, type OtlpSpan } from './otlp-genai.js';
import { validatePayload } from './schema.js';

const T0 = 1_768_478_400_000;
const tid = Buffer.from('0af7651916cd43dd8448eb211c80319c', 'hex');
let seq = 0;
const sid = () => Buffer.from((++seq).toString(16).padStart(16, '0'), 'hex');

const s = (key: string, v: string): OtlpKeyValue => ({ key, value: { stringValue: v } });
const n = (key: string, v: number): OtlpKeyValue => ({ key, value: { intValue: v } });

function span(attributes: OtlpKeyValue[], over: Partial<OtlpSpan> = {}): OtlpSpan {
  return { traceId: tid, spanId: sid(), name: 'op', startTimeUnixNano: `${T0}000000`, endTimeUnixNano: `${T0 + 5}000000`, attributes, ...over };
}

function one(attributes: OtlpKeyValue[], over: Partial<OtlpSpan> = {}, resource: OtlpKeyValue[] = [s('service.name', 'svc')]) {
  const r = mapExportRequest({ resourceSpans: [{ resource: { attributes: resource }, scopeSpans: [{ spans: [span(attributes, over)] }] }] });
  expect(r.rejected).toBe(0);
  const trace = r.traces[0];
  const sp = trace?.spans[0];
  if (trace === undefined || sp === undefined) throw new Error('no span');
  return { trace, span: sp };
}

describe('usage into disjoint buckets', () => {
  it('subtracts cache reads and writes from input and reasoning from output (conventions count them inside)', () => {
    const { span: sp } = one([
      n('gen_ai.usage.input_tokens', 5000),
      n('gen_ai.usage.cache_read.input_tokens', 3000),
      n('gen_ai.usage.cache_creation.input_tokens', 1000),
      n('gen_ai.usage.output_tokens', 800),
      n('gen_ai.usage.reasoning.output_tokens', 300),
    ]);
    expect(sp.usage).toEqual({
      inputTokens: 1000,
      cachedInputTokens: 3000,
      cacheWriteInputTokens: 1000,
      outputTokens: 500,
      reasoningTokens: 300,
      totalTokens: 5800,
    });
  });

  it('takes input smaller than cache reads + writes as already exclusive (Anthropic native counts)', () => {
    const { span: sp } = one([n('gen_ai.usage.input_tokens', 50), n('gen_ai.usage.cache_read.input_tokens', 3000), n('gen_ai.usage.output_tokens', 10)]);
    expect(sp.usage).toMatchObject({ inputTokens: 50, cachedInputTokens: 3000, outputTokens: 10 });
  });

  it('takes input as exclusive when the reported total says so', () => {
    const { span: sp } = one([
      n('gen_ai.usage.input_tokens', 4000),
      n('gen_ai.usage.cache_read.input_tokens', 1000),
      n('gen_ai.usage.output_tokens', 100),
      n('gen_ai.usage.total_tokens', 5100),
    ]);
    expect(sp.usage).toEqual({ inputTokens: 4000, cachedInputTokens: 1000, outputTokens: 100, totalTokens: 5100 });
  });

  it('never counts a token twice when several alias families are present: the first family wins per count', () => {
    const { span: sp } = one([
      n('gen_ai.usage.input_tokens', 100),
      n('gen_ai.usage.prompt_tokens', 999),
      n('llm.token_count.prompt', 999),
      n('ai.usage.promptTokens', 999),
      n('gen_ai.usage.output_tokens', 7),
    ]);
    expect(sp.usage).toEqual({ inputTokens: 100, outputTokens: 7, totalTokens: 107 });
  });

  it('reads counts sent as doubles or decimal strings, and ignores negative or non-numeric ones', () => {
    const { span: sp } = one([
      { key: 'gen_ai.usage.input_tokens', value: { doubleValue: 12 } },
      s('gen_ai.usage.output_tokens', '34'),
      n('gen_ai.usage.cache_read.input_tokens', -5),
      s('gen_ai.usage.reasoning.output_tokens', 'many'),
    ]);
    expect(sp.usage).toEqual({ inputTokens: 12, outputTokens: 34, totalTokens: 46 });
  });

  it('reads 64-bit counts given as Long-like objects', () => {
    const { span: sp } = one([{ key: 'gen_ai.usage.input_tokens', value: { intValue: { low: 7, high: 1, unsigned: false } } }]);
    expect(sp.usage?.inputTokens).toBe(4294967296 + 7);
  });
});

describe("input that already leaves out the cache, known from the span's source", () => {
  // What OpenLLMetry's Anthropic instrumentation sends: Anthropic's own input_tokens (fresh input only) and a
  // total of input + output. Fresh input larger than the cache, so the sizes alone would subtract the cache.
  const anthropic = [
    s('gen_ai.system', 'Anthropic'),
    s('gen_ai.request.model', 'claude-sonnet-4-20250514'),
    n('gen_ai.usage.prompt_tokens', 5000),
    n('gen_ai.usage.cache_read_input_tokens', 1200),
    n('gen_ai.usage.cache_creation_input_tokens', 300),
    n('gen_ai.usage.completion_tokens', 400),
    n('llm.usage.total_tokens', 5400),
  ];
  const from = (scope: string) =>
    mapExportRequest({ resourceSpans: [{ scopeSpans: [{ scope: { name: scope, version: '0.14.0' }, spans: [span(anthropic)] }] }] }).traces[0]?.spans[0]?.usage;

  it("keeps OpenLLMetry's Anthropic input whole (JS and Python scopes)", () => {
    for (const scope of ['@traceloop/instrumentation-anthropic', 'opentelemetry.instrumentation.anthropic'])
      expect(from(scope), scope).toMatchObject({ inputTokens: 5000, cachedInputTokens: 1200, cacheWriteInputTokens: 300, outputTokens: 400 });
  });

  it('subtracts the cache for a source that counts it inside the input', () => {
    expect(from('@traceloop/instrumentation-openai')).toMatchObject({ inputTokens: 3500, cachedInputTokens: 1200, cacheWriteInputTokens: 300 });
  });
});

describe('span fields', () => {
  it.each([
    ['chat', 'llm'],
    ['text_completion', 'llm'],
    ['generate_content', 'llm'],
    ['embeddings', 'embedding'],
    ['execute_tool', 'tool'],
    ['invoke_agent', 'agent'],
    ['create_agent', 'agent'],
    ['retrieval', 'other'],
  ])('gen_ai.operation.name %s is span type %s', (op, type) => {
    expect(one([s('gen_ai.operation.name', op)]).span.spanType).toBe(type);
  });

  it('a span without GenAI attributes is "other" with no model, so it is never flagged unpriced', () => {
    const { span: sp } = one([s('http.request.method', 'GET')]);
    expect(sp).toMatchObject({ spanType: 'other', metadata: { 'http.request.method': 'GET' } });
    expect(sp.modelId).toBeUndefined();
  });

  it('prefers the response model and the current provider attribute', () => {
    const { span: sp } = one([
      s('gen_ai.request.model', 'gpt-4o'),
      s('gen_ai.response.model', 'gpt-4o-2024-08-06'),
      s('gen_ai.system', 'old'),
      s('gen_ai.provider.name', 'openai'),
    ]);
    expect(sp).toMatchObject({ modelId: 'gpt-4o-2024-08-06', provider: 'openai' });
  });

  it('converts nanoseconds to milliseconds exactly, past 2^53', () => {
    expect(nanosToMillis('1768478400123999999')).toBe(1768478400123);
    expect(nanosToMillis({ low: 0xffffffff, high: 0x188c6a5e, unsigned: true })).toBe(Number(((0x188c6a5en << 32n) | 0xffffffffn) / 1_000_000n));
    expect(nanosToMillis('-1')).toBeUndefined();
  });

  it('rejects spans with bad ids or times and keeps the others', () => {
    const r = mapExportRequest({
      resourceSpans: [
        {
          scopeSpans: [
            {
              spans: [
                span([]),
                span([], { traceId: Buffer.alloc(16) }),
                span([], { spanId: Buffer.alloc(3, 1) }),
                span([], { startTimeUnixNano: `${T0 + 10}000000`, endTimeUnixNano: `${T0}000000` }),
                span([], { startTimeUnixNano: '99999999999999999999999' }),
              ],
            },
          ],
        },
      ],
    });
    expect(r).toMatchObject({ spans: 1, rejected: 4 });
    expect(r.rejectReasons.join('\n')).toMatch(
      /traceId must be 16 bytes[\s\S]*spanId must be 8 bytes[\s\S]*must not be before[\s\S]*nanoseconds since the epoch/,
    );
  });

  it('takes input and output text from the older events and indexed attributes', () => {
    const ev = one([], {
      events: [
        { name: 'gen_ai.content.prompt', attributes: [s('gen_ai.prompt', 'P')] },
        { name: 'gen_ai.content.completion', attributes: [s('gen_ai.completion', 'C')] },
      ],
    });
    expect(ev.span).toMatchObject({ input: 'P', output: 'C' });
    const idx = one([s('gen_ai.prompt.1.content', 'second'), s('gen_ai.prompt.0.role', 'system'), s('gen_ai.prompt.0.content', 'first')]);
    expect(JSON.parse(idx.span.input ?? '')).toEqual([{ role: 'system', content: 'first' }, { content: 'second' }]);
    expect(idx.span.metadata).toBeUndefined();
  });

  it('an error status gives status error with its message, else the exception event', () => {
    expect(one([], { status: { code: 2, message: 'boom' } }).span).toMatchObject({ status: 'error', errorMessage: 'boom' });
    expect(one([], { status: { code: 2 }, events: [{ name: 'exception', attributes: [s('exception.message', 'from event')] }] }).span).toMatchObject({
      status: 'error',
      errorMessage: 'from event',
    });
    expect(one([], { status: { code: 1 } }).span.status).toBeUndefined();
  });
});

describe('limits: cut, never refused', () => {
  it('cuts text over its v1 limit and names the field in otel.truncated', () => {
    const { span: sp } = one([], { name: 'n'.repeat(600) });
    expect(sp.name).toHaveLength(512);
    expect(sp.metadata?.[TRUNCATED_KEY]).toBe('name');
  });

  it('keeps the first 62 attributes, then one entry naming how many were left out (two slots stay for the notes)', () => {
    const many = Array.from({ length: 100 }, (_, i) => s(`attr.${String(i).padStart(3, '0')}`, 'v'));
    const { span: sp } = one(many);
    const keys = Object.keys(sp.metadata ?? {});
    expect(keys).toHaveLength(63);
    expect(keys[61]).toBe('attr.061');
    expect(sp.metadata?.[DROPPED_KEY]).toMatch(/^38 left out: attr\.062, attr\.063/);
    expect(validatePayload({ version: 'v1', traces: [{ traceId: 't', traceName: 'x', spans: [sp] }] }).ok).toBe(true);
  });

  it('cuts long keys and values and ends them with an ellipsis', () => {
    const { span: sp } = one([s('k'.repeat(200), 'v'.repeat(5000))]);
    const [[k, v]] = Object.entries(sp.metadata ?? {}) as [[string, string]];
    expect(k).toHaveLength(128);
    expect(k.endsWith('\u2026')).toBe(true);
    expect(v).toHaveLength(1024);
  });

  it('cuts at code points, never inside a surrogate pair', () => {
    expect(cutCodePoints('a😀b', 2)).toBe('a😀');
    expect(cutCodePoints('😀😀', 1)).toBe('😀');
  });

  it('splits a trace of more than 2000 spans into v1 traces with the same id', () => {
    const spans = Array.from({ length: 2500 }, () => span([]));
    const r = mapExportRequest({ resourceSpans: [{ scopeSpans: [{ spans }] }] });
    expect(r.traces.map((t) => t.spans.length)).toEqual([2000, 500]);
    expect(new Set(r.traces.map((t) => t.traceId)).size).toBe(1);
  });
});

describe('trace fields', () => {
  it('names the trace after its root span, never after the service; reads agent, session and customer', () => {
    const root = span([s('gen_ai.agent.name', 'planner'), s('session.id', 'sess'), s('enduser.id', 'cust')], { name: 'root op' });
    const child = span([], { parentSpanId: root.spanId ?? null });
    const r = mapExportRequest({ resourceSpans: [{ resource: { attributes: [s('service.name', 'svc')] }, scopeSpans: [{ spans: [child, root] }] }] });
    expect(r.traces[0]).toMatchObject({
      traceName: 'root op',
      agentName: 'planner',
      sessionId: 'sess',
      customer: { id: 'cust' },
      metadata: { 'service.name': 'svc' },
    });
    // Children exported before their root: no name yet (the store learns it from the root's request).
    const orphan = one([], { parentSpanId: Buffer.alloc(8, 9) }).trace;
    expect(orphan.traceName).toBe('');
    expect(orphan.metadata).toMatchObject({ 'service.name': 'svc' });
    expect(one([], { parentSpanId: Buffer.alloc(8, 9) }, []).trace.traceName).toBe('');
  });

  it('reads customer and session from configured attribute names, on the span or its resource', () => {
    const r = mapExportRequest(
      { resourceSpans: [{ resource: { attributes: [s('tenant.id', 'acme')] }, scopeSpans: [{ spans: [span([s('chat.thread', 'th-1')])] }] }] },
      { customerAttributes: ['tenant.id'], sessionAttributes: ['chat.thread'] },
    );
    expect(r.traces[0]).toMatchObject({ customer: { id: 'acme' }, sessionId: 'th-1' });
  });
});
