-- The rollups of packages/shared/src/rollups.ts (usage_daily, traces) as materialized views fed
-- by every insert into spans; one schema for 18.16 and current servers. A view inserts without
-- converting types, so every expression is typed as its column.
--
-- Every measure is multiplied by rollup_weight: the store writes a changed span (a reprice, a
-- trace's late customer) as a copy of its stored version weighted -1 plus the new version, in
-- one insert, so the views take the old share back and add the new one atomically. The store
-- inserts only spans not stored yet, so a replay or a retry adds nothing.
--
-- The rollups are filled from the spans already stored (once: only while they are empty), then
-- the views start.
ALTER TABLE spans ADD COLUMN rollup_weight Int8 DEFAULT 1;
CREATE TABLE IF NOT EXISTS usage_daily (
  org_id String,
  start_date Date,
  customer_id String,
  customer_name String,
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
ORDER BY (org_id, start_date, customer_id, customer_name, model_id, provider, span_type);
CREATE TABLE IF NOT EXISTS traces (
  org_id String,
  trace_id String,
  start_date Date,
  spans AggregateFunction(sum, Int64),
  unpriced AggregateFunction(sum, Int64),
  input_tokens AggregateFunction(sum, Int64),
  cached_input_tokens AggregateFunction(sum, Int64),
  cache_write_input_tokens AggregateFunction(sum, Int64),
  output_tokens AggregateFunction(sum, Int64),
  reasoning_tokens AggregateFunction(sum, Int64),
  total_tokens AggregateFunction(sum, Int64),
  image_count AggregateFunction(sum, Int64),
  web_search_count AggregateFunction(sum, Int64),
  request_count AggregateFunction(sum, Int64),
  input_cost AggregateFunction(sum, Decimal(38, 18)),
  output_cost AggregateFunction(sum, Decimal(38, 18)),
  reasoning_cost AggregateFunction(sum, Decimal(38, 18)),
  cached_input_cost AggregateFunction(sum, Decimal(38, 18)),
  cache_write_input_cost AggregateFunction(sum, Decimal(38, 18)),
  image_cost AggregateFunction(sum, Decimal(38, 18)),
  web_search_cost AggregateFunction(sum, Decimal(38, 18)),
  request_cost AggregateFunction(sum, Decimal(38, 18)),
  total_cost AggregateFunction(sum, Decimal(38, 18)),
  first_start AggregateFunction(min, Int64),
  last_start AggregateFunction(max, Int64),
  last_end AggregateFunction(max, Int64),
  name_c AggregateFunction(min, String),
  customer_c AggregateFunction(min, String),
  customer_name_c AggregateFunction(min, String),
  customer_image_c AggregateFunction(min, String),
  session_c AggregateFunction(min, String),
  agent_c AggregateFunction(min, String),
  workflow_c AggregateFunction(min, String),
  workflow_run_c AggregateFunction(min, String)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(start_date)
ORDER BY (org_id, start_date, trace_id);
INSERT INTO usage_daily
SELECT org_id, start_date, customer_id, customer_name, model_id, provider, span_type, sum(toInt64(1) * rollup_weight) AS spans, sum(toInt64(if(priced = 0 AND model_id != '', 1, 0)) * rollup_weight) AS unpriced, sum(input_tokens * rollup_weight) AS input_tokens, sum(cached_input_tokens * rollup_weight) AS cached_input_tokens, sum(cache_write_input_tokens * rollup_weight) AS cache_write_input_tokens, sum(output_tokens * rollup_weight) AS output_tokens, sum(reasoning_tokens * rollup_weight) AS reasoning_tokens, sum(total_tokens * rollup_weight) AS total_tokens, sum(image_count * rollup_weight) AS image_count, sum(web_search_count * rollup_weight) AS web_search_count, sum(request_count * rollup_weight) AS request_count, sum(input_cost * rollup_weight) AS input_cost, sum(output_cost * rollup_weight) AS output_cost, sum(reasoning_cost * rollup_weight) AS reasoning_cost, sum(cached_input_cost * rollup_weight) AS cached_input_cost, sum(cache_write_input_cost * rollup_weight) AS cache_write_input_cost, sum(image_cost * rollup_weight) AS image_cost, sum(web_search_cost * rollup_weight) AS web_search_cost, sum(request_cost * rollup_weight) AS request_cost, sum(total_cost * rollup_weight) AS total_cost FROM spans FINAL WHERE (SELECT count() FROM usage_daily) = 0 GROUP BY org_id, start_date, customer_id, customer_name, model_id, provider, span_type;
INSERT INTO traces
SELECT org_id, trace_id, start_date, sumState(toInt64(1) * rollup_weight) AS spans, sumState(toInt64(if(priced = 0 AND model_id != '', 1, 0)) * rollup_weight) AS unpriced, sumState(input_tokens * rollup_weight) AS input_tokens, sumState(cached_input_tokens * rollup_weight) AS cached_input_tokens, sumState(cache_write_input_tokens * rollup_weight) AS cache_write_input_tokens, sumState(output_tokens * rollup_weight) AS output_tokens, sumState(reasoning_tokens * rollup_weight) AS reasoning_tokens, sumState(total_tokens * rollup_weight) AS total_tokens, sumState(image_count * rollup_weight) AS image_count, sumState(web_search_count * rollup_weight) AS web_search_count, sumState(request_count * rollup_weight) AS request_count, sumState(input_cost * rollup_weight) AS input_cost, sumState(output_cost * rollup_weight) AS output_cost, sumState(reasoning_cost * rollup_weight) AS reasoning_cost, sumState(cached_input_cost * rollup_weight) AS cached_input_cost, sumState(cache_write_input_cost * rollup_weight) AS cache_write_input_cost, sumState(image_cost * rollup_weight) AS image_cost, sumState(web_search_cost * rollup_weight) AS web_search_cost, sumState(request_cost * rollup_weight) AS request_cost, sumState(total_cost * rollup_weight) AS total_cost, minState(start_time) AS first_start, maxState(start_time) AS last_start, maxState(end_time) AS last_end, minState(CASE WHEN trace_name <> '' THEN concat(concat(substring('0000000000000000', 1, 16 - length(toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at)))), toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at))), trace_name) ELSE '~' END) AS name_c, minState(CASE WHEN customer_id <> '' THEN concat(concat(substring('0000000000000000', 1, 16 - length(toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at)))), toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at))), customer_id) ELSE '~' END) AS customer_c, minState(CASE WHEN customer_id <> '' THEN concat(concat(substring('0000000000000000', 1, 16 - length(toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at)))), toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at))), customer_name) ELSE '~' END) AS customer_name_c, minState(CASE WHEN customer_id <> '' THEN concat(concat(substring('0000000000000000', 1, 16 - length(toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at)))), toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at))), customer_image_url) ELSE '~' END) AS customer_image_c, minState(CASE WHEN session_id <> '' THEN concat(concat(substring('0000000000000000', 1, 16 - length(toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at)))), toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at))), session_id) ELSE '~' END) AS session_c, minState(CASE WHEN agent_name <> '' THEN concat(concat(substring('0000000000000000', 1, 16 - length(toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at)))), toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at))), agent_name) ELSE '~' END) AS agent_c, minState(CASE WHEN workflow_name <> '' THEN concat(concat(substring('0000000000000000', 1, 16 - length(toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at)))), toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at))), workflow_name) ELSE '~' END) AS workflow_c, minState(CASE WHEN workflow_name <> '' THEN concat(concat(substring('0000000000000000', 1, 16 - length(toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at)))), toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at))), workflow_run_id) ELSE '~' END) AS workflow_run_c FROM spans FINAL WHERE (SELECT count() FROM traces) = 0 GROUP BY org_id, trace_id, start_date;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_daily_mv TO usage_daily AS
SELECT org_id, start_date, customer_id, customer_name, model_id, provider, span_type, sum(toInt64(1) * rollup_weight) AS spans, sum(toInt64(if(priced = 0 AND model_id != '', 1, 0)) * rollup_weight) AS unpriced, sum(input_tokens * rollup_weight) AS input_tokens, sum(cached_input_tokens * rollup_weight) AS cached_input_tokens, sum(cache_write_input_tokens * rollup_weight) AS cache_write_input_tokens, sum(output_tokens * rollup_weight) AS output_tokens, sum(reasoning_tokens * rollup_weight) AS reasoning_tokens, sum(total_tokens * rollup_weight) AS total_tokens, sum(image_count * rollup_weight) AS image_count, sum(web_search_count * rollup_weight) AS web_search_count, sum(request_count * rollup_weight) AS request_count, sum(input_cost * rollup_weight) AS input_cost, sum(output_cost * rollup_weight) AS output_cost, sum(reasoning_cost * rollup_weight) AS reasoning_cost, sum(cached_input_cost * rollup_weight) AS cached_input_cost, sum(cache_write_input_cost * rollup_weight) AS cache_write_input_cost, sum(image_cost * rollup_weight) AS image_cost, sum(web_search_cost * rollup_weight) AS web_search_cost, sum(request_cost * rollup_weight) AS request_cost, sum(total_cost * rollup_weight) AS total_cost FROM spans GROUP BY org_id, start_date, customer_id, customer_name, model_id, provider, span_type;
CREATE MATERIALIZED VIEW IF NOT EXISTS traces_mv TO traces AS
SELECT org_id, trace_id, start_date, sumState(toInt64(1) * rollup_weight) AS spans, sumState(toInt64(if(priced = 0 AND model_id != '', 1, 0)) * rollup_weight) AS unpriced, sumState(input_tokens * rollup_weight) AS input_tokens, sumState(cached_input_tokens * rollup_weight) AS cached_input_tokens, sumState(cache_write_input_tokens * rollup_weight) AS cache_write_input_tokens, sumState(output_tokens * rollup_weight) AS output_tokens, sumState(reasoning_tokens * rollup_weight) AS reasoning_tokens, sumState(total_tokens * rollup_weight) AS total_tokens, sumState(image_count * rollup_weight) AS image_count, sumState(web_search_count * rollup_weight) AS web_search_count, sumState(request_count * rollup_weight) AS request_count, sumState(input_cost * rollup_weight) AS input_cost, sumState(output_cost * rollup_weight) AS output_cost, sumState(reasoning_cost * rollup_weight) AS reasoning_cost, sumState(cached_input_cost * rollup_weight) AS cached_input_cost, sumState(cache_write_input_cost * rollup_weight) AS cache_write_input_cost, sumState(image_cost * rollup_weight) AS image_cost, sumState(web_search_cost * rollup_weight) AS web_search_cost, sumState(request_cost * rollup_weight) AS request_cost, sumState(total_cost * rollup_weight) AS total_cost, minState(start_time) AS first_start, maxState(start_time) AS last_start, maxState(end_time) AS last_end, minState(CASE WHEN trace_name <> '' THEN concat(concat(substring('0000000000000000', 1, 16 - length(toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at)))), toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at))), trace_name) ELSE '~' END) AS name_c, minState(CASE WHEN customer_id <> '' THEN concat(concat(substring('0000000000000000', 1, 16 - length(toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at)))), toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at))), customer_id) ELSE '~' END) AS customer_c, minState(CASE WHEN customer_id <> '' THEN concat(concat(substring('0000000000000000', 1, 16 - length(toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at)))), toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at))), customer_name) ELSE '~' END) AS customer_name_c, minState(CASE WHEN customer_id <> '' THEN concat(concat(substring('0000000000000000', 1, 16 - length(toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at)))), toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at))), customer_image_url) ELSE '~' END) AS customer_image_c, minState(CASE WHEN session_id <> '' THEN concat(concat(substring('0000000000000000', 1, 16 - length(toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at)))), toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at))), session_id) ELSE '~' END) AS session_c, minState(CASE WHEN agent_name <> '' THEN concat(concat(substring('0000000000000000', 1, 16 - length(toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at)))), toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at))), agent_name) ELSE '~' END) AS agent_c, minState(CASE WHEN workflow_name <> '' THEN concat(concat(substring('0000000000000000', 1, 16 - length(toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at)))), toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at))), workflow_name) ELSE '~' END) AS workflow_c, minState(CASE WHEN workflow_name <> '' THEN concat(concat(substring('0000000000000000', 1, 16 - length(toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at)))), toString((CASE WHEN parent_span_id = '' THEN 0 ELSE 1000000000000000 END + received_at))), workflow_run_id) ELSE '~' END) AS workflow_run_c FROM spans GROUP BY org_id, trace_id, start_date;
