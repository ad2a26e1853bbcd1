import { describe, expect, it } from 'vitest';
import { CUSTOMER_TEXT, LIMITS, SPAN_TEXT, TRACE_TEXT, USAGE_DIMENSIONS } from './fields.js';
import { mapExportRequest, type OtlpKeyValue, type OtlpSpan } from './otlp-genai.js';
import { oneSpanRequest } from './otlp/one-span.js';
import { REPORT_COST_COLUMNS, SPAN_COLUMNS, USAGE_COLUMNS } from './rows.js';
import { codePointLength, UsageSchema } from './schema.js';

/**
 * The numbers of ingest-api-v1.md, section 2 (and 8), written out here by
 * hand: the table in fields.ts may not drift from them, nor may any cut.
 */
const CONTRACT = {
  trace: { traceId: [1, 128], traceName: [0, 256], agentName: [0, 256], workflowName: [0, 256], workflowRunId: [0, 128], sessionId: [0, 128] },
  customer: { id: [1, 128], name: [0, 256], imageUrl: [0, 2048] },
  span: {
    spanId: [1, 128],
    parentSpanId: [1, 128],
    name: [0, 512],
    errorMessage: [0, 8192],
    provider: [0, 128],
    modelId: [0, 256],
    input: [0, 1_000_000],
    output: [0, 1_000_000],
    toolCatalog: [0, 1_000_000],
    systemFingerprint: [0, 256],
    safetyMetadata: [0, 16384],
    sources: [0, 1_000_000],
  },
  counts: { tracesPerBatch: 1000, spansPerTrace: 2000, metadataEntries: 64, metadataKeyChars: 128, metadataValueChars: 1024, chunkArrayItems: 200 },
} as const;

describe('the one table of field limits', () => {
  it('says what the contract says', () => {
    expect(TRACE_TEXT).toEqual(CONTRACT.trace);
    expect(CUSTOMER_TEXT).toEqual(CONTRACT.customer);
    expect(SPAN_TEXT).toEqual(CONTRACT.span);
    expect(LIMITS).toEqual(CONTRACT.counts);
  });

  // Every text the OTLP mapping fills, sent one code point too long: it is cut at the contract's limit, never refused.
  const s = (key: string, v: string): OtlpKeyValue => ({ key, value: { stringValue: v } });
  const over = (max: number) => 'é'.repeat(max + 1);
  const map = (attributes: OtlpKeyValue[], extra: Partial<OtlpSpan> = {}) => {
    const trace = mapExportRequest(oneSpanRequest(attributes, extra, [s('service.name', 'svc')])).traces[0];
    if (trace === undefined || trace.spans[0] === undefined) throw new Error('no span mapped');
    return { trace, span: trace.spans[0] };
  };
  const cases: [string, number, () => string | undefined][] = [
    ['span.name', CONTRACT.span.name[1], () => map([], { name: over(CONTRACT.span.name[1]) }).span.name],
    [
      'span.errorMessage',
      CONTRACT.span.errorMessage[1],
      () => map([], { status: { code: 2, message: over(CONTRACT.span.errorMessage[1]) } }).span.errorMessage,
    ],
    ['span.modelId', CONTRACT.span.modelId[1], () => map([s('gen_ai.request.model', over(CONTRACT.span.modelId[1]))]).span.modelId],
    ['span.provider', CONTRACT.span.provider[1], () => map([s('gen_ai.provider.name', over(CONTRACT.span.provider[1]))]).span.provider],
    ['span.input', CONTRACT.span.input[1], () => map([s('input.value', over(CONTRACT.span.input[1]))]).span.input],
    ['span.output', CONTRACT.span.output[1], () => map([s('output.value', over(CONTRACT.span.output[1]))]).span.output],
    ['trace.traceName', CONTRACT.trace.traceName[1], () => map([], { name: over(CONTRACT.span.name[1]) }).trace.traceName],
    ['trace.agentName', CONTRACT.trace.agentName[1], () => map([s('gen_ai.agent.name', over(CONTRACT.trace.agentName[1]))]).trace.agentName],
    ['trace.sessionId', CONTRACT.trace.sessionId[1], () => map([s('session.id', over(CONTRACT.trace.sessionId[1]))]).trace.sessionId],
    ['customer.id', CONTRACT.customer.id[1], () => map([s('enduser.id', over(CONTRACT.customer.id[1]))]).trace.customer?.id],
  ];
  it.each(cases)('OTLP cuts %s at the contract limit of %i code points', (_field, max, cut) => {
    expect(codePointLength(cut() ?? '')).toBe(max);
  });

  it('derives the usage and cost columns, and the usage schema, from the usage dimensions', () => {
    const columns = SPAN_COLUMNS.map(([n]) => n as string);
    for (const d of USAGE_DIMENSIONS) {
      expect(columns).toContain(d.column);
      if (d.cost !== undefined) expect(columns).toContain(d.cost);
    }
    expect(USAGE_COLUMNS).toEqual(USAGE_DIMENSIONS.map((d) => d.column));
    expect(REPORT_COST_COLUMNS.at(-1)).toBe('total_cost');
    expect(Object.keys(UsageSchema.shape).sort()).toEqual(USAGE_DIMENSIONS.map((d) => d.field).sort());
  });
});
