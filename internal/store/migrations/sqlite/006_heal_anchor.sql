-- Chain heal (SPEC.md "Chain heal", docs/decisions/heal.md). One row per heal
-- finding that a chain_repair event already answers; the event's raw carries
-- the same finding_key, so this table is an index of the chain, not a second
-- record. The primary key is what makes two replicas running heal at once
-- write one repair per finding: the second sees the first's row under the
-- account's head lock, and a racer that got past it anyway hits the key.
CREATE TABLE heal_repairs (
  user_id         TEXT   NOT NULL,
  finding_key     TEXT   NOT NULL,
  kind            TEXT   NOT NULL,
  repair_event_id TEXT   NOT NULL,
  repair_sequence BIGINT NOT NULL,
  created_at      BIGINT NOT NULL,
  PRIMARY KEY (user_id, finding_key)
);

-- Anchor receipts (SPEC.md "Operator cron" anchor, docs/decisions/anchor.md).
-- One RFC 3161 timestamp token per anchored block; the same receipt is also an
-- anchor event on the account's chain (event_id). chain_size is the account's
-- event count right after that event, so the next sweep knows the root has not
-- changed when nothing was appended since.
CREATE TABLE anchors (
  user_id       TEXT   NOT NULL,
  block_index   BIGINT NOT NULL,
  tree_size     BIGINT NOT NULL,
  root_hash     BLOB   NOT NULL,
  block_hash    BLOB   NOT NULL,
  provider      TEXT   NOT NULL,
  tsa_url       TEXT   NOT NULL,
  token         BLOB   NOT NULL,
  gen_time      BIGINT NOT NULL,
  serial_number TEXT   NOT NULL,
  event_id      TEXT   NOT NULL,
  chain_size    BIGINT NOT NULL,
  created_at    BIGINT NOT NULL,
  PRIMARY KEY (user_id, block_index)
);
