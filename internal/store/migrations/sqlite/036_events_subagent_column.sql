-- Migration 036: raw's subagent member as a column, set by the service.
--
-- events_subagent (migration 033) indexed json_extract(raw, '$.subagent') on
-- the rows whose raw holds the member's name or an escape. Its predicate read
-- raw with two instr for every row entering the index, each a scan of the
-- whole raw on the single writer: a batch row at its insert, an appended row
-- when the indexer cleared its mark, a cost that grows with raw
-- (docs/performance.md "Console at size"). The service now reads the member
-- in Go before the insert, outside the writer (store.RawSubagent,
-- app.prepareEvent), and the index reads the column: its predicate tests two
-- columns, not raw.
--
-- Rows stored before: their column is filled here, once, and only where raw
-- can hold the member — the rows events_subagent held (the member's name
-- unescaped, or any escape), read through that index (INDEXED BY), and the
-- rows not yet indexed through events_unindexed: this reads those rows, not
-- the table (a one-time UPDATE of the rows that can hold the member, in the
-- upgrade's transaction, rather than a backfill behind the append: the old
-- index finds them without a scan, and a column half filled would hide
-- events from the filter meanwhile). The value is RawSubagent's: a string's
-- text or an object's or array's JSON text (raw is stored compacted, so
-- json_extract gives it as raw holds it), the first member when raw names it
-- twice, and none for null, a number, a boolean or a text holding U+0000. (A
-- string with an unpaired surrogate escape keeps the bytes json_extract makes
-- of it, which no filter's text can equal.)
-- Building the new index then reads the table once, as migration 033 did.
ALTER TABLE events ADD COLUMN subagent TEXT;
UPDATE events INDEXED BY events_subagent
  SET subagent = CASE WHEN json_valid(raw) AND json_type(raw, '$.subagent') IN ('text', 'object', 'array')
    AND instr(json_extract(raw, '$.subagent'), char(0)) = 0 THEN json_extract(raw, '$.subagent') END
  WHERE unindexed IS NULL AND (instr(raw, '"subagent"') > 0 OR instr(raw, '\') > 0);
UPDATE events INDEXED BY events_unindexed
  SET subagent = CASE WHEN json_valid(raw) AND json_type(raw, '$.subagent') IN ('text', 'object', 'array')
    AND instr(json_extract(raw, '$.subagent'), char(0)) = 0 THEN json_extract(raw, '$.subagent') END
  WHERE unindexed IS NOT NULL AND (instr(raw, '"subagent"') > 0 OR instr(raw, '\') > 0);
DROP INDEX events_subagent;
CREATE INDEX events_subagent ON events(account, subagent, sequence) WHERE unindexed IS NULL AND subagent IS NOT NULL;
