-- Migration 034: the arguments' text of a pending approval.
--
-- The arguments' text of a pending approval (docs/approvals.md "The
-- arguments' text"): sent only when the operator told the hook or the proxy
-- to (off by default), shown to the approver, and deleted when the approval
-- is decided or expires. It is never on the chain, never in an export: the
-- record keeps the digest (approvals.args_sha256), not the text.
CREATE TABLE approval_args (
  user_id     TEXT NOT NULL,
  approval_id TEXT NOT NULL,
  args_text   TEXT NOT NULL,
  PRIMARY KEY (user_id, approval_id)
);
