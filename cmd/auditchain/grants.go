package main

import (
	"context"
	"flag"
	"io"
	"strings"
	"time"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

const grantsUsage = `usage: auditchain grants <command> [flags]

commands:
  create --subagent S --tools a,b --max-calls N [--expires-in D | --expires-at T]
                       grant a sub-agent tools and a call budget (prints the delegation token)
  status --subagent S [--tool T] [--grant G]
                       may the sub-agent go ahead? exit 3 when the gate says no
  use GRANT_ID --subagent S [--n N]
                       meter N calls on the grant; exit 3 when refused
  revoke GRANT_ID --subagent S
                       revoke a grant
  list [--subagent S]  list grants
`

var grantVerbs = []verb{
	{"create", "usage: auditchain grants create --subagent S --tools a,b --max-calls N [--expires-in D | --expires-at T] [--grant-id G] [--parent P]\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			subagent := fs.String("subagent", "", "the sub-agent (required)")
			tools := fs.String("tools", "", "allowed tools, comma-separated (required)")
			maxCalls := fs.Int64("max-calls", 0, "call budget (required)")
			expiresIn := new(time.Duration)
			config.DurationVar(fs, expiresIn, "expires-in", time.Hour, "lifetime from now: 90s, 15m, 2h, 7d (a day is 24h)")
			expiresAt := fs.String("expires-at", "", "expiry (ISO-8601 with a UTC offset); overrides --expires-in")
			grantID := fs.String("grant-id", "", "the grant's id (default: the service's)")
			parent := fs.String("parent", "", "parent agent")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				if *subagent == "" || *tools == "" || *maxCalls <= 0 {
					return nil, usagef("grants create needs --subagent, --tools and --max-calls")
				}
				exp := *expiresAt
				if exp == "" {
					exp = time.Now().Add(*expiresIn).UTC().Format("2006-01-02T15:04:05+00:00")
				}
				return c.CreateGrant(ctx, api.CreateGrantRequest{Subagent: subagent, ExpiresAt: &exp, MaxToolCalls: maxCalls,
					AllowedTools: strings.Split(*tools, ","), GrantID: optString(*grantID), ParentAgent: optString(*parent)})
			}
		}},
	{"status", "usage: auditchain grants status --subagent S [--tool T] [--grant G]\n\nExit 0 when authorized, 3 when the gate says no.\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			subagent := fs.String("subagent", "", "the sub-agent (required)")
			tool := fs.String("tool", "", "the tool it wants to call")
			grant := fs.String("grant", "", "a grant id (default: the sub-agent's latest live grant)")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				if *subagent == "" {
					return nil, usagef("grants status needs --subagent")
				}
				st, err := c.GrantStatus(ctx, api.GrantStatusQuery{Subagent: *subagent, Tool: optString(*tool), GrantID: optString(*grant)})
				if err != nil {
					return nil, err
				}
				if !st.Authorized {
					return st, gateRefusal{st.Status + ": " + st.Reason}
				}
				return st, nil
			}
		}},
	{"use", "usage: auditchain grants use GRANT_ID --subagent S [--n N]\n\nExit 3 when the gate refuses (budget_exhausted, not_authorized).\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			subagent := fs.String("subagent", "", "the sub-agent (required)")
			n := fs.Int64("n", 1, "calls to meter")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				id, err := oneArg(args, "GRANT_ID")
				if err != nil {
					return nil, err
				}
				if *subagent == "" {
					return nil, usagef("grants use needs --subagent")
				}
				return c.UseGrant(ctx, id, api.UseRequest{Subagent: subagent, N: n})
			}
		}},
	{"revoke", "usage: auditchain grants revoke GRANT_ID --subagent S\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			subagent := fs.String("subagent", "", "the sub-agent (required)")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				id, err := oneArg(args, "GRANT_ID")
				if err != nil {
					return nil, err
				}
				if *subagent == "" {
					return nil, usagef("grants revoke needs --subagent")
				}
				return c.RevokeGrant(ctx, id, api.RevokeRequest{Subagent: subagent})
			}
		}},
	{"list", "usage: auditchain grants list [--subagent S]\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			subagent := fs.String("subagent", "", "only this sub-agent's grants")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				return c.Grants(ctx, *subagent)
			}
		}},
}

func grantsCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return clientGroup(ctx, "grants", grantsUsage, grantVerbs, args, getenv, stdout, stderr)
}
