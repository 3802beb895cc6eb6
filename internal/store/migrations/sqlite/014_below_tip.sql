-- Batch ingest may store a row below the account's tip (CONTRACT.md "Batch"),
-- and the row still takes the next Merkle leaf: the one case where leaf order
-- and sequence order differ. below_tip marks such a row (1; NULL for every
-- other row, so single appends write and bind nothing more), and a partial
-- index reads the marked rows in leaf order. The leaf-order reads (export,
-- chain verify, the tree's rebuild, heal's root) merge them into the primary
-- key's sequence order, in which every unmarked row is in leaf order already
-- (store.EventsFrom).
ALTER TABLE events ADD COLUMN below_tip INTEGER;
CREATE INDEX events_below_tip ON events(account, leaf_index) WHERE below_tip IS NOT NULL;
