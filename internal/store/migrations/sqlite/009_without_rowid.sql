-- Every append writes a row or two of chain_heads, machine_heads, daily_usage
-- and merkle_hashes. As rowid tables with a non-integer primary key each was
-- two B-trees: the table and the index of its key, both dirtied and both
-- written to the WAL at every commit. Their rows are small (a key and a few
-- numbers or a 32-byte hash), which is what WITHOUT ROWID tables are for:
-- the row lives in the key's B-tree, one B-tree per table
-- (docs/performance.md "What bounds the append"). PostgreSQL's heap tables
-- have no such cost; its migration 009 is empty.
CREATE TABLE chain_heads_new (
  user_id        TEXT PRIMARY KEY,
  last_sequence  BIGINT NOT NULL,
  last_hash      TEXT,
  last_event_id  TEXT,
  event_count    BIGINT NOT NULL
) WITHOUT ROWID;
INSERT INTO chain_heads_new (user_id, last_sequence, last_hash, last_event_id, event_count)
  SELECT user_id, last_sequence, last_hash, last_event_id, event_count FROM chain_heads;
DROP TABLE chain_heads;
ALTER TABLE chain_heads_new RENAME TO chain_heads;

CREATE TABLE machine_heads_new (
  user_id    TEXT NOT NULL,
  machine_id TEXT NOT NULL,
  events     BIGINT NOT NULL,
  PRIMARY KEY (user_id, machine_id)
) WITHOUT ROWID;
INSERT INTO machine_heads_new (user_id, machine_id, events) SELECT user_id, machine_id, events FROM machine_heads;
DROP TABLE machine_heads;
ALTER TABLE machine_heads_new RENAME TO machine_heads;

CREATE TABLE daily_usage_new (
  user_id TEXT NOT NULL,
  day     TEXT NOT NULL,
  used    BIGINT NOT NULL,
  PRIMARY KEY (user_id, day)
) WITHOUT ROWID;
INSERT INTO daily_usage_new (user_id, day, used) SELECT user_id, day, used FROM daily_usage;
DROP TABLE daily_usage;
ALTER TABLE daily_usage_new RENAME TO daily_usage;

CREATE TABLE merkle_hashes_new (
  user_id TEXT   NOT NULL,
  idx     BIGINT NOT NULL,
  hash    BLOB   NOT NULL,
  PRIMARY KEY (user_id, idx)
) WITHOUT ROWID;
INSERT INTO merkle_hashes_new (user_id, idx, hash) SELECT user_id, idx, hash FROM merkle_hashes ORDER BY user_id, idx;
DROP TABLE merkle_hashes;
ALTER TABLE merkle_hashes_new RENAME TO merkle_hashes;
