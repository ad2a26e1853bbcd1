import { CUSTOMER_TEXT, SPAN_TEXT, TRACE_TEXT } from './fields.js';
import { codePointLength, LIMITS, MAX_EPOCH_MS, type Customer, type Metadata, type Span, type SpanType, type Trace, type Usage } from './schema.js';

/**
 * OTLP traces (an ExportTraceServiceRequest, decoded from protobuf or from
 * the OTLP JSON encoding) mapped onto v1 traces and spans, following the
 * OpenTelemetry GenAI semantic conventions and the aliases instrumentations
 * still send. Pure: no I/O, no pricing; the result goes through the same
 * pricing, row encoding and write log as a v1 batch.
 *
 * The input types describe the decoded message structurally, so both the
 * protobuf decoder's messages and plain objects fit. 64-bit integers may be
 * numbers, decimal strings or Long-like `{ low, high, unsigned }` objects.
 * A oneof (AnyValue) member counts as set when it is an own property.
 */

export type Int64Like = number | string | { low: number; high: number; unsigned?: boolean };

export interface OtlpAnyValue {
  stringValue?: string | null;
  boolValue?: boolean | null;
  intValue?: Int64Like | null;
  doubleValue?: number | null;
  arrayValue?: { values?: readonly OtlpAnyValue[] | null } | null;
  kvlistValue?: { values?: readonly OtlpKeyValue[] | null } | null;
  bytesValue?: Uint8Array | null;
}

export interface OtlpKeyValue {
  key?: string | null;
  value?: OtlpAnyValue | null;
}

export interface OtlpEvent {
  timeUnixNano?: Int64Like | null;
  name?: string | null;
  attributes?: readonly OtlpKeyValue[] | null;
}

export interface OtlpSpan {
  traceId?: Uint8Array | null;
  spanId?: Uint8Array | null;
  parentSpanId?: Uint8Array | null;
  name?: string | null;
  kind?: number | null;
  startTimeUnixNano?: Int64Like | null;
  endTimeUnixNano?: Int64Like | null;
  attributes?: readonly OtlpKeyValue[] | null;
  events?: readonly OtlpEvent[] | null;
  status?: { code?: number | null; message?: string | null } | null;
}

export interface OtlpResourceSpans {
  resource?: { attributes?: readonly OtlpKeyValue[] | null } | null;
  scopeSpans?: readonly { scope?: { name?: string | null; version?: string | null } | null; spans?: readonly OtlpSpan[] | null }[] | null;
}

export interface OtlpExportRequest {
  resourceSpans?: readonly OtlpResourceSpans[] | null;
}

export interface OtlpMappingOptions {
  /** Attributes read, in order, for the customer id (span first, then resource). */
  customerAttributes: readonly string[];
  /** Attributes read, in order, for the session id (span first, then resource). */
  sessionAttributes: readonly string[];
}

export const DEFAULT_OTLP_MAPPING: OtlpMappingOptions = {
  customerAttributes: ['enduser.id', 'user.id'],
  sessionAttributes: ['session.id', 'gen_ai.conversation.id'],
};

export interface MappedTraces {
  /** v1 traces; one OTLP trace may give several (one per resource, and at most 2000 spans each). */
  traces: Trace[];
  /** Spans mapped into `traces`. */
  spans: number;
  /** Spans that could not be mapped, and why (the first few reasons). */
  rejected: number;
  rejectReasons: string[];
}

/** Metadata entry that lists the fields cut to their v1 limit. */
export const TRUNCATED_KEY = 'otel.truncated';
/** Metadata entry that counts and names the attributes left out past the 64-entry limit. */
export const DROPPED_KEY = 'otel.dropped_attributes';

const MAX_REASONS = 5;
const STATUS_ERROR = 2;

// ---------------------------------------------------------------- attribute names

/** Model: the response's model is what ran; the request's is what was asked for. */
const MODEL_KEYS = ['gen_ai.response.model', 'gen_ai.request.model', 'llm.model_name', 'ai.response.model', 'ai.model.id'];
const PROVIDER_KEYS = ['gen_ai.provider.name', 'gen_ai.system', 'llm.provider', 'llm.system', 'ai.model.provider'];

