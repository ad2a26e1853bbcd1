-- Two narrow per-day rollups of packages/shared/src/rollups.ts (DAILY_ROLLUPS): customers and
-- models (with provider and span type). Kept like usage_daily (same transaction, same take-backs,
-- same compaction), filled here from the stored spans. usage_daily grows with customers x models
-- a day; these do not, so reports by customer, model or day read them.
CREATE TABLE IF NOT EXISTS customers_daily (
  org_id VARCHAR NOT NULL,
  start_date DATE NOT NULL,
  customer_id VARCHAR NOT NULL,
  customer_name VARCHAR NOT NULL,
  spans BIGINT NOT NULL,
  unpriced BIGINT NOT NULL,
  input_tokens BIGINT NOT NULL,
  cached_input_tokens BIGINT NOT NULL,
  cache_write_input_tokens BIGINT NOT NULL,
  output_tokens BIGINT NOT NULL,
  reasoning_tokens BIGINT NOT NULL,
  total_tokens BIGINT NOT NULL,
  image_count BIGINT NOT NULL,
  web_search_count BIGINT NOT NULL,
  request_count BIGINT NOT NULL,
  input_cost DECIMAL(38,18) NOT NULL,
  output_cost DECIMAL(38,18) NOT NULL,
  reasoning_cost DECIMAL(38,18) NOT NULL,
  cached_input_cost DECIMAL(38,18) NOT NULL,
  cache_write_input_cost DECIMAL(38,18) NOT NULL,
  image_cost DECIMAL(38,18) NOT NULL,
  web_search_cost DECIMAL(38,18) NOT NULL,
  request_cost DECIMAL(38,18) NOT NULL,
  total_cost DECIMAL(38,18) NOT NULL
);
INSERT INTO customers_daily
SELECT org_id, start_date, customer_id, customer_name, sum(1) AS spans, sum(CASE WHEN NOT priced AND model_id <> '' THEN 1 ELSE 0 END) AS unpriced, sum(input_tokens) AS input_tokens, sum(cached_input_tokens) AS cached_input_tokens, sum(cache_write_input_tokens) AS cache_write_input_tokens, sum(output_tokens) AS output_tokens, sum(reasoning_tokens) AS reasoning_tokens, sum(total_tokens) AS total_tokens, sum(image_count) AS image_count, sum(web_search_count) AS web_search_count, sum(request_count) AS request_count, sum(input_cost) AS input_cost, sum(output_cost) AS output_cost, sum(reasoning_cost) AS reasoning_cost, sum(cached_input_cost) AS cached_input_cost, sum(cache_write_input_cost) AS cache_write_input_cost, sum(image_cost) AS image_cost, sum(web_search_cost) AS web_search_cost, sum(request_cost) AS request_cost, sum(total_cost) AS total_cost FROM spans GROUP BY org_id, start_date, customer_id, customer_name;
CREATE TABLE IF NOT EXISTS models_daily (
  org_id VARCHAR NOT NULL,
  start_date DATE NOT NULL,
  model_id VARCHAR NOT NULL,
  provider VARCHAR NOT NULL,
  span_type VARCHAR NOT NULL,
  spans BIGINT NOT NULL,
  unpriced BIGINT NOT NULL,
  input_tokens BIGINT NOT NULL,
  cached_input_tokens BIGINT NOT NULL,
  cache_write_input_tokens BIGINT NOT NULL,
  output_tokens BIGINT NOT NULL,
  reasoning_tokens BIGINT NOT NULL,
  total_tokens BIGINT NOT NULL,
  image_count BIGINT NOT NULL,
  web_search_count BIGINT NOT NULL,
  request_count BIGINT NOT NULL,
  input_cost DECIMAL(38,18) NOT NULL,
  output_cost DECIMAL(38,18) NOT NULL,
  reasoning_cost DECIMAL(38,18) NOT NULL,
  cached_input_cost DECIMAL(38,18) NOT NULL,
  cache_write_input_cost DECIMAL(38,18) NOT NULL,
  image_cost DECIMAL(38,18) NOT NULL,
  web_search_cost DECIMAL(38,18) NOT NULL,
  request_cost DECIMAL(38,18) NOT NULL,
  total_cost DECIMAL(38,18) NOT NULL
);
INSERT INTO models_daily
SELECT org_id, start_date, model_id, provider, span_type, sum(1) AS spans, sum(CASE WHEN NOT priced AND model_id <> '' THEN 1 ELSE 0 END) AS unpriced, sum(input_tokens) AS input_tokens, sum(cached_input_tokens) AS cached_input_tokens, sum(cache_write_input_tokens) AS cache_write_input_tokens, sum(output_tokens) AS output_tokens, sum(reasoning_tokens) AS reasoning_tokens, sum(total_tokens) AS total_tokens, sum(image_count) AS image_count, sum(web_search_count) AS web_search_count, sum(request_count) AS request_count, sum(input_cost) AS input_cost, sum(output_cost) AS output_cost, sum(reasoning_cost) AS reasoning_cost, sum(cached_input_cost) AS cached_input_cost, sum(cache_write_input_cost) AS cache_write_input_cost, sum(image_cost) AS image_cost, sum(web_search_cost) AS web_search_cost, sum(request_cost) AS request_cost, sum(total_cost) AS total_cost FROM spans GROUP BY org_id, start_date, model_id, provider, span_type;
