package app

// Teams (SPEC.md "Teams", "Team member status", "Authentication" 6;
// CONTRACT.md "Teams"; docs/decisions/teams.md). A team's members are its
// owners, members and viewers; an invitation names an email, is mailed, and
// is accepted by the account holding that email before it expires. Every
// change to a team's members runs in one write holding the team's lock, so
// that two changes never both pass a check the other would fail (two
// accepts of one invitation, two owners removing each other). A caller who
// is not an active member gets exactly the answer of a missing team.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

var (
	errOrgNotFound        = domain.NotFound(domain.CodeOrgNotFound, "team")
	errMemberNotFound     = domain.NotFound(domain.CodeMemberNotFound, "member or live invitation")
	errInvitationNotFound = &domain.Error{Code: domain.CodeInvitationNotFound,
		Detail: "no pending invitation to this team for the caller's email"}
	errOwnerRequired = &domain.Error{Code: domain.CodeOwnerRequired,
		Detail: "only an owner of the team may do this"}
)

// Removal reasons a team.member_removed notice names.
const (
	removedByOwner   = "removed"
	removedWithdrawn = "withdrawn"
	removedLeft      = "left"
	removedNotMailed = "not_mailed"
)

// CreateOrg creates a team whose owner is the caller. Members are known by
// email, so the caller's account needs one.
func (a *App) CreateOrg(ctx context.Context, p Principal, req api.CreateTeamRequest) (api.TeamCreated, error) {
	name := deref(req.Name)
	if why := domain.CheckTeamName(name); why != "" {
		return api.TeamCreated{}, domain.Validation(domain.FieldError{Field: "name", Message: why})
	}
	acct, err := a.store.Account(ctx, p.UserID)
	if err != nil {
		return api.TeamCreated{}, err
	}
	if acct.Email == nil {
		return api.TeamCreated{}, &domain.Error{Code: domain.CodeAccountHasNoEmail,
			Detail: "team members are known by email: an account without one cannot own a team"}
	}
	id, err := a.newID(domain.OrgIDPrefix, domain.OrgIDBytes)
	if err != nil {
		return api.TeamCreated{}, err
	}
	now := a.now().UTC()
	org := store.Org{OrgID: id, Name: name, OwnerUserID: p.UserID, CreatedAt: now}
	owner := store.OrgMember{OrgID: id, Email: *acct.Email, UserID: &p.UserID, Role: domain.RoleOwner,
		Status: domain.MemberActive, CreatedAt: now, JoinedAt: &now}
	err = a.w.Write(ctx, func(t *writer.Tx) error {
		// The account's lock makes the count exact across replicas.
		if _, err := t.Lock(ctx, p.UserID); err != nil {
			return err
		}
		n, err := a.store.CountOwnedOrgs(ctx, t.SQL(), p.UserID)
		if err != nil {
			return err
		}
		if n >= domain.MaxOwnedTeams {
			return domain.Errorf(domain.CodeTooManyOrgs, "an account owns at most %d teams", domain.MaxOwnedTeams)
		}
		return a.store.CreateOrg(ctx, t.SQL(), org, owner)
	})
	if err != nil {
		return api.TeamCreated{}, err
	}
	return api.TeamCreated{Org: teamOf(store.MemberOrg{Org: org, Role: domain.RoleOwner})}, nil
}

// Orgs lists the teams the caller owns or has joined, never one it is only
// invited to.
func (a *App) Orgs(ctx context.Context, p Principal) (api.TeamList, error) {
	orgs, err := a.store.OrgsOf(ctx, p.UserID)
	if err != nil {
		return api.TeamList{}, err
	}
	out := api.TeamList{Orgs: make([]api.Team, len(orgs))}
	for i, o := range orgs {
		out.Orgs[i] = teamOf(o)
	}
	return out, nil
}

// Org describes a team to one of its members.
func (a *App) Org(ctx context.Context, p Principal, orgID string) (api.TeamDetail, error) {
	org, err := a.memberOrg(ctx, p, orgID)
	if err != nil {
		return api.TeamDetail{}, err
	}
	active, invited, err := a.store.OrgCounts(ctx, nil, orgID, a.now())
	if err != nil {
		return api.TeamDetail{}, err
	}
	return api.TeamDetail{Org: teamOf(org), MemberCount: active, InvitedCount: invited}, nil
}

// OrgMembers lists a team's active members and live invitations to one of
// its members.
func (a *App) OrgMembers(ctx context.Context, p Principal, orgID string) (api.TeamMembers, error) {
	if _, err := a.memberOrg(ctx, p, orgID); err != nil {
		return api.TeamMembers{}, err
	}
	members, err := a.store.OrgMembers(ctx, orgID, a.now())
	if err != nil {
		return api.TeamMembers{}, err
	}
	out := api.TeamMembers{OrgID: orgID, Members: make([]api.TeamMember, len(members))}
	for i, m := range members {
		out.Members[i] = teamMemberOf(m)
	}
	return out, nil
}

