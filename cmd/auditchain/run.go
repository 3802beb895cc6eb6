package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/auditchain/auditchain/internal/buildinfo"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
)

const usage = `usage: auditchain <command> [flags]

commands:
  serve                 run the HTTP API (flags read AUDITCHAIN_*; see serve --help)
  admin create-account  create an account and its first unscoped key
  admin create-key      create another key for an account
  admin announce        mail a mandatory notice (breaking_change.announce) to every account with an email
  verify token FILE --service-key KEY    check a delegation token offline
  verify export FILE --service-key KEY   check an exported chain offline
  bench [flags] WORKLOAD…                load generator (docs/bench.md)
  mcp [--url URL] [--api-key KEY]        serve auditchain's tools to an agent over stdio (docs/mcp.md)
  mcp proxy [--subagent NAME] -- COMMAND [ARGS…]   gate and record every tool call of an MCP server
  hook --host HOST                       gate and record an agent host's tool call (docs/hooks.md)
  hook flush | install | uninstall | doctor  send spooled events; set a host up, take it out, check it
  events    append | search | get | tail            the record (client verbs: --url, --api-key
  grants    create | status | use | revoke | list     the gate            or AUDITCHAIN_URL and
  proposals list | get | create | ratify | enact | reject  governance     AUDITCHAIN_API_KEY;
  chain     tip | verify | proof | export | public-key                    --json for scripts)
  approvals list | get | approve | deny | watch      per-call approvals (docs/approvals.md)
  approval-rules create | list | delete              which calls wait for a person
  keys      create | list | revoke
  machines  keygen | register | list                  signing keys
  monitor --account ID --state FILE  hold an account's log to its pinned checkpoint (split view, rollback)
  health [--url URL]    probe a running service's /v1/health (exit 0 when it is ok)
  witness keygen | serve | evidence     cosign other logs' checkpoints: a C2SP witness (docs/witness.md)
  completion bash|zsh|fish              print a shell completion script
  version               print the version and the commit it was built from (also --version)
  help [COMMAND…]       print this, or a command's help

Every command and group takes -h or --help. Exit codes: 0 success, 1 error,
2 usage error, 3 the gate said no, 4 a monitor's alarm (docs/cli.md, docs/cli-verbs.md).
`

// run is the whole program; main only supplies the process's context, arguments,
// environment and streams, so tests can run it in-process. Help asked for
// (-h, --help, help) goes to stdout and answers nil.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := dispatch(ctx, args, getenv, stdout, stderr)
	if errors.Is(err, errHelpShown) {
		return nil
	}
	return err
}

func dispatch(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command given")
	}
	switch args[0] {
	case "--version", "-version":
		// The form most programs answer; the same as `auditchain version`.
		return dispatch(ctx, append([]string{"version"}, args[1:]...), getenv, stdout, stderr)
	case "help", "-h", "--help", "-help":
		if len(args) > 1 && args[0] == "help" {
			// `auditchain help admin create-key` is `auditchain admin create-key --help`.
			return dispatch(ctx, append(args[1:len(args):len(args)], "--help"), getenv, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return errHelpShown
	}
	cmds := commands(ctx, getenv, stdout, stderr)
	cmd, ok := cmds[args[0]]
	if !ok {
		if strings.HasPrefix(args[0], "-") {
			return usagef("%s before a command: flags go after it, as in auditchain COMMAND [flags] (auditchain --help lists the commands)", args[0])
		}
		return unknownWord("command", args[0], append(slices.Collect(maps.Keys(cmds)), "help"), "auditchain --help lists them")
	}
	return cmd(args[1:])
}

// commands is every top-level command but help, by name.
func commands(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) map[string]func(args []string) error {
	return map[string]func([]string) error{
		"serve":     func(args []string) error { return serve(ctx, args, getenv, stdout, stderr) },
		"admin":     func(args []string) error { return adminCmd(ctx, args, getenv, stdout, stderr) },
		"verify":    func(args []string) error { return verifyCmd(ctx, args, stdout, stderr) },
		"bench":     func(args []string) error { return benchCmd(ctx, args, stdout, stderr) },
		"mcp":       func(args []string) error { return mcpCmd(ctx, args, getenv, os.Stdin, stdout, stderr) },
		"hook":      func(args []string) error { return hookCmd(ctx, args, getenv, os.Stdin, stdout, stderr) },
		"events":    func(args []string) error { return eventsCmd(ctx, args, getenv, stdout, stderr) },
		"grants":    func(args []string) error { return grantsCmd(ctx, args, getenv, stdout, stderr) },
		"proposals": func(args []string) error { return proposalsCmd(ctx, args, getenv, stdout, stderr) },
		"chain":     func(args []string) error { return chainCmd(ctx, args, getenv, stdout, stderr) },
		"approvals": func(args []string) error { return approvalsCmd(ctx, args, getenv, stdout, stderr) },
		"approval-rules": func(args []string) error {
			return approvalRulesCmd(ctx, args, getenv, stdout, stderr)
		},
		"keys":     func(args []string) error { return keysCmd(ctx, args, getenv, stdout, stderr) },
		"machines": func(args []string) error { return machinesCmd(ctx, args, getenv, stdout, stderr) },
		"monitor":  func(args []string) error { return monitorCmd(ctx, args, getenv, stdout, stderr) },
		"health":   func(args []string) error { return healthCmd(ctx, args, getenv, stdout, stderr) },
		"witness":  func(args []string) error { return witnessCmd(ctx, args, getenv, stdout, stderr) },
		"completion": func(args []string) error {
			return completionCmd(ctx, args, stdout, stderr)
		},
		"version": func(args []string) error {
			if _, err := parseFlags(newFlags("version", "usage: auditchain version\n"), args, stdout, stderr); err != nil {
				return err
			}
			fmt.Fprintln(stdout, buildinfo.Read().Long())
			return nil
		},
	}
}

// group runs the subcommand args[0] of a command group (admin, verify):
// without one, or with an unknown one, it prints the group's usage on stderr
// (a usage error), and an unknown one is named with the one meant; -h, --help
// or help print it on stdout, and `help SUB` shows SUB's help.
func group(name, groupUsage string, args []string, stdout, stderr io.Writer, subs map[string]func([]string) error) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, groupUsage)
		return usagef("%s needs a subcommand", name)
	}
	switch args[0] {
	case subcommandsProbe:
		return subcommandList(slices.Sorted(maps.Keys(subs)))
	case "-h", "--help", "-help":
		fmt.Fprint(stdout, groupUsage)
		return errHelpShown
	case "help":
		if len(args) == 1 {
			fmt.Fprint(stdout, groupUsage)
			return errHelpShown
		}
		return group(name, groupUsage, []string{args[1], "--help"}, stdout, stderr, subs)
	}
	sub, ok := subs[args[0]]
	if !ok {
		return unknownWord(name+" command", args[0], slices.Collect(maps.Keys(subs)), "auditchain "+name+" --help lists them")
	}
	return sub(args[1:])
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// explain turns a domain error into a one-line message for the terminal.
func explain(err error) error {
	var de *domain.Error
	if errors.As(err, &de) {
		msg := de.Detail
		for _, f := range de.Fields {
			msg = f.Field + ": " + f.Message
		}
		return fmt.Errorf("%s: %s", de.Code, msg)
	}
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// envOr reads an environment variable, or def when it is unset or empty.
func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}
