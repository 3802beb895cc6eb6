package mcpserver

// Asking the host's user about a held call through MCP elicitation
// (docs/approvals.md "Through the host's user: elicitation"; docs/mcp.md
// "Approvals"). With an Approver, and when the host declared form
// elicitation in its initialize, the proxy's wait for a held call sends the
// host an elicitation/create naming the sub-agent, the tool, the arguments
// and their digest, and decides the approval through the API with the
// Approver's credential on the user's answer: accept approves, decline
// denies, cancel (or no answer before the wait's deadline) leaves it
// pending. Meanwhile it still watches the approval through the API, so a
// decision made elsewhere (the console, the CLI) ends the question.
//
// The Approver must be another identity than the proxy's own key: the
// service refuses the caller's own identity (separation_of_powers), and the
// record then names that key as the approver, with a note saying the host's
// user answered through elicitation. That is the proxy's word: the service
// cannot tell who answered the host's prompt (docs/approvals.md says so).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// Approver decides approvals: a *client.Client with a key other than the
// proxy's, holding the approvals capability.
type Approver interface {
	Approve(ctx context.Context, approvalID string, note *string) (*api.Approval, error)
	Deny(ctx context.Context, approvalID string, note *string) (*api.Approval, error)
}

var _ Approver = (*client.Client)(nil)

// ElicitationNote starts the note of every approval the proxy decides on
// the host's user's answer: the record's statement of who decided.
const ElicitationNote = "host user via MCP elicitation"

// maxShownArguments bounds the arguments' text shown in the question; the
// digest names them whole.
const maxShownArguments = 2000

// maxUserNote and maxHostName bound, in bytes, what the decision's note
// keeps of the user's note and of the host's clientInfo: with the prefix
// they stay well under the API's 4 KiB note.
const (
	maxUserNote = 1000
	maxHostName = 200
)

// cutUTF8 is s cut to at most n bytes, on a character boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// heldCall is what an approval binds, and the arguments shown to the
// host's user (never sent to the service).
type heldCall struct {
	tool, argsHash string
	args           json.RawMessage
	// canceled is closed when the host cancels the tools/call: the wait
	// for its approval ends (and a question about it is withdrawn).
	canceled <-chan struct{}
}

// hostElicitsForms reports whether the host's initialize capabilities
// declare form elicitation: an elicitation object that is empty (form, as
// before modes existed) or names form (MCP 2025-11-25).
func hostElicitsForms(caps json.RawMessage) bool {
	var c struct {
		Elicitation *map[string]json.RawMessage `json:"elicitation"`
	}
	if json.Unmarshal(caps, &c) != nil || c.Elicitation == nil {
		return false
	}
	_, form := (*c.Elicitation)["form"]
	_, url := (*c.Elicitation)["url"]
	return form || !url
}

// elicits reports whether held calls are put to the host's user.
func (p *Proxy) elicits() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.opts.Approver != nil && p.hostElicit
}

// hostRequest sends the host a request of the proxy's own, under an id
// from the same counter as the upstream's relayed requests (so none
// collide); the channel delivers its answer (nil if the session ends
// first). cancel withdraws it: the host is told (notifications/cancelled)
// and a late answer is dropped.
func (p *Proxy) hostRequest(method string, params json.RawMessage) (<-chan *message, func(reason string)) {
	ch := make(chan *message, 1)
	p.mu.Lock()
	p.nextHost++
	id := json.RawMessage(strconv.AppendInt(nil, p.nextHost, 10))
	p.ownCalls[idKey(id)] = ch
	p.mu.Unlock()
	p.toHostOrHold(encodeRequest(id, method, params))
	cancel := func(reason string) {
		p.mu.Lock()
		_, open := p.ownCalls[idKey(id)]
		delete(p.ownCalls, idKey(id))
		p.mu.Unlock()
		if open {
			b, _ := json.Marshal(map[string]any{"requestId": id, "reason": reason})
			p.toHostOrHold(encodeRequest(nil, "notifications/cancelled", b))
		}
	}
	return ch, cancel
}

// ownAnswer delivers the host's answer to a request of the proxy's;
// false when m answers none.
func (p *Proxy) ownAnswer(m *message) bool {
	p.mu.Lock()
	ch, ok := p.ownCalls[idKey(m.id)]
	delete(p.ownCalls, idKey(m.id))
	p.mu.Unlock()
	if ok {
		ch <- m
	}
	return ok
}