// OrgKeys lists the key metadata of every active member of a team, to one
// of its members.
func (a *App) OrgKeys(ctx context.Context, p Principal, orgID string) (api.TeamKeys, error) {
	if _, err := a.memberOrg(ctx, p, orgID); err != nil {
		return api.TeamKeys{}, err
	}
	keys, err := a.store.OrgKeys(ctx, orgID)
	if err != nil {
		return api.TeamKeys{}, err
	}
	return api.TeamKeys{OrgID: orgID, Keys: keysOf(keys)}, nil
}

// teamOf is a team as one of its members sees it.
func teamOf(o store.MemberOrg) api.Team {
	return api.Team{OrgID: o.OrgID, Name: o.Name, OwnerUserID: o.OwnerUserID, CreatedAt: domain.FormatTimestamp(o.CreatedAt), Role: o.Role}
}

// teamMemberOf is a member or an invitation as the API shows it.
func teamMemberOf(m store.OrgMember) api.TeamMember {
	return api.TeamMember{OrgID: m.OrgID, UserID: m.UserID, Email: m.Email, Role: m.Role, Status: m.Status,
		CreatedAt: domain.FormatTimestamp(m.CreatedAt)}
}

// memberOrg reads the team as the caller, an active member, sees it; any
// other caller, and an id that cannot exist, get errOrgNotFound.
func (a *App) memberOrg(ctx context.Context, p Principal, orgID string) (store.MemberOrg, error) {
	if !domain.ValidOrgID(orgID) {
		return store.MemberOrg{}, errOrgNotFound
	}
	org, err := a.store.OrgOf(ctx, nil, orgID, p.UserID)
	if errors.Is(err, store.ErrNotFound) {
		return org, errOrgNotFound
	}
	return org, err
}

