-- spans_org_day_idx is never used by a query (reports filter on start_time and
-- DuckDB skips row groups by their min/max instead; EXPLAIN shows sequential
-- scans), while every checkpoint rewrites its data: one index less to maintain
-- per insert as the table grows.
DROP INDEX IF EXISTS spans_org_day_idx;
