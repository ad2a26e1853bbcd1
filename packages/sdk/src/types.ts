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
