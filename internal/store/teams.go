package store

// Teams (migration 018; SPEC.md "Teams"): orgs and their member rows, an
// invitation being a member row with status invited. Every write takes the
// caller's transaction, which holds the org's lock (LockOrg) first.

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Org is a team.
type Org struct {
	OrgID       string
	Name        string
	OwnerUserID string
	CreatedAt   time.Time
}

// MemberOrg is a team as one of its active members sees it: with that
// member's role.
type MemberOrg struct {
	Org
	Role string
}

// OrgMember is a member row: an invitation (status invited, UserID nil) or
// a member (status active).
type OrgMember struct {
	OrgID     string
	Email     string
	UserID    *string
	Role      string
	Status    string
	CreatedAt time.Time
	ExpiresAt *time.Time // an invitation's end; nil once active
	JoinedAt  *time.Time // nil while invited
	InvitedBy *string    // nil for the creator
}

// CreateOrg stores a team and its creator's active owner row inside tx.
func (s *Store) CreateOrg(ctx context.Context, tx *sql.Tx, o Org, owner OrgMember) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO orgs (org_id, name, owner_user_id, created_at) VALUES ($1, $2, $3, $4)`,
		o.OrgID, o.Name, o.OwnerUserID, o.CreatedAt.UnixMicro()); err != nil {
		if IsUniqueViolation(err) {
			return ErrConflict
		}
		return err
	}
	return insertOrgMember(ctx, tx, owner)
}

// LockOrg holds the team until tx ends and returns it: every change to its
// members is serialised on it (PostgreSQL; on SQLite the writer holds the
// database). ErrNotFound when there is no such team.
func (s *Store) LockOrg(ctx context.Context, tx *sql.Tx, orgID string) (Org, error) {
	q := `SELECT org_id, name, owner_user_id, created_at FROM orgs WHERE org_id = $1`
	if s.Dialect == Postgres {
		q += ` FOR UPDATE`
	}
	return scanOrg(tx.QueryRowContext(ctx, q, orgID))
}

func scanOrg(r scanner) (Org, error) {
	var o Org
	var created int64
	err := r.Scan(&o.OrgID, &o.Name, &o.OwnerUserID, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return o, ErrNotFound
	}
	o.CreatedAt = time.UnixMicro(created).UTC()
	return o, err
}

const memberOrgSelect = `SELECT o.org_id, o.name, o.owner_user_id, o.created_at, m.role
	FROM org_members m JOIN orgs o ON o.org_id = m.org_id
	WHERE m.user_id = $1 AND m.status = 'active'`

func scanMemberOrg(r scanner) (MemberOrg, error) {
	var o MemberOrg
	var created int64
	err := r.Scan(&o.OrgID, &o.Name, &o.OwnerUserID, &created, &o.Role)
	if errors.Is(err, sql.ErrNoRows) {
		return o, ErrNotFound
	}
	o.CreatedAt = time.UnixMicro(created).UTC()
	return o, err
}

// OrgOf reads the team orgID as its active member userID sees it, through
// q (nil: the read pool); ErrNotFound when there is no such team or userID
// is not an active member of it.
func (s *Store) OrgOf(ctx context.Context, q Querier, orgID, userID string) (MemberOrg, error) {
	if q == nil {
		q = s.read
	}
	return scanMemberOrg(q.QueryRowContext(ctx, memberOrgSelect+` AND m.org_id = $2`, userID, orgID))
}

// OrgsOf lists the teams userID is an active member of, oldest first.
func (s *Store) OrgsOf(ctx context.Context, userID string) ([]MemberOrg, error) {
	return queryAll(ctx, s, nil, scanMemberOrg, memberOrgSelect+` ORDER BY o.created_at, o.org_id`, userID)
}

// CountOwnedOrgs counts the teams userID is an active owner of.
func (s *Store) CountOwnedOrgs(ctx context.Context, q Querier, userID string) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM org_members WHERE user_id = $1 AND status = 'active' AND role = 'owner'`, userID).Scan(&n)
	return n, err
}

const memberColumns = `org_id, email, user_id, role, status, created_at, expires_at, joined_at, invited_by`

func scanOrgMember(r scanner) (OrgMember, error) {
	var m OrgMember
	var created int64
	var expires, joined sql.NullInt64
	err := r.Scan(&m.OrgID, &m.Email, &m.UserID, &m.Role, &m.Status, &created, &expires, &joined, &m.InvitedBy)
	if errors.Is(err, sql.ErrNoRows) {
		return m, ErrNotFound
	}
	m.CreatedAt = time.UnixMicro(created).UTC()
	m.ExpiresAt, m.JoinedAt = fromMicros(expires), fromMicros(joined)
	return m, err
}

