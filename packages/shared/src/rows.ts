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
 * The canonical line form of a row (exports' and tools' format): one JSON
 * object per line, every key in table order, decimals as strings.
 */
export function encodeRow(row: SpanRow): string {
  return withoutLoneSurrogates(JSON.stringify(row, COLUMN_NAMES));
}

/** Keys in table order, whatever order a row object was built in. */
const COLUMN_NAMES: string[] = SPAN_COLUMNS.map(([name]) => name);

/**
 * The columns a line always carries: what identifies, places and prices a span. Any other key whose value is its
 * kind's empty value (`EMPTY_VALUES`) is left out of the write log's lines (`encodeLine`).
 */
const WRITTEN_ALWAYS: ReadonlySet<string> = new Set([
  'org_id',
  'key_prefix',
  'received_at',
  'trace_id',
  'span_id',
  'span_type',
  'name',
  'start_time',
  'end_time',
  'start_date',
  'duration_ms',
  'status',
  'total_cost',
  'priced',
  'price_source',
]);

/** What a key left out of a line stands for, by column kind: every reader of lines (stores, tools) takes it so. */
const EMPTY_VALUES: Readonly<Record<ColumnKind, string | number | boolean | null | readonly never[]>> = {
  string: '',
  int: 0,
  nullable_int: null,
  nullable_float: null,
  date: '',
  decimal: '0',
  bool: false,
  string_array: [],
  int_array: [],
};

function isEmptyValue(kind: ColumnKind, v: unknown): boolean {
  if (Array.isArray(v)) return v.length === 0;
  return v === EMPTY_VALUES[kind] || v === undefined;
}

/**
 * The line form of a row in the write log and the stores' bulk loads: the
 * canonical line without the keys of empty values (most of a typical span's
 * keys: ~40% of its line). `encodeSpanLine` writes the same bytes.
 */
export function encodeLine(row: SpanRow): string {
  const keys = SPAN_COLUMNS.filter(([name, kind]) => WRITTEN_ALWAYS.has(name) || !isEmptyValue(kind, row[name])).map(([name]) => name);
  return withoutLoneSurrogates(JSON.stringify(row, keys));
}

/**
 * A row parsed from a line (either form), its left-out keys given their empty values; a key every line carries is
 * left as it was (missing in a line that lacks it), for the reader to refuse.
 */
export function completeRow(parsed: Record<string, unknown>): SpanRow {
  const row: Record<string, unknown> = {};
  for (const [name, kind] of SPAN_COLUMNS) row[name] = WRITTEN_ALWAYS.has(name) ? parsed[name] : (parsed[name] ?? EMPTY_VALUES[kind]);
  return row as SpanRow;
}

/**
 * JSON.stringify writes a lone surrogate as an escape (\udc00), which the
 * stores refuse: store U+FFFD instead, so an accepted span is never lost.
 */
function withoutLoneSurrogates(line: string): string {
  return line.includes('\\ud') || line.includes('\\uD') ? line.replace(LONE_SURROGATE_ESCAPE, '$1\\ufffd') : line;
}

// Each writes `key` (`,"name":`) and the value, or nothing for a kind's empty value.
const optText = (key: string, s: string | undefined): string => (s === undefined || s === '' ? '' : key + JSON.stringify(s));
const optCount = (key: string, n: number | undefined): string => (n === undefined || n === 0 ? '' : key + String(n));
const optNumber = (key: string, n: number | undefined): string => (n === undefined ? '' : key + String(n));
const optList = (key: string, a: readonly (string | number)[] | undefined): string => (a === undefined || a.length === 0 ? '' : key + JSON.stringify(a));
// Decimal strings hold only digits, '-' and '.': nothing to escape.
const optCost = (key: string, c: string): string => (c === '0' ? '' : `${key}"${c}"`);
const optMeta = (keysKey: string, valuesKey: string, m: Metadata | undefined): string => {
  const keys = metaKeys(m);
  return keys.length === 0 ? '' : `${keysKey}${JSON.stringify(keys)}${valuesKey}${JSON.stringify(metaValues(m))}`;
};

/**
 * The start of the line of every span of `trace`: the trace's columns lead
 * the table order, so they are encoded once per trace and shared by its
 * spans' lines (see `encodeSpanLine`).
 */
export function encodeTraceHead(trace: Trace, ctx: RowContext): string {
  const c = trace.customer;
  return (
    `{"org_id":${JSON.stringify(ctx.orgId)},"key_prefix":${JSON.stringify(ctx.keyPrefix)},"received_at":${ctx.receivedAt}` +
    `,"trace_id":${JSON.stringify(trace.traceId)}${optText(',"trace_name":', trace.traceName)}${optText(',"agent_name":', trace.agentName)}` +
    `${optText(',"workflow_name":', trace.workflowName)}${optText(',"workflow_run_id":', trace.workflowRunId)}` +
    `${optText(',"session_id":', trace.sessionId)}${optText(',"customer_id":', c?.id)}${optText(',"customer_name":', c?.name)}` +
    `${optText(',"customer_image_url":', c?.imageUrl)}${optMeta(',"trace_metadata_keys":', ',"trace_metadata_values":', trace.metadata)}`
  );
}

