import type { SpanV1, TraceHeaderV1 } from './types.js';

/**
 * The contract's limits (ingest-api-v1.md, sections 2 and 8), checked before a
 * span is queued so that one bad span is reported alone instead of failing a
 * whole batch with a 400. `limits.test.ts` holds these equal to the server's
 * schema in `@trace-ingest/shared/schema`.
 */
export const LIMITS = {
  tracesPerBatch: 1000,
  spansPerTrace: 2000,
  metadataEntries: 64,
  metadataKeyChars: 128,
  metadataValueChars: 1024,
  chunkArrayItems: 200,
  /** The server's default INGEST_MAX_BODY_BYTES (10 MiB). */
  bodyBytes: 10 * 1024 * 1024,
} as const;

/** 9999-12-31T23:59:59.999Z, the latest epoch ms the span stores hold. */
export const MAX_EPOCH_MS = 253_402_300_799_999;

/** [min, max] length in Unicode code points of each string field. */
export const TRACE_TEXT: Readonly<Record<string, readonly [number, number]>> = {
  traceId: [1, 128],
  traceName: [0, 256],
  agentName: [0, 256],
  workflowName: [0, 256],
  workflowRunId: [0, 128],
  sessionId: [0, 128],
};

export const CUSTOMER_TEXT: Readonly<Record<string, readonly [number, number]>> = {
  id: [1, 128],
  name: [0, 256],
  imageUrl: [0, 2048],
};

export const SPAN_TEXT: Readonly<Record<string, readonly [number, number]>> = {
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
};

/** ...of the span fields added to v1 after the spec: how the call was billed (see the README's usage dimensions). */
export const BILLING_TEXT: Readonly<Record<string, readonly [number, number]>> = {
  serviceTier: [0, 64],
  region: [0, 64],
};

export const SPAN_TYPES = ['agent', 'llm', 'tool', 'embedding', 'other'] as const;
export const SPAN_STATUSES = ['ok', 'error'] as const;
export const USAGE_FIELDS = [
  'inputTokens',
  'outputTokens',
  'totalTokens',
  'reasoningTokens',
  'cachedInputTokens',
  'cacheWriteInputTokens',
  'imageCount',
  'webSearchCount',
  'requestCount',
  'cacheWrite1hInputTokens',
  'audioInputTokens',
  'cachedAudioInputTokens',
  'audioOutputTokens',
] as const;
export const RATE_LIMIT_FIELDS = ['requestsLimit', 'requestsRemaining', 'requestsResetMs', 'tokensLimit', 'tokensRemaining', 'tokensResetMs'] as const;
const CHUNK_ARRAYS = ['chunkOffsets', 'chunkTokens', 'reasoningOffsets', 'reasoningChunkTokens'] as const;
const SPAN_COUNTS = ['reasoningDurationMs', 'modelCallMs'] as const;
const SPAN_FIELDS = new Set<string>([
  ...Object.keys(SPAN_TEXT),
  ...Object.keys(BILLING_TEXT),
  'batch',
  'spanType',
  'startTime',
  'endTime',
  'status',
  'usage',
  'ttftMs',
  ...CHUNK_ARRAYS,
  ...SPAN_COUNTS,
  'rateLimit',
  'metadata',
]);
const TRACE_FIELDS = new Set<string>([...Object.keys(TRACE_TEXT), 'customer', 'metadata', 'spans']);

