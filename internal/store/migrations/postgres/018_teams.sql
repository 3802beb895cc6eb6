-- Teams (SPEC.md "Teams", CONTRACT.md "Teams"; docs/decisions/teams.md).
-- Every change to a team's members runs under its orgs row's lock.

-- owner_user_id is always an active owner: the creator, and when that owner
-- leaves, the longest-standing remaining owner.
CREATE TABLE orgs (
  org_id        TEXT PRIMARY KEY,
  name          TEXT NOT NULL,
  owner_user_id TEXT NOT NULL REFERENCES accounts(user_id),
  created_at    BIGINT NOT NULL
);

-- One row per team and email: an invitation (status invited, user_id NULL,
-- live until expires_at) that its email's account accepts (status active,
-- user_id set, joined_at). Removing a member or withdrawing an invitation
-- deletes the row; the members' notifications keep the history.
CREATE TABLE org_members (
  org_id     TEXT NOT NULL REFERENCES orgs(org_id),
  email      TEXT NOT NULL,
  user_id    TEXT REFERENCES accounts(user_id),
  role       TEXT NOT NULL CHECK (role IN ('owner', 'member', 'viewer')),
  status     TEXT NOT NULL CHECK (status IN ('invited', 'active')),
  created_at BIGINT NOT NULL,
  expires_at BIGINT,
  joined_at  BIGINT,
  invited_by TEXT,
  PRIMARY KEY (org_id, email)
);
-- An account's teams; an account is a team's member once.
CREATE UNIQUE INDEX org_members_user ON org_members(user_id, org_id);
