-- Approvals at speed (issue #38): the pending list from an index, and the
-- generation of an account's approval rules on its head row.
--
-- GET /v1/approvals?status=pending reads an account's pending approvals
-- newest first (created_at DESC, approval_id DESC, LIMIT): a partial index of
-- the pending rows, with approval_id in it, gives them in that order with no
-- sort (issue #38: 10,000 pending approvals list in p99 <= 50 ms;
-- docs/performance.md "Approvals at speed"). Other statuses read
-- approvals_by_time in the same order. No index is keyed by status any more:
-- the approved call's use (approved to used) then moves no index entry kept
-- per account, only its row and the expiry job's entry. The expiry job's
-- index keeps only the live rows it looks at (pending or approved): as
-- (status, expires_at) SQLite's planner took it for the list, whose
-- `status = 'pending' AND expires_at > now` it matches, and sorted every
-- pending approval of every account.
DROP INDEX approvals_by_status;
DROP INDEX approvals_by_time;
DROP INDEX approvals_to_expire;
CREATE INDEX approvals_pending ON approvals(user_id, created_at, approval_id) WHERE status = 'pending';
CREATE INDEX approvals_by_time ON approvals(user_id, created_at, approval_id);
CREATE INDEX approvals_live_by_expiry ON approvals(expires_at) WHERE status IN ('pending', 'approved');
-- The generation of an account's approval rules, bumped by every change of
-- them under the head's lock (store.LockHeadRules): a tool call that holds
-- the head knows from the row it locks whether the account has any rule (0:
-- none ever) and whether the rules it read at a generation are still
-- current, so a plain allowed call reads no approval_rules (issue #38).
ALTER TABLE chain_heads ADD COLUMN approval_rules_gen BIGINT NOT NULL DEFAULT 0;
UPDATE chain_heads SET approval_rules_gen = 1 WHERE user_id IN (SELECT user_id FROM approval_rules);
