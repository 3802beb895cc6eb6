-- Per-call approvals (CONTRACT.md "Approvals", docs/approvals.md).
--
-- approval_rules: which calls wait for a person. subagent and tool are
-- exact names or '*'; ttl_seconds is how long an approval it asks for
-- lives (30..86400).
CREATE TABLE approval_rules (
  user_id     TEXT    NOT NULL,
  rule_id     TEXT    NOT NULL,
  subagent    TEXT    NOT NULL,
  tool        TEXT    NOT NULL,
  ttl_seconds INTEGER NOT NULL,
  created_at  BIGINT  NOT NULL,
  PRIMARY KEY (user_id, rule_id)
) WITHOUT ROWID;

-- approvals: one per call a rule matched, bound to the sub-agent, the tool
-- and args_sha256 (the call's raw.tool_input_sha256). status is pending,
-- approved, denied, expired or used; pending -> approved|denied|expired,
-- approved -> used|expired, each by a conditional update (the row's status
-- in the WHERE), so an approval is used at most once whatever the number
-- of replicas. requested_by is the identity (key or session id) that made
-- the call: it may not decide it. Times are Unix microseconds.
CREATE TABLE approvals (
  user_id        TEXT   NOT NULL,
  approval_id    TEXT   NOT NULL,
  rule_id        TEXT   NOT NULL,
  subagent       TEXT   NOT NULL,
  tool           TEXT   NOT NULL,
  args_sha256    TEXT   NOT NULL,
  status         TEXT   NOT NULL,
  requested_by   TEXT   NOT NULL,
  requested_kind TEXT   NOT NULL,
  call_event_id  TEXT   NOT NULL,
  created_at     BIGINT NOT NULL,
  expires_at     BIGINT NOT NULL,
  decided_at     BIGINT,
  decided_by     TEXT,
  decided_kind   TEXT,
  note           TEXT,
  used_at        BIGINT,
  used_event_id  TEXT,
  PRIMARY KEY (user_id, approval_id)
) WITHOUT ROWID;

CREATE INDEX approvals_by_status ON approvals (user_id, status, created_at);
-- The expiry job's scan: unfinished approvals by expiry.
CREATE INDEX approvals_expiring ON approvals (expires_at) WHERE status IN ('pending', 'approved');
