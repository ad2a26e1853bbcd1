-- The top lists are derived tables (packages/store/src/clickhouse-top-lists.ts): the derivation pass builds a
-- day's lists right after it derived the day, and each list mark names the derivation of the day it was built
-- from; a list is current when that is the day's current derivation. The change times of migration 0006 go:
-- no read compares clocks any more. Lists built before this mark no derivation, so the next pass builds them.
ALTER TABLE top_list_marks ADD COLUMN derivation UInt64 DEFAULT 0;
DROP TABLE IF EXISTS top_list_changes_mv;
DROP TABLE IF EXISTS top_list_changes;
