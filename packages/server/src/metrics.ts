import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Prometheus metrics of one server process. Labels never carry keys or
 * other secrets; org ids are deliberately left out to keep cardinality flat.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'trace_ingest_requests_total',
    help: 'Batches (POST /ingest, POST /v1/traces and OTLP/gRPC) by HTTP status (on OTLP/gRPC, the status the catalog gives the error) and error code',
    labelNames: ['status', 'code'] as const,
    registers: [this.registry],
  });
  readonly httpRequests = new Counter({
    name: 'trace_ingest_http_requests_total',
    help: 'HTTP requests by route, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
  });
  readonly authFailures = new Counter({
    name: 'trace_ingest_auth_failures_total',
    help: 'Requests refused for a wrong API key, console token or metrics token, by listener (ingest, console, metrics)',
    labelNames: ['listener'] as const,
    registers: [this.registry],
  });
  readonly authRefused = new Counter({
    name: 'trace_ingest_auth_limited_total',
    help: 'Requests refused (429) because their client address is over its failed-authentication limit, by listener',
    labelNames: ['listener'] as const,
    registers: [this.registry],
  });
  readonly grpcRequests = new Counter({
    name: 'trace_ingest_grpc_requests_total',
    help: 'OTLP/gRPC calls by method and gRPC status code',
    labelNames: ['method', 'code'] as const,
    registers: [this.registry],
  });
  readonly batchesRejected = new Counter({
    name: 'trace_ingest_batches_rejected_total',
    help:
      'Batches (POST /ingest, POST /v1/traces and OTLP/gRPC) refused, by reason ' +
      '(size, auth, rate_limit, quota, validation, aborted, draining, buffer_full, error)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly unpricedByModel = new Counter({
    name: 'trace_ingest_unpriced_spans_by_model_total',
    help: 'Accepted spans whose model has no price, by provider and model (at most 200 distinct models; the rest as "other")',
    labelNames: ['provider', 'model'] as const,
    registers: [this.registry],
  });
  readonly bufferRows = new Gauge({
    name: 'trace_ingest_buffer_rows',
    help: 'Rows in the write log not yet confirmed by the span store (rows of segments left by an earlier run count once read)',
    registers: [this.registry],
  });
  readonly rowsPerFlush = new Histogram({
    name: 'trace_ingest_rows_per_flush',
    help: 'Rows in one confirmed insert into the span store',
    buckets: [1, 10, 100, 500, 1000, 5000, 10_000, 50_000, 100_000],
    registers: [this.registry],
  });
  readonly spansAccepted = new Counter({ name: 'trace_ingest_spans_accepted_total', help: 'Span rows answered 202', registers: [this.registry] });
  readonly spansBefore2001 = new Counter({
    name: 'trace_ingest_spans_before_2001_total',
    help: 'Accepted spans whose start time is before 2001 (times sent in seconds instead of milliseconds?); stored as sent',
    registers: [this.registry],
  });
  readonly spansUnpriced = new Counter({
    name: 'trace_ingest_spans_unpriced_total',
    help: 'Accepted spans with a model but no price',
    registers: [this.registry],
  });
  readonly requestDuration = new Histogram({
    name: 'trace_ingest_request_duration_seconds',
    help: 'Batch latency (POST /ingest, POST /v1/traces and OTLP/gRPC), accepted requests',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
  readonly bufferBytes = new Gauge({
    name: 'trace_ingest_buffer_bytes',
    help: 'Bytes in the write log not yet confirmed by the span store',
    registers: [this.registry],
  });
  readonly bufferSegments = new Gauge({ name: 'trace_ingest_buffer_segments', help: 'Write log segments not yet retired', registers: [this.registry] });
  readonly bodySlotsHeld = new Gauge({
    name: 'trace_ingest_body_slots_held',
    help: 'Large or compressed request bodies being read now (at most MAX_CONCURRENT_BODIES)',
    registers: [this.registry],
  });
  readonly bodySlotsWaiting = new Gauge({
    name: 'trace_ingest_body_slots_waiting',
    help: 'Large or compressed request bodies waiting for a body slot',
    registers: [this.registry],
  });
  readonly bufferFull = new Counter({
    name: 'trace_ingest_buffer_full_total',
    help: 'Requests refused with 503 because the write log was full',
    registers: [this.registry],
  });
  readonly quotaOwedSpans = new Gauge({
    name: 'trace_ingest_quota_owed_spans',
    help: 'Accepted spans not yet added to the quota usage because the key store (or Redis) failed; retried',
    registers: [this.registry],
  });
  readonly rowsFlushed = new Counter({ name: 'trace_ingest_rows_flushed_total', help: 'Rows confirmed by the span store', registers: [this.registry] });
  readonly backlogFlushes = new Counter({
    name: 'trace_ingest_backlog_flushes_total',
    help:
      'Confirmed inserts larger than FLUSH_MAX_ROWS or FLUSH_MAX_BYTES, taken while more than one such insert waited ' +
      'or gathered from sustained traffic (FLUSH_GATHER_MS; up to FLUSH_BACKLOG_MAX_ROWS and FLUSH_BACKLOG_MAX_BYTES)',
    registers: [this.registry],
  });
  readonly flushDuration = new Histogram({
    name: 'trace_ingest_flush_duration_seconds',
    help: 'Duration of one confirmed insert into the span store',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly storeErrors = new Counter({
    name: 'trace_ingest_store_errors_total',
    help: 'Failed inserts into the span store (retried)',
    registers: [this.registry],
  });
  readonly budgetSpend = new Gauge({
    name: 'trace_ingest_budget_spend_usd',
    help:
      'This UTC month\'s spend: per org (budget = its budget\'s id, customer=""), and per customer with a budget of their own ' +
      "(the budget's id; the customer id only with METRICS_CUSTOMER_LABELS)",
    labelNames: ['org', 'budget', 'customer'] as const,
    registers: [this.registry],
  });
  readonly budgetAmount = new Gauge({
    name: 'trace_ingest_budget_usd',
    help: 'Monthly budgets, by budget id: per org (customer="") and per customer (its id only with METRICS_CUSTOMER_LABELS)',
    labelNames: ['org', 'budget', 'customer'] as const,
    registers: [this.registry],
  });
  readonly budgetProjected = new Gauge({
    name: 'trace_ingest_budget_projected_usd',
    help: "This UTC month's projected spend at its end, with the labels of trace_ingest_budget_spend_usd",
    labelNames: ['org', 'budget', 'customer'] as const,
    registers: [this.registry],
  });
  readonly budgetAlerts = new Counter({
    name: 'trace_ingest_budget_alerts_total',
    help: 'Alerts recorded by this replica, by kind (threshold crossed, projected to exceed, spend anomaly)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly budgetDeliveries = new Counter({
    name: 'trace_ingest_budget_deliveries_total',
    help: 'Budget alert webhook posts, by outcome (delivered, failed: retried with backoff)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly deadLetterRows = new Counter({
    name: 'trace_ingest_dead_letter_rows_total',
    help: 'Rows the span store refused permanently, written to the dead-letter file',
    registers: [this.registry],
  });
  readonly walDamagedRecords = new Counter({
    name: 'trace_ingest_wal_damaged_records_total',
    help: 'Write-log records that failed their checksum and were skipped (their bytes are in the dead-letter folder)',
    registers: [this.registry],
  });
  readonly walUnreadableSpans = new Counter({
    name: 'trace_ingest_wal_unreadable_spans_total',
    help: 'Acknowledged spans in damaged write-log records that could not be read',
    registers: [this.registry],
  });
  readonly walMissingSegments = new Counter({
    name: 'trace_ingest_wal_missing_segments_total',
    help: "Write-log segments found missing (expected by the log's checkpoint or between others, or removed before they were stored)",
    registers: [this.registry],
  });
  readonly flushFailures = new Counter({
    name: 'trace_ingest_flush_failures_total',
    help: 'Flushes of the write log that failed before reaching the span store (the log logs once per change of reason)',
    registers: [this.registry],
  });
  readonly retentionDeleted = new Counter({
    name: 'trace_ingest_retention_deleted_rows_total',
    help: 'Span rows deleted by retention (their costs stay in the daily rollups)',
    registers: [this.registry],
  });
  readonly retentionEmptied = new Counter({
    name: 'trace_ingest_retention_emptied_texts_total',
    help: 'Span rows whose texts were emptied by text retention',
    registers: [this.registry],
  });
  readonly contentRedacted = new Counter({
    name: 'trace_ingest_content_policy_spans_total',
    help: "Spans written under an org's content policy (redaction rules or no-text)",
    registers: [this.registry],
  });
  readonly storeBytes = new Gauge({
    name: 'trace_ingest_store_bytes',
    help: 'Bytes on disk per store: spans (the span store) and write_log',
    labelNames: ['store'] as const,
    registers: [this.registry],
  });
  readonly bytesPerSpan = new Gauge({ name: 'trace_ingest_store_bytes_per_span', help: 'Span store bytes per stored span', registers: [this.registry] });
  readonly ingestRate = new Gauge({
    name: 'trace_ingest_spans_received_per_second',
    help: 'Spans stored with a received time in the last hour or day, per second',
    labelNames: ['window'] as const,
    registers: [this.registry],
  });
  readonly diskFree = new Gauge({ name: 'trace_ingest_disk_free_bytes', help: "Free bytes on the span store's disk", registers: [this.registry] });
  readonly daysUntilFull = new Gauge({
    name: 'trace_ingest_disk_days_until_full',
    help: "Days until the span store's disk is full at the ingest rate of the last hour or day, whichever is higher (absent: not filling)",
    registers: [this.registry],
  });
  readonly storeUp = new Gauge({ name: 'trace_ingest_store_up', help: '1 while the last insert into the span store succeeded', registers: [this.registry] });

  private readonly unpricedModels = new Set<string>();

  /** Counts unpriced spans per model without letting arbitrary model names grow the label set without bound. */
  countUnpriced(provider: string, model: string, n = 1): void {
    const id = `${provider}\u0000${model}`;
    if (!this.unpricedModels.has(id) && this.unpricedModels.size >= 200) {
      this.unpricedByModel.inc({ provider: 'other', model: 'other' }, n);
      return;
    }
    this.unpricedModels.add(id);
    this.unpricedByModel.inc({ provider, model }, n);
  }

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    if (opts.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'trace_ingest_' });
    this.storeUp.set(1);
  }
}
