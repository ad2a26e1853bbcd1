import { regionOf, serviceTierOf } from './billing-mode.js';
import { utcDay } from './dates.js';
import { USAGE_DIMENSIONS, type UsageColumn } from './fields.js';
import type { IngestPayload, Metadata, Span, Trace, Usage } from './schema.js';

/** The usage columns in the order reports show them (usage report, its CSV, the console API). */
export const USAGE_COLUMNS: readonly UsageColumn[] = USAGE_DIMENSIONS.map((d) => d.column);

/** The cost columns in the order reports show them: each bucket beside its usage, then the total. */
export const REPORT_COST_COLUMNS: readonly CostColumn[] = [...USAGE_DIMENSIONS.flatMap((d) => (d.cost === undefined ? [] : [d.cost])), 'total_cost'];

export type ColumnKind = 'string' | 'int' | 'nullable_int' | 'nullable_float' | 'date' | 'decimal' | 'bool' | 'string_array' | 'int_array';

/** Every column of `spans`, in table order, with its logical kind. Stores map kinds to their types. */
export const SPAN_COLUMNS = [
  ['org_id', 'string'],
  ['key_prefix', 'string'],
  ['received_at', 'int'],
  ['trace_id', 'string'],
  ['trace_name', 'string'],
  ['agent_name', 'string'],
  ['workflow_name', 'string'],
  ['workflow_run_id', 'string'],
  ['session_id', 'string'],
  ['customer_id', 'string'],
  ['customer_name', 'string'],
  ['customer_image_url', 'string'],
  ['trace_metadata_keys', 'string_array'],
  ['trace_metadata_values', 'string_array'],
  ['span_id', 'string'],
  ['parent_span_id', 'string'],
  ['span_type', 'string'],
  ['name', 'string'],
  ['start_time', 'int'],
  ['end_time', 'int'],
  ['start_date', 'date'],
  ['duration_ms', 'int'],
  ['status', 'string'],
  ['error_message', 'string'],
  ['provider', 'string'],
  ['model_id', 'string'],
  ['service_tier', 'string'],
  ['region', 'string'],
  ['input_tokens', 'int'],
  ['output_tokens', 'int'],
  ['total_tokens', 'int'],
  ['reasoning_tokens', 'int'],
  ['cached_input_tokens', 'int'],
  ['cache_write_input_tokens', 'int'],
  ['image_count', 'int'],
  ['web_search_count', 'int'],
  ['request_count', 'int'],
  ['cache_write_1h_input_tokens', 'int'],
  ['audio_input_tokens', 'int'],
  ['cached_audio_input_tokens', 'int'],
  ['audio_output_tokens', 'int'],
  ['input_cost', 'decimal'],
  ['output_cost', 'decimal'],
  ['reasoning_cost', 'decimal'],
  ['cached_input_cost', 'decimal'],
  ['cache_write_input_cost', 'decimal'],
  ['image_cost', 'decimal'],
  ['web_search_cost', 'decimal'],
  ['request_cost', 'decimal'],
  ['cache_write_1h_input_cost', 'decimal'],
  ['audio_input_cost', 'decimal'],
  ['cached_audio_input_cost', 'decimal'],
  ['audio_output_cost', 'decimal'],
  ['total_cost', 'decimal'],
  ['priced', 'bool'],
  ['price_source', 'string'],
  ['ttft_ms', 'nullable_float'],
  ['chunk_offsets', 'int_array'],
  ['chunk_tokens', 'int_array'],
  ['reasoning_offsets', 'int_array'],
  ['reasoning_chunk_tokens', 'int_array'],
  ['reasoning_duration_ms', 'nullable_int'],
  ['input', 'string'],
  ['output', 'string'],
  ['tool_catalog', 'string'],
  ['model_call_ms', 'nullable_int'],
  ['system_fingerprint', 'string'],
  ['safety_metadata', 'string'],
  ['sources', 'string'],
  ['rate_limit_requests_limit', 'nullable_int'],
  ['rate_limit_requests_remaining', 'nullable_int'],
  ['rate_limit_requests_reset_ms', 'nullable_int'],
  ['rate_limit_tokens_limit', 'nullable_int'],
  ['rate_limit_tokens_remaining', 'nullable_int'],
  ['rate_limit_tokens_reset_ms', 'nullable_int'],
  ['span_metadata_keys', 'string_array'],
  ['span_metadata_values', 'string_array'],
] as const satisfies ReadonlyArray<readonly [string, ColumnKind]>;

