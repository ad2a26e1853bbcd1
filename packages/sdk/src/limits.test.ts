import { describe, expect, it } from 'vitest';
import { LIMITS as SERVER_LIMITS, MAX_EPOCH_MS as SERVER_MAX_EPOCH_MS, validatePayload } from '@trace-ingest/shared/schema';
import { validateIngest } from '@trace-ingest/shared/validate';
import {
  BILLING_TEXT as SHARED_BILLING_TEXT,
  CUSTOMER_TEXT as SHARED_CUSTOMER_TEXT,
  SPAN_TEXT as SHARED_SPAN_TEXT,
  TRACE_TEXT as SHARED_TRACE_TEXT,
} from '@trace-ingest/shared/fields';
import { BILLING_TEXT, CUSTOMER_TEXT, LIMITS, MAX_EPOCH_MS, SPAN_TEXT, TRACE_TEXT, spanProblem, traceProblem, utf8Bytes } from './limits.js';
import type { SpanV1, TraceV1 } from './types.js';

// The SDK carries its own copy of the limits (no runtime dependency); these
// tests hold the copy equal to the server's contract.

const span = (over: Record<string, unknown> = {}): SpanV1 => ({ spanId: 's', spanType: 'llm', name: 'n', startTime: 1, endTime: 2, ...over }) as SpanV1;
const trace = (over: Record<string, unknown> = {}, spans: SpanV1[] = [span()]): TraceV1 => ({ traceId: 't', traceName: 'x', ...over, spans }) as TraceV1;

/** The server's verdict (both its validators) and the SDK's must agree. */
function agree(t: TraceV1): boolean {
  const body = JSON.parse(JSON.stringify({ version: 'v1', traces: [t] })) as unknown;
  const server = validateIngest(body).ok;
  expect(validatePayload(body).ok).toBe(server);
  const { spans, ...header } = t;
  const sdk = traceProblem(header) === undefined && spans.every((s) => spanProblem(s) === undefined);
  expect({ sdk, server, t: JSON.stringify(t).slice(0, 300) }).toEqual({ sdk: server, server, t: JSON.stringify(t).slice(0, 300) });
  return sdk;
}

// Four UTF-16 units, two code points each: limits count code points.
const astral = (n: number) => '\u{1D11E}'.repeat(n);

