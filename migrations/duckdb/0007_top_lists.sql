-- Per-day lists of the traces and sessions that can rank first in a range
-- (packages/store/src/duckdb-top-lists.ts): each day's costliest groups and
-- every group seen on more than one day (multi), with that day's measures
-- and rank among the day's groups (NULL on rows added as another day's
-- neighbour); a trace's row also keeps its name and customer candidates, so
-- the console labels the traces it lists from these rows. Ranking
-- the traces of 90 days reads these rows, not every trace of those days.
-- The *_top_days tables mark the days whose list is current (with how many
-- groups each day has); a write removes the marks of the days it changes
-- and a read rebuilds its range's unmarked days, so they start empty.
CREATE TABLE IF NOT EXISTS trace_tops AS SELECT org_id, start_date, trace_id,
  spans, unpriced, input_tokens, cached_input_tokens, cache_write_input_tokens, output_tokens, reasoning_tokens, total_tokens, image_count, web_search_count, request_count,
  input_cost, output_cost, reasoning_cost, cached_input_cost, cache_write_input_cost, image_cost, web_search_cost, request_cost, total_cost,
  name_c, customer_c, CAST(NULL AS BIGINT) AS day_rank, CAST(NULL AS BOOLEAN) AS multi
FROM traces LIMIT 0;
CREATE TABLE IF NOT EXISTS session_tops AS SELECT org_id, start_date, session_id,
  spans, unpriced, input_tokens, cached_input_tokens, cache_write_input_tokens, output_tokens, reasoning_tokens, total_tokens, image_count, web_search_count, request_count,
  input_cost, output_cost, reasoning_cost, cached_input_cost, cache_write_input_cost, image_cost, web_search_cost, request_cost, total_cost,
  CAST(NULL AS BIGINT) AS day_rank, CAST(NULL AS BOOLEAN) AS multi
FROM sessions_daily LIMIT 0;
CREATE TABLE IF NOT EXISTS trace_top_days (org_id VARCHAR NOT NULL, start_date DATE NOT NULL, group_count BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS session_top_days (org_id VARCHAR NOT NULL, start_date DATE NOT NULL, group_count BIGINT NOT NULL);
