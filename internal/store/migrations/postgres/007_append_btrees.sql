-- Fewer B-trees per appended event (docs/performance.md "What bounds the
-- append"). leaf_index is the event's position in the account's chain: every
-- append, single or batch, extends the tip, so chain order by sequence is leaf
-- order and the unique (user_id, leaf_index) index only duplicated the primary
-- key's order. The payload_hash index served only the ancestry walk across a
-- broken link, which now scans the account's earlier events instead.
ALTER TABLE events DROP CONSTRAINT IF EXISTS events_user_id_leaf_index_key;
DROP INDEX IF EXISTS events_payload_hash;
