import { LIMITS, spanProblem, traceProblem, utf8Bytes } from './limits.js';
import { headerJson, SpanQueue, soloBodyBytes, takeBatch, type Batch, type QueuedSpan } from './queue.js';
import { classify, DEFAULT_RETRY, nextDelay, type RetryOptions } from './retry.js';
import { Trace, type SpanSink, type TraceStart } from './trace.js';
import type { SpanV1, TraceHeaderV1, TraceV1 } from './types.js';

/**
 * Where the month's spend will end: the spend of its days before today, plus
 * for today and each day left the daily run rate (the last 14 complete UTC
 * days' cost, weighted linearly to recent ones; today at least what it has spent).
 */
export interface BudgetForecast {
  /** Projected spend at the month's end (USD, decimal string, 4 decimals). */
  projectedUsd: string;
  dailyRateUsd: string;
  /** The UTC day (YYYY-MM-DD) the budget is projected to be reached; null without a budget, when it has been, or not this month. */
  crossesOn: string | null;
}

/** A budget as GET /v1/budget reports it: USD as exact decimal strings (null: no budget set). */
export interface BudgetStatus {
  budgetUsd: string | null;
  spentUsd: string;
  remainingUsd: string | null;
  /** Alert percentages this month's spend has reached. */
  crossed: number[];
  /** null until there is a complete day of spend in the last 14. */
  forecast: BudgetForecast | null;
}

export interface BudgetAnswer {
  /** The UTC month, YYYY-MM. */
  month: string;
  /**
   * Absent for a key limited to named customers. Its forecast also says how
   * far off it was, on average, on the org's past months (null: none to measure).
   */
  org?: BudgetStatus & { forecast: (BudgetForecast & { errorPct: string | null; errorMonths: number }) | null };
  customer?: BudgetStatus & { id: string };
  /** When the server last read the spend (epoch ms); spans count once stored, within seconds. */
  asOf: number;
}

/** What went wrong, handed to `onError`; the SDK never throws into the application. */
export class TraceIngestError extends Error {
  override readonly name = 'TraceIngestError';
  constructor(
    message: string,
    /** The server's `code` (e.g. `TI_ERR_QUOTA_EXCEEDED`) or one of the SDK's (`SDK_…`). */
    readonly code: string,
    /** How many spans this error cost. */
    readonly spans: number,
    /** The HTTP status, when a response came. */
    readonly status?: number,
    /** The server's validation issues, on a 400. */
    readonly issues?: unknown[],
  ) {
    super(message);
  }
}

export interface TraceIngestOptions {
  /** Default: TRACE_INGEST_URL, else http://localhost:4000. */
  baseUrl?: string;
  /** Default: TRACE_INGEST_API_KEY. Without a key the client records nothing and says so once. */
  apiKey?: string;
  /** A key of the budget:read scope for budget() (default: TRACE_INGEST_BUDGET_API_KEY, else apiKey). */
  budgetApiKey?: string;
  /** Every span that will not be sent, and why. Default: one console.warn per error. */
  onError?: (error: TraceIngestError) => void;
  /**
   * Trouble that costs no span yet, said once when it starts: the server
   * refuses connections or its host is unknown (a wrong URL?) while the
   * batch is retried. Default: console.warn.
   */
  onWarning?: (message: string) => void;
  /** Send as soon as this many spans are queued (default 100)... */
  flushAt?: number;
  /** ...or this many bytes of spans (default 1 MiB)... */
  flushAtBytes?: number;
  /** ...or this often, on an unref'd timer (default 1000 ms). */
  flushIntervalMs?: number;
  /** Queue bound in spans (default 10,000). */
  maxQueueSpans?: number;
  /** Queue bound in bytes of serialized spans (default 32 MiB). */
  maxQueueBytes?: number;
  /**
   * When the queue is full: `drop-newest` (default) refuses the span being
   * ended, keeping the older ones in order; `drop-oldest` evicts the oldest
   * queued spans to make room. Either way they are counted in `dropped`.
   */
  whenQueueFull?: 'drop-newest' | 'drop-oldest';
  /** The server's INGEST_MAX_BODY_BYTES (default 10 MiB); each request body stays within it. */
  maxBodyBytes?: number;
  /** Default `gzip` (CompressionStream); `none` sends plain JSON. */
  compression?: 'gzip' | 'none';
  retry?: Partial<RetryOptions>;
  /** One request's timeout (default 30 s); a timeout is a transport error and is retried. */
  requestTimeoutMs?: number;
  /** Default bound of flush() and shutdown() (default 10 s). */
  flushTimeoutMs?: number;
  /** In Node, flush on `beforeExit` (default true). */
  flushOnExit?: boolean;
  /** Send span inputs / outputs (default true); off, the texts never leave the process. */
  recordInputs?: boolean;
  recordOutputs?: boolean;
  /** The fetch to use (default the global one). */
  fetch?: typeof globalThis.fetch;
}