/** Each usage count, by alias family: current conventions, older conventions, OpenInference, Vercel AI SDK. */
const INPUT_KEYS = ['gen_ai.usage.input_tokens', 'gen_ai.usage.prompt_tokens', 'llm.token_count.prompt', 'ai.usage.inputTokens', 'ai.usage.promptTokens'];
const OUTPUT_KEYS = [
  'gen_ai.usage.output_tokens',
  'gen_ai.usage.completion_tokens',
  'llm.token_count.completion',
  'ai.usage.outputTokens',
  'ai.usage.completionTokens',
];
const CACHE_READ_KEYS = [
  'gen_ai.usage.cache_read.input_tokens',
  'gen_ai.usage.cache_read_input_tokens',
  'llm.token_count.prompt_details.cache_read',
  'ai.usage.cachedInputTokens',
];
const CACHE_WRITE_KEYS = ['gen_ai.usage.cache_creation.input_tokens', 'gen_ai.usage.cache_creation_input_tokens', 'llm.token_count.prompt_details.cache_write'];
const REASONING_KEYS = [
  'gen_ai.usage.reasoning.output_tokens',
  'gen_ai.usage.reasoning_tokens',
  'llm.token_count.completion_details.reasoning',
  'ai.usage.reasoningTokens',
];
const TOTAL_KEYS = ['gen_ai.usage.total_tokens', 'llm.usage.total_tokens', 'llm.token_count.total', 'ai.usage.totalTokens'];
const USAGE_KEYS = [INPUT_KEYS, OUTPUT_KEYS, CACHE_READ_KEYS, CACHE_WRITE_KEYS, REASONING_KEYS, TOTAL_KEYS].flat();
const USAGE_KEY_SET = new Set(USAGE_KEYS);

const INPUT_TEXT_KEYS = ['gen_ai.input.messages', 'input.value', 'ai.prompt.messages', 'ai.prompt', 'gen_ai.prompt'];
const OUTPUT_TEXT_KEYS = ['gen_ai.output.messages', 'output.value', 'ai.response.text', 'ai.response.object', 'gen_ai.completion'];
const TTFT_KEYS = ['ai.response.msToFirstChunk', 'ai.stream.msToFirstChunk'];

/** Attributes whose value lives in a column; they are not repeated in metadata. */
const CONSUMED = new Set<string>([
  ...MODEL_KEYS,
  ...PROVIDER_KEYS,
  ...INPUT_TEXT_KEYS,
  ...OUTPUT_TEXT_KEYS,
  ...TTFT_KEYS,
  'gen_ai.operation.name',
  'gen_ai.agent.name',
  'openinference.span.kind',
]);

const OPERATION_TYPES: Record<string, SpanType> = {
  chat: 'llm',
  text_completion: 'llm',
  generate_content: 'llm',
  embeddings: 'embedding',
  execute_tool: 'tool',
  invoke_agent: 'agent',
  create_agent: 'agent',
};

/** OpenInference's span kinds, for spans without gen_ai.operation.name. */
const OPENINFERENCE_TYPES: Record<string, SpanType> = { LLM: 'llm', EMBEDDING: 'embedding', TOOL: 'tool', AGENT: 'agent' };

/**
 * The Vercel AI SDK's provider strings (`openai.chat`, `amazon-bedrock`,
 * `google.vertex.chat`, ...) as the conventions spell providers; the price
 * engine resolves those ids.
 */
const VERCEL_PROVIDERS: Record<string, string> = {
  'amazon-bedrock': 'aws.bedrock',
  'google.vertex': 'gcp.vertex_ai',
  'google.generative-ai': 'gcp.gemini',
  'azure-openai': 'azure.ai.openai',
  azure: 'azure.ai.openai',
  xai: 'x_ai',
  mistral: 'mistral_ai',
};

// ---------------------------------------------------------------- values

const TWO_32 = 4294967296;

/** An OTLP 64-bit integer as a JS number (exact up to 2^53), or undefined. */
export function int64ToNumber(v: Int64Like | null | undefined): number | undefined {
  if (v === null || v === undefined) return undefined;
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  if (typeof v === 'string') {
    if (!/^-?\d+$/.test(v.trim())) return undefined;
    return Number(v);
  }
  const high = v.unsigned === true ? v.high >>> 0 : v.high | 0;
  return high * TWO_32 + (v.low >>> 0);
}

