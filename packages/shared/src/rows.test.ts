import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  completeRow,
  encodeLine,
  encodeRow,
  encodeSpanLine,
  encodeTraceHead,
  SPAN_COLUMNS,
  spanToRow,
  totalTokens,
  UNPRICED,
  type SpanCosts,
} from '@trace-ingest/shared/rows';
import type { Span, Trace } from '@trace-ingest/shared/schema';

// Text that exercises escaping: quotes, backslashes, control characters,
// U+2028, astral code points and lone surrogates (stored as U+FFFD).
const text = fc.string({
  unit: fc.oneof(fc.constantFrom('a', '"', '\\', '\n', '\u0000', '\u2028', '😀', '\ud800', '\udc00', 'é'), fc.string({ unit: 'binary', maxLength: 1 })),
  maxLength: 8,
});
const count = fc.oneof(fc.nat(), fc.constant(Number.MAX_SAFE_INTEGER));
const metadata = fc.dictionary(fc.oneof(text, fc.constantFrom('__proto__', 'constructor')), text, { maxKeys: 4 }).map((m) => {
  // Own keys as JSON.parse makes them, "__proto__" included.
  const o: Record<string, string> = JSON.parse(JSON.stringify(m)) as Record<string, string>;
  return o;
});
const opt = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });

const span: fc.Arbitrary<Span> = fc
  .record(
    {
      spanId: text,
      parentSpanId: text,
      spanType: fc.constantFrom('agent', 'llm', 'tool', 'embedding', 'other'),
      name: text,
      startTime: fc.integer({ min: 0, max: Date.UTC(9999, 11, 31) }),
      duration: fc.nat({ max: 10 ** 9 }),
      status: fc.constantFrom('ok', 'error'),
      errorMessage: text,
      provider: text,
      modelId: text,
      usage: fc.record(
        {
          inputTokens: count,
          outputTokens: count,
          totalTokens: count,
          reasoningTokens: count,
          cachedInputTokens: count,
          cacheWriteInputTokens: count,
          imageCount: count,
          webSearchCount: count,
          requestCount: count,
        },
        { requiredKeys: [] },
      ),
      ttftMs: fc.oneof(fc.nat(), fc.double({ min: 0, max: 1e9, noNaN: true })),
      chunkOffsets: fc.array(count, { maxLength: 4 }),
      chunkTokens: fc.array(count, { maxLength: 4 }),
      reasoningOffsets: fc.array(count, { maxLength: 4 }),
      reasoningChunkTokens: fc.array(count, { maxLength: 4 }),
      reasoningDurationMs: count,
      input: text,
      output: text,
      toolCatalog: text,
      modelCallMs: count,
      systemFingerprint: text,
      safetyMetadata: text,
      sources: text,
      rateLimit: fc.record(
        { requestsLimit: count, requestsRemaining: count, requestsResetMs: count, tokensLimit: count, tokensRemaining: count, tokensResetMs: count },
        { requiredKeys: [] },
      ),
      metadata,
    },
    { requiredKeys: ['spanId', 'spanType', 'name', 'startTime', 'duration'] },
  )
  .map(({ duration, ...s }) => ({ ...s, endTime: s.startTime + duration }) as Span);

const trace: fc.Arbitrary<Trace> = fc.record(
  {
    traceId: text,
    traceName: text,
    agentName: text,
    workflowName: text,
    workflowRunId: text,
    sessionId: text,
    customer: fc.record({ id: text, name: opt(text), imageUrl: opt(text) }, { requiredKeys: ['id'] }),
    metadata,
    spans: fc.array(span, { minLength: 1, maxLength: 3 }),
  },
  { requiredKeys: ['traceId', 'spans'] },
) as fc.Arbitrary<Trace>;

const priced: SpanCosts = {
  input_cost: '0.0012',
  output_cost: '0.003',
  reasoning_cost: '0',
  cached_input_cost: '0.000000000000000001',
  cache_write_input_cost: '0',
  image_cost: '0',
  web_search_cost: '0',
  request_cost: '0',
  cache_write_1h_input_cost: '0',
  audio_input_cost: '0',
  cached_audio_input_cost: '0',
  audio_output_cost: '0',
  total_cost: '0.004200000000000001',
  priced: true,
  price_source: 'catalog:genai-prices@0.1.8',
};