/** The value each column kind holds in a row. */
interface KindValue {
  string: string;
  int: number;
  nullable_int: number | null;
  nullable_float: number | null;
  date: string;
  decimal: string;
  bool: boolean;
  string_array: string[];
  int_array: number[];
}

type Column = (typeof SPAN_COLUMNS)[number];

/**
 * The `spans` table contract: one row per span, the trace's fields copied
 * onto it. Column names are the same in every span store; ops query them.
 *
 * Conventions, the same in every store:
 * - Optional text is '' when absent (so it can sit in a sort key); optional
 *   numbers are NULL when absent (0 is a real measurement).
 * - Times are epoch milliseconds (Int64); `start_date` is the span's UTC day.
 * - Costs are USD decimals with 18 fractional digits, carried as strings so no
 *   binary float ever touches money.
 * - A span is identified by (org_id, trace_id, span_id).
 */
export type SpanRow = { [C in Column as C[0]]: KindValue[C[1]] };

/** A cost column: each bucket's, and `total_cost`, their exact sum. */
export type CostColumn = Extract<Column, readonly [string, 'decimal']>[0];

/** The cost columns in table order (as `encodeRow` writes them: contiguous). */
export const COST_COLUMNS: readonly CostColumn[] = SPAN_COLUMNS.filter((c): c is Extract<Column, readonly [string, 'decimal']> => c[1] === 'decimal').map(
  ([name]) => name,
);

/**
 * The cost columns of one span, decimal strings in USD, with `priced` and
 * `price_source` (where the unit prices came from: `catalog:<version>`,
 * `override:<id>`, or '' when unpriced).
 */
export type SpanCosts = Pick<SpanRow, CostColumn | 'priced' | 'price_source'>;

/** The costs of a span no price is known for: every cost 0. */
export const UNPRICED: Readonly<SpanCosts> = Object.freeze({
  ...(Object.fromEntries(COST_COLUMNS.map((c) => [c, '0'])) as Record<CostColumn, string>),
  priced: false,
  price_source: '',
});

/** Prices one span. The org is the one the API key belongs to. */
export type SpanPricer = (span: Span, orgId: string) => SpanCosts;

export const noPricing: SpanPricer = () => UNPRICED;

export interface RowContext {
  orgId: string;
  keyPrefix: string;
  receivedAt: number;
}

function metaKeys(m: Metadata | undefined): string[] {
  return m === undefined ? [] : Object.keys(m);
}
function metaValues(m: Metadata | undefined): string[] {
  if (m === undefined) return [];
  const out: string[] = [];
  for (const k of Object.keys(m)) out.push(m[k] as string);
  return out;
}

/** The usage columns of a span, by the one table of usage dimensions (0 when not sent). */
export function usageColumns(u: Usage | undefined): Record<UsageColumn, number> {
  const out = {} as Record<UsageColumn, number>;
  for (const d of USAGE_IN_TABLE_ORDER) out[d.column] = u?.[d.field] ?? 0;
  out.total_tokens = totalTokens(u);
  return out;
}

/** The whole prompt (what a long-context tier is chosen on): every input bucket, disjoint. */
export function promptTokens(u: Usage): number {
  return (
    (u.inputTokens ?? 0) +
    (u.cachedInputTokens ?? 0) +
    (u.cacheWriteInputTokens ?? 0) +
    (u.cacheWrite1hInputTokens ?? 0) +
    (u.audioInputTokens ?? 0) +
    (u.cachedAudioInputTokens ?? 0)
  );
}