/**
 * Nanoseconds since the epoch to whole milliseconds, exactly (a nanosecond
 * timestamp is past 2^53, so plain division could round across a
 * millisecond boundary).
 */
export function nanosToMillis(v: Int64Like | null | undefined): number | undefined {
  if (v === null || v === undefined) return undefined;
  let ns: bigint;
  try {
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) return undefined;
      ns = BigInt(Math.trunc(v));
    } else if (typeof v === 'string') {
      if (!/^\d+$/.test(v.trim())) return undefined;
      ns = BigInt(v.trim());
    } else {
      ns = (BigInt(v.high >>> 0) << 32n) | BigInt(v.low >>> 0);
      if (v.unsigned !== true && (v.high | 0) < 0) return undefined;
    }
  } catch {
    return undefined;
  }
  if (ns < 0n) return undefined;
  return Number(ns / 1_000_000n);
}

function hex(b: Uint8Array | null | undefined): string {
  if (b === null || b === undefined || b.length === 0) return '';
  // The protobuf decoder gives Buffers; a view is made only for other byte arrays.
  return (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength)).toString('hex');
}

function allZero(b: Uint8Array): boolean {
  for (const x of b) if (x !== 0) return false;
  return true;
}

const hasOwn = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

/**
 * The member of the AnyValue oneof that is set. A decoded message has the
 * members' defaults on its prototype and the set one as an own property (the
 * decoder's `value` getter finds it the same way, but lists all keys on every
 * call: it was the largest cost of the mapping); a plain object has only
 * what was sent.
 */
function oneofName(v: OtlpAnyValue): string | undefined {
  if (hasOwn(v, 'stringValue') && v.stringValue !== null && v.stringValue !== undefined) return 'stringValue';
  if (hasOwn(v, 'intValue') && v.intValue !== null && v.intValue !== undefined) return 'intValue';
  if (hasOwn(v, 'doubleValue') && v.doubleValue !== null && v.doubleValue !== undefined) return 'doubleValue';
  if (hasOwn(v, 'boolValue') && v.boolValue !== null && v.boolValue !== undefined) return 'boolValue';
  if (hasOwn(v, 'arrayValue') && v.arrayValue !== null && v.arrayValue !== undefined) return 'arrayValue';
  if (hasOwn(v, 'kvlistValue') && v.kvlistValue !== null && v.kvlistValue !== undefined) return 'kvlistValue';
  if (hasOwn(v, 'bytesValue') && v.bytesValue !== null && v.bytesValue !== undefined) return 'bytesValue';
  return undefined;
}

/** An AnyValue as plain JSON data (int64 beyond 2^53 as a decimal string). */
export function anyValueToJs(v: OtlpAnyValue | null | undefined, depth = 0): unknown {
  if (v === null || v === undefined || depth > 32) return null;
  switch (oneofName(v)) {
    case 'stringValue':
      return v.stringValue ?? '';
    case 'boolValue':
      return v.boolValue === true;
    case 'intValue': {
      const n = int64ToNumber(v.intValue);
      if (n !== undefined && Number.isSafeInteger(n)) return n;
      return typeof v.intValue === 'object' && v.intValue !== null ? longToString(v.intValue) : String(v.intValue);
    }
    case 'doubleValue':
      return v.doubleValue ?? 0;
    case 'arrayValue':
      return (v.arrayValue?.values ?? []).map((x) => anyValueToJs(x, depth + 1));
    case 'kvlistValue': {
      const o: Record<string, unknown> = {};
      for (const kv of v.kvlistValue?.values ?? []) if (typeof kv.key === 'string') o[kv.key] = anyValueToJs(kv.value, depth + 1);
      return o;
    }
    case 'bytesValue':
      return v.bytesValue === null || v.bytesValue === undefined ? '' : Buffer.from(v.bytesValue).toString('base64');
    default:
      return null;
  }
}

