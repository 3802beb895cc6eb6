-- Witnesses (docs/integrity.md "Witnesses"): what each configured witness
-- (known by its note key name) holds of each account's log, and the
-- cosignatures it answered.
--
-- witness_state is one row per account and witness. witness_size is the
-- size the witness is known to hold for the account's origin (the "old
-- size" of the next add-checkpoint: the size it last cosigned, or the size
-- it answered with a 409); cosigned_size, cosigned_root and cosigned_block
-- describe the newest checkpoint it cosigned for us. log_size is the
-- newest block's size when the witness job last looked, so the lag
-- (log_size - cosigned_size) is read from this table alone. failures and
-- next_attempt_at are the job's backoff; last_error says why.
CREATE TABLE witness_state (
  user_id         TEXT    NOT NULL,
  witness         TEXT    NOT NULL,
  witness_size    BIGINT  NOT NULL DEFAULT 0,
  cosigned_size   BIGINT  NOT NULL DEFAULT 0,
  cosigned_root   BYTEA,
  cosigned_block  BIGINT,
  log_size        BIGINT  NOT NULL DEFAULT 0,
  failures        INTEGER NOT NULL DEFAULT 0,
  next_attempt_at BIGINT  NOT NULL DEFAULT 0,
  last_error      TEXT,
  updated_at      BIGINT  NOT NULL,
  PRIMARY KEY (user_id, witness)
);

-- A witness's cosignature on a block: the note signature line it answered
-- (C2SP tlog-cosignature, cosignature/v1), verbatim without its newline.
-- Kept outside chain_blocks.note, whose bytes the block hash covers.
CREATE TABLE block_cosignatures (
  user_id     TEXT   NOT NULL,
  block_index BIGINT NOT NULL,
  witness     TEXT   NOT NULL,
  signature   TEXT   NOT NULL,
  created_at  BIGINT NOT NULL,
  PRIMARY KEY (user_id, block_index, witness)
);