/**
 * `total_tokens`, one rule for every route: the total the client reported,
 * else the sum of the token buckets (the prompt's, output, reasoning and
 * audio output), which are disjoint. Stored, never priced.
 */
export function totalTokens(u: Usage | undefined): number {
  if (u === undefined) return 0;
  if (u.totalTokens !== undefined) return u.totalTokens;
  return promptTokens(u) + (u.outputTokens ?? 0) + (u.reasoningTokens ?? 0) + (u.audioOutputTokens ?? 0);
}

// Row objects keep the table's key order, as the line form does.
const USAGE_IN_TABLE_ORDER = [...USAGE_DIMENSIONS].sort(
  (a, b) => SPAN_COLUMNS.findIndex(([n]) => n === a.column) - SPAN_COLUMNS.findIndex(([n]) => n === b.column),
);

/**
 * The row object of a span. The request path writes the same row as a line
 * without building this object (`encodeSpanLine`); this is the plain form the
 * tests hold that line to, and what tools that want an object use.
 */
export function spanToRow(trace: Trace, span: Span, ctx: RowContext, costs: SpanCosts): SpanRow {
  const u = span.usage;
  const rl = span.rateLimit;
  return {
    org_id: ctx.orgId,
    key_prefix: ctx.keyPrefix,
    received_at: ctx.receivedAt,
    trace_id: trace.traceId,
    trace_name: trace.traceName ?? '',
    agent_name: trace.agentName ?? '',
    workflow_name: trace.workflowName ?? '',
    workflow_run_id: trace.workflowRunId ?? '',
    session_id: trace.sessionId ?? '',
    customer_id: trace.customer?.id ?? '',
    customer_name: trace.customer?.name ?? '',
    customer_image_url: trace.customer?.imageUrl ?? '',
    trace_metadata_keys: metaKeys(trace.metadata),
    trace_metadata_values: metaValues(trace.metadata),
    span_id: span.spanId,
    parent_span_id: span.parentSpanId ?? '',
    span_type: span.spanType,
    name: span.name,
    start_time: span.startTime,
    end_time: span.endTime,
    start_date: utcDay(span.startTime),
    duration_ms: span.endTime - span.startTime,
    status: span.status ?? 'ok',
    error_message: span.errorMessage ?? '',
    provider: span.provider ?? '',
    model_id: span.modelId ?? '',
    service_tier: serviceTierOf(span),
    region: regionOf(span),
    ...usageColumns(u),
    ...costs,
    ttft_ms: span.ttftMs ?? null,
    chunk_offsets: span.chunkOffsets ?? [],
    chunk_tokens: span.chunkTokens ?? [],
    reasoning_offsets: span.reasoningOffsets ?? [],
    reasoning_chunk_tokens: span.reasoningChunkTokens ?? [],
    reasoning_duration_ms: span.reasoningDurationMs ?? null,
    input: span.input ?? '',
    output: span.output ?? '',
    tool_catalog: span.toolCatalog ?? '',
    model_call_ms: span.modelCallMs ?? null,
    system_fingerprint: span.systemFingerprint ?? '',
    safety_metadata: span.safetyMetadata ?? '',
    sources: span.sources ?? '',
    rate_limit_requests_limit: rl?.requestsLimit ?? null,
    rate_limit_requests_remaining: rl?.requestsRemaining ?? null,
    rate_limit_requests_reset_ms: rl?.requestsResetMs ?? null,
    rate_limit_tokens_limit: rl?.tokensLimit ?? null,
    rate_limit_tokens_remaining: rl?.tokensRemaining ?? null,
    rate_limit_tokens_reset_ms: rl?.tokensResetMs ?? null,
    span_metadata_keys: metaKeys(span.metadata),
    span_metadata_values: metaValues(span.metadata),
  };
}