function longToString(v: { low: number; high: number; unsigned?: boolean }): string {
  const u = (BigInt(v.high >>> 0) << 32n) | BigInt(v.low >>> 0);
  return (v.unsigned !== true && (v.high | 0) < 0 ? u - (1n << 64n) : u).toString();
}

/** An AnyValue as text: strings as they are, everything else as JSON. */
function anyValueToText(v: OtlpAnyValue | null | undefined): string {
  const js = anyValueToJs(v);
  if (typeof js === 'string') return js;
  if (js === null) return '';
  return typeof js === 'object' ? JSON.stringify(js) : String(js);
}

/** A token count: a non-negative integer (an integral double, or a numeric string, is taken too). */
function countOf(v: OtlpAnyValue | undefined): number | undefined {
  if (v === undefined) return undefined;
  const js = anyValueToJs(v);
  const n = typeof js === 'number' ? js : typeof js === 'string' && /^\s*\d+(\.0*)?\s*$/.test(js) ? Number(js) : Number.NaN;
  if (!Number.isFinite(n) || n < 0 || !Number.isSafeInteger(Math.floor(n))) return undefined;
  return Math.floor(n);
}

// ---------------------------------------------------------------- limits

/** `s` cut to at most `max` code points; marks `field` as truncated when it was cut. */
function fit(s: string, max: number, field: string, truncated: string[]): string {
  if (s.length <= max || codePointLength(s) <= max) return s;
  truncated.push(field);
  return cutCodePoints(s, max);
}

/** The first `max` code points of `s`, never splitting a surrogate pair. */
export function cutCodePoints(s: string, max: number): string {
  let i = 0;
  let n = 0;
  while (i < s.length && n < max) {
    const c = s.charCodeAt(i);
    i += c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00 ? 2 : 1;
    n++;
  }
  return s.slice(0, i);
}

const ELLIPSIS = '\u2026';

/** A metadata key or value over its limit: cut to one code point less than the limit and ended with "…". */
function fitMeta(s: string, max: number): string {
  if (s.length <= max || codePointLength(s) <= max) return s;
  return cutCodePoints(s, max - 1) + ELLIPSIS;
}

/**
 * Builds a v1 metadata map within its limits (64 entries, keys of 128 and
 * values of 1024 code points): the first 62 entries in the order added (a
 * later duplicate key is ignored), then `otel.truncated` when a field of the
 * span or trace was cut, and `otel.dropped_attributes` with the number and
 * names of the entries left out. Keys and values over their limit are cut to
 * one code point less and ended with "…".
 */
class MetadataBuilder {
  private readonly m: Record<string, string> = Object.create(null) as Record<string, string>;
  private n = 0;
  private readonly dropped: string[] = [];
  /** Entries kept back for the last slots (the truncation note). */
  constructor(private readonly reserved = 0) {}

  add(key: string, value: string): void {
    const k = fitMeta(key, LIMITS.metadataKeyChars);
    if (k === '' || Object.prototype.hasOwnProperty.call(this.m, k)) return;
    if (this.n >= LIMITS.metadataEntries - 1 - this.reserved) {
      this.dropped.push(k);
      return;
    }
    this.m[k] = fitMeta(value, LIMITS.metadataValueChars);
    this.n++;
  }

  build(extra?: [string, string]): Metadata | undefined {
    if (extra !== undefined) {
      this.m[extra[0]] = fitMeta(extra[1], LIMITS.metadataValueChars);
      this.n++;
    }
    if (this.dropped.length > 0) {
      this.m[DROPPED_KEY] = fitMeta(`${this.dropped.length} left out: ${this.dropped.join(', ')}`, LIMITS.metadataValueChars);
      this.n++;
    }
    // Without a prototype, so an attribute named "__proto__" is an entry like any other (as JSON.parse makes it).
    return this.n === 0 ? undefined : this.m;
  }
}

// ---------------------------------------------------------------- spans

/**
 * Every attribute name the mapping reads has a slot number; a span's
 * attributes are sorted into an array by slot in one pass, so each of the
 * ~60 lookups per span is an array read (a Map per span, or a scan per
 * lookup, was the largest cost of the mapping).
 */
