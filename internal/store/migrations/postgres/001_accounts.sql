CREATE TABLE accounts (
  user_id    TEXT PRIMARY KEY,
  email      TEXT UNIQUE,
  is_admin   BOOLEAN NOT NULL DEFAULT FALSE,
  created_at BIGINT NOT NULL
);

CREATE TABLE api_keys (
  id         TEXT PRIMARY KEY,
  user_id    TEXT NOT NULL REFERENCES accounts(user_id),
  key_hash   BYTEA NOT NULL UNIQUE,
  prefix     TEXT NOT NULL,
  machine    TEXT NOT NULL DEFAULT '',
  label      TEXT NOT NULL DEFAULT '',
  scopes     TEXT NOT NULL DEFAULT '',
  created_at BIGINT NOT NULL,
  expires_at BIGINT,
  revoked_at BIGINT
);
CREATE INDEX api_keys_user ON api_keys(user_id, created_at);

CREATE TABLE service_settings (
  name  TEXT PRIMARY KEY,
  value BYTEA NOT NULL
);