/** All rows of a validated payload, priced by `price`. */
export function payloadToRows(payload: IngestPayload, ctx: RowContext, price: SpanPricer): SpanRow[] {
  const rows: SpanRow[] = [];
  for (const trace of payload.traces) {
    for (const span of trace.spans) rows.push(spanToRow(trace, span, ctx, price(span, ctx.orgId)));
  }
  return rows;
}

/**
 * The canonical line form of a row (the write log's and the stores' bulk-load
 * format): one JSON object per line, keys in table order, decimals as strings.
 */
export function encodeRow(row: SpanRow): string {
  return withoutLoneSurrogates(JSON.stringify(row, COLUMN_NAMES));
}

/** Keys in table order, whatever order a row object was built in. */
const COLUMN_NAMES: string[] = SPAN_COLUMNS.map(([name]) => name);

/**
 * JSON.stringify writes a lone surrogate as an escape (\udc00), which the
 * stores refuse: store U+FFFD instead, so an accepted span is never lost.
 */
function withoutLoneSurrogates(line: string): string {
  return line.includes('\\ud') || line.includes('\\uD') ? line.replace(LONE_SURROGATE_ESCAPE, '$1\\ufffd') : line;
}

const str = (s: string | undefined): string => (s === undefined ? '""' : JSON.stringify(s));
const num = (n: number | undefined): string => (n === undefined ? 'null' : String(n));
const count = (n: number | undefined): string => (n === undefined ? '0' : String(n));
const list = (a: readonly (string | number)[] | undefined): string => (a === undefined ? '[]' : JSON.stringify(a));
// Most spans report no tier or region.
const billingText = (s: string): string => (s === '' ? '""' : JSON.stringify(s));
const keysOf = (m: Metadata | undefined): string => (m === undefined ? '[]' : JSON.stringify(metaKeys(m)));
const valuesOf = (m: Metadata | undefined): string => (m === undefined ? '[]' : JSON.stringify(metaValues(m)));

/**
 * The start of the canonical line of every span of `trace`: the trace's
 * columns lead the table order, so they are encoded once per trace and
 * shared by its spans' lines (see `encodeSpanLine`).
 */
export function encodeTraceHead(trace: Trace, ctx: RowContext): string {
  const c = trace.customer;
  return (
    `{"org_id":${JSON.stringify(ctx.orgId)},"key_prefix":${JSON.stringify(ctx.keyPrefix)},"received_at":${ctx.receivedAt}` +
    `,"trace_id":${JSON.stringify(trace.traceId)},"trace_name":${str(trace.traceName)},"agent_name":${str(trace.agentName)}` +
    `,"workflow_name":${str(trace.workflowName)},"workflow_run_id":${str(trace.workflowRunId)},"session_id":${str(trace.sessionId)}` +
    `,"customer_id":${str(c?.id)},"customer_name":${str(c?.name)},"customer_image_url":${str(c?.imageUrl)}` +
    `,"trace_metadata_keys":${keysOf(trace.metadata)},"trace_metadata_values":${valuesOf(trace.metadata)}`
  );
}

/**
 * The canonical line of one span, byte for byte what
 * `encodeRow(spanToRow(trace, span, ctx, costs))` writes (a test holds the
 * two equal), without the 66-key row object in between: on the request path
 * this is the largest cost after JSON.parse.
 */
