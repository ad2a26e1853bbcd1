import { randomId } from './ids.js';
import type { StreamFields } from './sampling.js';
import type { Billing, Customer, Metadata, RateLimit, SpanStatus, SpanType, SpanV1, TraceHeaderV1, Usage } from './types.js';

/** Where ended spans go (the client); kept narrow so recording never depends on sending. */
export interface SpanSink {
  readonly recordInputs: boolean;
  readonly recordOutputs: boolean;
  /** Queues one ended span of `trace`; never throws. */
  accept(trace: Trace, span: SpanV1): void;
}

export interface TraceStart {
  /** traceName; at least one of name and agent is required. */
  name?: string;
  /** agentName */
  agent?: string;
  /** workflowName, with a generated workflowRunId, or both given. */
  workflow?: string | { name: string; runId: string };
  /** sessionId */
  session?: string;
  /** customer id, or the customer object. */
  customer?: string | Customer;
  metadata?: Metadata;
  /** Generated when absent. */
  traceId?: string;
}

export interface SpanStart {
  name: string;
  /** Default: `llm` when a provider or model is given, else `other`. */
  type?: SpanType;
  provider?: string;
  model?: string;
  input?: string;
  toolCatalog?: string;
  metadata?: Metadata;
  /** Epoch ms; default now. */
  startTime?: number;
  spanId?: string;
}

export interface SpanEnd extends StreamFields, Billing {
  /** Default `error` when `error` is given, else `ok`. */
  status?: SpanStatus;
  /** An Error or message: sets status `error` and errorMessage (cut at 8192 characters). */
  error?: unknown;
  usage?: Usage;
  input?: string;
  output?: string;
  provider?: string;
  model?: string;
  toolCatalog?: string;
  modelCallMs?: number;
  systemFingerprint?: string;
  safetyMetadata?: string;
  sources?: string;
  rateLimit?: RateLimit;
  metadata?: Metadata;
  /** Epoch ms; default now. */
  endTime?: number;
}

const monotonic = (): number => globalThis.performance.now();

function errorText(e: unknown): string {
  const s = e instanceof Error ? `${e.name}: ${e.message}` : typeof e === 'string' ? e : String(e);
  return s.length > 8192 ? s.slice(0, 8191) : s;
}

/** A span being recorded. `end()` queues it; later calls are ignored. */
export class Span {
  readonly spanId: string;
  readonly startTime: number;
  /** performance.now() at start, the origin of chunk offsets. */
  readonly startMonotonic: number;
  private ended = false;

  constructor(
    readonly trace: Trace,
    private readonly sink: SpanSink,
    private readonly start: SpanStart,
    readonly parentSpanId: string | undefined,
  ) {
    this.spanId = start.spanId ?? randomId(8);
    this.startTime = start.startTime ?? Date.now();
    this.startMonotonic = monotonic();
  }

  get isEnded(): boolean {
    return this.ended;
  }

  /** A span nested under this one (its parentSpanId is this span's id). */
  startSpan(opts: SpanStart): Span {
    return new Span(this.trace, this.sink, opts, this.spanId);
  }

  end(opts: SpanEnd = {}): void {
    if (this.ended) return;
    this.ended = true;
    const s = this.start;
    const provider = opts.provider ?? s.provider;
    const model = opts.model ?? s.model;
    const endTime = Math.max(opts.endTime ?? Date.now(), this.startTime);
    const span: SpanV1 = {
      spanId: this.spanId,
      spanType: s.type ?? (provider !== undefined || model !== undefined ? 'llm' : 'other'),
      name: s.name,
      startTime: this.startTime,
      endTime,
    };
    if (this.parentSpanId !== undefined) span.parentSpanId = this.parentSpanId;
    const status = opts.status ?? (opts.error !== undefined ? 'error' : 'ok');
    span.status = status;
    if (opts.error !== undefined) span.errorMessage = errorText(opts.error);
    if (provider !== undefined) span.provider = provider;
    if (model !== undefined) span.modelId = model;
    if (opts.usage !== undefined) span.usage = opts.usage;
    const input = opts.input ?? s.input;
    if (input !== undefined && this.sink.recordInputs) span.input = input;
    if (opts.output !== undefined && this.sink.recordOutputs) span.output = opts.output;
    const toolCatalog = opts.toolCatalog ?? s.toolCatalog;
    if (toolCatalog !== undefined) span.toolCatalog = toolCatalog;
    const metadata = opts.metadata === undefined ? s.metadata : { ...s.metadata, ...opts.metadata };
    if (metadata !== undefined) span.metadata = metadata;
    for (const k of [
      'ttftMs',
      'chunkOffsets',
      'chunkTokens',
      'reasoningOffsets',
      'reasoningChunkTokens',
      'reasoningDurationMs',
      'modelCallMs',
      'serviceTier',
      'batch',
      'region',
      'systemFingerprint',
      'safetyMetadata',
      'rateLimit',
    ] as const) {
      if (opts[k] !== undefined) (span as unknown as Record<string, unknown>)[k] = opts[k];
    }
    if (opts.sources !== undefined && this.sink.recordOutputs) span.sources = opts.sources;
    this.sink.accept(this.trace, span);
  }
}

/** A trace being recorded: the spans started under it share its traceId and fields. */
export class Trace {
  readonly traceId: string;
  readonly header: TraceHeaderV1;

  constructor(
    private readonly sink: SpanSink,
    opts: TraceStart,
  ) {
    this.traceId = opts.traceId ?? randomId();
    const h: TraceHeaderV1 = { traceId: this.traceId };
    if (opts.name !== undefined) h.traceName = opts.name;
    if (opts.agent !== undefined) h.agentName = opts.agent;
    if (opts.workflow !== undefined) {
      const w = typeof opts.workflow === 'string' ? { name: opts.workflow, runId: randomId() } : opts.workflow;
      h.workflowName = w.name;
      h.workflowRunId = w.runId;
    }
    if (opts.session !== undefined) h.sessionId = opts.session;
    if (opts.customer !== undefined) h.customer = typeof opts.customer === 'string' ? { id: opts.customer } : opts.customer;
    if (opts.metadata !== undefined) h.metadata = opts.metadata;
    this.header = h;
  }

  /** A top-level span of this trace. */
  startSpan(opts: SpanStart): Span {
    return new Span(this, this.sink, opts, undefined);
  }

  /**
   * Runs `fn` inside a span that ends when it settles: `ok`, or `error` with
   * the thrown error (which is rethrown: it is the application's own).
   */
  async span<T>(opts: SpanStart, fn: (span: Span) => Promise<T> | T): Promise<T> {
    const span = this.startSpan(opts);
    try {
      const result = await fn(span);
      span.end();
      return result;
    } catch (e) {
      span.end({ error: e });
      throw e;
    }
  }
}
