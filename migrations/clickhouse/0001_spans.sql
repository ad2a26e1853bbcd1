-- The spans table of packages/shared/src/rows.ts (SPAN_COLUMNS), the same column
-- names as the DuckDB store. One schema for ClickHouse 18.16 (Debian's package)
-- and current servers, so only what 18.16 has: no DateTime64, Map, Bool, CODEC,
-- TTL or skip indexes; LowCardinality needs allow_experimental_low_cardinality_type
-- there, which the migration runner sends to servers older than 20.
--
-- A span is identified by (org_id, trace_id, span_id). A retried or replayed
-- insert, or a repricing, writes another copy; ReplacingMergeTree keeps the copy
-- with the greatest received_at. It only collapses copies with equal sorting keys
-- in the same partition, so the key holds nothing a later copy could change:
-- start_date comes from the span's own start time, while customer_id and model_id
-- (which a client may fill in on a later send of the same trace) stay out of it.
-- Merges are eventual: read with FINAL (or argMax / LIMIT 1 BY) for one row per span.
CREATE TABLE IF NOT EXISTS spans (
  org_id String,
  key_prefix LowCardinality(String),
  received_at Int64,
  trace_id String,
  trace_name String,
  agent_name LowCardinality(String),
  workflow_name LowCardinality(String),
  workflow_run_id String,
  session_id String,
  customer_id String,
  customer_name String,
  customer_image_url String,
  trace_metadata_keys Array(String),
  trace_metadata_values Array(String),
  span_id String,
  parent_span_id String,
  span_type LowCardinality(String),
  name String,
  start_time Int64,
  end_time Int64,
  start_date Date,
  duration_ms Int64,
  status LowCardinality(String),
  error_message String,
  provider LowCardinality(String),
  model_id LowCardinality(String),
  input_tokens Int64,
  output_tokens Int64,
  total_tokens Int64,
  reasoning_tokens Int64,
  cached_input_tokens Int64,
  cache_write_input_tokens Int64,
  image_count Int64,
  web_search_count Int64,
  request_count Int64,
  input_cost Decimal(38, 18),
  output_cost Decimal(38, 18),
  reasoning_cost Decimal(38, 18),
  cached_input_cost Decimal(38, 18),
  cache_write_input_cost Decimal(38, 18),
  image_cost Decimal(38, 18),
  web_search_cost Decimal(38, 18),
  request_cost Decimal(38, 18),
  total_cost Decimal(38, 18),
  priced UInt8,
  price_source LowCardinality(String),
  ttft_ms Nullable(Float64),
  chunk_offsets Array(Int64),
  chunk_tokens Array(Int64),
  reasoning_offsets Array(Int64),
  reasoning_chunk_tokens Array(Int64),
  reasoning_duration_ms Nullable(Int64),
  input String,
  output String,
  tool_catalog String,
  model_call_ms Nullable(Int64),
  system_fingerprint LowCardinality(String),
  safety_metadata String,
  sources String,
  rate_limit_requests_limit Nullable(Int64),
  rate_limit_requests_remaining Nullable(Int64),
  rate_limit_requests_reset_ms Nullable(Int64),
  rate_limit_tokens_limit Nullable(Int64),
  rate_limit_tokens_remaining Nullable(Int64),
  rate_limit_tokens_reset_ms Nullable(Int64),
  span_metadata_keys Array(String),
  span_metadata_values Array(String),
  -- Metadata as [key, value] pairs, computed on read: arrayJoin(span_metadata) AS kv ... kv[1], kv[2].
  -- Not Map (absent in 18.16) nor Array(Tuple) (18.16 stores that as two real Nested columns).
  trace_metadata Array(Array(String)) ALIAS arrayMap((k, v) -> [k, v], trace_metadata_keys, trace_metadata_values),
  span_metadata Array(Array(String)) ALIAS arrayMap((k, v) -> [k, v], span_metadata_keys, span_metadata_values)
)
ENGINE = ReplacingMergeTree(received_at)
PARTITION BY toYYYYMM(start_date)
ORDER BY (org_id, start_date, trace_id, span_id)
SETTINGS index_granularity = 8192;
