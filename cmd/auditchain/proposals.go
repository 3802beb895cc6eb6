package main

import (
	"context"
	"flag"
	"io"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

const proposalsUsage = `usage: auditchain proposals <command> [flags]

commands:
  list [--status S] [--subagent S] [--limit N] [--cursor C]
  get PROPOSAL_ID
  create --kind K --subagent S [--tool T] [--note N] --blocked-attempts N
                       propose a rule (by the refused agent's key)
  ratify PROPOSAL_ID [--reason R]   (by a different identity)
  enact PROPOSAL_ID [--reason R]
  reject PROPOSAL_ID [--reason R]
`

// transitionVerb is ratify, enact or reject.
func transitionVerb(name string, do func(*client.Client) func(context.Context, string, *string) (*api.Proposal, error)) verb {
	return verb{name, "usage: auditchain proposals " + name + " PROPOSAL_ID [--reason R]\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			reason := fs.String("reason", "", "why")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				id, err := oneArg(args, "PROPOSAL_ID")
				if err != nil {
					return nil, err
				}
				return do(c)(ctx, id, optString(*reason))
			}
		}}
}

var proposalVerbs = []verb{
	{"list", "usage: auditchain proposals list [--status S] [--subagent S] [--limit N] [--cursor C]\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			status := fs.String("status", "", "only proposals in this status")
			subagent := fs.String("subagent", "", "only this sub-agent's")
			limit := fs.Int("limit", 0, "per page (0: the service's default)")
			cursor := fs.Int64("cursor", -1, "continue from a previous page's next_cursor")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				q := api.ProposalQuery{Status: *status, Subagent: *subagent, Limit: *limit}
				if *cursor >= 0 {
					q.Cursor = cursor
				}
				return c.Proposals(ctx, q)
			}
		}},
	idVerb("get", "PROPOSAL_ID", "usage: auditchain proposals get PROPOSAL_ID\n", (*client.Client).Proposal),
	{"create", "usage: auditchain proposals create --kind K --subagent S [--tool T] [--note N] --blocked-attempts N\n\nK is deny_scope, allow_scope or policy_note.\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			kind := fs.String("kind", "", "deny_scope, allow_scope or policy_note (required)")
			subagent := fs.String("subagent", "", "the sub-agent (required)")
			tool := fs.String("tool", "", "the tool")
			note := fs.String("note", "", "a note")
			blocked := fs.Int("blocked-attempts", 0, "the evidence: blocked attempts seen")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				if *kind == "" || *subagent == "" {
					return nil, usagef("proposals create needs --kind and --subagent")
				}
				return c.Propose(ctx, api.CreateProposalRequest{Kind: kind, Subject: &api.ProposalSubject{Subagent: subagent, Tool: optString(*tool)},
					Note: optString(*note), Evidence: &api.ProposalEvidence{BlockedAttempts: blocked}})
			}
		}},
	transitionVerb("ratify", func(c *client.Client) func(context.Context, string, *string) (*api.Proposal, error) { return c.Ratify }),
	transitionVerb("enact", func(c *client.Client) func(context.Context, string, *string) (*api.Proposal, error) { return c.Enact }),
	transitionVerb("reject", func(c *client.Client) func(context.Context, string, *string) (*api.Proposal, error) { return c.Reject }),
}

func proposalsCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return clientGroup(ctx, "proposals", proposalsUsage, proposalVerbs, args, getenv, stdout, stderr)
}