export function encodeSpanLine(traceHead: string, span: Span, costs: SpanCosts): string {
  const u = span.usage;
  const rl = span.rateLimit;
  const line =
    `${traceHead},"span_id":${JSON.stringify(span.spanId)},"parent_span_id":${str(span.parentSpanId)}` +
    `,"span_type":${JSON.stringify(span.spanType)},"name":${JSON.stringify(span.name)}` +
    `,"start_time":${span.startTime},"end_time":${span.endTime},"start_date":"${utcDay(span.startTime)}","duration_ms":${span.endTime - span.startTime}` +
    `,"status":${span.status === undefined ? '"ok"' : JSON.stringify(span.status)},"error_message":${str(span.errorMessage)}` +
    `,"provider":${str(span.provider)},"model_id":${str(span.modelId)}` +
    `,"service_tier":${billingText(serviceTierOf(span))},"region":${billingText(regionOf(span))}` +
    `,"input_tokens":${count(u?.inputTokens)},"output_tokens":${count(u?.outputTokens)},"total_tokens":${totalTokens(u)}` +
    `,"reasoning_tokens":${count(u?.reasoningTokens)},"cached_input_tokens":${count(u?.cachedInputTokens)}` +
    `,"cache_write_input_tokens":${count(u?.cacheWriteInputTokens)},"image_count":${count(u?.imageCount)}` +
    `,"web_search_count":${count(u?.webSearchCount)},"request_count":${count(u?.requestCount)}` +
    `,"cache_write_1h_input_tokens":${count(u?.cacheWrite1hInputTokens)},"audio_input_tokens":${count(u?.audioInputTokens)}` +
    `,"cached_audio_input_tokens":${count(u?.cachedAudioInputTokens)},"audio_output_tokens":${count(u?.audioOutputTokens)}` +
    // Decimal strings hold only digits, '-' and '.': nothing to escape.
    `,"input_cost":"${costs.input_cost}","output_cost":"${costs.output_cost}","reasoning_cost":"${costs.reasoning_cost}"` +
    `,"cached_input_cost":"${costs.cached_input_cost}","cache_write_input_cost":"${costs.cache_write_input_cost}"` +
    `,"image_cost":"${costs.image_cost}","web_search_cost":"${costs.web_search_cost}","request_cost":"${costs.request_cost}"` +
    `,"cache_write_1h_input_cost":"${costs.cache_write_1h_input_cost}","audio_input_cost":"${costs.audio_input_cost}"` +
    `,"cached_audio_input_cost":"${costs.cached_audio_input_cost}","audio_output_cost":"${costs.audio_output_cost}"` +
    `,"total_cost":"${costs.total_cost}","priced":${costs.priced},"price_source":${JSON.stringify(costs.price_source)}` +
    `,"ttft_ms":${num(span.ttftMs)},"chunk_offsets":${list(span.chunkOffsets)},"chunk_tokens":${list(span.chunkTokens)}` +
    `,"reasoning_offsets":${list(span.reasoningOffsets)},"reasoning_chunk_tokens":${list(span.reasoningChunkTokens)}` +
    `,"reasoning_duration_ms":${num(span.reasoningDurationMs)},"input":${str(span.input)},"output":${str(span.output)}` +
    `,"tool_catalog":${str(span.toolCatalog)},"model_call_ms":${num(span.modelCallMs)},"system_fingerprint":${str(span.systemFingerprint)}` +
    `,"safety_metadata":${str(span.safetyMetadata)},"sources":${str(span.sources)}` +
    `,"rate_limit_requests_limit":${num(rl?.requestsLimit)},"rate_limit_requests_remaining":${num(rl?.requestsRemaining)}` +
    `,"rate_limit_requests_reset_ms":${num(rl?.requestsResetMs)},"rate_limit_tokens_limit":${num(rl?.tokensLimit)}` +
    `,"rate_limit_tokens_remaining":${num(rl?.tokensRemaining)},"rate_limit_tokens_reset_ms":${num(rl?.tokensResetMs)}` +
    `,"span_metadata_keys":${keysOf(span.metadata)},"span_metadata_values":${valuesOf(span.metadata)}}`;
  return withoutLoneSurrogates(line);
}

// An escape \ud800-\udfff not itself preceded by an escaped backslash.
const LONE_SURROGATE_ESCAPE = /(?<!\\)((?:\\\\)*)\\u[dD][89a-fA-F][0-9a-fA-F]{2}/g;
