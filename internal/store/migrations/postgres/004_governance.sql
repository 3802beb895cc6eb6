-- Governance proposals (SPEC.md "Proposal"). Status and the *_at/actor pairs
-- change only through domain.Transition, one chain event per change. Times are
-- unix microseconds; actors and evidence are JSON text.
CREATE TABLE proposals (
  user_id       TEXT NOT NULL,
  proposal_id   TEXT NOT NULL,
  -- chain sequence of the proposal's governance.proposed event: creation order
  -- within the account, for "newest first" without relying on clocks.
  seq           BIGINT NOT NULL,
  status        TEXT NOT NULL,
  kind          TEXT NOT NULL,
  note          TEXT,
  evidence      TEXT NOT NULL,
  subagent      TEXT NOT NULL,
  tool          TEXT,
  proposed_at   BIGINT NOT NULL,
  proposer      TEXT NOT NULL,
  ratified_at   BIGINT,
  ratifier      TEXT,
  ratify_reason TEXT,
  enacted_at    BIGINT,
  enactor       TEXT,
  enact_reason  TEXT,
  rejected_at   BIGINT,
  rejector      TEXT,
  reject_reason TEXT,
  PRIMARY KEY (user_id, proposal_id)
);
CREATE INDEX proposals_newest ON proposals(user_id, seq);
CREATE INDEX proposals_status ON proposals(user_id, status, seq);
-- The rules the gate obeys (App.EnactedRules).
CREATE INDEX proposals_enacted ON proposals(user_id, subagent, enacted_at) WHERE status = 'enacted';
