import type { PriceOverride } from '@trace-ingest/shared/price-engine';
import type { IngestPayload, Span, Trace } from '@trace-ingest/shared/schema';
import type { ResolvedKey } from '@trace-ingest/store/control-store-types';

/** Payload factories: pass the fields a test cares about, get a valid v1 object. */

let seq = 0;
const next = (): number => ++seq;

export function makeSpan(partial: Partial<Span> = {}): Span {
  const n = next();
  return {
    spanId: `span-${n}`,
    spanType: 'llm',
    name: `call-${n}`,
    startTime: Date.UTC(2026, 10, 1, 12, 0, 0),
    endTime: Date.UTC(2026, 10, 1, 12, 0, 1),
    ...partial,
  };
}

export function makeTrace(partial: Partial<Trace> = {}): Trace {
  const n = next();
  return {
    traceId: `trace-${n}`,
    traceName: `trace ${n}`,
    spans: [makeSpan()],
    ...partial,
  };
}

export function makePayload(partial: Partial<IngestPayload> = {}): IngestPayload {
  return { version: 'v1', traces: [makeTrace()], ...partial };
}

/** A payload of `traces` traces with `spansPerTrace` spans each, unique ids throughout. */
export function makeBulkPayload(traces: number, spansPerTrace: number, spanPartial: Partial<Span> = {}): IngestPayload {
  return {
    version: 'v1',
    traces: Array.from({ length: traces }, () => makeTrace({ spans: Array.from({ length: spansPerTrace }, () => makeSpan(spanPartial)) })),
  };
}

/** A resolved API key as the key store returns it: an ingest key on a plan far from its limits, no content policy. */
export function makeResolvedKey(key: string, partial: Partial<ResolvedKey> = {}): ResolvedKey {
  return {
    keyId: 'key_1',
    prefix: key.slice(0, 12),
    orgId: 'org_1',
    orgName: 'acme',
    planName: 'default',
    monthlySpans: 1000,
    rateLimitRps: 1000,
    contentPolicy: null,
    textDays: null,
    scopes: ['ingest'],
    customers: null,
    ...partial,
  };
}

/** A price override in force always: 1 and 2 per million input and output tokens of `my-model`, every other price unset. */
export function makeOverride(partial: Partial<Omit<PriceOverride, 'id'>> = {}): Omit<PriceOverride, 'id'> {
  return {
    orgId: '',
    provider: '',
    model: 'my-model',
    validFrom: 0,
    inputPerMtok: '1',
    outputPerMtok: '2',
    cachedInputPerMtok: null,
    cacheWriteInputPerMtok: null,
    reasoningPerMtok: null,
    imageEach: null,
    webSearchEach: null,
    requestEach: null,
    ...partial,
  };
}