describe('limits equal the server schema', () => {
  it('has the same counts', () => {
    for (const [k, v] of Object.entries(SERVER_LIMITS)) expect(LIMITS[k as keyof typeof LIMITS]).toBe(v);
    expect(MAX_EPOCH_MS).toBe(SERVER_MAX_EPOCH_MS);
  });

  it('has the same text bounds as the shared table of field limits', () => {
    expect(TRACE_TEXT).toEqual(SHARED_TRACE_TEXT);
    expect(CUSTOMER_TEXT).toEqual(SHARED_CUSTOMER_TEXT);
    expect(SPAN_TEXT).toEqual(SHARED_SPAN_TEXT);
    expect(BILLING_TEXT).toEqual(SHARED_BILLING_TEXT);
  });

  it.each(Object.entries(BILLING_TEXT))('span.%s (billing): the same bounds as the server', (field, [, max]) => {
    expect(agree(trace({}, [span({ [field]: 'a'.repeat(max) })]))).toBe(true);
    expect(agree(trace({}, [span({ [field]: 'a'.repeat(max + 1) })]))).toBe(false);
  });

  it('agrees with the server on batch and the new usage counts', () => {
    expect(
      agree(trace({}, [span({ batch: true, usage: { audioInputTokens: 1, cachedAudioInputTokens: 2, audioOutputTokens: 3, cacheWrite1hInputTokens: 4 } })])),
    ).toBe(true);
    expect(agree(trace({}, [span({ batch: 'yes' as unknown as boolean })]))).toBe(false);
  });

  it.each(Object.entries(SPAN_TEXT))('span.%s: the same bounds, counted in code points', (field, [min, max]) => {
    expect(agree(trace({}, [span({ [field]: 'a'.repeat(max) })]))).toBe(true);
    expect(agree(trace({}, [span({ [field]: 'a'.repeat(max + 1) })]))).toBe(false);
    if (max <= 16384) {
      expect(agree(trace({}, [span({ [field]: astral(max) })]))).toBe(true);
      expect(agree(trace({}, [span({ [field]: astral(max + 1) })]))).toBe(false);
    }
    if (min > 0) expect(agree(trace({}, [span({ [field]: '' })]))).toBe(false);
  });

  it.each(Object.entries(TRACE_TEXT))('trace.%s: the same bounds', (field, [min, max]) => {
    const pair = field === 'workflowName' ? { workflowRunId: 'r' } : field === 'workflowRunId' ? { workflowName: 'w' } : {};
    expect(agree(trace({ ...pair, [field]: astral(max) }))).toBe(true);
    expect(agree(trace({ ...pair, [field]: 'a'.repeat(max + 1) }))).toBe(false);
    if (min > 0) expect(agree(trace({ [field]: '' }))).toBe(false);
  });

  it.each(Object.entries(CUSTOMER_TEXT))('customer.%s: the same bounds', (field, [, max]) => {
    const value = (n: number) => (field === 'imageUrl' ? `https://e.x/${'a'.repeat(n - 12)}` : 'a'.repeat(n));
    expect(agree(trace({ customer: { id: 'c', [field]: value(max) } }))).toBe(true);
    expect(agree(trace({ customer: { id: 'c', [field]: value(max + 1) } }))).toBe(false);
  });

  it('agrees on metadata, chunk arrays, usage, times and cross-field rules', () => {
    const meta = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 'v']));
    const cases: [TraceV1, boolean][] = [
      [trace({ metadata: meta(64) }), true],
      [trace({ metadata: meta(65) }), false],
      [trace({}, [span({ metadata: { ['k'.repeat(128)]: 'v'.repeat(1024) } })]), true],
      [trace({}, [span({ metadata: { ['k'.repeat(129)]: 'v' } })]), false],
      [trace({}, [span({ metadata: { k: 'v'.repeat(1025) } })]), false],
      [trace({}, [span({ metadata: { k: 1 } })]), false],
      [trace({}, [span({ chunkOffsets: Array.from({ length: 200 }, (_, i) => i), chunkTokens: Array(200).fill(1) })]), true],
      [trace({}, [span({ chunkOffsets: Array(201).fill(1) })]), false],
      [trace({}, [span({ reasoningChunkTokens: [1, -1] })]), false],
      [trace({}, [span({ reasoningOffsets: [1.5] })]), false],
      [trace({}, [span({ usage: { inputTokens: 1, requestCount: 0 } })]), true],
      [trace({}, [span({ usage: { inputTokens: 1.5 } })]), false],
      [trace({}, [span({ usage: { promptTokens: 1 } })]), false],
      [trace({}, [span({ rateLimit: { tokensRemaining: 5 } })]), true],
      [trace({}, [span({ rateLimit: { tokens: 5 } })]), false],
      [trace({}, [span({ ttftMs: 12.5 })]), true],
      [trace({}, [span({ ttftMs: -1 })]), false],
      [trace({}, [span({ startTime: 5, endTime: 4 })]), false],
      [trace({}, [span({ startTime: MAX_EPOCH_MS, endTime: MAX_EPOCH_MS + 1 })]), false],
      [trace({}, [span({ startTime: 1.5 })]), false],
      [trace({}, [span({ spanType: 'chain' })]), false],
      [trace({}, [span({ status: 'error', errorMessage: 'x' })]), true],
      [trace({}, [span({ status: 'failed' })]), false],
      [trace({}, [span({ modelCallMs: 3, reasoningDurationMs: 0 })]), true],
      [trace({}, [span({ modelCallMs: -3 })]), false],
      [trace({}, [span({ extra: 1 })]), false],
      [trace({ traceName: undefined, agentName: 'a' }), true],
      [trace({ traceName: undefined }), false],
      [trace({ workflowName: 'w' }), false],
      [trace({ workflowName: 'w', workflowRunId: 'r' }), true],
      [trace({ customer: { name: 'no id' } }), false],
      [trace({ customer: { id: 'c', imageUrl: 'not a uri' } }), false],
      [trace({ unknown: 'x' }), false],
    ];
    for (const [t, ok] of cases) expect(agree(t)).toBe(ok);
  });
});

describe('utf8Bytes', () => {
  it('equals the encoded length', () => {
    for (const s of ['', 'abc', 'é', '€', '\u{1D11E}', 'a\u{1D11E}é€x', '\ud800', JSON.stringify('\ud800x')]) {
      expect(utf8Bytes(s)).toBe(new TextEncoder().encode(s).length);
    }
  });
});
