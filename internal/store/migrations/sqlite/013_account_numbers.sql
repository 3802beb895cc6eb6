-- Events and Merkle rows name their account by a number instead of its
-- 36-byte user_id (docs/performance.md "Sixth round"). Every key of the
-- events table's B-trees and of merkle_hashes begins with the account, and
-- SQLite's single writer spends most of an appended row's time seeking and
-- splitting those B-trees: with an integer first column the entries are
-- smaller (more to a page, fewer page splits) and compare as integers. A
-- 500-row insert with all of events' indexes took a fifth less time.
--
-- account_numbers gives each account its number, once: the store reads it
-- through a cache (store/account_numbers.go), and a number never changes or
-- moves to another account. The account column of events and merkle_hashes
-- holds it; on PostgreSQL the same column holds the user_id (its migration
-- 013 only renames the column), so both dialects share their statements and
-- only the value bound for the account differs.
CREATE TABLE account_numbers (
  num     INTEGER PRIMARY KEY,
  user_id TEXT NOT NULL UNIQUE
);
-- Every account, and any id the record holds without an account row (rows
-- written by tools or tests for an id the accounts table never had).
INSERT INTO account_numbers (user_id)
  SELECT user_id FROM accounts
  UNION SELECT user_id FROM chain_heads
  UNION SELECT user_id FROM events
  UNION SELECT user_id FROM merkle_hashes
  ORDER BY 1;

-- SQLite cannot change a column's type: both tables are rebuilt, in the
-- order of their new keys (once, at upgrade; about as long as a full copy).
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
  PRIMARY KEY (account, sequence),
  UNIQUE (account, event_id)
);
INSERT INTO events_new (account, sequence, leaf_index, event_id, event_type, prev_hash, payload_hash, raw, decision, tool,
  machine_id, parent_id, signature, signature_key, ts, ts_micros, surface, api_key_id, machine_sequence, semantic_key, created_at)
SELECT n.num, e.sequence, e.leaf_index, e.event_id, e.event_type, e.prev_hash, e.payload_hash, e.raw, e.decision, e.tool,
  e.machine_id, e.parent_id, e.signature, e.signature_key, e.ts, e.ts_micros, e.surface, e.api_key_id, e.machine_sequence,
  e.semantic_key, e.created_at
FROM events e JOIN account_numbers n ON n.user_id = e.user_id ORDER BY n.num, e.sequence;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_type ON events(account, event_type, sequence);
CREATE INDEX events_tool ON events(account, tool, sequence);
CREATE INDEX events_ts ON events(account, ts_micros);
CREATE INDEX events_semantic ON events(account, semantic_key, sequence) WHERE semantic_key IS NOT NULL;
CREATE INDEX events_decision ON events(account, decision, sequence);

CREATE TABLE merkle_hashes_new (
  account INTEGER NOT NULL,
  idx     BIGINT  NOT NULL,
  hash    BLOB    NOT NULL,
  PRIMARY KEY (account, idx)
) WITHOUT ROWID;
INSERT INTO merkle_hashes_new (account, idx, hash)
  SELECT n.num, m.idx, m.hash FROM merkle_hashes m JOIN account_numbers n ON n.user_id = m.user_id ORDER BY n.num, m.idx;
DROP TABLE merkle_hashes;
ALTER TABLE merkle_hashes_new RENAME TO merkle_hashes;