// lockOrgAs locks the team inside t and reads the caller's active member
// row; a caller who is not one gets errOrgNotFound, as for a missing team.
func (a *App) lockOrgAs(ctx context.Context, t *writer.Tx, orgID string, p Principal) (store.Org, store.OrgMember, error) {
	if !domain.ValidOrgID(orgID) {
		return store.Org{}, store.OrgMember{}, errOrgNotFound
	}
	org, err := a.store.LockOrg(ctx, t.SQL(), orgID)
	if err == nil {
		var caller store.OrgMember
		caller, err = a.store.ActiveMember(ctx, t.SQL(), orgID, p.UserID)
		if err == nil {
			return org, caller, nil
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		err = errOrgNotFound
	}
	return store.Org{}, store.OrgMember{}, err
}

// Invite invites email into a team as role (SPEC.md "Team member status":
// the caller must be an owner) and mails the invitation. Email and role are
// pointers so that a missing one is named like an invalid one, after the
// caller's right to invite was checked. Each invitation mailed is charged
// to the inviting account, the team, the address and the deployment
// (inviteBudgets: 429 rate_limit_exceeded once one is spent). If the mailer
// cannot take the invitation it is withdrawn again, its charge given back,
// and the caller gets 503 mail_unavailable.
func (a *App) Invite(ctx context.Context, p Principal, orgID string, req api.InviteRequest) (api.TeamMemberResponse, error) {
	m, err := a.invite(ctx, p, orgID, req.Email, req.Role)
	a.noteRefusal(ctx, p.UserID, err)
	if err != nil {
		return api.TeamMemberResponse{}, err
	}
	return api.TeamMemberResponse{Member: teamMemberOf(m)}, nil
}

func (a *App) invite(ctx context.Context, p Principal, orgID string, rawEmail, role *string) (store.OrgMember, error) {
	now := a.now().UTC()
	var org store.Org
	var inviter string
	var m store.OrgMember
	var budgets []budget
	err := a.w.Write(ctx, func(t *writer.Tx) error {
		var caller store.OrgMember
		var err error
		if org, caller, err = a.lockOrgAs(ctx, t, orgID, p); err != nil {
			return err
		}
		if !domain.CanInvite(caller.Role) {
			return errOwnerRequired
		}
		inviter = caller.Email
		email, err := invitation(rawEmail, role)
		if err != nil {
			return err
		}
		switch prior, err := a.store.OrgMember(ctx, t.SQL(), orgID, email); {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		case prior.Status == domain.MemberActive:
			return domain.Errorf(domain.CodeAlreadyMember, "%s is already a member of this team", email)
		case prior.ExpiresAt.After(now):
			return domain.Errorf(domain.CodeAlreadyInvited,
				"%s has a pending invitation to this team; withdraw it (DELETE its member) to invite again", email)
		}
		n, err := a.store.CountLiveInvitations(ctx, t.SQL(), orgID, now)
		if err != nil {
			return err
		}
		if n >= domain.MaxPendingInvitations {
			return domain.Errorf(domain.CodeTooManyInvitations,
				"a team has at most %d pending invitations", domain.MaxPendingInvitations)
		}
		budgets = a.inviteBudgets(p.UserID, orgID, email)
		if err := a.charge(ctx, t, domain.CodeRateLimited, budgets...); err != nil {
			return err
		}
		expires := now.Add(domain.InvitationLifetime)
		m = store.OrgMember{OrgID: orgID, Email: email, Role: *role, Status: domain.MemberInvited,
			CreatedAt: now, ExpiresAt: &expires, InvitedBy: &p.UserID}
		if err := a.store.PutInvitation(ctx, t.SQL(), m); err != nil {
			return err
		}
		return a.notifyTeam(ctx, t, orgID, nil, Notice{Type: domain.NoticeTeamMemberInvited, Subject: teamSubject(org, m)})
	})
	if err != nil {
		return store.OrgMember{}, err
	}
	if err := a.mail.Send(ctx, invitationMail(org, m, inviter)); err != nil {
		a.log.Error("team invitation not mailed", "org_id", orgID, "err", err)
		withdrawn, werr := a.withdrawUnmailed(ctx, org, m, budgets)
		if werr != nil {
			return store.OrgMember{}, werr
		}
		if withdrawn {
			return store.OrgMember{}, &domain.Error{Code: domain.CodeMailUnavailable, RetryAfter: 30,
				Detail: "the invitation could not be mailed, so it was withdrawn; try again shortly"}
		}
		// Accepted (or removed) in the meantime: it reached its person.
	}
	return m, nil
}

// invitation checks an invitation's fields and returns its email as stored.
func invitation(rawEmail, role *string) (string, error) {
	var errs []domain.FieldError
	var email string
	if rawEmail == nil {
		errs = append(errs, domain.FieldError{Field: "email", Message: "required"})
	} else if e, ok := domain.NormalizeEmail(*rawEmail); ok {
		email = e
	} else {
		errs = append(errs, domain.FieldError{Field: "email", Message: "must be one plain address like name@example.com"})
	}
	if role == nil {
		errs = append(errs, domain.FieldError{Field: "role", Message: "required"})
	} else if !domain.ValidRole(*role) {
		errs = append(errs, domain.FieldError{Field: "role", Message: "must be owner, member or viewer"})
	}
	if len(errs) > 0 {
		return "", domain.Validation(errs...)
	}
	return email, nil
}

// withdrawUnmailed withdraws the invitation m the mailer could not take,
// and gives back what it was charged, unless it was accepted or removed
// since; it reports whether it did.
func (a *App) withdrawUnmailed(ctx context.Context, org store.Org, m store.OrgMember, charged []budget) (bool, error) {
	ctx = context.WithoutCancel(ctx)
	var withdrawn bool
	err := a.w.Write(ctx, func(t *writer.Tx) error {
		if _, err := a.store.LockOrg(ctx, t.SQL(), m.OrgID); err != nil {
			return err
		}
		var err error
		if withdrawn, err = a.store.DeleteOrgMember(ctx, t.SQL(), m); err != nil || !withdrawn {
			return err
		}
		if err := a.refund(ctx, t, charged...); err != nil {
			return err
		}
		return a.notifyTeam(ctx, t, m.OrgID, nil, removedNotice(org, m, removedNotMailed))
	})
	return withdrawn, err
}

// invitationMail is the invitation as its email receives it: who invited,
// to what, how to accept, until when. It holds no secret: accepting takes
// signing in with this email.
func invitationMail(org store.Org, m store.OrgMember, inviter string) mail.Message {
	body := fmt.Sprintf("%s invited you to the auditchain team %q (%s) as %s.\n\n"+
		"To accept, sign in to auditchain with this address (%s) and send\n\n"+
		"    POST /v1/orgs/%s/accept\n\n"+
		"with your session, or with an API key of your account. The invitation expires at %s.\n"+
		"If you did not expect it, ignore this message: nothing happens unless you accept.\n",
		inviter, org.Name, org.OrgID, m.Role, m.Email, org.OrgID, m.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"))
	return mail.Message{To: m.Email, Kind: "team_invitation", Subject: "[auditchain] You are invited to a team", Body: body}
}

// AcceptInvitation makes the caller's pending invitation to a team an
// active membership (SPEC.md "Team member status": invited → active for
// the caller signed in with the invited email, by session or by a key of
// its account). Without a live invitation for the caller's email, however
// the team stands, the answer is 404 invitation_not_found.
func (a *App) AcceptInvitation(ctx context.Context, p Principal, orgID string) (api.TeamMemberResponse, error) {
	if !domain.ValidOrgID(orgID) {
		return api.TeamMemberResponse{}, errInvitationNotFound
	}
	acct, err := a.store.Account(ctx, p.UserID)
	if err != nil {
		return api.TeamMemberResponse{}, err
	}
	if acct.Email == nil {
		return api.TeamMemberResponse{}, errInvitationNotFound
	}
	now := a.now().UTC()
	var m store.OrgMember
	err = a.w.Write(ctx, func(t *writer.Tx) error {
		org, err := a.store.LockOrg(ctx, t.SQL(), orgID)
		if errors.Is(err, store.ErrNotFound) {
			return errInvitationNotFound
		}
		if err != nil {
			return err
		}
		switch ok, err := a.store.ActivateMember(ctx, t.SQL(), orgID, *acct.Email, p.UserID, now); {
		case err != nil:
			return err
		case !ok:
			return errInvitationNotFound
		}
		if m, err = a.store.OrgMember(ctx, t.SQL(), orgID, *acct.Email); err != nil {
			return err
		}
		return a.notifyTeam(ctx, t, orgID, nil, Notice{Type: domain.NoticeTeamMemberJoined, Subject: teamSubject(org, m)})
	})
	if err != nil {
		return api.TeamMemberResponse{}, err
	}
	return api.TeamMemberResponse{Member: teamMemberOf(m)}, nil
}

// RemoveOrgMember deletes the member row of email from a team: an owner
// removes a member or withdraws an invitation, and any member may leave.
// The team never loses its last owner; when the owner it names
// (owner_user_id) goes, the longest-standing remaining owner is named.
func (a *App) RemoveOrgMember(ctx context.Context, p Principal, orgID, rawEmail string) error {
	now := a.now().UTC()
	return a.w.Write(ctx, func(t *writer.Tx) error {
		org, caller, err := a.lockOrgAs(ctx, t, orgID, p)
		if err != nil {
			return err
		}
		email, ok := domain.NormalizeEmail(rawEmail)
		self := ok && email == caller.Email
		if !domain.CanRemove(caller.Role, self) {
			return errOwnerRequired
		}
		if !ok {
			return errMemberNotFound
		}
		target, err := a.store.OrgMember(ctx, t.SQL(), orgID, email)
		if errors.Is(err, store.ErrNotFound) || (err == nil && target.Status == domain.MemberInvited && !target.ExpiresAt.After(now)) {
			return errMemberNotFound
		}
		if err != nil {
			return err
		}
		owners, err := a.store.ActiveOwners(ctx, t.SQL(), orgID)
		if err != nil {
			return err
		}
		if !domain.RemovalLeavesOwner(target.Role, target.Status, len(owners)) {
			return &domain.Error{Code: domain.CodeLastOwner,
				Detail: "a team keeps at least one owner: invite another owner first"}
		}
		if _, err := a.store.DeleteOrgMember(ctx, t.SQL(), target); err != nil {
			return err
		}
		if target.UserID != nil && *target.UserID == org.OwnerUserID {
			// RemovalLeavesOwner made sure another owner stays.
			if i := slices.IndexFunc(owners, func(o store.OrgMember) bool { return *o.UserID != org.OwnerUserID }); i >= 0 {
				if err := a.store.SetOrgOwner(ctx, t.SQL(), orgID, *owners[i].UserID); err != nil {
					return err
				}
			}
		}
		reason := removedByOwner
		switch {
		case self:
			reason = removedLeft
		case target.Status == domain.MemberInvited:
			reason = removedWithdrawn
		}
		return a.notifyTeam(ctx, t, orgID, target.UserID, removedNotice(org, target, reason))
	})
}

// notifyTeam writes n for every active member of the team and for also
// (a member just removed), inside t: team changes are notices, not chain
// events (docs/decisions/teams.md). Accounts are visited in user_id order,
// the order every team write takes their locks in.
func (a *App) notifyTeam(ctx context.Context, t *writer.Tx, orgID string, also *string, n Notice) error {
	ids, err := a.store.ActiveMemberIDs(ctx, t.SQL(), orgID)
	if err != nil {
		return err
	}
	if also != nil && !slices.Contains(ids, *also) {
		ids = append(ids, *also)
		slices.Sort(ids)
	}
	for _, id := range ids {
		if _, err := a.notify(ctx, t, id, n); err != nil {
			return err
		}
	}
	return nil
}

// teamSubject names the team and the member row a notice is about.
func teamSubject(org store.Org, m store.OrgMember) map[string]any {
	return map[string]any{"org_id": org.OrgID, "name": org.Name, "email": m.Email, "role": m.Role, "status": m.Status}
}

func removedNotice(org store.Org, m store.OrgMember, reason string) Notice {
	subject := teamSubject(org, m)
	subject["reason"] = reason
	return Notice{Type: domain.NoticeTeamMemberRemoved, Subject: subject}
}