/** Length in code points, as the server counts (JSON Schema maxLength). */
export function codePoints(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

function textProblem(path: string, v: unknown, [min, max]: readonly [number, number]): string | undefined {
  if (typeof v !== 'string') return `${path} must be a string`;
  // UTF-16 length bounds the code-point count from above; count only when it matters.
  if (v.length < min) return `${path} must be at least ${min} character${min === 1 ? '' : 's'} long`;
  if (v.length > max && codePoints(v) > max) return `${path} must be at most ${max} characters long (has ${codePoints(v)})`;
  return undefined;
}

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

function metadataProblem(path: string, m: unknown): string | undefined {
  if (m === null || typeof m !== 'object' || Array.isArray(m)) return `${path} must be an object of strings`;
  const keys = Object.keys(m);
  if (keys.length > LIMITS.metadataEntries) return `${path} must have at most ${LIMITS.metadataEntries} entries (has ${keys.length})`;
  for (const k of keys) {
    const kp = textProblem(`${path} key "${k.slice(0, 40)}"`, k, [0, LIMITS.metadataKeyChars]);
    if (kp !== undefined) return kp;
    const vp = textProblem(`${path}.${k.slice(0, 40)}`, (m as Record<string, unknown>)[k], [0, LIMITS.metadataValueChars]);
    if (vp !== undefined) return vp;
  }
  return undefined;
}

function countsProblem(path: string, o: unknown, fields: readonly string[]): string | undefined {
  if (o === null || typeof o !== 'object' || Array.isArray(o)) return `${path} must be an object`;
  for (const [k, v] of Object.entries(o)) {
    if (!fields.includes(k)) return `${path}.${k} is not a field of the v1 contract`;
    if (v !== undefined && !isCount(v)) return `${path}.${k} must be an integer >= 0`;
  }
  return undefined;
}

/** The first way `span` breaks the contract, or undefined when the server will accept it. */
export function spanProblem(span: SpanV1, path = 'span'): string | undefined {
  const s = span as unknown as Record<string, unknown>;
  for (const [k, v] of Object.entries(s)) {
    if (v === undefined) continue;
    if (!SPAN_FIELDS.has(k)) return `${path}.${k} is not a field of the v1 contract`;
  }
  for (const [k, range] of Object.entries(SPAN_TEXT)) {
    const v = s[k];
    if (v === undefined) {
      if (range[0] > 0 && k !== 'parentSpanId') return `${path}.${k} is required`;
      continue;
    }
    const p = textProblem(`${path}.${k}`, v, range);
    if (p !== undefined) return p;
  }
  for (const [k, range] of Object.entries(BILLING_TEXT)) {
    const v = s[k];
    if (v === undefined) continue;
    const p = textProblem(`${path}.${k}`, v, range);
    if (p !== undefined) return p;
  }
  if (span.batch !== undefined && typeof span.batch !== 'boolean') return `${path}.batch must be true or false`;
  if (!SPAN_TYPES.includes(span.spanType)) return `${path}.spanType must be one of ${SPAN_TYPES.join(', ')}`;
  for (const k of ['startTime', 'endTime'] as const) {
    if (!isCount(span[k]) || span[k] > MAX_EPOCH_MS) return `${path}.${k} must be integer epoch milliseconds`;
  }
  if (span.endTime < span.startTime) return `${path}.endTime must be >= startTime`;
  if (span.status !== undefined && !SPAN_STATUSES.includes(span.status)) return `${path}.status must be ok or error`;
  if (span.ttftMs !== undefined && !(typeof span.ttftMs === 'number' && Number.isFinite(span.ttftMs) && span.ttftMs >= 0))
    return `${path}.ttftMs must be a number >= 0`;
  for (const k of CHUNK_ARRAYS) {
    const a = span[k];
    if (a === undefined) continue;
    if (!Array.isArray(a) || a.length > LIMITS.chunkArrayItems || !a.every(isCount)) {
      return `${path}.${k} must be at most ${LIMITS.chunkArrayItems} integers >= 0`;
    }
  }
  for (const k of SPAN_COUNTS) {
    if (span[k] !== undefined && !isCount(span[k])) return `${path}.${k} must be an integer >= 0`;
  }
  if (span.usage !== undefined) {
    const p = countsProblem(`${path}.usage`, span.usage, USAGE_FIELDS);
    if (p !== undefined) return p;
  }
  if (span.rateLimit !== undefined) {
    const p = countsProblem(`${path}.rateLimit`, span.rateLimit, RATE_LIMIT_FIELDS);
    if (p !== undefined) return p;
  }
  if (span.metadata !== undefined) return metadataProblem(`${path}.metadata`, span.metadata);
  return undefined;
}

function isUri(v: string): boolean {
  try {
    new URL(v);
    return true;
  } catch {
    return false;
  }
}

/** The first way a trace's own fields (not its spans) break the contract. */
export function traceProblem(trace: TraceHeaderV1, path = 'trace'): string | undefined {
  const t = trace as unknown as Record<string, unknown>;
  for (const [k, v] of Object.entries(t)) {
    if (v !== undefined && !TRACE_FIELDS.has(k)) return `${path}.${k} is not a field of the v1 contract`;
  }
  for (const [k, range] of Object.entries(TRACE_TEXT)) {
    const v = t[k];
    if (v === undefined) {
      if (range[0] > 0) return `${path}.${k} is required`;
      continue;
    }
    const p = textProblem(`${path}.${k}`, v, range);
    if (p !== undefined) return p;
  }
  if (trace.traceName === undefined && trace.agentName === undefined) return `${path}: at least one of traceName or agentName is required`;
  if ((trace.workflowName === undefined) !== (trace.workflowRunId === undefined)) return `${path}: workflowName and workflowRunId must be given together`;
  if (trace.customer !== undefined) {
    const c = trace.customer as unknown as Record<string, unknown>;
    if (c === null || typeof c !== 'object') return `${path}.customer must be an object`;
    for (const [k, v] of Object.entries(c)) {
      if (v === undefined) continue;
      const range = CUSTOMER_TEXT[k];
      if (range === undefined) return `${path}.customer.${k} is not a field of the v1 contract`;
      const p = textProblem(`${path}.customer.${k}`, v, range);
      if (p !== undefined) return p;
    }
    if (c['id'] === undefined) return `${path}.customer.id is required`;
    if (typeof c['imageUrl'] === 'string' && !isUri(c['imageUrl'])) return `${path}.customer.imageUrl must be an absolute URI`;
  }
  if (trace.metadata !== undefined) return metadataProblem(`${path}.metadata`, trace.metadata);
  return undefined;
}

/** UTF-8 byte length of a string, without encoding it. */
export function utf8Bytes(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 2; // a surrogate pair: 2 UTF-16 units, 4 bytes
      i++;
    } else n += 2;
  }
  return n;
}
