package console

// The approvals panel (CONTRACT.md "Approvals"; docs/approvals.md): the calls
// an approval rule holds, pending first — sub-agent, tool, the digest of the
// input the approval binds, the arguments' text where the hook or proxy was
// told to send it, when it was asked for and when it expires — then the
// recent decided ones, and the rules that hold calls. Approve and deny are
// POST /v1/approvals/{id}/approve and /deny's use case (app.DecideApproval),
// by the viewer's identity: the identity that made the call is shown its
// buttons disabled with the reason, and refused 409 separation_of_powers if
// it sends them anyway. New pending approvals appear live: the page's script
// listens to the session's event stream, as the activity panel does, and
// refreshes the pending rows from /console/approvals/rows.

import (
	"cmp"
	"net/http"
	"slices"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// Bounds of the panel's lists (GET /v1/approvals pages through them all).
const (
	pendingShown = 25
	decidedShown = 50
)

// approvalRow is an approval as the panel shows it.
type approvalRow struct {
	api.Approval
	// Own says the viewer's identity made the call: it may not decide it.
	Own bool
	// Created and Expires are its times; ExpiresIn says how long is left
	// when the page was rendered (the script counts it down).
	Created, Expires time.Time
	ExpiresIn        string
	Decided          time.Time
}

// Matches says the arguments' text hashes to the digest the approval binds.
func (r approvalRow) Matches() bool { return r.ArgsTextMatches != nil && *r.ArgsTextMatches }

// approvalRows are the pending rows with what their forms need, rendered in
// the page and alone for the live refresh.
type approvalRows struct {
	Rows []approvalRow
	CSRF string
	// More says there are more pending approvals than shown.
	More bool
}

type approvalsPage struct {
	Pending approvalRows
	Decided []approvalRow
	Rules   []api.ApprovalRule
	// Refused is a decision's refusal, shown above the pending rows.
	Refused *refusal
	Done    string
	Connect connectHelp
}

var approvalsDone = map[string]string{
	"approved": "Approved. The agent's same call, sent again with the approval id, runs once; the hook or proxy waiting for it runs it now.",
	"denied":   "Denied. The call sent again with the approval id is refused (approval_denied).",
}

func (c *Console) approvals(w http.ResponseWriter, r *http.Request) error {
	return c.approvalsPage(w, r, http.StatusOK, approvalsPage{Done: done(r, approvalsDone)})
}

func (c *Console) approvalsPage(w http.ResponseWriter, r *http.Request, status int, pg approvalsPage) error {
	p := viewerOf(r).Principal
	rows, err := c.pendingRows(w, r)
	if err != nil {
		return err
	}
	pg.Pending = rows
	// The newest of each settled status, merged: however many are pending,
	// the decided ones are found by their own index.
	var settled []api.Approval
	for _, st := range []string{api.ApprovalApproved, api.ApprovalUsed, api.ApprovalDenied, api.ApprovalExpired} {
		list, err := c.App.Approvals(r.Context(), p, st, decidedShown)
		if err != nil {
			return err
		}
		settled = append(settled, list.Approvals...)
	}
	slices.SortFunc(settled, func(a, b api.Approval) int {
		return cmp.Or(parseTS(b.CreatedAt).Compare(parseTS(a.CreatedAt)), cmp.Compare(b.ApprovalID, a.ApprovalID))
	})
	now := c.App.Now()
	for _, ap := range settled[:min(len(settled), decidedShown)] {
		pg.Decided = append(pg.Decided, c.approvalRow(ap, p.Identity(), now))
	}
	rules, err := c.App.ApprovalRules(r.Context(), p)
	if err != nil {
		return err
	}
	pg.Rules, pg.Connect = rules.Rules, connect(r)
	c.render(w, r, status, "approvals", "Approvals", pg)
	return nil
}

// pendingRows reads the pending approvals, newest first, with their
// arguments' text where it was sent.
func (c *Console) pendingRows(w http.ResponseWriter, r *http.Request) (approvalRows, error) {
	p := viewerOf(r).Principal
	list, err := c.App.PendingApprovals(r.Context(), p, pendingShown+1)
	if err != nil {
		return approvalRows{}, err
	}
	out := approvalRows{CSRF: c.csrfToken(w, r), More: len(list) > pendingShown}
	now := c.App.Now()
	for i, ap := range list {
		if i == pendingShown {
			break
		}
		out.Rows = append(out.Rows, c.approvalRow(ap, p.Identity(), now))
	}
	return out, nil
}

func (c *Console) approvalRow(ap api.Approval, viewer string, now time.Time) approvalRow {
	row := approvalRow{Approval: ap, Own: ap.RequestedBy.Identity == viewer, Created: parseTS(ap.CreatedAt), Expires: parseTS(ap.ExpiresAt)}
	row.ExpiresIn = "expired"
	if left := row.Expires.Sub(now); left > 0 {
		row.ExpiresIn = until(left)
	}
	if ap.DecidedAt != nil {
		row.Decided = parseTS(*ap.DecidedAt)
	}
	return row
}

// approvalRowsFragment is the pending rows alone, for the live refresh.
func (c *Console) approvalRowsFragment(w http.ResponseWriter, r *http.Request) error {
	rows, err := c.pendingRows(w, r)
	if err != nil {
		return err
	}
	c.fragment(w, "approvals", "rows", rows)
	return nil
}

// decideApproval is the handler of the approve and deny forms: the API's use
// case with the form's optional note, by the viewer's identity; a refusal
// (409 separation_of_powers, 409 approval_not_pending, 404) is shown on the
// panel above the pending rows.
func (c *Console) decideApproval(approve bool) handlerFunc {
	outcome := "denied"
	if approve {
		outcome = "approved"
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		note, err := formText(r, "note", domain.MaxNoteBytes)
		if err == nil {
			_, err = c.App.DecideApproval(r.Context(), viewerOf(r).Principal, r.PathValue("approval_id"), approve, optional(note))
			if err == nil {
				http.Redirect(w, r, Prefix+"approvals?done="+outcome, http.StatusSeeOther)
				return nil
			}
		}
		f, err := c.refused(err)
		if err != nil {
			return err
		}
		return c.approvalsPage(w, r, f.Status, approvalsPage{Refused: f})
	}
}
