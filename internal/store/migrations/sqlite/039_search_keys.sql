-- Migration 039 (SQLite only): the keys built behind the append are tables
-- of their own, and a row is written once (issue #39, eighth round;
-- store/index_behind.go, docs/performance.md "The keys in tables of their
-- own").
--
-- Since migrations 023 and 037 an appended row carried a mark (unindexed =
-- 1) that kept it out of search's partial indexes and of the key by
-- sequence, and the indexer cleared the mark to enter them. Clearing it
-- rewrote the row where it lies: the tail's rows of one account are spread
-- over most of the tail's table pages, so each chunk of the indexer wrote
-- most of them again, about one page per append (1.0 of the 4.1 WAL frames
-- an append wrote with 2 KiB pages). Now the row is never updated:
--
--   events_tail      (account, sequence) → the row: the rows not yet indexed.
--                    Every insert into events enters it (trigger below).
--   events_seq       (account, sequence) → the row: the rows indexed.
--   events_by_type, events_by_tool, events_by_decision, events_by_subagent,
--   events_by_ts     search's keys of the rows indexed (a row without a
--                    tool, decision, sub-agent or time is in none of those).
--
-- Each is a WITHOUT ROWID table, one B-tree as an index is, holding the
-- row's rowid (rid) beside the key. The indexer copies a chunk of the tail
-- into them in key order and deletes it from the tail: the same entries the
-- partial indexes received, without the row's page. A read by key joins a
-- key table to events USING its key columns and finds the row by rid
-- (store/events_search.go, indexedArms).
--
-- A sequence is stored once per account: the trigger aborts an insert
-- whose (account, sequence) either key table holds, with the error the
-- table's primary key raised before migration 037. It looks the tail up
-- rather than leave the refusal to events_tail's own key because an INSERT
-- OR IGNORE (or OR REPLACE) into events, which the service never sends,
-- would pass its conflict policy on to the trigger's insert, and
-- RAISE(ABORT) keeps none. A row moves
-- from the tail to events_seq only in the indexer's transaction. The
-- service never updates or deletes a row of events (the record is
-- append-only); two triggers at the end keep the keys exact under a write
-- past it.
--
-- The existing rows' keys are copied in key order from the indexes they
-- replace, then those indexes, the column and the two triggers of migration
-- 037 are dropped (DROP COLUMN rewrites the table: about as long as the
-- copy of migration 037, once). PostgreSQL is untouched: its appends write
-- their index entries in their statement.
CREATE TABLE events_tail (
  account  INTEGER NOT NULL,
  sequence BIGINT NOT NULL,
  rid      INTEGER NOT NULL,
  PRIMARY KEY (account, sequence)
) WITHOUT ROWID;
CREATE TABLE events_seq (
  account  INTEGER NOT NULL,
  sequence BIGINT NOT NULL,
  rid      INTEGER NOT NULL,
  PRIMARY KEY (account, sequence)
) WITHOUT ROWID;
CREATE TABLE events_by_type (
  account    INTEGER NOT NULL,
  event_type TEXT NOT NULL,
  sequence   BIGINT NOT NULL,
  rid        INTEGER NOT NULL,
  PRIMARY KEY (account, event_type, sequence)
) WITHOUT ROWID;
CREATE TABLE events_by_tool (
  account  INTEGER NOT NULL,
  tool     TEXT NOT NULL,
  sequence BIGINT NOT NULL,
  rid      INTEGER NOT NULL,
  PRIMARY KEY (account, tool, sequence)
) WITHOUT ROWID;
CREATE TABLE events_by_decision (
  account  INTEGER NOT NULL,
  decision TEXT NOT NULL,
  sequence BIGINT NOT NULL,
  rid      INTEGER NOT NULL,
  PRIMARY KEY (account, decision, sequence)
) WITHOUT ROWID;
CREATE TABLE events_by_subagent (
  account  INTEGER NOT NULL,
  subagent TEXT NOT NULL,
  sequence BIGINT NOT NULL,
  rid      INTEGER NOT NULL,
  PRIMARY KEY (account, subagent, sequence)
) WITHOUT ROWID;
CREATE TABLE events_by_ts (
  account   INTEGER NOT NULL,
  ts_micros BIGINT NOT NULL,
  sequence  BIGINT NOT NULL,
  rid       INTEGER NOT NULL,
  PRIMARY KEY (account, ts_micros, sequence)
) WITHOUT ROWID;

INSERT INTO events_tail SELECT account, sequence, rowid FROM events
  WHERE unindexed IS NOT NULL ORDER BY account, sequence;
INSERT INTO events_seq SELECT account, sequence, rowid FROM events
  WHERE unindexed IS NULL ORDER BY account, sequence;
