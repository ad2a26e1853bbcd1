-- The billing dimensions of packages/shared/src/rows.ts: the service tier and region a span was
-- billed in, its one-hour cache writes and audio tokens, and their costs. A line written before
-- them lacks their keys; the bulk load reads those as '' and 0 (duckdb-migrations.ts).
ALTER TABLE spans ADD COLUMN IF NOT EXISTS service_tier VARCHAR DEFAULT '';
ALTER TABLE spans ALTER COLUMN service_tier SET NOT NULL;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS region VARCHAR DEFAULT '';
ALTER TABLE spans ALTER COLUMN region SET NOT NULL;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS cache_write_1h_input_tokens BIGINT DEFAULT 0;
ALTER TABLE spans ALTER COLUMN cache_write_1h_input_tokens SET NOT NULL;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS audio_input_tokens BIGINT DEFAULT 0;
ALTER TABLE spans ALTER COLUMN audio_input_tokens SET NOT NULL;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS cached_audio_input_tokens BIGINT DEFAULT 0;
ALTER TABLE spans ALTER COLUMN cached_audio_input_tokens SET NOT NULL;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS audio_output_tokens BIGINT DEFAULT 0;
ALTER TABLE spans ALTER COLUMN audio_output_tokens SET NOT NULL;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS cache_write_1h_input_cost DECIMAL(38,18) DEFAULT 0;
ALTER TABLE spans ALTER COLUMN cache_write_1h_input_cost SET NOT NULL;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS audio_input_cost DECIMAL(38,18) DEFAULT 0;
ALTER TABLE spans ALTER COLUMN audio_input_cost SET NOT NULL;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS cached_audio_input_cost DECIMAL(38,18) DEFAULT 0;
ALTER TABLE spans ALTER COLUMN cached_audio_input_cost SET NOT NULL;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS audio_output_cost DECIMAL(38,18) DEFAULT 0;
ALTER TABLE spans ALTER COLUMN audio_output_cost SET NOT NULL;
-- The rollups gain the new measures in MEASURES order (packages/shared/src/rollups.ts), which their
-- writes rely on: each table is copied into one of that shape, its rows' new measures 0.
ALTER TABLE usage_daily RENAME TO usage_daily_before_0008;
CREATE TABLE usage_daily (
  org_id VARCHAR NOT NULL,
  start_date DATE NOT NULL,
  customer_id VARCHAR NOT NULL,
  customer_name VARCHAR NOT NULL,
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
  cache_write_1h_input_tokens BIGINT NOT NULL,
  audio_input_tokens BIGINT NOT NULL,
  cached_audio_input_tokens BIGINT NOT NULL,
  audio_output_tokens BIGINT NOT NULL,
  input_cost DECIMAL(38,18) NOT NULL,
  output_cost DECIMAL(38,18) NOT NULL,
  reasoning_cost DECIMAL(38,18) NOT NULL,
  cached_input_cost DECIMAL(38,18) NOT NULL,
  cache_write_input_cost DECIMAL(38,18) NOT NULL,
  image_cost DECIMAL(38,18) NOT NULL,
  web_search_cost DECIMAL(38,18) NOT NULL,
  request_cost DECIMAL(38,18) NOT NULL,
  cache_write_1h_input_cost DECIMAL(38,18) NOT NULL,
  audio_input_cost DECIMAL(38,18) NOT NULL,
  cached_audio_input_cost DECIMAL(38,18) NOT NULL,
  audio_output_cost DECIMAL(38,18) NOT NULL,
  total_cost DECIMAL(38,18) NOT NULL
);
INSERT INTO usage_daily SELECT org_id, start_date, customer_id, customer_name, model_id, provider, span_type, spans, unpriced, input_tokens, cached_input_tokens, cache_write_input_tokens, output_tokens, reasoning_tokens, total_tokens, image_count, web_search_count, request_count, 0 AS cache_write_1h_input_tokens, 0 AS audio_input_tokens, 0 AS cached_audio_input_tokens, 0 AS audio_output_tokens, input_cost, output_cost, reasoning_cost, cached_input_cost, cache_write_input_cost, image_cost, web_search_cost, request_cost, CAST(0 AS DECIMAL(38,18)) AS cache_write_1h_input_cost, CAST(0 AS DECIMAL(38,18)) AS audio_input_cost, CAST(0 AS DECIMAL(38,18)) AS cached_audio_input_cost, CAST(0 AS DECIMAL(38,18)) AS audio_output_cost, total_cost FROM usage_daily_before_0008;
DROP TABLE usage_daily_before_0008;
ALTER TABLE customers_daily RENAME TO customers_daily_before_0008;
CREATE TABLE customers_daily (
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
  cache_write_1h_input_tokens BIGINT NOT NULL,
  audio_input_tokens BIGINT NOT NULL,
  cached_audio_input_tokens BIGINT NOT NULL,
  audio_output_tokens BIGINT NOT NULL,
  input_cost DECIMAL(38,18) NOT NULL,
  output_cost DECIMAL(38,18) NOT NULL,
  reasoning_cost DECIMAL(38,18) NOT NULL,
  cached_input_cost DECIMAL(38,18) NOT NULL,
  cache_write_input_cost DECIMAL(38,18) NOT NULL,
  image_cost DECIMAL(38,18) NOT NULL,
  web_search_cost DECIMAL(38,18) NOT NULL,
  request_cost DECIMAL(38,18) NOT NULL,
  cache_write_1h_input_cost DECIMAL(38,18) NOT NULL,
  audio_input_cost DECIMAL(38,18) NOT NULL,
  cached_audio_input_cost DECIMAL(38,18) NOT NULL,
  audio_output_cost DECIMAL(38,18) NOT NULL,
  total_cost DECIMAL(38,18) NOT NULL
);
INSERT INTO customers_daily SELECT org_id, start_date, customer_id, customer_name, spans, unpriced, input_tokens, cached_input_tokens, cache_write_input_tokens, output_tokens, reasoning_tokens, total_tokens, image_count, web_search_count, request_count, 0 AS cache_write_1h_input_tokens, 0 AS audio_input_tokens, 0 AS cached_audio_input_tokens, 0 AS audio_output_tokens, input_cost, output_cost, reasoning_cost, cached_input_cost, cache_write_input_cost, image_cost, web_search_cost, request_cost, CAST(0 AS DECIMAL(38,18)) AS cache_write_1h_input_cost, CAST(0 AS DECIMAL(38,18)) AS audio_input_cost, CAST(0 AS DECIMAL(38,18)) AS cached_audio_input_cost, CAST(0 AS DECIMAL(38,18)) AS audio_output_cost, total_cost FROM customers_daily_before_0008;
DROP TABLE customers_daily_before_0008;
ALTER TABLE models_daily RENAME TO models_daily_before_0008;
CREATE TABLE models_daily (
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
  cache_write_1h_input_tokens BIGINT NOT NULL,
  audio_input_tokens BIGINT NOT NULL,
  cached_audio_input_tokens BIGINT NOT NULL,
  audio_output_tokens BIGINT NOT NULL,
  input_cost DECIMAL(38,18) NOT NULL,
  output_cost DECIMAL(38,18) NOT NULL,
  reasoning_cost DECIMAL(38,18) NOT NULL,
  cached_input_cost DECIMAL(38,18) NOT NULL,
  cache_write_input_cost DECIMAL(38,18) NOT NULL,
  image_cost DECIMAL(38,18) NOT NULL,
  web_search_cost DECIMAL(38,18) NOT NULL,
  request_cost DECIMAL(38,18) NOT NULL,
  cache_write_1h_input_cost DECIMAL(38,18) NOT NULL,
  audio_input_cost DECIMAL(38,18) NOT NULL,
  cached_audio_input_cost DECIMAL(38,18) NOT NULL,
  audio_output_cost DECIMAL(38,18) NOT NULL,
  total_cost DECIMAL(38,18) NOT NULL
);
INSERT INTO models_daily SELECT org_id, start_date, model_id, provider, span_type, spans, unpriced, input_tokens, cached_input_tokens, cache_write_input_tokens, output_tokens, reasoning_tokens, total_tokens, image_count, web_search_count, request_count, 0 AS cache_write_1h_input_tokens, 0 AS audio_input_tokens, 0 AS cached_audio_input_tokens, 0 AS audio_output_tokens, input_cost, output_cost, reasoning_cost, cached_input_cost, cache_write_input_cost, image_cost, web_search_cost, request_cost, CAST(0 AS DECIMAL(38,18)) AS cache_write_1h_input_cost, CAST(0 AS DECIMAL(38,18)) AS audio_input_cost, CAST(0 AS DECIMAL(38,18)) AS cached_audio_input_cost, CAST(0 AS DECIMAL(38,18)) AS audio_output_cost, total_cost FROM models_daily_before_0008;
DROP TABLE models_daily_before_0008;
ALTER TABLE sessions_daily RENAME TO sessions_daily_before_0008;
CREATE TABLE sessions_daily (
  org_id VARCHAR NOT NULL,
  start_date DATE NOT NULL,
  customer_id VARCHAR NOT NULL,
  session_id VARCHAR NOT NULL,
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
  cache_write_1h_input_tokens BIGINT NOT NULL,
  audio_input_tokens BIGINT NOT NULL,
  cached_audio_input_tokens BIGINT NOT NULL,
  audio_output_tokens BIGINT NOT NULL,
  input_cost DECIMAL(38,18) NOT NULL,
  output_cost DECIMAL(38,18) NOT NULL,
  reasoning_cost DECIMAL(38,18) NOT NULL,
  cached_input_cost DECIMAL(38,18) NOT NULL,
  cache_write_input_cost DECIMAL(38,18) NOT NULL,
  image_cost DECIMAL(38,18) NOT NULL,
  web_search_cost DECIMAL(38,18) NOT NULL,
  request_cost DECIMAL(38,18) NOT NULL,
  cache_write_1h_input_cost DECIMAL(38,18) NOT NULL,
  audio_input_cost DECIMAL(38,18) NOT NULL,
  cached_audio_input_cost DECIMAL(38,18) NOT NULL,
  audio_output_cost DECIMAL(38,18) NOT NULL,
  total_cost DECIMAL(38,18) NOT NULL
);
INSERT INTO sessions_daily SELECT org_id, start_date, customer_id, session_id, spans, unpriced, input_tokens, cached_input_tokens, cache_write_input_tokens, output_tokens, reasoning_tokens, total_tokens, image_count, web_search_count, request_count, 0 AS cache_write_1h_input_tokens, 0 AS audio_input_tokens, 0 AS cached_audio_input_tokens, 0 AS audio_output_tokens, input_cost, output_cost, reasoning_cost, cached_input_cost, cache_write_input_cost, image_cost, web_search_cost, request_cost, CAST(0 AS DECIMAL(38,18)) AS cache_write_1h_input_cost, CAST(0 AS DECIMAL(38,18)) AS audio_input_cost, CAST(0 AS DECIMAL(38,18)) AS cached_audio_input_cost, CAST(0 AS DECIMAL(38,18)) AS audio_output_cost, total_cost FROM sessions_daily_before_0008;
DROP TABLE sessions_daily_before_0008;
ALTER TABLE workflows_daily RENAME TO workflows_daily_before_0008;
CREATE TABLE workflows_daily (
  org_id VARCHAR NOT NULL,
  start_date DATE NOT NULL,
  workflow_name VARCHAR NOT NULL,
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
  cache_write_1h_input_tokens BIGINT NOT NULL,
  audio_input_tokens BIGINT NOT NULL,
  cached_audio_input_tokens BIGINT NOT NULL,
  audio_output_tokens BIGINT NOT NULL,
  input_cost DECIMAL(38,18) NOT NULL,
  output_cost DECIMAL(38,18) NOT NULL,
  reasoning_cost DECIMAL(38,18) NOT NULL,
  cached_input_cost DECIMAL(38,18) NOT NULL,
  cache_write_input_cost DECIMAL(38,18) NOT NULL,
  image_cost DECIMAL(38,18) NOT NULL,
  web_search_cost DECIMAL(38,18) NOT NULL,
  request_cost DECIMAL(38,18) NOT NULL,
  cache_write_1h_input_cost DECIMAL(38,18) NOT NULL,
  audio_input_cost DECIMAL(38,18) NOT NULL,
  cached_audio_input_cost DECIMAL(38,18) NOT NULL,
  audio_output_cost DECIMAL(38,18) NOT NULL,
  total_cost DECIMAL(38,18) NOT NULL
);
INSERT INTO workflows_daily SELECT org_id, start_date, workflow_name, spans, unpriced, input_tokens, cached_input_tokens, cache_write_input_tokens, output_tokens, reasoning_tokens, total_tokens, image_count, web_search_count, request_count, 0 AS cache_write_1h_input_tokens, 0 AS audio_input_tokens, 0 AS cached_audio_input_tokens, 0 AS audio_output_tokens, input_cost, output_cost, reasoning_cost, cached_input_cost, cache_write_input_cost, image_cost, web_search_cost, request_cost, CAST(0 AS DECIMAL(38,18)) AS cache_write_1h_input_cost, CAST(0 AS DECIMAL(38,18)) AS audio_input_cost, CAST(0 AS DECIMAL(38,18)) AS cached_audio_input_cost, CAST(0 AS DECIMAL(38,18)) AS audio_output_cost, total_cost FROM workflows_daily_before_0008;
DROP TABLE workflows_daily_before_0008;
ALTER TABLE traces RENAME TO traces_before_0008;
CREATE TABLE traces (
  org_id VARCHAR NOT NULL,
  trace_id VARCHAR NOT NULL,
  start_date DATE NOT NULL,
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
  cache_write_1h_input_tokens BIGINT NOT NULL,
  audio_input_tokens BIGINT NOT NULL,
  cached_audio_input_tokens BIGINT NOT NULL,
  audio_output_tokens BIGINT NOT NULL,
  input_cost DECIMAL(38,18) NOT NULL,
  output_cost DECIMAL(38,18) NOT NULL,
  reasoning_cost DECIMAL(38,18) NOT NULL,
  cached_input_cost DECIMAL(38,18) NOT NULL,
  cache_write_input_cost DECIMAL(38,18) NOT NULL,
  image_cost DECIMAL(38,18) NOT NULL,
  web_search_cost DECIMAL(38,18) NOT NULL,
  request_cost DECIMAL(38,18) NOT NULL,
  cache_write_1h_input_cost DECIMAL(38,18) NOT NULL,
  audio_input_cost DECIMAL(38,18) NOT NULL,
  cached_audio_input_cost DECIMAL(38,18) NOT NULL,
  audio_output_cost DECIMAL(38,18) NOT NULL,
  total_cost DECIMAL(38,18) NOT NULL,
  first_start BIGINT NOT NULL,
  last_start BIGINT NOT NULL,
  last_end BIGINT NOT NULL,
  name_c VARCHAR,
  customer_c VARCHAR,
  customer_name_c VARCHAR,
  customer_image_c VARCHAR,
  session_c VARCHAR,
  agent_c VARCHAR,
  workflow_c VARCHAR,
  workflow_run_c VARCHAR
);
INSERT INTO traces SELECT org_id, trace_id, start_date, spans, unpriced, input_tokens, cached_input_tokens, cache_write_input_tokens, output_tokens, reasoning_tokens, total_tokens, image_count, web_search_count, request_count, 0 AS cache_write_1h_input_tokens, 0 AS audio_input_tokens, 0 AS cached_audio_input_tokens, 0 AS audio_output_tokens, input_cost, output_cost, reasoning_cost, cached_input_cost, cache_write_input_cost, image_cost, web_search_cost, request_cost, CAST(0 AS DECIMAL(38,18)) AS cache_write_1h_input_cost, CAST(0 AS DECIMAL(38,18)) AS audio_input_cost, CAST(0 AS DECIMAL(38,18)) AS cached_audio_input_cost, CAST(0 AS DECIMAL(38,18)) AS audio_output_cost, total_cost, first_start, last_start, last_end, name_c, customer_c, customer_name_c, customer_image_c, session_c, agent_c, workflow_c, workflow_run_c FROM traces_before_0008;
DROP TABLE traces_before_0008;
-- The top lists are derived per day: made again, empty and unmarked, so a read rebuilds them.
DROP TABLE IF EXISTS trace_tops;
DROP TABLE IF EXISTS session_tops;
CREATE TABLE trace_tops AS SELECT org_id, start_date, trace_id, spans, unpriced, input_tokens, cached_input_tokens, cache_write_input_tokens, output_tokens, reasoning_tokens, total_tokens, image_count, web_search_count, request_count, cache_write_1h_input_tokens, audio_input_tokens, cached_audio_input_tokens, audio_output_tokens, input_cost, output_cost, reasoning_cost, cached_input_cost, cache_write_input_cost, image_cost, web_search_cost, request_cost, cache_write_1h_input_cost, audio_input_cost, cached_audio_input_cost, audio_output_cost, total_cost, name_c, customer_c, CAST(NULL AS BIGINT) AS day_rank, CAST(NULL AS BOOLEAN) AS multi FROM traces LIMIT 0;
CREATE TABLE session_tops AS SELECT org_id, start_date, session_id, spans, unpriced, input_tokens, cached_input_tokens, cache_write_input_tokens, output_tokens, reasoning_tokens, total_tokens, image_count, web_search_count, request_count, cache_write_1h_input_tokens, audio_input_tokens, cached_audio_input_tokens, audio_output_tokens, input_cost, output_cost, reasoning_cost, cached_input_cost, cache_write_input_cost, image_cost, web_search_cost, request_cost, cache_write_1h_input_cost, audio_input_cost, cached_audio_input_cost, audio_output_cost, total_cost, CAST(NULL AS BIGINT) AS day_rank, CAST(NULL AS BOOLEAN) AS multi FROM sessions_daily LIMIT 0;
DELETE FROM trace_top_days;
DELETE FROM session_top_days;