const SLOTS = new Map<string, number>();
function slotOf(key: string): number {
  let i = SLOTS.get(key);
  if (i === undefined) {
    i = SLOTS.size;
    SLOTS.set(key, i);
  }
  return i;
}
for (const k of [...CONSUMED, ...USAGE_KEYS, ...DEFAULT_OTLP_MAPPING.customerAttributes, ...DEFAULT_OTLP_MAPPING.sessionAttributes]) slotOf(k);
for (const k of ['ai.operationId', 'service.name', 'gen_ai.prompt', 'gen_ai.completion', 'exception.message', 'exception.type']) slotOf(k);

class Attrs {
  private readonly vals: (OtlpAnyValue | undefined)[];

  constructor(readonly list: readonly OtlpKeyValue[]) {
    this.vals = new Array<OtlpAnyValue | undefined>(SLOTS.size);
    for (const kv of list) {
      const k = kv.key;
      if (typeof k !== 'string') continue;
      const i = SLOTS.get(k);
      // The first of repeated keys counts, as in a Map filled in order.
      if (i !== undefined && this.vals[i] === undefined && kv.value !== null && kv.value !== undefined) this.vals[i] = kv.value;
    }
  }

  get(key: string): OtlpAnyValue | undefined {
    const i = SLOTS.get(key);
    if (i !== undefined) return this.vals[i];
    for (const kv of this.list) if (kv.key === key && kv.value !== null && kv.value !== undefined) return kv.value;
    return undefined;
  }

  str(key: string): string | undefined {
    const v = this.get(key);
    if (v === undefined) return undefined;
    const t = anyValueToText(v);
    return t === '' ? undefined : t;
  }

  first(keys: readonly string[]): string | undefined {
    for (const k of keys) {
      const s = this.str(k);
      if (s !== undefined) return s;
    }
    return undefined;
  }

  count(keys: readonly string[]): number | undefined {
    for (const k of keys) {
      const c = countOf(this.get(k));
      if (c !== undefined) return c;
    }
    return undefined;
  }
}

function attrs(list: readonly OtlpKeyValue[] | null | undefined): Attrs {
  return new Attrs(list ?? []);
}

/** The Vercel AI SDK's outer spans repeat the sum of their `.do*` children's usage: pricing both would count tokens twice. */
function isVercelWrapper(a: Attrs): boolean {
  const op = a.str('ai.operationId');
  return op !== undefined && op.startsWith('ai.') && !/\.do[A-Z]/.test(op);
}

function spanTypeOf(a: Attrs): SpanType {
  const op = a.str('gen_ai.operation.name');
  if (op !== undefined) return OPERATION_TYPES[op] ?? 'other';
  const oi = a.str('openinference.span.kind');
  if (oi !== undefined) return OPENINFERENCE_TYPES[oi.toUpperCase()] ?? 'other';
  const vercel = a.str('ai.operationId');
  if (vercel !== undefined) {
    if (/\.do(Generate|Stream)$/.test(vercel)) return 'llm';
    if (/\.doEmbed$/.test(vercel)) return 'embedding';
    if (vercel === 'ai.toolCall') return 'tool';
  }
  return 'other';
}

function providerOf(a: Attrs): string | undefined {
  // The Vercel AI SDK writes its own provider string into gen_ai.system too.
  if (a.str('ai.operationId') === undefined) return a.first(PROVIDER_KEYS);
  const vercel = a.first(['ai.model.provider', 'gen_ai.provider.name', 'gen_ai.system']);
  if (vercel === undefined) return undefined;
  for (const [prefix, id] of Object.entries(VERCEL_PROVIDERS)) if (vercel === prefix || vercel.startsWith(prefix + '.')) return id;
  const dot = vercel.indexOf('.');
  return dot > 0 ? vercel.slice(0, dot) : vercel;
}

/**
 * Usage into the v1 buckets, which are disjoint. In the conventions (and in
 * OpenInference and the Vercel AI SDK) cache reads and writes are parts of
 * the input count and reasoning is part of the output count, so they are
 * subtracted. Instrumentations that copy Anthropic's native input count
 * report input without the cache: when input is smaller than cache reads +
 * writes, or the total equals input + cache + output, the input count is
 * taken as already exclusive. The same for output smaller than reasoning.
 */
