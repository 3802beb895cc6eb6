-- The delegation gate: one row per written grant (SPEC.md "Grant record").
-- A grant id may be reused once no live grant bears it (docs/decisions/gate.md),
-- so a row is (user_id, grant_id, generation): generation counts the earlier
-- grants of the account with that id. Times are unix microseconds.
-- uses is the meter: only a conditional UPDATE (uses + n <= max_tool_calls)
-- moves it, so concurrent uses never overspend.
CREATE TABLE grants (
  user_id        TEXT NOT NULL,
  grant_id       TEXT NOT NULL,
  generation     BIGINT NOT NULL,
  subagent       TEXT NOT NULL,
  parent_agent   TEXT,
  allowed_tools  TEXT NOT NULL,
  max_tool_calls BIGINT NOT NULL,
  expires_at     BIGINT NOT NULL,
  created_at     BIGINT NOT NULL,
  revoked_at     BIGINT,
  epoch          TEXT NOT NULL,
  token          TEXT NOT NULL,
  uses           BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (user_id, grant_id, generation)
);
-- The status check: a sub-agent's grants, newest first.
CREATE INDEX grants_subagent ON grants(user_id, subagent, created_at, grant_id, generation);
-- ... and of those only the ones that can still authorize.
CREATE INDEX grants_live ON grants(user_id, subagent, expires_at) WHERE revoked_at IS NULL;
-- The list, newest first.
CREATE INDEX grants_created ON grants(user_id, created_at, grant_id, generation);
