-- The record: one row per stored event. (user_id, sequence) is the chain order
-- and leaf_index the Merkle leaf position; both are unique per account.
CREATE TABLE events (
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
  UNIQUE (user_id, event_id),
  UNIQUE (user_id, leaf_index)
);
CREATE INDEX events_payload_hash ON events(user_id, payload_hash);
CREATE INDEX events_type ON events(user_id, event_type, sequence);
CREATE INDEX events_tool ON events(user_id, tool, sequence);
CREATE INDEX events_ts ON events(user_id, ts_micros);
CREATE INDEX events_semantic ON events(user_id, semantic_key, sequence) WHERE semantic_key IS NOT NULL;

-- The chain head is the per-account serialisation point of appends.
CREATE TABLE chain_heads (
  user_id        TEXT PRIMARY KEY,
  last_sequence  BIGINT NOT NULL,
  last_hash      TEXT,
  last_event_id  TEXT,
  event_count    BIGINT NOT NULL
);

CREATE TABLE machine_heads (
  user_id    TEXT NOT NULL,
  machine_id TEXT NOT NULL,
  events     BIGINT NOT NULL,
  PRIMARY KEY (user_id, machine_id)
);

-- Signing keys keep their history: an event is checked against the key that was
-- registered for its machine when it was appended (from_leaf onwards).
CREATE TABLE signing_keys (
  user_id       TEXT NOT NULL,
  machine_id    TEXT NOT NULL,
  from_leaf     BIGINT NOT NULL,
  public_key    TEXT NOT NULL,
  fingerprint   TEXT NOT NULL,
  registered_at BIGINT NOT NULL,
  api_key_id    TEXT,
  PRIMARY KEY (user_id, machine_id, from_leaf)
);

CREATE TABLE daily_usage (
  user_id TEXT NOT NULL,
  day     TEXT NOT NULL,
  used    BIGINT NOT NULL,
  PRIMARY KEY (user_id, day)
);

-- GCRA state of the per-key batch rate limit: the theoretical arrival time.
CREATE TABLE rate_state (
  key_id    TEXT PRIMARY KEY,
  tat_micros BIGINT NOT NULL
);