export function usageOf(a: Pick<Attrs, 'count'>): Usage | undefined {
  const input = a.count(INPUT_KEYS);
  const output = a.count(OUTPUT_KEYS);
  const read = a.count(CACHE_READ_KEYS) ?? 0;
  const write = a.count(CACHE_WRITE_KEYS) ?? 0;
  const reasoning = a.count(REASONING_KEYS) ?? 0;
  const total = a.count(TOTAL_KEYS);
  if (input === undefined && output === undefined && read === 0 && write === 0 && reasoning === 0 && total === undefined) return undefined;
  const u: Usage = {};
  const cache = read + write;
  if (input !== undefined) {
    const exclusive = input < cache || (cache > 0 && total !== undefined && total === input + cache + (output ?? 0));
    u.inputTokens = exclusive ? input : input - cache;
  }
  if (read > 0) u.cachedInputTokens = read;
  if (write > 0) u.cacheWriteInputTokens = write;
  if (output !== undefined) u.outputTokens = output < reasoning ? output : output - reasoning;
  if (reasoning > 0) u.reasoningTokens = reasoning;
  const sum = (u.inputTokens ?? 0) + read + write + (u.outputTokens ?? 0) + reasoning;
  u.totalTokens = total ?? sum;
  return u;
}

/** Prompt and completion from the older span events (`gen_ai.content.prompt`, per-message events). */
function textsFromEvents(events: readonly OtlpEvent[] | null | undefined): { input?: string; output?: string } {
  if (events === null || events === undefined || events.length === 0) return {};
  const inMsgs: unknown[] = [];
  const outMsgs: unknown[] = [];
  let input: string | undefined;
  let output: string | undefined;
  for (const e of events) {
    const name = e.name ?? '';
    const a = attrs(e.attributes);
    if (name === 'gen_ai.content.prompt') input ??= a.str('gen_ai.prompt');
    else if (name === 'gen_ai.content.completion') output ??= a.str('gen_ai.completion');
    else if (/^gen_ai\.(system|user|assistant|tool)\.message$/.test(name)) inMsgs.push(eventBody(name.slice(7, -8), a));
    else if (name === 'gen_ai.choice') outMsgs.push(eventBody('assistant', a));
  }
  const out: { input?: string; output?: string } = {};
  const i = input ?? (inMsgs.length > 0 ? JSON.stringify(inMsgs) : undefined);
  const o = output ?? (outMsgs.length > 0 ? JSON.stringify(outMsgs) : undefined);
  if (i !== undefined) out.input = i;
  if (o !== undefined) out.output = o;
  return out;
}

function eventBody(role: string, a: Attrs): Record<string, unknown> {
  const o: Record<string, unknown> = { role };
  for (const kv of a.list)
    if (typeof kv.key === 'string' && kv.key !== 'gen_ai.system' && kv.key !== 'gen_ai.provider.name') o[kv.key] = anyValueToJs(kv.value);
  return o;
}

/** OpenLLMetry's indexed attributes: gen_ai.prompt.0.role, gen_ai.prompt.0.content, ... */
function indexedMessages(a: Attrs, prefix: string): string | undefined {
  const byIndex = new Map<number, Record<string, unknown>>();
  for (const kv of a.list) {
    const k = kv.key;
    if (typeof k !== 'string' || !k.startsWith(prefix)) continue;
    const m = /^(\d+)\.(.+)$/.exec(k.slice(prefix.length));
    if (m === null) continue;
    const idx = Number(m[1]);
    let msg = byIndex.get(idx);
    if (msg === undefined) byIndex.set(idx, (msg = {}));
    msg[m[2] as string] = anyValueToJs(kv.value);
  }
  if (byIndex.size === 0) return undefined;
  return JSON.stringify([...byIndex.entries()].sort((x, y) => x[0] - y[0]).map(([, m]) => m));
}

const INDEXED = /^gen_ai\.(prompt|completion)\.\d+\./;

interface SpanOutcome {
  span?: Span;
  traceId: string;
  reject?: string;
  agentName?: string;
  session?: string;
  customer?: string;
  isRoot: boolean;
}

