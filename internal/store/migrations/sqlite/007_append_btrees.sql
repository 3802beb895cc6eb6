-- Fewer B-trees per appended event (docs/performance.md "What bounds the
-- append"). leaf_index is the event's position in the account's chain: every
-- append, single or batch, extends the tip, so chain order by sequence is leaf
-- order and UNIQUE (user_id, leaf_index) only duplicated the primary key's
-- order. The payload_hash index served only the ancestry walk across a broken
-- link, which now scans the account's earlier events instead. SQLite cannot
-- drop a table constraint, so the table is rebuilt (once, at upgrade).
CREATE TABLE events_new (
  user_id          TEXT NOT NULL,
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
  PRIMARY KEY (user_id, sequence),
  UNIQUE (user_id, event_id)
);
INSERT INTO events_new (user_id, sequence, leaf_index, event_id, event_type, prev_hash, payload_hash, raw, decision, tool,
  machine_id, parent_id, signature, signature_key, ts, ts_micros, surface, api_key_id, machine_sequence, semantic_key, created_at)
SELECT user_id, sequence, leaf_index, event_id, event_type, prev_hash, payload_hash, raw, decision, tool,
  machine_id, parent_id, signature, signature_key, ts, ts_micros, surface, api_key_id, machine_sequence, semantic_key, created_at
FROM events ORDER BY user_id, sequence;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
-- What search (GET /v1/events filters) and the dedup gate read, unchanged.
CREATE INDEX events_type ON events(user_id, event_type, sequence);
CREATE INDEX events_tool ON events(user_id, tool, sequence);
CREATE INDEX events_ts ON events(user_id, ts_micros);
CREATE INDEX events_semantic ON events(user_id, semantic_key, sequence) WHERE semantic_key IS NOT NULL;
