-- Migration 037 (SQLite only): the key (account, sequence) built behind the
-- append, as search's indexes are (migration 023, store/index_behind.go).
--
-- The table's PRIMARY KEY (account, sequence) was a B-tree of its own that
-- every append wrote: one leaf per account in a group commit, 0.77 WAL
-- frames of 4 KiB per append (docs/performance.md "The key by sequence
-- behind the append"). Its uniqueness is the writer's to keep (the head row
-- orders an account's appends; a batch checks the sequences it stores below
-- the tip), and the key is read, not checked, on the way an append runs.
-- It is now two partial unique indexes: events_sequence over the rows
-- indexed, which the indexer fills in key order many rows per leaf, and
-- events_unindexed over the tail, which it already was, now unique. Every
-- read by sequence names their predicates and reads both (store/
-- events_sequence.go): a planner uses a partial index only when the query
-- implies its WHERE. A second row at a sequence is refused at its insert,
-- as the primary key refused it: by the index of its own part, and by a
-- trigger that looks the sequence up in the other part (a read of one
-- index leaf, which the append's page cache holds; no write). The error is
-- the primary key's, so a writer that relied on it (store.ErrConflict)
-- sees no difference.
--
-- SQLite cannot drop a table's key: the table is copied, in key order, and
-- its indexes built after the copy (sorted, faster than inserting into
-- them row by row): about as long as a full copy of events, once, at the
-- upgrade. The dedup key UNIQUE (account, event_id) becomes the index
-- events_event_id, the same column set (INSERT … ON CONFLICT (account,
-- event_id) names it by its columns). PostgreSQL keeps its primary key: its
-- appends write their index entries in their statement, and it never marks
-- a row, so there is no tail to split off.
CREATE TABLE events_new (
  account          INTEGER NOT NULL,
  sequence         BIGINT NOT NULL,
  leaf_index       BIGINT NOT NULL,
  event_id         TEXT NOT NULL,
  event_type       TEXT NOT NULL,
  prev_hash        TEXT,
  payload_hash     TEXT NOT NULL,
  raw              TEXT,
  decision         TEXT,
  tool             TEXT,
  machine_id       TEXT,
  parent_id        TEXT,
  signature        TEXT,
  signature_key    TEXT,
  ts               TEXT NOT NULL,
  ts_micros        BIGINT,
  surface          TEXT NOT NULL,
  api_key_id       TEXT,
  machine_sequence BIGINT NOT NULL,
  semantic_key     TEXT,
  created_at       BIGINT NOT NULL,
  below_tip        INTEGER,
  unindexed        INTEGER,
  subagent         TEXT
);
INSERT INTO events_new (account, sequence, leaf_index, event_id, event_type, prev_hash, payload_hash, raw, decision, tool,
  machine_id, parent_id, signature, signature_key, ts, ts_micros, surface, api_key_id, machine_sequence, semantic_key,
  created_at, below_tip, unindexed, subagent)
SELECT account, sequence, leaf_index, event_id, event_type, prev_hash, payload_hash, raw, decision, tool,
  machine_id, parent_id, signature, signature_key, ts, ts_micros, surface, api_key_id, machine_sequence, semantic_key,
  created_at, below_tip, unindexed, subagent
FROM events ORDER BY account, sequence;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE UNIQUE INDEX events_sequence ON events(account, sequence) WHERE unindexed IS NULL;
CREATE UNIQUE INDEX events_unindexed ON events(account, sequence) WHERE unindexed IS NOT NULL;
CREATE UNIQUE INDEX events_event_id ON events(account, event_id);
CREATE INDEX events_semantic ON events(account, semantic_key, sequence) WHERE semantic_key IS NOT NULL;
CREATE INDEX events_below_tip ON events(account, leaf_index) WHERE below_tip IS NOT NULL;
CREATE INDEX events_type ON events(account, event_type, sequence) WHERE unindexed IS NULL;
CREATE INDEX events_tool ON events(account, tool, sequence) WHERE unindexed IS NULL;
CREATE INDEX events_ts ON events(account, ts_micros) WHERE unindexed IS NULL;
CREATE INDEX events_decision ON events(account, decision, sequence) WHERE unindexed IS NULL;
CREATE INDEX events_subagent ON events(account, subagent, sequence) WHERE unindexed IS NULL AND subagent IS NOT NULL;
CREATE TRIGGER events_sequence_once_tail BEFORE INSERT ON events
  WHEN NEW.unindexed IS NOT NULL AND EXISTS (SELECT 1 FROM events
    WHERE unindexed IS NULL AND account = NEW.account AND sequence = NEW.sequence)
  BEGIN SELECT RAISE(ABORT, 'UNIQUE constraint failed: events.account, events.sequence'); END;
CREATE TRIGGER events_sequence_once_indexed BEFORE INSERT ON events
  WHEN NEW.unindexed IS NULL AND EXISTS (SELECT 1 FROM events
    WHERE unindexed IS NOT NULL AND account = NEW.account AND sequence = NEW.sequence)
  BEGIN SELECT RAISE(ABORT, 'UNIQUE constraint failed: events.account, events.sequence'); END;
