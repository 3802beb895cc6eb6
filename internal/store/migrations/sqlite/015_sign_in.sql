-- Sign-in (CONTRACT.md "Credentials") and legal acceptances ("Legal
-- agreements"). Codes and session tokens are stored only as hashes.

-- One-time codes: the newest unused code of an email is the one a
-- verification is compared with; a new request supersedes the earlier ones.
-- acceptances holds, for an email without an account yet, the acceptances
-- its request carried (JSON), recorded when the code is verified.
CREATE TABLE otp_codes (
  id          TEXT PRIMARY KEY,
  email       TEXT NOT NULL,
  code_hash   BLOB NOT NULL,
  acceptances TEXT,
  created_at  BIGINT NOT NULL,
  expires_at  BIGINT NOT NULL,
  attempts    INTEGER NOT NULL DEFAULT 0,
  used_at     BIGINT
);
CREATE INDEX otp_codes_email ON otp_codes(email, created_at);

-- The per-email row a code request locks, so that concurrent requests of one
-- email count each other against the hourly limit (PostgreSQL; SQLite's one
-- writer serialises them anyway).
CREATE TABLE otp_emails (
  email TEXT PRIMARY KEY
) WITHOUT ROWID;

CREATE TABLE sessions (
  id         TEXT PRIMARY KEY,
  token_hash BLOB NOT NULL UNIQUE,
  user_id    TEXT NOT NULL REFERENCES accounts(user_id),
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  ended_at   BIGINT
);
CREATE INDEX sessions_user ON sessions(user_id);

-- One row per account, document and version accepted (the first acceptance
-- of a version stands).
CREATE TABLE legal_acceptances (
  user_id      TEXT NOT NULL REFERENCES accounts(user_id),
  document_id  TEXT NOT NULL,
  version      TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  source       TEXT NOT NULL,
  email        TEXT NOT NULL,
  recorded_at  BIGINT NOT NULL,
  PRIMARY KEY (user_id, document_id, version)
);
