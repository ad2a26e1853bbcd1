-- The groups each write added rows to on a day whose top list is current, with how many spans it added
-- (packages/store/src/duckdb-top-lists.ts): a read brings such a day's list up to date from its old rows and
-- these groups alone, since costs only grow, instead of ranking every group of the day again.
CREATE TABLE IF NOT EXISTS trace_top_touches (org_id VARCHAR NOT NULL, start_date DATE NOT NULL, trace_id VARCHAR NOT NULL, spans BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS session_top_touches (org_id VARCHAR NOT NULL, start_date DATE NOT NULL, session_id VARCHAR NOT NULL, spans BIGINT NOT NULL);
