import { BILLING_TEXT, CUSTOMER_TEXT, LIMITS, SPAN_TEXT, TRACE_TEXT } from './fields.js';
import { totalTokens } from './rows.js';
import { MAX_EPOCH_MS, type Customer, type Span, type SpanType, type Trace, type Usage } from './schema.js';
import { allZero, anyValueToJs, anyValueToText, hex, nanosToMillis } from './otlp/any-value.js';
import { attrs, slotOf, type Attrs } from './otlp/attrs.js';
import {
  CONSUMED,
  CONVENTIONS,
  CUSTOMER_KEYS,
  INPUT_TEXT_KEYS,
  MODEL_KEYS,
  OUTPUT_TEXT_KEYS,
  PROVIDER_KEYS,
  SERVICE_TIER_KEYS,
  SESSION_KEYS,
  TRACE_NAME_KEYS,
  TTFT_KEYS,
  USAGE_KEYS,
  USAGE_KEY_SET,
} from './otlp/conventions/index.js';
import { fit, MetadataBuilder, TRUNCATED_KEY } from './otlp/limits.js';
import type { SpanBilling, SpanSource, UsageCount } from './otlp/convention.js';
import { DEFAULT_OTLP_MAPPING, type MappedTraces, type OtlpEvent, type OtlpExportRequest, type OtlpMappingOptions, type OtlpSpan } from './otlp/types.js';

/**
 * OTLP traces (an ExportTraceServiceRequest, decoded from protobuf or from
 * the OTLP JSON encoding) mapped onto v1 traces and spans. Pure: no I/O, no
 * pricing; the result goes through the same pricing, row encoding and write
 * log as a v1 batch. The parts:
 * - `otlp/types.ts`: the decoded request, structurally;
 * - `otlp/any-value.ts`: AnyValue, 64-bit integers and ids as JS values;
 * - `otlp/limits.ts`: the v1 limits (texts cut, never refused; metadata within 64 entries);
 * - `otlp/attrs.ts`: a span's attributes by slot, for cheap lookups;
 * - `otlp/conventions/`: one module per instrumentation family (the GenAI
 *   semantic conventions, OpenInference, the Vercel AI SDK, OpenLLMetry) with
 *   its attribute names and rules, registered in `conventions/index.ts`;
 * - this file: the rules every family shares (usage into disjoint buckets,
 *   texts from events, trace fields) and the request as a whole.
 */

export type {
  Int64Like,
  MappedTraces,
  OtlpAnyValue,
  OtlpEvent,
  OtlpExportRequest,
  OtlpKeyValue,
  OtlpMappingOptions,
  OtlpResourceSpans,
  OtlpSpan,
} from './otlp/types.js';
export { DEFAULT_OTLP_MAPPING } from './otlp/types.js';
export { anyValueToJs, int64ToNumber, nanosToMillis } from './otlp/any-value.js';
export { cutCodePoints, DROPPED_KEY, TRUNCATED_KEY } from './otlp/limits.js';

const MAX_REASONS = 5;
/** Customer and session attributes of the families: read into the trace's fields, so not repeated in metadata. */
const IDENTITY_KEYS: ReadonlySet<string> = new Set([...CUSTOMER_KEYS, ...SESSION_KEYS]);
const STATUS_ERROR = 2;

for (const k of ['service.name', 'exception.message', 'exception.type', ...DEFAULT_OTLP_MAPPING.customerAttributes, ...DEFAULT_OTLP_MAPPING.sessionAttributes])
  slotOf(k);

function spanTypeOf(a: Attrs): SpanType {
  for (const c of CONVENTIONS) {
    const t = c.spanType?.(a);
    if (t !== undefined) return t;
  }
  return 'other';
}

function providerOf(a: Attrs): string | undefined {
  for (const c of CONVENTIONS) {
    const claimed = c.providerOf?.(a);
    if (claimed !== undefined) return claimed.value;
  }
  return a.first(PROVIDER_KEYS);
}

/**
 * Usage into the v1 buckets, which are disjoint. In the conventions (and in
 * OpenInference and the Vercel AI SDK) cache reads and writes and audio input
 * are parts of the input count, reasoning and audio output parts of the
 * output count, and one-hour cache writes part of the cache writes, so they
 * are subtracted. Instrumentations that copy Anthropic's native input count
 * report input without the cache: when input is smaller than cache reads +
 * writes, or the total equals input + cache + output, the input count is
 * taken as already exclusive. The same for output smaller than reasoning.
 * `extra` holds counts a family carries elsewhere than in attributes of their
 * own (SpanBilling.usage); an attribute wins over them.
 */