describe('encodeSpanLine', () => {
  it('writes the same bytes as encodeLine(spanToRow(...)) for any span, and the row less its empty values', () => {
    fc.assert(
      fc.property(trace, fc.constantFrom(UNPRICED, priced), fc.string(), fc.nat(), (t, costs, keyPrefix, receivedAt) => {
        const ctx = { orgId: 'org_"x\\', keyPrefix, receivedAt };
        const head = encodeTraceHead(t, ctx);
        for (const s of t.spans) {
          const row = spanToRow(t, s, ctx, costs);
          const line = encodeSpanLine(head, s, costs);
          expect(line).toBe(encodeLine(row));
          const parsed = JSON.parse(line) as Record<string, unknown>;
          expect(completeRow(parsed)).toEqual(JSON.parse(encodeRow(row)));
          // Keys in table order.
          const order = Object.keys(parsed).map((k) => SPAN_COLUMNS.findIndex(([n]) => n === k));
          expect(order).toEqual([...order].sort((a, b) => a - b));
        }
      }),
      { numRuns: 500, seed: 20261105 },
    );
  });

  it('leaves out every key of an empty value but those that identify, place and price a span', () => {
    const t: Trace = { traceId: 't', spans: [] };
    const line = encodeSpanLine(
      encodeTraceHead(t, { orgId: 'o', keyPrefix: 'k', receivedAt: 1 }),
      { spanId: 's', spanType: 'llm', name: 'n', startTime: 1, endTime: 2 },
      UNPRICED,
    );
    expect(line).toBe(
      '{"org_id":"o","key_prefix":"k","received_at":1,"trace_id":"t","span_id":"s","span_type":"llm","name":"n","start_time":1,"end_time":2,' +
        '"start_date":"1970-01-01","duration_ms":1,"status":"ok","total_cost":"0","priced":false,"price_source":""}',
    );
    // A key every line carries is not made up for a line without it.
    expect(completeRow({ span_id: 's' })).not.toHaveProperty('org_id', '');
    expect(completeRow({ span_id: 's' }).input_cost).toBe('0');
  });

  it('escapes every code unit as JSON.stringify does, in short fields and long texts alike', () => {
    const ctx = { orgId: 'o', keyPrefix: 'k', receivedAt: 1 };
    const unit = (c: number) => String.fromCharCode(c % 0x10000);
    for (let block = 0; block < 0x10000; block += 0x100) {
      // Each code unit apart ('x' between them), so no two surrogates pair up.
      let units = '';
      for (let c = block; c < block + 0x100; c++) units += `x${unit(c)}`;
      const t: Trace = { traceId: units, spans: [] };
      const head = encodeTraceHead(t, ctx);
      for (let c = block; c < block + 0x100; c += 5) {
        const s: Span = {
          spanId: unit(c),
          spanType: 'llm',
          name: `n${unit(c + 1)}`,
          provider: `${unit(c + 2)}p`,
          modelId: `m${unit(c + 3)}m`,
          parentSpanId: unit(c + 4),
          startTime: 0,
          endTime: 1,
          input: units,
          output: `${'plain words '.repeat(20)}${unit(c)}`,
        };
        expect(encodeSpanLine(head, s, UNPRICED)).toBe(encodeLine(spanToRow(t, s, ctx, UNPRICED)));
      }
    }
  });

  it('writes a lone surrogate as U+FFFD, in trace and span fields alike', () => {
    const t: Trace = { traceId: 't\ud800', traceName: 'x', spans: [{ spanId: 's', spanType: 'llm', name: '\udc00', startTime: 0, endTime: 1 }] };
    const line = encodeSpanLine(encodeTraceHead(t, { orgId: 'o', keyPrefix: 'k', receivedAt: 1 }), t.spans[0] as Span, UNPRICED);
    const row = JSON.parse(line) as { trace_id: string; name: string };
    expect(row.trace_id).toBe('t\ufffd');
    expect(row.name).toBe('\ufffd');
  });
});

describe('total_tokens', () => {
  const head = encodeTraceHead({ traceId: 't', spans: [] }, { orgId: 'o', keyPrefix: 'k', receivedAt: 1 });
  const total = (usage: Span['usage']) =>
    completeRow(
      JSON.parse(encodeSpanLine(head, { spanId: 's', spanType: 'llm', name: 'n', startTime: 1, endTime: 2, usage }, UNPRICED)) as Record<string, unknown>,
    ).total_tokens;

  it('is the reported total, else the sum of the token buckets, on every route (the OTLP mapping uses the same rule)', () => {
    expect(total({ inputTokens: 10, cachedInputTokens: 20, cacheWriteInputTokens: 3, outputTokens: 5, reasoningTokens: 7, imageCount: 2 })).toBe(45);
    expect(total({ inputTokens: 10, outputTokens: 5, totalTokens: 99 })).toBe(99);
    expect(total(undefined)).toBe(0);
    expect(totalTokens({ inputTokens: 1, outputTokens: 2 })).toBe(3);
  });
});