function mapSpan(s: OtlpSpan, opts: OtlpMappingOptions, resource: Attrs): SpanOutcome {
  const tid = s.traceId;
  const sid = s.spanId;
  const traceId = hex(tid);
  if (tid === null || tid === undefined || tid.length !== 16 || allZero(tid))
    return { traceId, isRoot: false, reject: 'traceId must be 16 bytes, not all zero (32 hex characters in JSON)' };
  if (sid === null || sid === undefined || sid.length !== 8 || allZero(sid))
    return { traceId, isRoot: false, reject: 'spanId must be 8 bytes, not all zero (16 hex characters in JSON)' };
  const startTime = nanosToMillis(s.startTimeUnixNano);
  const endTime = nanosToMillis(s.endTimeUnixNano);
  if (startTime === undefined || endTime === undefined || startTime > MAX_EPOCH_MS || endTime > MAX_EPOCH_MS) {
    return { traceId, isRoot: false, reject: 'startTimeUnixNano and endTimeUnixNano must be nanoseconds since the epoch, no later than year 9999' };
  }
  if (endTime < startTime) return { traceId, isRoot: false, reject: 'endTimeUnixNano must not be before startTimeUnixNano' };

  const a = attrs(s.attributes);
  const truncated: string[] = [];
  const parent = s.parentSpanId;
  const span: Span = {
    spanId: hex(sid),
    spanType: spanTypeOf(a),
    name: fit(s.name ?? '', SPAN_TEXT.name[1], 'name', truncated),
    startTime,
    endTime,
  };
  if (parent !== null && parent !== undefined && parent.length === 8 && !allZero(parent)) span.parentSpanId = hex(parent);

  if ((s.status?.code ?? 0) === STATUS_ERROR) {
    span.status = 'error';
    const msg = s.status?.message || exceptionMessage(s.events);
    if (msg !== undefined && msg !== '') span.errorMessage = fit(msg, SPAN_TEXT.errorMessage[1], 'errorMessage', truncated);
  }

  const model = a.first(MODEL_KEYS);
  const provider = providerOf(a);
  if (model !== undefined) span.modelId = fit(model, SPAN_TEXT.modelId[1], 'modelId', truncated);
  if (provider !== undefined) span.provider = fit(provider, SPAN_TEXT.provider[1], 'provider', truncated);
  const wrapper = isVercelWrapper(a);
  const usage = wrapper ? undefined : usageOf(a);
  if (usage !== undefined) span.usage = usage;

  const ttft = a.get(TTFT_KEYS[0] as string) ?? a.get(TTFT_KEYS[1] as string);
  const ttftJs = ttft === undefined ? undefined : anyValueToJs(ttft);
  if (typeof ttftJs === 'number' && Number.isFinite(ttftJs) && ttftJs >= 0) span.ttftMs = ttftJs;

  const ev = textsFromEvents(s.events);
  const input = a.first(INPUT_TEXT_KEYS) ?? indexedMessages(a, 'gen_ai.prompt.') ?? ev.input;
  const output = a.first(OUTPUT_TEXT_KEYS) ?? indexedMessages(a, 'gen_ai.completion.') ?? ev.output;
  if (input !== undefined) span.input = fit(input, SPAN_TEXT.input[1], 'input', truncated);
  if (output !== undefined) span.output = fit(output, SPAN_TEXT.output[1], 'output', truncated);

  // Everything not in a column goes to metadata; usage attributes too when the usage was left unpriced (a wrapper's sum).
  const meta = new MetadataBuilder(1);
  for (const kv of a.list) {
    const k = kv.key;
    if (typeof k !== 'string' || CONSUMED.has(k) || INDEXED.test(k) || opts.customerAttributes.includes(k) || opts.sessionAttributes.includes(k)) continue;
    if (!wrapper && USAGE_KEY_SET.has(k)) continue;
    meta.add(k, anyValueToText(kv.value));
  }
  const metadata = meta.build(truncated.length > 0 ? [TRUNCATED_KEY, truncated.join(',')] : undefined);
  if (metadata !== undefined) span.metadata = metadata;

  const out: SpanOutcome = { span, traceId, isRoot: span.parentSpanId === undefined };
  const agent = a.str('gen_ai.agent.name');
  if (agent !== undefined) out.agentName = agent;
  const session = a.first(opts.sessionAttributes) ?? resource.first(opts.sessionAttributes);
  if (session !== undefined) out.session = session;
  const customer = a.first(opts.customerAttributes) ?? resource.first(opts.customerAttributes);
  if (customer !== undefined) out.customer = customer;
  return out;
}

