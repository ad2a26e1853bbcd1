/**
 * The contract's field limits and usage dimensions, once (ingest-api-v1.md,
 * section 2). The zod schema, the OTLP mapping's cuts, the row and report
 * column lists and the SDK's parity test all read this table; a test holds
 * it to the contract's numbers.
 */

/** Counts of the v1 payload. */
export const LIMITS = {
  tracesPerBatch: 1000,
  spansPerTrace: 2000,
  metadataEntries: 64,
  metadataKeyChars: 128,
  metadataValueChars: 1024,
  chunkArrayItems: 200,
} as const;

/** [min, max] length in Unicode code points of each text field of a trace. */
export const TRACE_TEXT = {
  traceId: [1, 128],
  traceName: [0, 256],
  agentName: [0, 256],
  workflowName: [0, 256],
  workflowRunId: [0, 128],
  sessionId: [0, 128],
} as const satisfies Record<string, readonly [number, number]>;

/** ...of the trace's customer. */
export const CUSTOMER_TEXT = {
  id: [1, 128],
  name: [0, 256],
  imageUrl: [0, 2048],
} as const satisfies Record<string, readonly [number, number]>;

/** ...of a span. */
export const SPAN_TEXT = {
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
} as const satisfies Record<string, readonly [number, number]>;

/**
 * ...of the span fields added to v1 after the spec (additive and optional,
 * documented in the README's "Usage dimensions and cost"): how the call was
 * billed beyond its token counts.
 */
export const BILLING_TEXT = {
  serviceTier: [0, 64],
  region: [0, 64],
} as const satisfies Record<string, readonly [number, number]>;

/**
 * The usage counts, each once: its field in the v1 `usage` object, its
 * column in `spans`, and the cost column it is priced into (`totalTokens` is
 * stored, not priced). In the order reports show them: the nine of the first
 * contract, then the audio and one-hour cache buckets added to it, so a
 * report's earlier columns keep their places.
 */
export const USAGE_DIMENSIONS = [
  { field: 'inputTokens', column: 'input_tokens', cost: 'input_cost' },
  { field: 'cachedInputTokens', column: 'cached_input_tokens', cost: 'cached_input_cost' },
  { field: 'cacheWriteInputTokens', column: 'cache_write_input_tokens', cost: 'cache_write_input_cost' },
  { field: 'outputTokens', column: 'output_tokens', cost: 'output_cost' },
  { field: 'reasoningTokens', column: 'reasoning_tokens', cost: 'reasoning_cost' },
  { field: 'totalTokens', column: 'total_tokens', cost: undefined },
  { field: 'imageCount', column: 'image_count', cost: 'image_cost' },
  { field: 'webSearchCount', column: 'web_search_count', cost: 'web_search_cost' },
  { field: 'requestCount', column: 'request_count', cost: 'request_cost' },
  { field: 'cacheWrite1hInputTokens', column: 'cache_write_1h_input_tokens', cost: 'cache_write_1h_input_cost' },
  { field: 'audioInputTokens', column: 'audio_input_tokens', cost: 'audio_input_cost' },
  { field: 'cachedAudioInputTokens', column: 'cached_audio_input_tokens', cost: 'cached_audio_input_cost' },
  { field: 'audioOutputTokens', column: 'audio_output_tokens', cost: 'audio_output_cost' },
] as const;

export type UsageDimension = (typeof USAGE_DIMENSIONS)[number];
/** A usage field of the v1 payload (`inputTokens`, ...). */
export type UsageField = UsageDimension['field'];
/** A usage column of `spans` (`input_tokens`, ...). */
export type UsageColumn = UsageDimension['column'];
/** A per-bucket cost column (`input_cost`, ...); `total_cost` is their sum. */
export type BucketCostColumn = NonNullable<UsageDimension['cost']>;