export function usageOf(a: Pick<Attrs, 'count'>, source?: SpanSource, extra?: SpanBilling['usage']): Usage | undefined {
  const get = (k: UsageCount): number | undefined => a.count(USAGE_KEYS[k]) ?? extra?.[k];
  const input = get('input');
  const output = get('output');
  const read = get('cacheRead') ?? 0;
  const oneHour = get('cacheWrite1h') ?? 0;
  const write = Math.max(get('cacheWrite') ?? 0, oneHour);
  const reasoning = get('reasoning') ?? 0;
  const audioIn = get('audioInput') ?? 0;
  const audioOut = get('audioOutput') ?? 0;
  const total = get('total');
  if (input === undefined && output === undefined && read + write + reasoning + audioIn + audioOut === 0 && total === undefined) return undefined;
  const u: Usage = {};
  const cache = read + write;
  if (input !== undefined) {
    const declared = source === undefined ? undefined : CONVENTIONS.map((c) => c.inputExcludesCache?.(source)).find((v) => v !== undefined);
    const exclusive = declared ?? (input < cache || (cache > 0 && total !== undefined && total === input + cache + (output ?? 0)));
    const text = exclusive ? input : input - cache;
    u.inputTokens = text < audioIn ? text : text - audioIn;
  }
  if (read > 0) u.cachedInputTokens = read;
  if (write - oneHour > 0) u.cacheWriteInputTokens = write - oneHour;
  if (oneHour > 0) u.cacheWrite1hInputTokens = oneHour;
  if (audioIn > 0) u.audioInputTokens = audioIn;
  if (output !== undefined) {
    const text = output < reasoning ? output : output - reasoning;
    u.outputTokens = text < audioOut ? text : text - audioOut;
  }
  if (reasoning > 0) u.reasoningTokens = reasoning;
  if (audioOut > 0) u.audioOutputTokens = audioOut;
  u.totalTokens = total ?? totalTokens(u);
  return u;
}

/** The families' billing facts of a span, each field from the first family that gives it. */
function billingOf(a: Attrs): SpanBilling {
  const out: SpanBilling = {};
  for (const c of CONVENTIONS) {
    const b = c.billingOf?.(a);
    if (b === undefined) continue;
    out.serviceTier ??= b.serviceTier;
    out.region ??= b.region;
    if (b.usage !== undefined) out.usage = { ...b.usage, ...out.usage };
  }
  return out;
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
  /** A name set for the trace by an attribute (langfuse.trace.name, ai.telemetry.functionId). */
  traceName?: string;
  isRoot: boolean;
}

function mapSpan(s: OtlpSpan, opts: OtlpMappingOptions, resource: Attrs, scope: { name: string; version: string }): SpanOutcome {
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
  const wrapper = CONVENTIONS.some((c) => c.isWrapper?.(a) === true);
  const billing = billingOf(a);
  const usage = wrapper ? undefined : usageOf(a, { scopeName: scope.name, scopeVersion: scope.version, provider: span.provider }, billing.usage);
  if (usage !== undefined) span.usage = usage;
  const serviceTier = a.first(SERVICE_TIER_KEYS) ?? billing.serviceTier;
  if (serviceTier !== undefined) span.serviceTier = fit(serviceTier, BILLING_TEXT.serviceTier[1], 'serviceTier', truncated);
  if (billing.region !== undefined) span.region = fit(billing.region, BILLING_TEXT.region[1], 'region', truncated);

  const ttft = TTFT_KEYS.map((k) => a.get(k)).find((v) => v !== undefined);
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
    if (typeof k !== 'string' || CONSUMED.has(k) || INDEXED.test(k) || IDENTITY_KEYS.has(k)) continue;
    if (opts.customerAttributes.includes(k) || opts.sessionAttributes.includes(k)) continue;
    if (!wrapper && USAGE_KEY_SET.has(k)) continue;
    meta.add(k, anyValueToText(kv.value));
  }
  const metadata = meta.build(truncated.length > 0 ? [TRUNCATED_KEY, truncated.join(',')] : undefined);
  if (metadata !== undefined) span.metadata = metadata;

  const out: SpanOutcome = { span, traceId, isRoot: span.parentSpanId === undefined };
  const agent = a.str('gen_ai.agent.name');
  if (agent !== undefined) out.agentName = agent;
  // The configured names first (span, then resource), then those of the instrumentation families.
  const session = a.first(opts.sessionAttributes) ?? resource.first(opts.sessionAttributes) ?? a.first(SESSION_KEYS) ?? resource.first(SESSION_KEYS);
  if (session !== undefined) out.session = session;
  const customer = a.first(opts.customerAttributes) ?? resource.first(opts.customerAttributes) ?? a.first(CUSTOMER_KEYS) ?? resource.first(CUSTOMER_KEYS);
  if (customer !== undefined) out.customer = customer;
  const traceName = a.first(TRACE_NAME_KEYS);
  if (traceName !== undefined) out.traceName = traceName;
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
  traceName?: string;
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
      const scope = { name: ss.scope?.name ?? '', version: ss.scope?.version ?? '' };
      for (const s of ss.spans ?? []) {
        const r = mapSpan(s, opts, resource, scope);
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
        g.traceName ??= r.traceName;
      }
    }
  }

  const traces: Trace[] = [];
  for (const g of groups) {
    const truncated: string[] = [];
    // A name set for the trace wins over the root span's name. Without either (children exported before
    // their root) the name stays empty: the store takes the trace's name from the request that brings one,
    // while the service's name stays in the metadata, never posing as the trace's.
    const name = g.traceName || rootNames.get(g.traceId) || '';
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
