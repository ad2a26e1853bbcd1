import type { SpanType } from '../schema.js';
import type { Attrs } from './attrs.js';

/**
 * The usage counts a span may carry, each read from the first attribute present. Cache reads and
 * writes and audio input are parts of the input count; reasoning and audio output parts of the
 * output count; one-hour cache writes part of the cache writes.
 */
export type UsageCount = 'input' | 'output' | 'cacheRead' | 'cacheWrite' | 'reasoning' | 'total' | 'cacheWrite1h' | 'audioInput' | 'audioOutput';

/** How a call was billed beyond its counts, when a family's attributes say it in a structure of its own. */
export interface SpanBilling {
  serviceTier?: string | undefined;
  region?: string | undefined;
  /** Counts the attributes themselves do not carry (a one-hour cache write count inside a JSON attribute). */
  usage?: Partial<Record<UsageCount, number>> | undefined;
}

/**
 * What one instrumentation family (a set of attribute names and the rules
 * that read them) contributes to the mapping. Adding an instrumentation is a
 * module exporting one of these and its line in `conventions/index.ts`; the
 * registry's order is the precedence when a span carries several families'
 * names for the same column.
 */
export interface Convention {
  name: string;
  /** Attribute names of each column, in this family's order of preference. */
  model?: readonly string[];
  provider?: readonly string[];
  usage?: Partial<Record<UsageCount, readonly string[]>>;
  inputText?: readonly string[];
  outputText?: readonly string[];
  ttft?: readonly string[];
  /** Attributes naming the trace's customer and session, read after the configured ones (OTLP_*_ATTRIBUTES). */
  customer?: readonly string[];
  session?: readonly string[];
  /** Attributes naming the trace, on any of its spans; they win over the root span's name. */
  traceName?: readonly string[];
  /** Attributes naming the service tier that served the call (the response's before the request's). */
  serviceTier?: readonly string[];
  /** Other attributes read into a column (so left out of metadata), e.g. the span kind. */
  consumed?: readonly string[];
  /** Attributes read by a rule below without becoming a column. */
  reads?: readonly string[];
  /** The span's type, when this family's attributes decide it; the first family that answers wins. */
  spanType?(a: Attrs): SpanType | undefined;
  /**
   * The provider, when the span is this family's and its spelling must be
   * translated: `{ value }` claims the span (value may be undefined); undefined
   * leaves it to the `provider` name lists.
   */
  providerOf?(a: Attrs): { value: string | undefined } | undefined;
  /** The tier, region and counts this family's structured attributes carry (see SpanBilling); the first family that answers wins per field. */
  billingOf?(a: Attrs): SpanBilling | undefined;
  /** A span that repeats the summed usage of its children: stored with its counts in metadata and unpriced. */
  isWrapper?(a: Attrs): boolean;
  /**
   * Whether the span's input count already leaves out cache reads and writes
   * (a provider's native count copied as is), decided from where the span
   * comes from: its instrumentation scope and provider. Undefined: this family
   * does not know, and the counts' sizes decide.
   */
  inputExcludesCache?(source: SpanSource): boolean | undefined;
}

/** What a span says about where it comes from. */
export interface SpanSource {
  /** The instrumentation scope's name and version (e.g. `@traceloop/instrumentation-anthropic`, `0.14.0`). */
  scopeName: string;
  scopeVersion: string;
  /** The provider as mapped (`anthropic`, `openai`, ...). */
  provider: string | undefined;
}
