-- SQLite builds search's indexes behind the append (its migration 023;
-- store/index_behind.go). PostgreSQL writes its indexes in the append's
-- transaction as before and never sets unindexed, so its four search
-- indexes, partial on unindexed IS NULL like SQLite's, still hold every
-- row (search names the predicate: store/events_search.go), and
-- events_unindexed stays empty. The schema is the same in both dialects
-- (store/schema_test.go).
ALTER TABLE events ADD COLUMN unindexed INTEGER;
DROP INDEX events_type;
DROP INDEX events_tool;
DROP INDEX events_ts;
DROP INDEX events_decision;
CREATE INDEX events_type ON events(account, event_type, sequence) WHERE unindexed IS NULL;
CREATE INDEX events_tool ON events(account, tool, sequence) WHERE unindexed IS NULL;
CREATE INDEX events_ts ON events(account, ts_micros) WHERE unindexed IS NULL;
CREATE INDEX events_decision ON events(account, decision, sequence) WHERE unindexed IS NULL;
CREATE INDEX events_unindexed ON events(account, sequence) WHERE unindexed IS NOT NULL;