// elicitDecision puts the held call to the host's user and waits, until
// deadline, for their answer or a decision made elsewhere; it answers the
// approval's status as it then stands (pending when nothing was decided).
func (p *Proxy) elicitDecision(ctx context.Context, id string, c heldCall, deadline time.Time) string {
	ectx, stop := context.WithDeadline(ctx, deadline)
	defer stop()
	answer, cancel := p.hostRequest("elicitation/create", p.question(id, c))
	elsewhere := make(chan string, 1)
	go func() { elsewhere <- p.waitDecision(ectx, id, deadline) }()
	select {
	case st := <-elsewhere:
		if st != api.ApprovalPending {
			cancel("approval " + id + " was " + st + " elsewhere")
			return st
		}
		cancel("the proxy's wait for approval " + id + " ended")
		return st
	case m := <-answer:
		action, note, err := elicitAnswer(m)
		if err != nil {
			// A host that cannot ask: the decision is left to the API.
			p.log.Warn("mcp proxy: the host did not answer the approval question; waiting for a decision through the API",
				"approval_id", id, "err", err)
			return <-elsewhere
		}
		switch action {
		case "accept":
			return p.decide(ctx, id, true, note)
		case "decline":
			return p.decide(ctx, id, false, note)
		}
		return api.ApprovalPending // cancel: dismissed, someone else may decide
	}
}

// question is the elicitation/create request for a held call: a form with
// one optional field, the user's note.
func (p *Proxy) question(id string, c heldCall) json.RawMessage {
	shown := string(c.args)
	if len(shown) > maxShownArguments {
		shown = cutUTF8(shown, maxShownArguments) + fmt.Sprintf(" … (%d bytes in all)", len(c.args))
	}
	msg := fmt.Sprintf("auditchain: the agent (sub-agent %q) asks to call the tool %q with these arguments:\n\n%s\n\n"+
		"(SHA-256 of their RFC 8785 form: %s)\n\n"+
		"Accept approves this one call, once; decline denies it; dismiss to leave it for someone else. "+
		"The record will say the host's user decided through this question (approval %s).",
		p.opts.Subagent, c.tool, shown, c.argsHash, id)
	b, _ := json.Marshal(map[string]any{
		"message": msg,
		"requestedSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"note": map[string]any{"type": "string", "title": "Note",
					"description": "Optional: why (kept with the approval on the record)", "maxLength": maxUserNote},
			},
		},
	})
	return b
}

// elicitAnswer reads the host's answer to an elicitation/create: its action
// and the user's note.
func elicitAnswer(m *message) (action, note string, err error) {
	if m == nil {
		return "", "", errors.New("the session ended")
	}
	if m.err != nil {
		return "", "", fmt.Errorf("the host answered an error: %s", m.err)
	}
	var r struct {
		Action  string `json:"action"`
		Content struct {
			Note any `json:"note"`
		} `json:"content"`
	}
	if json.Unmarshal(m.result, &r) != nil {
		return "", "", errors.New("the host's answer cannot be read")
	}
	switch r.Action {
	case "accept", "decline", "cancel":
	default:
		return "", "", fmt.Errorf("the host answered the action %q", r.Action)
	}
	note, _ = r.Content.Note.(string)
	return r.Action, note, nil
}

// decide approves or denies through the Approver on the host's user's
// answer and answers the approval's status then: when someone else decided
// first (approval_not_pending) it is what they decided.
func (p *Proxy) decide(ctx context.Context, id string, approve bool, userNote string) string {
	note := ElicitationNote + " (auditchain mcp proxy"
	p.mu.Lock()
	if p.hostClient != "" {
		note += "; host " + cutUTF8(p.hostClient, maxHostName)
	}
	p.mu.Unlock()
	note += ")"
	if userNote = strings.TrimSpace(userNote); userNote != "" {
		note += ": " + cutUTF8(userNote, maxUserNote)
	}
	decide, want := p.opts.Approver.Deny, api.ApprovalDenied
	if approve {
		decide, want = p.opts.Approver.Approve, api.ApprovalApproved
	}
	ap, err := decide(ctx, id, &note)
	if err == nil {
		return ap.Status
	}
	var pe *client.Error
	if errors.As(err, &pe) && pe.Code == "approval_not_pending" {
		if ap, rerr := p.opts.Service.Approval(ctx, id, 0); rerr == nil {
			return ap.Status
		}
	}
	p.log.Warn("mcp proxy: deciding the approval on the host's user's answer failed; it stays pending",
		"approval_id", id, "decision", want, "err", err)
	return api.ApprovalPending
}
