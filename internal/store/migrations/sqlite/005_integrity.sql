-- Integrity (CONTRACT.md "Integrity", docs/integrity.md). merkle_hashes holds
-- each account's RFC 6962 tree in golang.org/x/mod/sumdb/tlog's stored-hash
-- form: appending leaf n (the event with leaf_index n) writes the rows at
-- dense indexes from tlog.StoredHashIndex(0, n), in the event's transaction.
-- Rows are never updated or deleted.
CREATE TABLE merkle_hashes (
  user_id TEXT   NOT NULL,
  idx     BIGINT NOT NULL,
  hash    BLOB   NOT NULL,
  PRIMARY KEY (user_id, idx)
);

-- Chain blocks: signed checkpoints (C2SP tlog-checkpoint as a signed note by
-- the service identity). block_index is the position in the account's block
-- chain; the primary key makes two replicas sealing at once fail rather than
-- fork. note is the signed note verbatim; block_hash = SHA-256(note).
CREATE TABLE chain_blocks (
  user_id         TEXT   NOT NULL,
  block_index     BIGINT NOT NULL,
  tree_size       BIGINT NOT NULL,
  root_hash       BLOB   NOT NULL,
  prev_block_hash BLOB,
  block_hash      BLOB   NOT NULL,
  note            BLOB   NOT NULL,
  created_at      BIGINT NOT NULL,
  PRIMARY KEY (user_id, block_index),
  UNIQUE (user_id, tree_size)
);
