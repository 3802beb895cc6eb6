-- Search's indexes are built behind the append (issue #39; store/index_behind.go).
-- A single append wrote one leaf page of every B-tree its row touches, and
-- with many accounts in one group commit those are all different pages:
-- about 8 pages (32 KB of WAL) for a row of ~600 bytes, four of them for
-- the indexes only search reads. Now an appended row carries unindexed = 1
-- and is left out of those four (partial indexes); the writer, between two
-- group commits, clears the mark of the whole tail at once (a few thousand
-- rows), so each account's index page is written once for many rows.
-- events_unindexed holds only the tail, ordered as search reads it, and
-- search reads it beside the indexes: a client reads its own writes at once.
-- Every row stored before this version is indexed (unindexed IS NULL).
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
