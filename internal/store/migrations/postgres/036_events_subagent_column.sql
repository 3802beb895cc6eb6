-- Migration 036: raw's subagent member as a column, set by the service, as on
-- SQLite (its migration 036). events_subagent (migration 033) had every
-- append scan raw with strpos, and parse it in a subtransaction-guarded
-- function when it held the member's name or an escape; the service now
-- reads the member in Go before the insert (store.RawSubagent) and the index
-- reads the column.
--
-- Rows stored before: their column is filled here, once, and only where raw
-- can hold the member — the rows events_subagent held, read through that
-- index (PostgreSQL never marks a row: unindexed is NULL on every one): this
-- reads those rows, not the table (a one-time UPDATE in the upgrade's
-- transaction rather than a backfill behind the append: the old index finds
-- them without a scan, and a column half filled would hide events from the
-- filter meanwhile). Sequential scans are off for this statement so that a
-- table without statistics is read through the index all the same. The value is RawSubagent's, not
-- raw_subagent's: the first member when raw names it twice (json_each keeps
-- them in order), a string's text or an object's or array's JSON text as raw
-- holds it, and none for null, a number or a boolean; a value whose text
-- PostgreSQL cannot hold (U+0000, an unpaired surrogate) raises an error,
-- answered with none. Building the new index then reads the table once, as
-- migration 033 did; writes to events wait meanwhile.
ALTER TABLE events ADD COLUMN subagent TEXT;
CREATE FUNCTION raw_subagent_member(raw text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  member json;
BEGIN
  SELECT value INTO member FROM json_each(raw::json) WHERE key = 'subagent' LIMIT 1;
  CASE json_typeof(member)
    WHEN 'string' THEN RETURN member #>> '{}';
    WHEN 'object', 'array' THEN RETURN member::text;
    ELSE RETURN NULL;
  END CASE;
EXCEPTION WHEN others THEN
  RETURN NULL;
END
$$;
SET LOCAL enable_seqscan = off;
UPDATE events SET subagent = raw_subagent_member(raw)
  WHERE unindexed IS NULL AND (strpos(raw, '"subagent"') > 0 OR strpos(raw, '\') > 0);
SET LOCAL enable_seqscan = on;
DROP FUNCTION raw_subagent_member(text);
DROP INDEX events_subagent;
CREATE INDEX events_subagent ON events(account, subagent, sequence) WHERE unindexed IS NULL AND subagent IS NOT NULL;
