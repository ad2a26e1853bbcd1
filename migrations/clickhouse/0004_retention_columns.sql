-- Each span's retention as its org had it when the span was written (0: keep forever). A current
-- server deletes expired rows and empties expired texts with TTL expressions that read them
-- (clickhouse-retention.ts, applied where the server has TTL); 18.16 has no TTL, and there the
-- retention pass deletes and empties by mutations, as it does on every server after a change of an
-- org's retention.
ALTER TABLE spans ADD COLUMN retention_days UInt16 DEFAULT 0;
ALTER TABLE spans ADD COLUMN text_days UInt16 DEFAULT 0;