export interface TraceIngestStats {
  /** Spans waiting in the queue. */
  queued: number;
  /** Spans in the request being sent (or waiting to be retried). */
  inFlight: number;
  /** Spans the server accepted (202). */
  sent: number;
  /** Spans dropped because the queue was full, the client shut down, or it has no API key. */
  dropped: number;
  /** Spans given up: refused by the server (400/401/413/quota 429), retries exhausted, or invalid. */
  failed: number;
  /** Retries of requests (each retry of a batch counts once). */
  retried: number;
}

interface ProcessLike {
  env?: Record<string, string | undefined>;
  on?(event: 'beforeExit', fn: () => void): unknown;
  off?(event: 'beforeExit', fn: () => void): unknown;
}

interface TimerLike {
  unref?(): void;
}

/** The Node `process` where there is one (not on edge runtimes or in browsers). */
function nodeProcess(): ProcessLike | undefined {
  const p = (globalThis as { process?: ProcessLike }).process;
  return typeof p === 'object' && p !== null ? p : undefined;
}

function unref(t: unknown): void {
  (t as TimerLike | undefined)?.unref?.();
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    // A pending retry alone does not keep the process alive; flush() does, up to its timeout.
    unref(t);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/** The client's abort signal and a per-request timeout as one signal (AbortSignal.any where the runtime has it). */
function requestSignal(outer: AbortSignal, timeoutMs: number): { signal: AbortSignal; done(): void } {
  const timeout = AbortSignal.timeout(timeoutMs);
  if (typeof AbortSignal.any === 'function') return { signal: AbortSignal.any([outer, timeout]), done: () => undefined };
  const c = new AbortController();
  const abort = (): void => c.abort();
  outer.addEventListener('abort', abort, { once: true });
  timeout.addEventListener('abort', abort, { once: true });
  return {
    signal: c.signal,
    done: () => {
      outer.removeEventListener('abort', abort);
      timeout.removeEventListener('abort', abort);
    },
  };
}

async function gzip(text: string): Promise<Uint8Array<ArrayBuffer>> {
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream('gzip'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

const defaultOnError = (e: TraceIngestError): void => {
  console.warn(`trace-ingest: ${e.message} (${e.code}; ${e.spans} span${e.spans === 1 ? '' : 's'} not sent)`);
};

interface PreparedTrace {
  header: string;
  headerBytes: number;
  problem: string | undefined;
}

/**
 * Records traces and sends them to `POST /ingest` in the background: a
 * bounded queue, one request at a time, batches within the contract's
 * limits, retries by the contract's rules. No method throws or rejects.
 */
export class TraceIngest implements SpanSink {
  readonly baseUrl: string;
  readonly recordInputs: boolean;
  readonly recordOutputs: boolean;
  private readonly apiKey: string | undefined;
  private readonly budgetApiKey: string | undefined;
  private readonly onError: (e: TraceIngestError) => void;
  private readonly onWarning: (message: string) => void;
  private readonly flushAt: number;
  private readonly flushAtBytes: number;
  private readonly maxBodyBytes: number;
  private readonly whenFull: 'drop-newest' | 'drop-oldest';
  private readonly gzip: boolean;
  private readonly retry: RetryOptions;
  private readonly requestTimeoutMs: number;
  private readonly flushTimeoutMs: number;
  private readonly fetchFn: typeof globalThis.fetch;
  private readonly queue: SpanQueue;
  private readonly prepared = new WeakMap<Trace, PreparedTrace>();
  private readonly abort = new AbortController();
  /** The server could not be reached since the last answer (reported once per such episode). */
  private unreachable = false;
  private readonly stats: TraceIngestStats = { queued: 0, inFlight: 0, sent: 0, dropped: 0, failed: 0, retried: 0 };
  private pumping: Promise<void> | undefined;
  private interval: ReturnType<typeof setInterval> | undefined;
  private closing: Promise<boolean> | undefined;
  private full = false;
  private exitHook: (() => void) | undefined;
  private exitGaveUp = false;

  constructor(opts: TraceIngestOptions = {}) {
    const env = nodeProcess()?.env ?? {};
    this.baseUrl = (opts.baseUrl ?? env['TRACE_INGEST_URL'] ?? 'http://localhost:4000').replace(/\/+$/, '');
    const key = opts.apiKey ?? env['TRACE_INGEST_API_KEY'];
    this.apiKey = key === undefined || key === '' ? undefined : key;
    const budgetKey = opts.budgetApiKey ?? env['TRACE_INGEST_BUDGET_API_KEY'];
    this.budgetApiKey = budgetKey === undefined || budgetKey === '' ? undefined : budgetKey;
    this.onError = opts.onError ?? defaultOnError;
    this.onWarning = opts.onWarning ?? ((m) => console.warn(`trace-ingest: ${m}`));
    this.flushAt = Math.max(1, opts.flushAt ?? 100);
    this.flushAtBytes = Math.max(1, opts.flushAtBytes ?? 1024 * 1024);
    this.maxBodyBytes = Math.min(opts.maxBodyBytes ?? LIMITS.bodyBytes, LIMITS.bodyBytes * 64);
    this.whenFull = opts.whenQueueFull ?? 'drop-newest';
    this.gzip = (opts.compression ?? 'gzip') === 'gzip' && typeof globalThis.CompressionStream === 'function';
    this.retry = { ...DEFAULT_RETRY, ...opts.retry };
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 30_000;
    this.flushTimeoutMs = opts.flushTimeoutMs ?? 10_000;
    this.fetchFn = opts.fetch ?? globalThis.fetch.bind(globalThis);
    this.recordInputs = opts.recordInputs ?? true;
    this.recordOutputs = opts.recordOutputs ?? true;
    this.queue = new SpanQueue(Math.max(1, opts.maxQueueSpans ?? 10_000), Math.max(1, opts.maxQueueBytes ?? 32 * 1024 * 1024));
    if (this.apiKey === undefined) {
      this.report(new TraceIngestError('no API key: pass apiKey or set TRACE_INGEST_API_KEY; nothing will be sent', 'SDK_NO_API_KEY', 0));
      return;
    }
    this.interval = setInterval(
      () => {
        if (this.queue.spans > 0) this.kick();
      },
      Math.max(10, opts.flushIntervalMs ?? 1000),
    );
    unref(this.interval);
    const proc = nodeProcess();
    if ((opts.flushOnExit ?? true) && typeof proc?.on === 'function') {
      // The queue may still hold spans when the event loop empties (the timers are unref'd).
      this.exitHook = () => {
        if (this.exitGaveUp || (this.queue.spans === 0 && this.pumping === undefined)) return;
        void this.flush().then((ok) => {
          if (!ok) this.exitGaveUp = true;
        });
      };
      proc.on('beforeExit', this.exitHook);
    }
  }

  /** Starts recording a trace. */
  startTrace(opts: TraceStart): Trace {
    return new Trace(this, opts);
  }

  /** Queues a v1 trace built by the caller; each span is checked and queued on its own. */
  send(trace: TraceV1): void {
    try {
      const { spans, ...header } = trace;
      const prepared = this.prepare(header as TraceHeaderV1);
      const list = Array.isArray(spans) ? spans : [];
      for (let i = 0; i < list.length; i++) this.enqueue(prepared, list[i] as SpanV1, `trace ${header.traceId} spans[${i}]`);
    } catch (e) {
      this.report(new TraceIngestError(`could not queue the trace: ${String(e)}`, 'SDK_INTERNAL', 0));
    }
  }

  /** @internal a span of a recorded trace ended. */
  accept(trace: Trace, span: SpanV1): void {
    try {
      let prepared = this.prepared.get(trace);
      if (prepared === undefined) {
        prepared = this.prepare(trace.header);
        this.prepared.set(trace, prepared);
      }
      this.enqueue(prepared, span, `trace ${trace.traceId} span "${span.name}"`);
    } catch (e) {
      this.report(new TraceIngestError(`could not queue the span: ${String(e)}`, 'SDK_INTERNAL', 1));
    }
  }

  getStats(): TraceIngestStats {
    return { ...this.stats, queued: this.queue.spans };
  }

  /**
   * Sends everything queued. Resolves true when the queue is empty, false when
   * `timeoutMs` passed first (sending continues in the background). Never rejects.
   */
  /**
   * This UTC month's budget and spend of the org and, given one, of a
   * customer (GET /v1/budget): exact decimal USD as strings, and the alert
   * percentages crossed. Advisory: spans are priced after the model call, so
   * the application decides whether to refuse the next one. Resolves
   * undefined when the server cannot say (reported to onError), never throws.
   *
   * Needs a key of the `budget:read` scope, which an ingest key does not have
   * (`trace-ingest keys create --org <org> --scope budget:read`): give it as
   * `budgetApiKey` (or TRACE_INGEST_BUDGET_API_KEY); without one, `apiKey` is
   * sent and the server answers 403 unless that key has the scope too. A key
   * limited to named customers needs `customer`, and answers without `org`.
   */
  async budget(customer?: string): Promise<BudgetAnswer | undefined> {
    const key = this.budgetApiKey ?? this.apiKey;
    if (key === undefined) {
      this.report(new TraceIngestError('no API key: pass budgetApiKey (a budget:read key) or set TRACE_INGEST_BUDGET_API_KEY', 'SDK_NO_API_KEY', 0));
      return undefined;
    }
    const url = `${this.baseUrl}/v1/budget${customer === undefined ? '' : `?customer=${encodeURIComponent(customer)}`}`;
    try {
      const res = await this.fetchFn(url, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(this.requestTimeoutMs) });
      const body = (await res.json().catch(() => undefined)) as (BudgetAnswer & { error?: string; code?: string }) | undefined;
      if (!res.ok || body === undefined) {
        this.report(new TraceIngestError(body?.error ?? `GET /v1/budget answered ${res.status}`, body?.code ?? 'SDK_BUDGET', 0, res.status));
        return undefined;
      }
      return body;
    } catch (e) {
      this.report(new TraceIngestError(`GET /v1/budget failed: ${e instanceof Error ? e.message : String(e)}`, 'SDK_NETWORK', 0));
      return undefined;
    }
  }

  flush(timeoutMs: number = this.flushTimeoutMs): Promise<boolean> {
    const drained = (async () => {
      while (this.queue.spans > 0 || this.pumping !== undefined) {
        this.kick();
        if (this.pumping === undefined) return false;
        await this.pumping;
      }
      return true;
    })();
    let timer: ReturnType<typeof setTimeout> | undefined;
    // This timer is ref'd on purpose: it keeps a process that awaits flush() alive until the bound.
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), Math.max(0, timeoutMs));
    });
    return Promise.race([drained, timedOut])
      .catch(() => false)
      .finally(() => clearTimeout(timer));
  }

  /**
   * Stops the timers, sends what is queued (bounded by `timeoutMs`), then
   * abandons what is left (reported to onError). Spans ended afterwards are
   * dropped. Idempotent: later calls return the first call's promise.
   */
  shutdown(timeoutMs: number = this.flushTimeoutMs): Promise<boolean> {
    this.closing ??= (async () => {
      if (this.interval !== undefined) clearInterval(this.interval);
      if (this.exitHook !== undefined) nodeProcess()?.off?.('beforeExit', this.exitHook);
      const ok = await this.flush(timeoutMs);
      if (!ok) {
        this.abort.abort();
        await this.pumping?.catch(() => undefined);
        const left = this.queue.clear();
        if (left > 0) {
          this.stats.failed += left;
          this.report(new TraceIngestError(`shutdown after ${timeoutMs} ms with spans still queued`, 'SDK_SHUTDOWN_TIMEOUT', left));
        }
      }
      return ok;
    })().catch(() => false);
    return this.closing;
  }

  private prepare(header: TraceHeaderV1): PreparedTrace {
    return { ...headerJson(header), problem: traceProblem(header) };
  }

  private enqueue(prepared: PreparedTrace, span: SpanV1, where: string): void {
    if (this.apiKey === undefined) {
      // Said once at construction; each span not sent is still counted.
      this.stats.dropped++;
      return;
    }
    if (this.closing !== undefined) {
      this.stats.dropped++;
      return;
    }
    if (this.whenFull === 'drop-newest' && this.queue.spans >= this.queue.maxSpans) {
      // Full by count: refuse before spending time on checking and serializing.
      this.stats.dropped++;
      this.reportFull();
      return;
    }
    const problem = prepared.problem ?? spanProblem(span);
    if (problem !== undefined) {
      this.stats.failed++;
      this.report(new TraceIngestError(`${where} not sent: ${problem}`, 'SDK_INVALID_SPAN', 1));
      return;
    }
    const json = JSON.stringify(span);
    const item: QueuedSpan = { header: prepared.header, headerBytes: prepared.headerBytes, json, bytes: utf8Bytes(json) };
    if (soloBodyBytes(item) > this.maxBodyBytes) {
      this.stats.failed++;
      this.report(
        new TraceIngestError(
          `${where} not sent: ${item.bytes} bytes of JSON, more than one request may carry (${this.maxBodyBytes} bytes)`,
          'SDK_SPAN_TOO_LARGE',
          1,
        ),
      );
      return;
    }
    if (!this.queue.fits(item.bytes)) {
      if (this.whenFull === 'drop-oldest' && item.bytes <= this.queue.maxBytes) {
        while (!this.queue.fits(item.bytes) && this.queue.shift() !== undefined) this.stats.dropped++;
      }
      if (!this.queue.fits(item.bytes)) {
        this.stats.dropped++;
        this.reportFull();
        return;
      }
      this.reportFull();
    } else this.full = false;
    this.queue.push(item);
    if (this.queue.spans >= this.flushAt || this.queue.bytes >= this.flushAtBytes) this.kick();
  }

  /** Once per episode of a full queue, not once per span. */
  private reportFull(): void {
    if (this.full) return;
    this.full = true;
    this.report(
      new TraceIngestError(
        `queue full (${this.queue.maxSpans} spans / ${this.queue.maxBytes} bytes): ` +
          `dropping the ${this.whenFull === 'drop-oldest' ? 'oldest' : 'newest'} spans until it drains; see getStats().dropped`,
        'SDK_QUEUE_FULL',
        1,
      ),
    );
  }

  private report(e: TraceIngestError): void {
    try {
      this.onError(e);
    } catch {
      // An error callback that throws must not reach the application through the SDK.
    }
  }

  /** Starts the sender unless it runs; one request at a time per client. */
  private kick(): void {
    if (this.pumping !== undefined || this.abort.signal.aborted || this.apiKey === undefined) return;
    this.pumping = this.pump()
      .catch((e: unknown) => this.report(new TraceIngestError(`sender stopped: ${String(e)}`, 'SDK_INTERNAL', 0)))
      .finally(() => {
        this.pumping = undefined;
      });
  }

  private async pump(): Promise<void> {
    while (this.queue.spans > 0 && !this.abort.signal.aborted) {
      const batch = takeBatch(this.queue, this.maxBodyBytes);
      if (batch === undefined) return;
      this.stats.inFlight = batch.spans;
      try {
        await this.sendBatch(batch);
      } finally {
        this.stats.inFlight = 0;
      }
    }
  }

  private async sendBatch(batch: Batch): Promise<void> {
    const body = this.gzip ? await gzip(batch.body) : batch.body;
    const headers: Record<string, string> = { 'content-type': 'application/json', authorization: `Bearer ${this.apiKey ?? ''}` };
    if (this.gzip) headers['content-encoding'] = 'gzip';
    const started = Date.now();
    for (let attempt = 0; ; attempt++) {
      let verdict: ReturnType<typeof classify>;
      let last: TraceIngestError;
      const req = requestSignal(this.abort.signal, this.requestTimeoutMs);
      try {
        const res = await this.fetchFn(`${this.baseUrl}/ingest`, { method: 'POST', headers, body, signal: req.signal });
        const text = await res.text().catch(() => '');
        verdict = classify(res.status, res.headers.get('retry-after'));
        this.unreachable = false;
        if (verdict.kind === 'sent') {
          this.stats.sent += batch.spans;
          return;
        }
        last = errorFromResponse(res.status, text, batch.spans);
      } catch (e) {
        if (this.abort.signal.aborted) {
          this.stats.failed += batch.spans;
          this.report(new TraceIngestError('shutdown while sending', 'SDK_SHUTDOWN_TIMEOUT', batch.spans));
          return;
        }
        verdict = { kind: 'retry' };
        const cause = e instanceof Error && e.cause instanceof Error ? e.cause : e;
        const code = (cause as { code?: unknown } | null)?.code;
        const refused = code === 'ECONNREFUSED';
        const what = refused ? `connection refused to ${this.baseUrl}` : `could not reach ${this.baseUrl}`;
        last = new TraceIngestError(`${what}: ${cause instanceof Error ? cause.message : String(cause)}`, 'SDK_TRANSPORT', batch.spans);
        // A wrong URL (nothing listens, or no such host) is said at once; a slow or dropped request is just retried.
        if ((refused || code === 'ENOTFOUND') && !this.unreachable) {
          // Said at the first failure, not only when the retries give up: a wrong URL shows at once. Once per outage.
          this.unreachable = true;
          try {
            this.onWarning(`${what} (check TRACE_INGEST_URL); retrying`);
          } catch {
            // A warning callback that throws must not reach the application either.
          }
        }
      } finally {
        req.done();
      }
      if (verdict.kind === 'final') {
        this.stats.failed += batch.spans;
        this.report(last);
        return;
      }
      const wait = nextDelay(verdict, attempt, this.retry, Date.now() - started);
      if (wait === undefined || this.abort.signal.aborted) {
        this.stats.failed += batch.spans;
        this.report(
          new TraceIngestError(
            `gave up after ${attempt + 1} attempts in ${Date.now() - started} ms: ${last.message}`,
            last.code,
            batch.spans,
            last.status,
            last.issues,
          ),
        );
        return;
      }
      this.stats.retried++;
      await sleep(wait, this.abort.signal);
    }
  }
}

function errorFromResponse(status: number, text: string, spans: number): TraceIngestError {
  let error = `HTTP ${status}`;
  let code = `HTTP_${status}`;
  let issues: unknown[] | undefined;
  try {
    const b = JSON.parse(text) as { error?: unknown; code?: unknown; issues?: unknown };
    if (typeof b.error === 'string') error = b.error;
    if (typeof b.code === 'string') code = b.code;
    if (Array.isArray(b.issues)) issues = b.issues;
  } catch {
    if (text !== '') error = `HTTP ${status}: ${text.slice(0, 200)}`;
  }
  return new TraceIngestError(error, code, spans, status, issues);
}
