-- Two narrow per-day rollups of packages/shared/src/rollups.ts (DAILY_ROLLUPS): sessions and
-- workflows, as usage_daily (0002_rollups): SummingMergeTree tables fed by views, measures
-- weighted by rollup_weight, filled once from the stored spans before their views start.
CREATE TABLE IF NOT EXISTS sessions_daily (
  org_id String,
  start_date Date,
  customer_id String,
  session_id String,
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
ENGINE = SummingMergeTree()
PARTITION BY toYYYYMM(start_date)
ORDER BY (org_id, start_date, customer_id, session_id);
INSERT INTO sessions_daily
SELECT org_id, start_date, customer_id, session_id, sum(toInt64(1) * rollup_weight) AS spans, sum(toInt64(if(priced = 0 AND model_id != '', 1, 0)) * rollup_weight) AS unpriced, sum(input_tokens * rollup_weight) AS input_tokens, sum(cached_input_tokens * rollup_weight) AS cached_input_tokens, sum(cache_write_input_tokens * rollup_weight) AS cache_write_input_tokens, sum(output_tokens * rollup_weight) AS output_tokens, sum(reasoning_tokens * rollup_weight) AS reasoning_tokens, sum(total_tokens * rollup_weight) AS total_tokens, sum(image_count * rollup_weight) AS image_count, sum(web_search_count * rollup_weight) AS web_search_count, sum(request_count * rollup_weight) AS request_count, sum(input_cost * rollup_weight) AS input_cost, sum(output_cost * rollup_weight) AS output_cost, sum(reasoning_cost * rollup_weight) AS reasoning_cost, sum(cached_input_cost * rollup_weight) AS cached_input_cost, sum(cache_write_input_cost * rollup_weight) AS cache_write_input_cost, sum(image_cost * rollup_weight) AS image_cost, sum(web_search_cost * rollup_weight) AS web_search_cost, sum(request_cost * rollup_weight) AS request_cost, sum(total_cost * rollup_weight) AS total_cost FROM spans FINAL WHERE (SELECT count() FROM sessions_daily) = 0 GROUP BY org_id, start_date, customer_id, session_id;
CREATE MATERIALIZED VIEW IF NOT EXISTS sessions_daily_mv TO sessions_daily AS
SELECT org_id, start_date, customer_id, session_id, sum(toInt64(1) * rollup_weight) AS spans, sum(toInt64(if(priced = 0 AND model_id != '', 1, 0)) * rollup_weight) AS unpriced, sum(input_tokens * rollup_weight) AS input_tokens, sum(cached_input_tokens * rollup_weight) AS cached_input_tokens, sum(cache_write_input_tokens * rollup_weight) AS cache_write_input_tokens, sum(output_tokens * rollup_weight) AS output_tokens, sum(reasoning_tokens * rollup_weight) AS reasoning_tokens, sum(total_tokens * rollup_weight) AS total_tokens, sum(image_count * rollup_weight) AS image_count, sum(web_search_count * rollup_weight) AS web_search_count, sum(request_count * rollup_weight) AS request_count, sum(input_cost * rollup_weight) AS input_cost, sum(output_cost * rollup_weight) AS output_cost, sum(reasoning_cost * rollup_weight) AS reasoning_cost, sum(cached_input_cost * rollup_weight) AS cached_input_cost, sum(cache_write_input_cost * rollup_weight) AS cache_write_input_cost, sum(image_cost * rollup_weight) AS image_cost, sum(web_search_cost * rollup_weight) AS web_search_cost, sum(request_cost * rollup_weight) AS request_cost, sum(total_cost * rollup_weight) AS total_cost FROM spans GROUP BY org_id, start_date, customer_id, session_id;
CREATE TABLE IF NOT EXISTS workflows_daily (
  org_id String,
  start_date Date,
  workflow_name LowCardinality(String),
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
ENGINE = SummingMergeTree()
PARTITION BY toYYYYMM(start_date)
ORDER BY (org_id, start_date, workflow_name);
INSERT INTO workflows_daily
SELECT org_id, start_date, workflow_name, sum(toInt64(1) * rollup_weight) AS spans, sum(toInt64(if(priced = 0 AND model_id != '', 1, 0)) * rollup_weight) AS unpriced, sum(input_tokens * rollup_weight) AS input_tokens, sum(cached_input_tokens * rollup_weight) AS cached_input_tokens, sum(cache_write_input_tokens * rollup_weight) AS cache_write_input_tokens, sum(output_tokens * rollup_weight) AS output_tokens, sum(reasoning_tokens * rollup_weight) AS reasoning_tokens, sum(total_tokens * rollup_weight) AS total_tokens, sum(image_count * rollup_weight) AS image_count, sum(web_search_count * rollup_weight) AS web_search_count, sum(request_count * rollup_weight) AS request_count, sum(input_cost * rollup_weight) AS input_cost, sum(output_cost * rollup_weight) AS output_cost, sum(reasoning_cost * rollup_weight) AS reasoning_cost, sum(cached_input_cost * rollup_weight) AS cached_input_cost, sum(cache_write_input_cost * rollup_weight) AS cache_write_input_cost, sum(image_cost * rollup_weight) AS image_cost, sum(web_search_cost * rollup_weight) AS web_search_cost, sum(request_cost * rollup_weight) AS request_cost, sum(total_cost * rollup_weight) AS total_cost FROM spans FINAL WHERE (SELECT count() FROM workflows_daily) = 0 GROUP BY org_id, start_date, workflow_name;
CREATE MATERIALIZED VIEW IF NOT EXISTS workflows_daily_mv TO workflows_daily AS
SELECT org_id, start_date, workflow_name, sum(toInt64(1) * rollup_weight) AS spans, sum(toInt64(if(priced = 0 AND model_id != '', 1, 0)) * rollup_weight) AS unpriced, sum(input_tokens * rollup_weight) AS input_tokens, sum(cached_input_tokens * rollup_weight) AS cached_input_tokens, sum(cache_write_input_tokens * rollup_weight) AS cache_write_input_tokens, sum(output_tokens * rollup_weight) AS output_tokens, sum(reasoning_tokens * rollup_weight) AS reasoning_tokens, sum(total_tokens * rollup_weight) AS total_tokens, sum(image_count * rollup_weight) AS image_count, sum(web_search_count * rollup_weight) AS web_search_count, sum(request_count * rollup_weight) AS request_count, sum(input_cost * rollup_weight) AS input_cost, sum(output_cost * rollup_weight) AS output_cost, sum(reasoning_cost * rollup_weight) AS reasoning_cost, sum(cached_input_cost * rollup_weight) AS cached_input_cost, sum(cache_write_input_cost * rollup_weight) AS cache_write_input_cost, sum(image_cost * rollup_weight) AS image_cost, sum(web_search_cost * rollup_weight) AS web_search_cost, sum(request_cost * rollup_weight) AS request_cost, sum(total_cost * rollup_weight) AS total_cost FROM spans GROUP BY org_id, start_date, workflow_name;