func insertOrgMember(ctx context.Context, tx *sql.Tx, m OrgMember) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO org_members (`+memberColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		m.OrgID, m.Email, m.UserID, m.Role, m.Status, m.CreatedAt.UnixMicro(), micros(m.ExpiresAt), micros(m.JoinedAt), m.InvitedBy)
	if IsUniqueViolation(err) {
		return ErrConflict
	}
	return err
}

// OrgMember reads the team's row of email, expired invitations included;
// ErrNotFound when there is none.
func (s *Store) OrgMember(ctx context.Context, q Querier, orgID, email string) (OrgMember, error) {
	return scanOrgMember(q.QueryRowContext(ctx, `SELECT `+memberColumns+` FROM org_members WHERE org_id = $1 AND email = $2`, orgID, email))
}

// ActiveMember reads userID's active member row of the team; ErrNotFound
// when userID is not an active member.
func (s *Store) ActiveMember(ctx context.Context, q Querier, orgID, userID string) (OrgMember, error) {
	return scanOrgMember(q.QueryRowContext(ctx, `SELECT `+memberColumns+` FROM org_members
		WHERE org_id = $1 AND user_id = $2 AND status = 'active'`, orgID, userID))
}

// OrgMembers lists the team's active members and its invitations live at
// now: the active owners, the other active members, then the invitations,
// each part in the order its rows were made.
func (s *Store) OrgMembers(ctx context.Context, orgID string, now time.Time) ([]OrgMember, error) {
	return queryAll(ctx, s, nil, scanOrgMember, `SELECT `+memberColumns+` FROM org_members
		WHERE org_id = $1 AND (status = 'active' OR expires_at > $2)
		ORDER BY CASE WHEN status = 'invited' THEN 2 WHEN role = 'owner' THEN 0 ELSE 1 END, created_at, email`, orgID, now.UnixMicro())
}

// OrgCounts counts the team's active members and its invitations live at
// now, through q (nil: the read pool).
func (s *Store) OrgCounts(ctx context.Context, q Querier, orgID string, now time.Time) (active, invited int, err error) {
	if q == nil {
		q = s.read
	}
	err = q.QueryRowContext(ctx, `SELECT
			COALESCE(SUM(CASE WHEN status = 'active' THEN 1 ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN status = 'invited' AND expires_at > $2 THEN 1 ELSE 0 END), 0)
		FROM org_members WHERE org_id = $1`, orgID, now.UnixMicro()).Scan(&active, &invited)
	return active, invited, err
}

// ActiveOwners lists the team's active owners, longest-standing first.
func (s *Store) ActiveOwners(ctx context.Context, q Querier, orgID string) ([]OrgMember, error) {
	return queryAll(ctx, s, q, scanOrgMember, `SELECT `+memberColumns+` FROM org_members
		WHERE org_id = $1 AND status = 'active' AND role = 'owner' ORDER BY joined_at, user_id`, orgID)
}

// ActiveMemberIDs lists the accounts of the team's active members in
// user_id order (the order a write locks their heads in).
func (s *Store) ActiveMemberIDs(ctx context.Context, q Querier, orgID string) ([]string, error) {
	return queryAll(ctx, s, q, func(r scanner) (string, error) {
		var id string
		return id, r.Scan(&id)
	}, `SELECT user_id FROM org_members WHERE org_id = $1 AND status = 'active' ORDER BY user_id`, orgID)
}

// PutInvitation stores an invitation inside tx, in place of an expired one
// of the same email (a live one, or a member, is for the caller to refuse
// first: ErrConflict).
func (s *Store) PutInvitation(ctx context.Context, tx *sql.Tx, m OrgMember) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM org_members WHERE org_id = $1 AND email = $2 AND status = 'invited' AND expires_at <= $3`,
		m.OrgID, m.Email, m.CreatedAt.UnixMicro()); err != nil {
		return err
	}
	return insertOrgMember(ctx, tx, m)
}

// CountLiveInvitations counts the team's invitations live at now.
func (s *Store) CountLiveInvitations(ctx context.Context, q Querier, orgID string, now time.Time) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM org_members WHERE org_id = $1 AND status = 'invited' AND expires_at > $2`,
		orgID, now.UnixMicro()).Scan(&n)
	return n, err
}

// ActivateMember makes email's invitation an active membership of userID
// at now, if it is still live then; false when it is not (accepted before,
// withdrawn, expired).
func (s *Store) ActivateMember(ctx context.Context, tx *sql.Tx, orgID, email, userID string, now time.Time) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE org_members SET status = 'active', user_id = $3, joined_at = $4, expires_at = NULL
		WHERE org_id = $1 AND email = $2 AND status = 'invited' AND expires_at > $4`, orgID, email, userID, now.UnixMicro())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// DeleteOrgMember deletes the row m, if it is still as m was read (its
// status and created_at): false when it is not.
func (s *Store) DeleteOrgMember(ctx context.Context, tx *sql.Tx, m OrgMember) (bool, error) {
	res, err := tx.ExecContext(ctx, `DELETE FROM org_members WHERE org_id = $1 AND email = $2 AND status = $3 AND created_at = $4`,
		m.OrgID, m.Email, m.Status, m.CreatedAt.UnixMicro())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// SetOrgOwner names userID the team's owner (owner_user_id).
func (s *Store) SetOrgOwner(ctx context.Context, tx *sql.Tx, orgID, userID string) error {
	_, err := tx.ExecContext(ctx, `UPDATE orgs SET owner_user_id = $2 WHERE org_id = $1`, orgID, userID)
	return err
}

// OrgKeys lists the keys of the team's active members, newest first:
// metadata only, as Keys does.
func (s *Store) OrgKeys(ctx context.Context, orgID string) ([]APIKey, error) {
	return queryAll(ctx, s, nil, scanKey, `SELECT k.id, k.user_id, k.key_hash, k.prefix, k.machine, k.label, k.scopes, k.created_at, k.expires_at, k.revoked_at
		FROM org_members m JOIN api_keys k ON k.user_id = m.user_id
		WHERE m.org_id = $1 AND m.status = 'active' ORDER BY k.created_at DESC, k.id DESC`, orgID)
}
