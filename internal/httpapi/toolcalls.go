package httpapi

import (
	"fmt"
	"net/http"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// toolCallBody is the body of POST /v1/tool-calls (pkg/api's) with its
// checks.
type toolCallBody api.ToolCallRequest

func (b *toolCallBody) validate() []domain.FieldError {
	var errs []domain.FieldError
	for _, f := range []struct {
		name string
		v    *string
		what string
	}{{"subagent", b.Subagent, "the sub-agent's exact name"}, {"tool", b.Tool, "the tool's name"},
		{"event_id", b.EventID, "the tool_call event's id, evt-<letters, digits, _ . : ->"}} {
		if f.v == nil {
			errs = append(errs, domain.FieldError{Field: f.name, Message: "required: " + f.what})
		}
	}
	for i, r := range b.Results {
		if r.EventID == nil {
			errs = append(errs, domain.FieldError{Field: fmt.Sprintf("results[%d].event_id", i), Message: "required: the tool_result event's id"})
		}
	}
	return errs
}

// gateToolCall is POST /v1/tool-calls: the gate's check, one use and the
// tool_call event in one commit (app.GateToolCall).
func (s *Server) gateToolCall(w http.ResponseWriter, r *http.Request) error {
	surface, err := app.Surface(surfaceHeader(r))
	if err != nil {
		return err
	}
	req, err := decode[toolCallBody](r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return s.app.RefuseBody(r.Context(), principal(r), err)
	}
	res, err := s.app.GateToolCall(r.Context(), principal(r), api.ToolCallRequest(req), surface)
	if err != nil {
		return err
	}
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	out := api.ToolCallResponse{Decision: res.Decision, GateStatus: res.Gate.Status, Reason: res.Gate.Reason,
		Subagent: res.Gate.Subagent, Metered: res.Metered, Event: res.Event, Epoch: res.Epoch, Quota: res.Quota,
		Approval: res.Approval}
	if res.GrantID != "" {
		out.GrantID = &res.GrantID
	}
	if res.Gate.ProposalID != "" {
		out.ProposalID = &res.Gate.ProposalID
	}
	if res.Gate.Grant != nil && !res.Replayed {
		out.Uses, out.Remaining = &res.Gate.Uses, &res.Gate.Remaining
	}
	return writeJSON(w, http.StatusOK, out)
}
