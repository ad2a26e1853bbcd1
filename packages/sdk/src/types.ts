/**
 * The v1 wire objects of `POST /ingest`, as plain types (no schema library at
 * run time). Field rules live in `limits.ts`.
 */

export type SpanType = 'agent' | 'llm' | 'tool' | 'embedding' | 'other';
export type SpanStatus = 'ok' | 'error';
export type Metadata = Record<string, string>;

/** Disjoint buckets, each priced at its own unit price (see the provider helpers). */
export interface Usage {
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
  reasoningTokens?: number;
  cachedInputTokens?: number;
  cacheWriteInputTokens?: number;
  imageCount?: number;
  webSearchCount?: number;
  requestCount?: number;
  /** Input tokens written to a one-hour cache (Anthropic), apart from cacheWriteInputTokens (five-minute writes). */
  cacheWrite1hInputTokens?: number;
  /** Audio input tokens not read from a cache, apart from inputTokens (text). */
  audioInputTokens?: number;
  /** Audio input tokens read from the cache. */
  cachedAudioInputTokens?: number;
  /** Audio output tokens, apart from outputTokens (text). */
  audioOutputTokens?: number;
}

/** How a call was billed beyond its counts, as the provider reported it. */
export interface Billing {
  /** The provider's service tier (OpenAI service_tier, Anthropic usage.service_tier, Gemini trafficType). */
  serviceTier?: string;
  /** The call went through the provider's batch API. */
  batch?: boolean;
  /** Where it ran when the provider bills by it (Anthropic usage.inference_geo, a Vertex AI location, ...). */
  region?: string;
}

export interface RateLimit {
  requestsLimit?: number;
  requestsRemaining?: number;
  requestsResetMs?: number;
  tokensLimit?: number;
  tokensRemaining?: number;
  tokensResetMs?: number;
}

export interface Customer {
  id: string;
  name?: string;
  imageUrl?: string;
}

export interface SpanV1 {
  spanId: string;
  parentSpanId?: string;
  spanType: SpanType;
  name: string;
  startTime: number;
  endTime: number;
  status?: SpanStatus;
  errorMessage?: string;
  provider?: string;
  modelId?: string;
  usage?: Usage;
  serviceTier?: string;
  batch?: boolean;
  region?: string;
  ttftMs?: number;
  chunkOffsets?: number[];
  chunkTokens?: number[];
  reasoningOffsets?: number[];
  reasoningChunkTokens?: number[];
  reasoningDurationMs?: number;
  input?: string;
  output?: string;
  toolCatalog?: string;
  modelCallMs?: number;
  systemFingerprint?: string;
  safetyMetadata?: string;
  sources?: string;
  rateLimit?: RateLimit;
  metadata?: Metadata;
}

/** A trace without its spans: the fields every batch entry of the trace repeats. */
export interface TraceHeaderV1 {
  traceId: string;
  traceName?: string;
  agentName?: string;
  workflowName?: string;
  workflowRunId?: string;
  sessionId?: string;
  customer?: Customer;
  metadata?: Metadata;
}

export interface TraceV1 extends TraceHeaderV1 {
  spans: SpanV1[];
}

export interface IngestPayloadV1 {
  version: 'v1';
  traces: TraceV1[];
}
