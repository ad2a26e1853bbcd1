-- A session touch holds what the write added to each of the session's measures that day, and whether the
-- write brought the session's first spans of that day; a session list keeps twice its ranks, and its mark the
-- floor: a cost no session of the day outside the list exceeds. A read then brings the day's session list up
-- to date from the list and its touches, reading the day's rollup rows only of sessions whose floor plus what
-- was added could reach the list (packages/store/src/duckdb-top-lists.ts). The session lists are rebuilt from
-- the rollups on their next read.
DROP TABLE IF EXISTS session_top_touches;
CREATE TABLE session_top_touches AS SELECT * EXCLUDE (day_rank, multi), CAST(NULL AS BOOLEAN) AS fresh FROM session_tops LIMIT 0;
DROP TABLE IF EXISTS session_top_days;
CREATE TABLE session_top_days AS SELECT org_id, start_date, CAST(0 AS BIGINT) AS group_count, total_cost AS floor_cost FROM session_tops LIMIT 0;
DELETE FROM session_tops;
