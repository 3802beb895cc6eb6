package httpapi

// The gate's routes (SPEC.md "Grants", CONTRACT.md "Delegation tokens"). The
// grant bodies are read by the one body reader (decode.go) and its problems
// answered with the route's own code (bodySpec.refuse, keycheck.go), so that
// a near-miss key (subagent_name, expiry_seconds, ...) is refused naming the
// key the client meant, before anything is written.

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// ---- request bodies --------------------------------------------------------

var grantBody = bodySpec{
	bad:  app.MalformedGrant,
	keys: []string{"subagent", "expires_at", "max_tool_calls", "allowed_tools", "grant_id", "parent_agent"},
	aliases: aliasTable(map[string][]string{
		"subagent": {"subagent_name", "sub_agent", "sub_agent_name", "subagent_id", "sub_agent_id", "agent", "agent_name",
			"agent_id", "child", "child_agent", "delegate", "name", "worker"},
		"expires_at": {"expiry_seconds", "expires_in", "expires_in_seconds", "ttl", "ttl_seconds", "expiry", "expires",
			"expiration", "expiration_time", "expiry_time", "expire", "expires_on", "expiry_at", "valid_until", "until",
			"deadline", "lifetime", "duration", "timeout"},
		"max_tool_calls": {"max_calls", "budget", "call_budget", "tool_budget", "max_uses", "limit", "call_limit",
			"tool_call_limit", "tool_calls", "calls", "max_tools", "max_tool_uses", "max_invocations", "quota"},
		"allowed_tools": {"tools", "allowed_tool", "tool", "tool_names", "permitted_tools", "allow_tools", "allowlist",
			"tool_allowlist", "tools_allowed", "scopes", "capabilities"},
		"grant_id":     {"grant", "id", "grantid", "grant_uuid", "uuid"},
		"parent_agent": {"parent", "parent_id", "parent_name", "parent_agent_id", "parent_agent_name", "orchestrator", "delegator", "owner"},
	}),
	types: map[string]string{
		"subagent":       "must be a string",
		"expires_at":     "must be an absolute ISO-8601 timestamp string with a UTC offset, like 2026-01-02T15:04:05+00:00 (durations are not accepted)",
		"max_tool_calls": "must be an integer (no fraction or exponent, within 64 bits)",
		"allowed_tools":  "must be an array of strings",
		"grant_id":       "must be a string",
		"parent_agent":   "must be a string",
	},
	server: map[string]string{
		"epoch":      "the epoch stamp is assigned by the server when the grant is written",
		"created_at": "created_at is assigned by the server",
		"action":     "action is set by the server",
		"uses":       "uses is counted by the server (POST /v1/grants/{grant_id}/use)",
		"remaining":  "remaining is computed by the server",
		"revoked_at": "revoked_at is set by POST /v1/grants/{grant_id}/revoke",
		"state":      "state is computed by the gate",
		"status":     "status is computed by the gate",
		"delegation": "the delegation token is issued by the server",
	},
}

var useBody = bodySpec{
	bad:   app.MalformedUse,
	keys:  []string{"subagent", "n"},
	types: map[string]string{"subagent": "must be a string", "n": "must be a positive integer"},
	aliases: aliasTable(map[string][]string{
		"subagent": grantAliases("subagent"),
		"n":        {"count", "calls", "tool_calls", "amount", "uses", "units", "quantity", "num", "number", "n_calls", "delta", "increment"},
	}),
}

var revokeBody = bodySpec{
	bad:     app.MalformedRevoke,
	keys:    []string{"subagent"},
	types:   map[string]string{"subagent": "must be a string"},
	aliases: aliasTable(map[string][]string{"subagent": grantAliases("subagent")}),
}

// grantAliases lists the near misses grantBody knows for key.
func grantAliases(key string) []string {
	var out []string
	for a, k := range grantBody.aliases {
		if k == key {
			out = append(out, a)
		}
	}
	return out
}

// ---- handlers ---------------------------------------------------------------

func (s *Server) createGrant(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeAs[api.CreateGrantRequest](r, s.cfg.MaxBodyBytes, true, grantBody.refuse)
	if err != nil {
		return err
	}
	res, err := s.app.CreateGrant(r.Context(), principal(r), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, res)
}

// malformedQuery is GET grants/status's 422.
func malformedQuery(field, reason string) error {
	return (&domain.Error{Code: domain.CodeMalformedQuery, Detail: field + ": " + reason,
		Fields: []domain.FieldError{{Field: field, Message: reason}}}).With("field", field).With("reason", reason)
}

// optionalQuery reads a query parameter; absent or empty is nil.
func optionalQuery(r *http.Request, name string) *string {
	v := r.URL.Query().Get(name)
	if v == "" {
		return nil
	}
	return &v
}

func (s *Server) grantStatus(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if !q.Has("subagent") {
		for k := range q {
			if meant := grantBody.nearMiss(k); meant == "subagent" {
				return malformedQuery("subagent", fmt.Sprintf("required; the parameter is %q, not %q", "subagent", k))
			}
		}
		return malformedQuery("subagent", "required: the sub-agent's exact name")
	}
	subagent := q.Get("subagent")
	if strings.TrimSpace(subagent) == "" {
		return malformedQuery("subagent", "must not be blank")
	}
	ans, err := s.app.GrantStatus(r.Context(), principal(r),
		api.GrantStatusQuery{Subagent: subagent, Tool: optionalQuery(r, "tool"), GrantID: optionalQuery(r, "grant_id")}, s.app.Now())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ans)
}

func (s *Server) listGrants(w http.ResponseWriter, r *http.Request) error {
	list, err := s.app.ListGrants(r.Context(), principal(r), optionalQuery(r, "subagent"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, list)
}

func (s *Server) useGrant(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeAs[api.UseRequest](r, s.cfg.MaxBodyBytes, true, useBody.refuse)
	if err != nil {
		return err
	}
	res, err := s.app.UseGrant(r.Context(), principal(r), r.PathValue("grant_id"), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}

func (s *Server) revokeGrant(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeAs[api.RevokeRequest](r, s.cfg.MaxBodyBytes, true, revokeBody.refuse)
	if err != nil {
		return err
	}
	res, err := s.app.RevokeGrant(r.Context(), principal(r), r.PathValue("grant_id"), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}

func (s *Server) delegationPublicKey(w http.ResponseWriter, r *http.Request) error {
	if !s.app.HasServiceKey() {
		return errors.New("service identity key not loaded")
	}
	return writeJSON(w, http.StatusOK, s.app.DelegationKey())
}
