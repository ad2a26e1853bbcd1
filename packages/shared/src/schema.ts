import { z } from 'zod';
import { BILLING_TEXT, CUSTOMER_TEXT, LIMITS, SPAN_TEXT, TRACE_TEXT } from './fields.js';

/**
 * The v1 wire contract of `POST /ingest` (ingest-api-v1.md, section 2).
 *
 * String limits count Unicode code points, as JSON Schema's `maxLength` does,
 * so the published OpenAPI document and this schema give the same verdict on
 * text outside the Basic Multilingual Plane.
 */

export { LIMITS } from './fields.js';

/** Length in code points, computed only when the UTF-16 length could exceed it. */
export function codePointLength(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    // A high surrogate followed by a low one is one code point.
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

function text([min, max]: readonly [number, number]) {
  let s = z.string();
  if (min > 0) s = s.min(min, { message: `must be at least ${min} character${min === 1 ? '' : 's'} long` });
  return s
    .refine((v) => v.length <= max || codePointLength(v) <= max, {
      message: `must be at most ${max} characters long`,
      abort: true,
    })
    .meta({ maxLength: max });
}

const count = z.int().min(0, { message: 'must be an integer >= 0' });

/** 9999-12-31T23:59:59.999Z: the last instant both span stores can hold as a date. */
export const MAX_EPOCH_MS = 253_402_300_799_999;
const epochMs = count.max(MAX_EPOCH_MS, { message: `must be epoch milliseconds no later than ${MAX_EPOCH_MS} (9999-12-31T23:59:59.999Z)` });

export const MetadataSchema = z
  .record(text([0, LIMITS.metadataKeyChars]), text([0, LIMITS.metadataValueChars]))
  .refine((m) => Object.keys(m).length <= LIMITS.metadataEntries, {
    message: `must have at most ${LIMITS.metadataEntries} entries`,
  })
  .meta({
    maxProperties: LIMITS.metadataEntries,
    description:
      `Free-form string-to-string map: at most ${LIMITS.metadataEntries} entries, ` +
      `keys at most ${LIMITS.metadataKeyChars} characters, values at most ${LIMITS.metadataValueChars} characters.`,
  });

export const CustomerSchema = z
  .strictObject({
    id: text(CUSTOMER_TEXT.id),
    name: text(CUSTOMER_TEXT.name).optional(),
    imageUrl: z
      .url({ message: 'must be an absolute URI' })
      .refine((v) => v.length <= CUSTOMER_TEXT.imageUrl[1] || codePointLength(v) <= CUSTOMER_TEXT.imageUrl[1], {
        message: `must be at most ${CUSTOMER_TEXT.imageUrl[1]} characters long`,
      })
      .meta({ maxLength: CUSTOMER_TEXT.imageUrl[1], format: 'uri' })
      .optional(),
  })
  .meta({ description: 'The end customer the call serves, used for per-customer cost attribution.' });

export const UsageSchema = z
  .strictObject({
    inputTokens: count
      .optional()
      .meta({ description: 'Uncached input tokens (excludes cachedInputTokens and cacheWriteInputTokens). Priced at the input rate.' }),
    outputTokens: count.optional().meta({ description: 'Output tokens excluding reasoningTokens. Priced at the output rate.' }),
    totalTokens: count.optional().meta({ description: 'Stored as sent; not priced.' }),
    reasoningTokens: count
      .optional()
      .meta({ description: 'Reasoning tokens, disjoint from outputTokens. Priced at the reasoning rate, else the output rate.' }),
    cachedInputTokens: count
      .optional()
      .meta({ description: 'Input tokens read from the prompt cache, disjoint from inputTokens. Priced at the cache-read rate.' }),
    cacheWriteInputTokens: count
      .optional()
      .meta({ description: 'Input tokens written to the prompt cache, disjoint from inputTokens. Priced at the cache-write rate.' }),
    imageCount: count.optional().meta({ description: 'Images generated or read; priced per image.' }),
    webSearchCount: count.optional().meta({ description: 'Web search calls; priced per call.' }),
    requestCount: count.optional().meta({ description: 'Requests; priced per request.' }),
    cacheWrite1hInputTokens: count.optional().meta({
      description:
        'Input tokens written to a one-hour prompt cache (Anthropic ephemeral_1h), disjoint from inputTokens and cacheWriteInputTokens ' +
        '(which holds the five-minute writes). Priced at the one-hour cache-write rate.',
    }),
    audioInputTokens: count.optional().meta({
      description: 'Audio input tokens not read from a cache, disjoint from inputTokens (text). Priced at the audio input rate.',
    }),
    cachedAudioInputTokens: count.optional().meta({
      description: 'Audio input tokens read from the prompt cache, disjoint from audioInputTokens and cachedInputTokens. Priced at the cached audio rate.',
    }),
    audioOutputTokens: count.optional().meta({
      description: 'Audio output tokens, disjoint from outputTokens (text). Priced at the audio output rate.',
    }),
  })
  .meta({ description: 'Token and request counts. Each count is a disjoint bucket priced independently with its own unit price.' });

export const RateLimitSchema = z.strictObject({
  requestsLimit: count.optional(),
  requestsRemaining: count.optional(),
  requestsResetMs: count.optional(),
  tokensLimit: count.optional(),
  tokensRemaining: count.optional(),
  tokensResetMs: count.optional(),
});

const chunkArray = z.array(count).max(LIMITS.chunkArrayItems, { message: `must have at most ${LIMITS.chunkArrayItems} items` });

export const SpanTypeSchema = z.enum(['agent', 'llm', 'tool', 'embedding', 'other']);
export const SpanStatusSchema = z.enum(['ok', 'error']);

export const SpanSchema = z
  .strictObject({
    spanId: text(SPAN_TEXT.spanId),
    parentSpanId: text(SPAN_TEXT.parentSpanId).optional(),
    spanType: SpanTypeSchema,
    name: text(SPAN_TEXT.name),
    startTime: epochMs.meta({ description: 'Epoch milliseconds.' }),
    // `x-minimum-field` carries the cross-field rule into the JSON Schema; the ajv validator implements it.
    endTime: epochMs.meta({ description: 'Epoch milliseconds; >= startTime.', 'x-minimum-field': 'startTime' }),
    status: SpanStatusSchema.optional(),
    errorMessage: text(SPAN_TEXT.errorMessage).optional(),
    provider: text(SPAN_TEXT.provider).optional(),
    modelId: text(SPAN_TEXT.modelId).optional(),
    usage: UsageSchema.optional(),
    serviceTier: text(BILLING_TEXT.serviceTier)
      .optional()
      .meta({
        description:
          'The service tier that served the call, as the provider reports it (OpenAI service_tier: default, flex, priority; Anthropic ' +
          'usage.service_tier: standard, priority, batch; Gemini trafficType). Absent or default/standard/auto: the standard price. ' +
          'A tier with no known price leaves the span unpriced.',
      }),
    batch: z
      .boolean({ message: 'must be true or false' })
      .optional()
      .meta({ description: "The call went through the provider's batch API (priced at its batch rate); default false." }),
    region: text(BILLING_TEXT.region)
      .optional()
      .meta({
        description:
          'Where the provider ran the call, when it bills by it: Anthropic usage.inference_geo (us, global), a Vertex AI endpoint ' +
          "location (global, us-east5, europe-west1, ...), OpenAI's data-residency region (us, eu). Bedrock's comes from the " +
          'inference profile in modelId (us., eu., global., ...). A region with no known price leaves the span unpriced.',
      }),
    ttftMs: z.number().min(0, { message: 'must be >= 0' }).optional(),
    chunkOffsets: chunkArray.optional(),
    chunkTokens: chunkArray.optional(),
    reasoningOffsets: chunkArray.optional(),
    reasoningChunkTokens: chunkArray.optional(),
    reasoningDurationMs: count.optional(),
    input: text(SPAN_TEXT.input).optional(),
    output: text(SPAN_TEXT.output).optional(),
    toolCatalog: text(SPAN_TEXT.toolCatalog).optional(),
    modelCallMs: count.optional(),
    systemFingerprint: text(SPAN_TEXT.systemFingerprint).optional(),
    safetyMetadata: text(SPAN_TEXT.safetyMetadata).optional(),
    sources: text(SPAN_TEXT.sources).optional(),
    rateLimit: RateLimitSchema.optional(),
    metadata: MetadataSchema.optional(),
  })
  .refine((s) => s.endTime >= s.startTime, { message: 'must be >= startTime', path: ['endTime'] });

export const TraceSchema = z
  .strictObject({
    traceId: text(TRACE_TEXT.traceId),
    traceName: text(TRACE_TEXT.traceName).optional(),
    agentName: text(TRACE_TEXT.agentName).optional(),
    workflowName: text(TRACE_TEXT.workflowName).optional(),
    workflowRunId: text(TRACE_TEXT.workflowRunId).optional(),
    sessionId: text(TRACE_TEXT.sessionId).optional(),
    customer: CustomerSchema.optional(),
    metadata: MetadataSchema.optional(),
    spans: z
      .array(SpanSchema)
      .min(1, { message: 'must have at least 1 span' })
      .max(LIMITS.spansPerTrace, { message: `must have at most ${LIMITS.spansPerTrace} spans` }),
  })
  .superRefine((t, ctx) => {
    if (t.traceName === undefined && t.agentName === undefined) {
      ctx.addIssue({ code: 'custom', message: 'at least one of traceName or agentName is required', path: ['traceName'] });
    }
    if ((t.workflowName === undefined) !== (t.workflowRunId === undefined)) {
      ctx.addIssue({
        code: 'custom',
        message: 'workflowName and workflowRunId must be given together',
        path: [t.workflowName === undefined ? 'workflowName' : 'workflowRunId'],
      });
    }
  })
  .meta({
    description: 'One top-level model call and its spans. At least one of traceName or agentName; workflowName and workflowRunId together or not at all.',
    anyOf: [{ required: ['traceName'] }, { required: ['agentName'] }],
    dependentRequired: { workflowName: ['workflowRunId'], workflowRunId: ['workflowName'] },
  });

export const IngestPayloadSchema = z.strictObject({
  version: z.literal('v1', { message: "must be the constant 'v1'" }),
  traces: z
    .array(TraceSchema)
    .min(1, { message: 'must have at least 1 trace' })
    .max(LIMITS.tracesPerBatch, { message: `must have at most ${LIMITS.tracesPerBatch} traces` }),
});

export type IngestPayload = z.infer<typeof IngestPayloadSchema>;
export type Trace = z.infer<typeof TraceSchema>;
export type Span = z.infer<typeof SpanSchema>;
export type Usage = z.infer<typeof UsageSchema>;
export type Customer = z.infer<typeof CustomerSchema>;
export type Metadata = z.infer<typeof MetadataSchema>;
export type SpanType = z.infer<typeof SpanTypeSchema>;

export const IngestAcceptedSchema = z.strictObject({
  accepted: z.int().min(0).meta({ description: 'The number of span rows accepted.' }),
});

export const ErrorBodySchema = z.object({
  error: z.string().meta({ description: 'What went wrong and what to fix.' }),
  code: z.string().optional().meta({ description: 'Stable machine-readable code, e.g. TI_ERR_QUOTA_EXCEEDED.' }),
  issues: z
    .array(z.object({ path: z.string(), message: z.string() }).loose())
    .optional()
    .meta({ description: 'Present when schema validation failed.' }),
});

export interface ValidationIssue {
  /** e.g. `traces[0].spans[3].endTime` */
  path: string;
  message: string;
  code?: string;
}

/** At most this many issues are reported for one body. */
export const MAX_REPORTED_ISSUES = 50;

export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else out += out === '' ? String(p) : `.${String(p)}`;
  }
  return out === '' ? '(root)' : out;
}

export type ValidationResult = { ok: true; value: IngestPayload } | { ok: false; issues: ValidationIssue[] };

/** Validate a parsed JSON value against the v1 contract with zod. */
export function validatePayload(input: unknown): ValidationResult {
  const r = IngestPayloadSchema.safeParse(input);
  if (r.success) return { ok: true, value: r.data };
  const issues = r.error.issues.slice(0, MAX_REPORTED_ISSUES).map((i) => ({
    path: formatPath(i.path),
    message: i.message,
    code: i.code,
  }));
  return { ok: false, issues };
}
