-- A trace touch holds the trace's whole row of that day as the write left it (every measure, the name and
-- customer candidates) and whether the write brought the trace's first spans of that day: a read then brings
-- the day's trace list up to date from the list and its touches alone (packages/store/src/duckdb-top-lists.ts).
-- The trace lists are rebuilt from the rollups on their next read.
DROP TABLE IF EXISTS trace_top_touches;
CREATE TABLE trace_top_touches AS SELECT * EXCLUDE (day_rank, multi), CAST(NULL AS BOOLEAN) AS fresh FROM trace_tops LIMIT 0;
DELETE FROM trace_top_days;
