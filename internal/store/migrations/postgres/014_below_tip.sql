-- Batch ingest may store a row below the account's tip (CONTRACT.md "Batch"),
-- and the row still takes the next Merkle leaf: the one case where leaf order
-- and sequence order differ. below_tip marks such a row (1; NULL for every
-- other row), and a partial index reads the marked rows in leaf order
-- (store.EventsFrom; SQLite's migration 014 says more). Adding a nullable
-- column rewrites no row; the index reads the table once.
SET LOCAL lock_timeout = '10s';
ALTER TABLE events ADD COLUMN below_tip SMALLINT;
CREATE INDEX events_below_tip ON events(account, leaf_index) WHERE below_tip IS NOT NULL;