function exceptionMessage(events: readonly OtlpEvent[] | null | undefined): string | undefined {
  for (const e of events ?? []) {
    if (e.name !== 'exception') continue;
    const a = attrs(e.attributes);
    const m = a.str('exception.message') ?? a.str('exception.type');
    if (m !== undefined) return m;
  }
  return undefined;
}

// ---------------------------------------------------------------- request

interface Group {
  traceId: string;
  resource: Attrs;
  spans: Span[];
  agentName?: string;
  session?: string;
  customer?: string;
}

/**
 * Maps a whole export request. Spans are grouped by (resource, trace id):
 * the resource's attributes become the trace metadata of its spans' rows.
 * A span that cannot be stored (bad ids, bad times) is counted in
 * `rejected`; nothing else makes a span fail: text over a v1 limit is cut
 * and named in the span's `otel.truncated` metadata entry.
 */
export function mapExportRequest(req: OtlpExportRequest, opts: OtlpMappingOptions = DEFAULT_OTLP_MAPPING): MappedTraces {
  for (const k of opts.customerAttributes) slotOf(k);
  for (const k of opts.sessionAttributes) slotOf(k);
  const groups: Group[] = [];
  const rootNames = new Map<string, string>();
  const reasons: string[] = [];
  let rejected = 0;
  let spans = 0;
  for (const rs of req.resourceSpans ?? []) {
    const resource = attrs(rs.resource?.attributes);
    const byTrace = new Map<string, Group>();
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        const r = mapSpan(s, opts, resource);
        if (r.span === undefined) {
          rejected++;
          const why = `span ${hex(s.spanId) || '(no id)'} of trace ${r.traceId || '(no id)'}: ${r.reject ?? 'invalid'}`;
          if (reasons.length < MAX_REASONS) reasons.push(why);
          continue;
        }
        let g = byTrace.get(r.traceId);
        if (g === undefined) {
          g = { traceId: r.traceId, resource, spans: [] };
          byTrace.set(r.traceId, g);
          groups.push(g);
        }
        g.spans.push(r.span);
        spans++;
        if (r.isRoot && !rootNames.has(r.traceId)) rootNames.set(r.traceId, r.span.name);
        g.agentName ??= r.agentName;
        g.session ??= r.session;
        g.customer ??= r.customer;
      }
    }
  }

  const traces: Trace[] = [];
  for (const g of groups) {
    const truncated: string[] = [];
    const name = rootNames.get(g.traceId) || g.resource.str('service.name') || 'unknown_service';
    const base: Omit<Trace, 'spans'> = { traceId: g.traceId, traceName: fit(name, TRACE_TEXT.traceName[1], 'traceName', truncated) };
    if (g.agentName !== undefined) base.agentName = fit(g.agentName, TRACE_TEXT.agentName[1], 'agentName', truncated);
    if (g.session !== undefined) base.sessionId = fit(g.session, TRACE_TEXT.sessionId[1], 'sessionId', truncated);
    if (g.customer !== undefined) base.customer = { id: fit(g.customer, CUSTOMER_TEXT.id[1], 'customer.id', truncated) } satisfies Customer;
    const meta = new MetadataBuilder(1);
    for (const kv of g.resource.list) if (typeof kv.key === 'string') meta.add(kv.key, anyValueToText(kv.value));
    const metadata = meta.build(truncated.length > 0 ? [TRUNCATED_KEY, truncated.join(',')] : undefined);
    if (metadata !== undefined) base.metadata = metadata;
    for (let i = 0; i < g.spans.length; i += LIMITS.spansPerTrace) traces.push({ ...base, spans: g.spans.slice(i, i + LIMITS.spansPerTrace) });
  }
  return { traces, spans, rejected, rejectReasons: reasons };
}
