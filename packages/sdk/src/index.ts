export {
  TraceIngest,
  TraceIngestError,
  type BudgetAnswer,
  type BudgetForecast,
  type BudgetStatus,
  type TraceIngestOptions,
  type TraceIngestStats,
} from './client.js';
export { Trace, Span, type TraceStart, type SpanStart, type SpanEnd } from './trace.js';
export { recordStream } from './stream.js';
export { StreamTimer, ChunkSampler, evenIndices, type StreamFields } from './sampling.js';
export {
  openaiChatUsage,
  openaiResponsesUsage,
  openaiUsage,
  openaiTier,
  openaiBilling,
  openaiChatStream,
  openaiResponsesStream,
  type OpenAIChatUsage,
  type OpenAIResponsesUsage,
} from './providers/openai.js';
export { anthropicUsage, anthropicTier, anthropicBilling, anthropicStream, type AnthropicUsage } from './providers/anthropic.js';
export { geminiUsage, geminiTier, geminiBilling, geminiStream, type GeminiUsageMetadata, type GeminiModalityCount } from './providers/gemini.js';
export type { StreamAdapter, ChunkInfo } from './providers/common.js';
export { LIMITS, spanProblem, traceProblem } from './limits.js';
export { classify, backoffMs, parseRetryAfter, DEFAULT_RETRY, type RetryOptions } from './retry.js';
export type * from './types.js';
