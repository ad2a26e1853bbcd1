-- Per-day top lists (packages/store/src/clickhouse-top-lists.ts): each day's costliest traces and
-- sessions, and every one seen on more than one day (multi), as a read built them (`build`,
-- increasing). A build's rows replace the previous build's rows of the same day and group;
-- readers take each day's latest build (top_list_marks, with the server's clock when it began).
-- top_list_changes records, through a view on spans, when each org's day last got rows (any
-- insert: new spans, re-sent spans, a reprice's corrections, an erasure's), and the days a build
-- found lacking a group of several days; a list built at least a margin after its day's last
-- change is current. Days already stored are recorded as changed now, so their lists are built
-- on first read.
CREATE TABLE IF NOT EXISTS trace_tops (
  org_id String,
  start_date Date,
  build UInt64,
  trace_id String,
  multi UInt8,
  spans Int64,
  unpriced Int64,
  input_tokens Int64,
  cached_input_tokens Int64,
  cache_write_input_tokens Int64,
  output_tokens Int64,
  reasoning_tokens Int64,
  total_tokens Int64,
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
  name_c String,
  customer_c String
)
ENGINE = ReplacingMergeTree(build)
PARTITION BY toYYYYMM(start_date)
ORDER BY (org_id, start_date, trace_id);
CREATE TABLE IF NOT EXISTS session_tops (
  org_id String,
  start_date Date,
  build UInt64,
  session_id String,
  multi UInt8,
  spans Int64,
  unpriced Int64,
  input_tokens Int64,
  cached_input_tokens Int64,
  cache_write_input_tokens Int64,
  output_tokens Int64,
  reasoning_tokens Int64,
  total_tokens Int64,
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
  total_cost Decimal(38, 18)
)
ENGINE = ReplacingMergeTree(build)
PARTITION BY toYYYYMM(start_date)
ORDER BY (org_id, start_date, session_id);
CREATE TABLE IF NOT EXISTS top_list_marks (
  org_id String,
  list String,
  list_day Date,
  build UInt64,
  built_at DateTime,
  groups UInt64
)
ENGINE = ReplacingMergeTree(build)
ORDER BY (org_id, list, list_day);
CREATE TABLE IF NOT EXISTS top_list_changes (
  org_id String,
  start_date Date,
  changed_at DateTime
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY (org_id, start_date);
CREATE MATERIALIZED VIEW IF NOT EXISTS top_list_changes_mv TO top_list_changes AS
SELECT org_id, start_date, now() AS changed_at FROM spans GROUP BY org_id, start_date;
INSERT INTO top_list_changes SELECT org_id, start_date, now() AS changed_at FROM traces GROUP BY org_id, start_date;
