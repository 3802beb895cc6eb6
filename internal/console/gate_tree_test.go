package console

import (
	"strings"
	"testing"

	"github.com/auditchain/auditchain/pkg/api"
)

// drawn writes a tree as "name(children…)", for comparison.
func drawn(nodes []*agentNode) string {
	var b strings.Builder
	for i, n := range nodes {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(n.Name)
		if len(n.Children) > 0 {
			b.WriteString("(" + drawn(n.Children) + ")")
		}
	}
	return b.String()
}

// TestAgentTree: children nest under the agent their grants name as
// parent; a parent without a grant is a root by its name; an agent under
// two parents is drawn under its newest grant's; a cycle of parents is
// broken where it closes, every agent drawn once.
func TestAgentTree(t *testing.T) {
	g := func(sub, parent, state string) api.ListedGrant {
		lg := api.ListedGrant{GrantRecord: api.GrantRecord{Subagent: sub}, State: state}
		if parent != "" {
			lg.ParentAgent = &parent
		}
		return lg
	}
	for _, c := range []struct {
		name   string
		grants []api.ListedGrant // newest first, as ListGrants answers
		want   string
	}{
		{"empty", nil, ""},
		{"nested", []api.ListedGrant{g("leaf", "mid", "authorized"), g("mid", "root", "authorized"), g("root", "", "authorized")},
			"root(mid(leaf))"},
		{"parent without a grant", []api.ListedGrant{g("a", "orch", "expired"), g("b", "orch", "authorized")}, "orch(a b)"},
		{"newest parent wins", []api.ListedGrant{g("w", "p2", "authorized"), g("w", "p1", "revoked")}, "p1 p2(w)"},
		{"self parent", []api.ListedGrant{g("s", "s", "authorized")}, "s"},
		{"cycle", []api.ListedGrant{g("a", "b", "authorized"), g("b", "a", "authorized"), g("c", "a", "authorized")}, "a(b c)"},
		{"into a cycle", []api.ListedGrant{g("x", "y", "authorized"), g("y", "z", "authorized"), g("z", "y", "authorized")}, "y(x z)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := drawn(agentTree(c.grants)); got != c.want {
				t.Errorf("tree %q, want %q", got, c.want)
			}
		})
	}
	tr := agentTree([]api.ListedGrant{g("a", "", "authorized"), g("a", "", "expired")})
	if tr[0].Live != 1 || tr[0].Grants != 2 {
		t.Errorf("a: %d live of %d", tr[0].Live, tr[0].Grants)
	}
}
