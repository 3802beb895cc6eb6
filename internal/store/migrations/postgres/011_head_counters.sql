-- SQLite's migration 011 moves the daily quota and the machine-less counter
-- into chain_heads (fewer statements for its single writer). PostgreSQL keeps
-- them in daily_usage and machine_heads, which its one-statement append
-- (store/append_pg.go) writes in the same round trip; these columns are here
-- only so that both dialects have the same schema (store/schema_test.go).
ALTER TABLE chain_heads ADD COLUMN quota_day TEXT;
ALTER TABLE chain_heads ADD COLUMN quota_used BIGINT NOT NULL DEFAULT 0;
ALTER TABLE chain_heads ADD COLUMN events_without_machine BIGINT NOT NULL DEFAULT 0;
