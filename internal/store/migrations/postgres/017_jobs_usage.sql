-- Operator jobs and usage (CONTRACT.md "Operator jobs", "Usage").

-- The expiry jobs visit only what expires soon.
CREATE INDEX grants_expiring ON grants(expires_at) WHERE revoked_at IS NULL;
CREATE INDEX api_keys_expiring ON api_keys(expires_at) WHERE revoked_at IS NULL AND expires_at IS NOT NULL;

-- One row per job and period: the replica whose insert made the row runs
-- that period (the lease), and records how it went. A replica that dies
-- mid-run leaves its row unfinished; the next period has a row of its own.
CREATE TABLE job_runs (
  job         TEXT NOT NULL,
  period      BIGINT NOT NULL,
  replica     TEXT NOT NULL,
  started_at  BIGINT NOT NULL,
  finished_at BIGINT,
  error       TEXT,
  PRIMARY KEY (job, period)
);

-- Credentialed calls counted per account, UTC day and dimension: kind is
-- capability, surface, gate (checks by status) or uses (grant uses, by n);
-- each replica adds its counts in batches.
CREATE TABLE usage_counts (
  user_id TEXT NOT NULL,
  day     TEXT NOT NULL,
  kind    TEXT NOT NULL,
  name    TEXT NOT NULL,
  count   BIGINT NOT NULL,
  PRIMARY KEY (user_id, day, kind, name)
);
