package main

// auditchain approvals … and approval-rules …: per-call approvals
// (CONTRACT.md "Approvals"; docs/approvals.md).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

const approvalsUsage = `usage: auditchain approvals <command> [flags]

commands:
  list [--status S] [--limit N]   newest first (S: pending, approved, denied, expired, used)
  get APPROVAL_ID [--wait 30s]    one approval; --wait: until it is decided (at most 30 s)
  approve APPROVAL_ID [--note N]  (by another identity than the one that made the call)
  deny APPROVAL_ID [--note N]
  watch [--every 2s] [--count N]  print each new pending approval as one JSON line
`

const approvalRulesUsage = `usage: auditchain approval-rules <command> [flags]

commands:
  create --subagent S --tool T [--ttl 10m]   hold S's calls of T for a person ("*": every one)
  list
  delete RULE_ID
`

// decideVerb is approve or deny.
func decideVerb(name string, do func(*client.Client) func(context.Context, string, *string) (*api.Approval, error)) verb {
	return verb{name, "usage: auditchain approvals " + name + " APPROVAL_ID [--note N]\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			note := fs.String("note", "", "a note for the record")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				id, err := oneArg(args, "APPROVAL_ID")
				if err != nil {
					return nil, err
				}
				return do(c)(ctx, id, optString(*note))
			}
		}}
}

var approvalVerbs = []verb{
	{"list", "usage: auditchain approvals list [--status S] [--limit N]\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			status := fs.String("status", "", "only approvals in this status: pending, approved, denied, expired or used")
			limit := fs.Int("limit", 0, "at most this many (0: the service's default, 100)")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				return c.Approvals(ctx, *status, *limit)
			}
		}},
	{"get", "usage: auditchain approvals get APPROVAL_ID [--wait 30s]\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			wait := fs.Duration("wait", 0, "answer once it is no longer pending, or after this long (at most 30s)")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				id, err := oneArg(args, "APPROVAL_ID")
				if err != nil {
					return nil, err
				}
				if *wait < 0 || *wait > api.MaxApprovalWait*time.Second {
					return nil, usagef("--wait is at most %ds", api.MaxApprovalWait)
				}
				return c.Approval(ctx, id, *wait)
			}
		}},
	decideVerb("approve", func(c *client.Client) func(context.Context, string, *string) (*api.Approval, error) { return c.Approve }),
	decideVerb("deny", func(c *client.Client) func(context.Context, string, *string) (*api.Approval, error) { return c.Deny }),
	{"watch", "usage: auditchain approvals watch [--every 2s] [--count N]\n\nPrints each pending approval not printed before as one JSON line, newest last,\nasking every --every, until interrupted or --count approvals.\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			every := fs.Duration("every", 2*time.Second, "how often to ask")
			count := fs.Int("count", 0, "stop after this many approvals (0: until interrupted)")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				if *every < 100*time.Millisecond {
					return nil, usagef("--every is at least 100ms")
				}
				err := watchApprovals(ctx, c, verbStdout(ctx), *every, *count)
				if errors.Is(err, context.Canceled) {
					err = nil // interrupted: the normal end of a watch
				}
				return nil, err
			}
		}},
}

// watchApprovals prints each pending approval not printed before, oldest
// first, asking every every, until ctx ends or count are printed.
func watchApprovals(ctx context.Context, c *client.Client, out io.Writer, every time.Duration, count int) error {
	seen := map[string]bool{}
	n := 0
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		list, err := c.Approvals(ctx, api.ApprovalPending, 0)
		if err != nil {
			return err
		}
		for i := len(list.Approvals) - 1; i >= 0; i-- {
			ap := list.Approvals[i]
			if seen[ap.ApprovalID] {
				continue
			}
			seen[ap.ApprovalID] = true
			if err := writeLine(out, ap); err != nil {
				return err
			}
			if n++; count > 0 && n >= count {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

var approvalRuleVerbs = []verb{
	{"create", "usage: auditchain approval-rules create --subagent S --tool T [--ttl 10m]\n\nS and T are exact names, or \"*\" for every one; --ttl is how long an approval\nlives (30s to 24h, default 10m).\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			subagent := fs.String("subagent", "", "the sub-agent, or \"*\" (required)")
			tool := fs.String("tool", "", "the tool, or \"*\" (required)")
			ttl := fs.Duration("ttl", 0, "how long an approval lives (0: the service's default, 10m)")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				if *subagent == "" || *tool == "" {
					return nil, usagef("approval-rules create needs --subagent and --tool")
				}
				req := api.ApprovalRuleRequest{Subagent: subagent, Tool: tool}
				if *ttl != 0 {
					if *ttl%time.Second != 0 {
						return nil, usagef("--ttl is whole seconds")
					}
					s := int64(*ttl / time.Second)
					req.TTLSeconds = &s
				}
				return c.CreateApprovalRule(ctx, req)
			}
		}},
	noArgVerb("list", "usage: auditchain approval-rules list\n", (*client.Client).ApprovalRules),
	{"delete", "usage: auditchain approval-rules delete RULE_ID\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				id, err := oneArg(args, "RULE_ID")
				if err != nil {
					return nil, err
				}
				if err := c.DeleteApprovalRule(ctx, id); err != nil {
					return nil, err
				}
				return humanText{text: fmt.Sprintf("deleted: %s\n", id), json: map[string]any{"deleted": id}}, nil
			}
		}},
}

func approvalsCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return clientGroup(ctx, "approvals", approvalsUsage, approvalVerbs, args, getenv, stdout, stderr)
}

func approvalRulesCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return clientGroup(ctx, "approval-rules", approvalRulesUsage, approvalRuleVerbs, args, getenv, stdout, stderr)
}