/**
 * The line of one span, byte for byte what
 * `encodeLine(spanToRow(trace, span, ctx, costs))` writes (a test holds the
 * two equal), without the 77-key row object in between: on the request path
 * this is the largest cost after JSON.parse.
 */
export function encodeSpanLine(traceHead: string, span: Span, costs: SpanCosts): string {
  const u = span.usage;
  const rl = span.rateLimit;
  const line =
    `${traceHead},"span_id":${JSON.stringify(span.spanId)}${optText(',"parent_span_id":', span.parentSpanId)}` +
    `,"span_type":${JSON.stringify(span.spanType)},"name":${JSON.stringify(span.name)}` +
    `,"start_time":${span.startTime},"end_time":${span.endTime},"start_date":"${utcDay(span.startTime)}","duration_ms":${span.endTime - span.startTime}` +
    `,"status":${span.status === undefined ? '"ok"' : JSON.stringify(span.status)}${optText(',"error_message":', span.errorMessage)}` +
    `${optText(',"provider":', span.provider)}${optText(',"model_id":', span.modelId)}` +
    `${optText(',"service_tier":', serviceTierOf(span))}${optText(',"region":', regionOf(span))}` +
    (u === undefined
      ? ''
      : `${optCount(',"input_tokens":', u.inputTokens)}${optCount(',"output_tokens":', u.outputTokens)}${optCount(',"total_tokens":', totalTokens(u))}` +
        `${optCount(',"reasoning_tokens":', u.reasoningTokens)}${optCount(',"cached_input_tokens":', u.cachedInputTokens)}` +
        `${optCount(',"cache_write_input_tokens":', u.cacheWriteInputTokens)}${optCount(',"image_count":', u.imageCount)}` +
        `${optCount(',"web_search_count":', u.webSearchCount)}${optCount(',"request_count":', u.requestCount)}` +
        `${optCount(',"cache_write_1h_input_tokens":', u.cacheWrite1hInputTokens)}${optCount(',"audio_input_tokens":', u.audioInputTokens)}` +
        `${optCount(',"cached_audio_input_tokens":', u.cachedAudioInputTokens)}${optCount(',"audio_output_tokens":', u.audioOutputTokens)}`) +
    `${optCost(',"input_cost":', costs.input_cost)}${optCost(',"output_cost":', costs.output_cost)}${optCost(',"reasoning_cost":', costs.reasoning_cost)}` +
    `${optCost(',"cached_input_cost":', costs.cached_input_cost)}${optCost(',"cache_write_input_cost":', costs.cache_write_input_cost)}` +
    `${optCost(',"image_cost":', costs.image_cost)}${optCost(',"web_search_cost":', costs.web_search_cost)}${optCost(',"request_cost":', costs.request_cost)}` +
    `${optCost(',"cache_write_1h_input_cost":', costs.cache_write_1h_input_cost)}${optCost(',"audio_input_cost":', costs.audio_input_cost)}` +
    `${optCost(',"cached_audio_input_cost":', costs.cached_audio_input_cost)}${optCost(',"audio_output_cost":', costs.audio_output_cost)}` +
    `,"total_cost":"${costs.total_cost}","priced":${costs.priced},"price_source":${JSON.stringify(costs.price_source)}` +
    `${optNumber(',"ttft_ms":', span.ttftMs)}${optList(',"chunk_offsets":', span.chunkOffsets)}${optList(',"chunk_tokens":', span.chunkTokens)}` +
    `${optList(',"reasoning_offsets":', span.reasoningOffsets)}${optList(',"reasoning_chunk_tokens":', span.reasoningChunkTokens)}` +
    `${optNumber(',"reasoning_duration_ms":', span.reasoningDurationMs)}${optText(',"input":', span.input)}${optText(',"output":', span.output)}` +
    `${optText(',"tool_catalog":', span.toolCatalog)}${optNumber(',"model_call_ms":', span.modelCallMs)}` +
    `${optText(',"system_fingerprint":', span.systemFingerprint)}${optText(',"safety_metadata":', span.safetyMetadata)}` +
    `${optText(',"sources":', span.sources)}` +
    `${optNumber(',"rate_limit_requests_limit":', rl?.requestsLimit)}${optNumber(',"rate_limit_requests_remaining":', rl?.requestsRemaining)}` +
    `${optNumber(',"rate_limit_requests_reset_ms":', rl?.requestsResetMs)}${optNumber(',"rate_limit_tokens_limit":', rl?.tokensLimit)}` +
    `${optNumber(',"rate_limit_tokens_remaining":', rl?.tokensRemaining)}${optNumber(',"rate_limit_tokens_reset_ms":', rl?.tokensResetMs)}` +
    `${optMeta(',"span_metadata_keys":', ',"span_metadata_values":', span.metadata)}}`;
  return withoutLoneSurrogates(line);
}

// An escape \ud800-\udfff not itself preceded by an escaped backslash.
const LONE_SURROGATE_ESCAPE = /(?<!\\)((?:\\\\)*)\\u[dD][89a-fA-F][0-9a-fA-F]{2}/g;
