-- Two narrow per-day rollups of packages/shared/src/rollups.ts (DAILY_ROLLUPS): customers and
-- models (with provider and span type), as usage_daily (0002_rollups): SummingMergeTree tables fed
-- by views, measures weighted by rollup_weight, filled once from the stored spans before their
-- views start. usage_daily grows with customers x models a day; these do not.
CREATE TABLE IF NOT EXISTS customers_daily (
  org_id String,
  start_date Date,
  customer_id String,
  customer_name String,
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
ORDER BY (org_id, start_date, customer_id, customer_name);
INSERT INTO customers_daily
SELECT org_id, start_date, customer_id, customer_name, sum(toInt64(1) * rollup_weight) AS spans, sum(toInt64(if(priced = 0 AND model_id != '', 1, 0)) * rollup_weight) AS unpriced, sum(input_tokens * rollup_weight) AS input_tokens, sum(cached_input_tokens * rollup_weight) AS cached_input_tokens, sum(cache_write_input_tokens * rollup_weight) AS cache_write_input_tokens, sum(output_tokens * rollup_weight) AS output_tokens, sum(reasoning_tokens * rollup_weight) AS reasoning_tokens, sum(total_tokens * rollup_weight) AS total_tokens, sum(image_count * rollup_weight) AS image_count, sum(web_search_count * rollup_weight) AS web_search_count, sum(request_count * rollup_weight) AS request_count, sum(input_cost * rollup_weight) AS input_cost, sum(output_cost * rollup_weight) AS output_cost, sum(reasoning_cost * rollup_weight) AS reasoning_cost, sum(cached_input_cost * rollup_weight) AS cached_input_cost, sum(cache_write_input_cost * rollup_weight) AS cache_write_input_cost, sum(image_cost * rollup_weight) AS image_cost, sum(web_search_cost * rollup_weight) AS web_search_cost, sum(request_cost * rollup_weight) AS request_cost, sum(total_cost * rollup_weight) AS total_cost FROM spans FINAL WHERE (SELECT count() FROM customers_daily) = 0 GROUP BY org_id, start_date, customer_id, customer_name;
CREATE MATERIALIZED VIEW IF NOT EXISTS customers_daily_mv TO customers_daily AS
SELECT org_id, start_date, customer_id, customer_name, sum(toInt64(1) * rollup_weight) AS spans, sum(toInt64(if(priced = 0 AND model_id != '', 1, 0)) * rollup_weight) AS unpriced, sum(input_tokens * rollup_weight) AS input_tokens, sum(cached_input_tokens * rollup_weight) AS cached_input_tokens, sum(cache_write_input_tokens * rollup_weight) AS cache_write_input_tokens, sum(output_tokens * rollup_weight) AS output_tokens, sum(reasoning_tokens * rollup_weight) AS reasoning_tokens, sum(total_tokens * rollup_weight) AS total_tokens, sum(image_count * rollup_weight) AS image_count, sum(web_search_count * rollup_weight) AS web_search_count, sum(request_count * rollup_weight) AS request_count, sum(input_cost * rollup_weight) AS input_cost, sum(output_cost * rollup_weight) AS output_cost, sum(reasoning_cost * rollup_weight) AS reasoning_cost, sum(cached_input_cost * rollup_weight) AS cached_input_cost, sum(cache_write_input_cost * rollup_weight) AS cache_write_input_cost, sum(image_cost * rollup_weight) AS image_cost, sum(web_search_cost * rollup_weight) AS web_search_cost, sum(request_cost * rollup_weight) AS request_cost, sum(total_cost * rollup_weight) AS total_cost FROM spans GROUP BY org_id, start_date, customer_id, customer_name;
CREATE TABLE IF NOT EXISTS models_daily (
  org_id String,
  start_date Date,
  model_id LowCardinality(String),
  provider LowCardinality(String),
  span_type LowCardinality(String),
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
ORDER BY (org_id, start_date, model_id, provider, span_type);
INSERT INTO models_daily
SELECT org_id, start_date, model_id, provider, span_type, sum(toInt64(1) * rollup_weight) AS spans, sum(toInt64(if(priced = 0 AND model_id != '', 1, 0)) * rollup_weight) AS unpriced, sum(input_tokens * rollup_weight) AS input_tokens, sum(cached_input_tokens * rollup_weight) AS cached_input_tokens, sum(cache_write_input_tokens * rollup_weight) AS cache_write_input_tokens, sum(output_tokens * rollup_weight) AS output_tokens, sum(reasoning_tokens * rollup_weight) AS reasoning_tokens, sum(total_tokens * rollup_weight) AS total_tokens, sum(image_count * rollup_weight) AS image_count, sum(web_search_count * rollup_weight) AS web_search_count, sum(request_count * rollup_weight) AS request_count, sum(input_cost * rollup_weight) AS input_cost, sum(output_cost * rollup_weight) AS output_cost, sum(reasoning_cost * rollup_weight) AS reasoning_cost, sum(cached_input_cost * rollup_weight) AS cached_input_cost, sum(cache_write_input_cost * rollup_weight) AS cache_write_input_cost, sum(image_cost * rollup_weight) AS image_cost, sum(web_search_cost * rollup_weight) AS web_search_cost, sum(request_cost * rollup_weight) AS request_cost, sum(total_cost * rollup_weight) AS total_cost FROM spans FINAL WHERE (SELECT count() FROM models_daily) = 0 GROUP BY org_id, start_date, model_id, provider, span_type;
CREATE MATERIALIZED VIEW IF NOT EXISTS models_daily_mv TO models_daily AS
SELECT org_id, start_date, model_id, provider, span_type, sum(toInt64(1) * rollup_weight) AS spans, sum(toInt64(if(priced = 0 AND model_id != '', 1, 0)) * rollup_weight) AS unpriced, sum(input_tokens * rollup_weight) AS input_tokens, sum(cached_input_tokens * rollup_weight) AS cached_input_tokens, sum(cache_write_input_tokens * rollup_weight) AS cache_write_input_tokens, sum(output_tokens * rollup_weight) AS output_tokens, sum(reasoning_tokens * rollup_weight) AS reasoning_tokens, sum(total_tokens * rollup_weight) AS total_tokens, sum(image_count * rollup_weight) AS image_count, sum(web_search_count * rollup_weight) AS web_search_count, sum(request_count * rollup_weight) AS request_count, sum(input_cost * rollup_weight) AS input_cost, sum(output_cost * rollup_weight) AS output_cost, sum(reasoning_cost * rollup_weight) AS reasoning_cost, sum(cached_input_cost * rollup_weight) AS cached_input_cost, sum(cache_write_input_cost * rollup_weight) AS cache_write_input_cost, sum(image_cost * rollup_weight) AS image_cost, sum(web_search_cost * rollup_weight) AS web_search_cost, sum(request_cost * rollup_weight) AS request_cost, sum(total_cost * rollup_weight) AS total_cost FROM spans GROUP BY org_id, start_date, model_id, provider, span_type;
