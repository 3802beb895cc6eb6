-- Per-call approvals (CONTRACT.md "Approvals"; docs/approvals.md). A rule
-- holds a sub-agent's calls of a tool (exact names or "*") for a person's
-- approval; an approval is one held call, bound to its sub-agent, tool and
-- the SHA-256 of its input, used at most once. Times are unix microseconds.
CREATE TABLE approval_rules (
  user_id     TEXT NOT NULL,
  rule_id     TEXT NOT NULL,
  subagent    TEXT NOT NULL,
  tool        TEXT NOT NULL,
  ttl_seconds BIGINT NOT NULL,
  created_at  BIGINT NOT NULL,
  PRIMARY KEY (user_id, rule_id)
);
CREATE TABLE approvals (
  user_id        TEXT NOT NULL,
  approval_id    TEXT NOT NULL,
  rule_id        TEXT NOT NULL,
  subagent       TEXT NOT NULL,
  tool           TEXT NOT NULL,
  args_sha256    TEXT NOT NULL,
  call_event_id  TEXT NOT NULL,
  requested_by   TEXT NOT NULL,
  requested_kind TEXT NOT NULL,
  -- pending, approved, denied, expired or used; a pending or approved row
  -- past expires_at reads as expired until the expiry job marks it.
  status         TEXT NOT NULL,
  created_at     BIGINT NOT NULL,
  expires_at     BIGINT NOT NULL,
  decided_at     BIGINT,
  decided_by     TEXT,
  decided_kind   TEXT,
  note           TEXT,
  used_at        BIGINT,
  used_event_id  TEXT,
  PRIMARY KEY (user_id, approval_id)
);
CREATE INDEX approvals_by_status ON approvals(user_id, status, created_at);
CREATE INDEX approvals_by_time ON approvals(user_id, created_at);
CREATE INDEX approvals_to_expire ON approvals(status, expires_at);