INSERT INTO events_by_type SELECT account, event_type, sequence, rowid FROM events
  WHERE unindexed IS NULL ORDER BY account, event_type, sequence;
INSERT INTO events_by_tool SELECT account, tool, sequence, rowid FROM events
  WHERE unindexed IS NULL AND tool IS NOT NULL ORDER BY account, tool, sequence;
INSERT INTO events_by_decision SELECT account, decision, sequence, rowid FROM events
  WHERE unindexed IS NULL AND decision IS NOT NULL ORDER BY account, decision, sequence;
INSERT INTO events_by_subagent SELECT account, subagent, sequence, rowid FROM events
  WHERE unindexed IS NULL AND subagent IS NOT NULL ORDER BY account, subagent, sequence;
INSERT INTO events_by_ts SELECT account, ts_micros, sequence, rowid FROM events
  WHERE unindexed IS NULL AND ts_micros IS NOT NULL ORDER BY account, ts_micros, sequence;

DROP TRIGGER events_sequence_once_tail;
DROP TRIGGER events_sequence_once_indexed;
DROP INDEX events_sequence;
DROP INDEX events_unindexed;
DROP INDEX events_type;
DROP INDEX events_tool;
DROP INDEX events_ts;
DROP INDEX events_decision;
DROP INDEX events_subagent;
ALTER TABLE events DROP COLUMN unindexed;

CREATE TRIGGER events_enter_tail AFTER INSERT ON events BEGIN
  SELECT RAISE(ABORT, 'UNIQUE constraint failed: events.account, events.sequence')
    WHERE EXISTS (SELECT 1 FROM events_seq WHERE account = NEW.account AND sequence = NEW.sequence)
       OR EXISTS (SELECT 1 FROM events_tail WHERE account = NEW.account AND sequence = NEW.sequence);
  INSERT INTO events_tail (account, sequence, rid) VALUES (NEW.account, NEW.sequence, NEW.rowid);
END;
-- The service never updates or deletes a row of events. A write to the file
-- past it (an operator's repair, or tampering that the verification must
-- report as it reported it before: docs/integrity.md) keeps the keys exact,
-- as the indexes they replace were kept: a row's keys follow its key
-- columns, back into the tail (where the next start's indexer finds it),
-- and leave with the row.
CREATE TRIGGER events_keys_follow_update
  AFTER UPDATE OF account, sequence, event_type, tool, decision, subagent, ts_micros ON events BEGIN
  DELETE FROM events_tail WHERE account = OLD.account AND sequence = OLD.sequence AND rid = OLD.rowid;
  DELETE FROM events_seq WHERE account = OLD.account AND sequence = OLD.sequence AND rid = OLD.rowid;
  DELETE FROM events_by_type WHERE account = OLD.account AND event_type = OLD.event_type AND sequence = OLD.sequence;
  DELETE FROM events_by_tool WHERE account = OLD.account AND tool = OLD.tool AND sequence = OLD.sequence;
  DELETE FROM events_by_decision WHERE account = OLD.account AND decision = OLD.decision AND sequence = OLD.sequence;
  DELETE FROM events_by_subagent WHERE account = OLD.account AND subagent = OLD.subagent AND sequence = OLD.sequence;
  DELETE FROM events_by_ts WHERE account = OLD.account AND ts_micros = OLD.ts_micros AND sequence = OLD.sequence;
  SELECT RAISE(ABORT, 'UNIQUE constraint failed: events.account, events.sequence')
    WHERE EXISTS (SELECT 1 FROM events_seq WHERE account = NEW.account AND sequence = NEW.sequence)
       OR EXISTS (SELECT 1 FROM events_tail WHERE account = NEW.account AND sequence = NEW.sequence);
  INSERT INTO events_tail (account, sequence, rid) VALUES (NEW.account, NEW.sequence, NEW.rowid);
END;
CREATE TRIGGER events_keys_follow_delete AFTER DELETE ON events BEGIN
  DELETE FROM events_tail WHERE account = OLD.account AND sequence = OLD.sequence AND rid = OLD.rowid;
  DELETE FROM events_seq WHERE account = OLD.account AND sequence = OLD.sequence AND rid = OLD.rowid;
  DELETE FROM events_by_type WHERE account = OLD.account AND event_type = OLD.event_type AND sequence = OLD.sequence;
  DELETE FROM events_by_tool WHERE account = OLD.account AND tool = OLD.tool AND sequence = OLD.sequence;
  DELETE FROM events_by_decision WHERE account = OLD.account AND decision = OLD.decision AND sequence = OLD.sequence;
  DELETE FROM events_by_subagent WHERE account = OLD.account AND subagent = OLD.subagent AND sequence = OLD.sequence;
  DELETE FROM events_by_ts WHERE account = OLD.account AND ts_micros = OLD.ts_micros AND sequence = OLD.sequence;
END;
