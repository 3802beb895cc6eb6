package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/hook"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

const hookUsage = `usage:
  auditchain hook --host HOST [flags] < host's hook JSON   answer one hook call (docs/hooks.md)
  auditchain hook flush [--spool DIR]                       send the spooled events
  auditchain hook install --host HOST [--project | --user] [--dir DIR] [--write] [--exe PATH]

hosts: claude-code, codex, gemini, cursor
environment: AUDITCHAIN_URL, AUDITCHAIN_API_KEY (required); AUDITCHAIN_HOOK_AGENT,
AUDITCHAIN_HOOK_POLICY, AUDITCHAIN_HOOK_ON_ERROR, AUDITCHAIN_HOOK_TIMEOUT, AUDITCHAIN_HOOK_SPOOL
stand for the flags of the same name.
`

// exitError ends the process with code; what it had to say is already
// written (a hook's refusal reason on stderr).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// maxHookStdin bounds what the hook reads (a tool input can hold a whole
// file being written).
const maxHookStdin = 64 << 20

// hookCmd is `auditchain hook …`. stdin is the host's JSON.
func hookCmd(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "flush":
			return hookFlushCmd(ctx, args[1:], getenv, stdout, stderr)
		case "install":
			return hookInstallCmd(args[1:], stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("hook", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), hookUsage); fs.PrintDefaults() }
	host := fs.String("host", "", "the agent host: "+strings.Join(hook.HostNames(), ", "))
	o := hookFlags(fs, getenv)
	agent := fs.String("agent", envOr(getenv, "AUDITCHAIN_HOOK_AGENT", "main"), "the sub-agent name the main agent's calls are gated as")
	policy := fs.String("policy", envOr(getenv, "AUDITCHAIN_HOOK_POLICY", "record"), "a main-agent call no grant covers: record (allow, on the record), ask, or deny")
	onError := fs.String("on-error", envOr(getenv, "AUDITCHAIN_HOOK_ON_ERROR", "deny"), "when the hook cannot decide: deny (fail closed) or allow")
	timeout := fs.Duration("timeout", envDuration(getenv, "AUDITCHAIN_HOOK_TIMEOUT", 5*time.Second), "deadline of one hook call, well under the host's timeout")
	if err := parseLeading(fs, args, stdout, stderr); err != nil {
		if errors.Is(err, errHelpShown) {
			return err // --help: usage on stdout, exit 0
		}
		// No host answer can be formed: exit 2 blocks the call on every host.
		return &exitError{code: 2}
	}
	failClosed := *onError != "allow"
	h, err := hook.HostByName(*host)
	if err == nil && *onError != "allow" && *onError != "deny" {
		err = fmt.Errorf("--on-error %q: want deny or allow", *onError)
	}
	pol, perr := hook.ParsePolicy(*policy)
	if err == nil {
		err = perr
	}
	if err != nil {
		return refuseUnanswerable(stdout, stderr, failClosed, err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	in, err := io.ReadAll(io.LimitReader(stdin, maxHookStdin))
	if err != nil {
		return refuseUnanswerable(stdout, stderr, failClosed, fmt.Errorf("read stdin: %w", err))
	}
	call, err := h.Parse(in)
	if err != nil {
		return refuseUnanswerable(stdout, stderr, failClosed, err)
	}
	if call.Phase == hook.PhaseOther {
		return answer(h, call, hook.Verdict{Decision: hook.Allow}, stdout, stderr)
	}
	now := time.Now
	r := &hook.Runner{MainAgent: *agent, Policy: pol, Spool: &hook.Spool{Dir: o.spoolDir()}, Now: now, Log: stderr}
	svc, err := o.service(now)
	var v hook.Verdict
	if err == nil {
		r.Service = svc
		v, err = r.Handle(ctx, call)
	} else {
		// Not configured: no account to record for, so nothing to spool
		// either (the refusal says why on stderr).
		r.Service, r.Spool = unreachable{err}, nil
	}
	if err != nil {
		fmt.Fprintf(stderr, "auditchain hook: %v\n", err)
		v = hook.Verdict{Decision: hook.Deny, Reason: "auditchain hook could not reach a decision (" + err.Error() + "); refused: it fails closed"}
		if !failClosed {
			v = hook.Verdict{Decision: hook.Allow}
		}
		r.Refused(ctx, call, v.Decision, err)
	}
	aerr := answer(h, call, v, stdout, stderr)
	if err == nil && r.Spool.Pending() {
		// The service answered: send what earlier runs spooled, within
		// what is left of the deadline.
		if res, ferr := r.Spool.FlushUpTo(ctx, svc, hookFlushRows); ferr != nil {
			fmt.Fprintf(stderr, "auditchain hook: flush the spool: %v\n", ferr)
		} else if res.Sent > 0 {
			fmt.Fprintf(stderr, "auditchain hook: flushed %d spooled events (%d left)\n", res.Sent, res.Left)
		}
	}
	return aerr
}

// hookFlushRows is how many spooled rows a hook run sends after its own
// call: a round trip each, paid before the host gets the process's exit.
const hookFlushRows = 8

// answer writes the host's answer: the JSON on stdout (and nothing else),
// the reason on stderr when the host reads it there, and the exit code.
func answer(h hook.Host, c *hook.Call, v hook.Verdict, stdout, stderr io.Writer) error {
	out, code, msg := h.Answer(c, v)
	if _, err := stdout.Write(out); err != nil {
		return &exitError{code: 2}
	}
	if msg != "" {
		fmt.Fprintln(stderr, msg)
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// refuseUnanswerable answers a call whose host or stdin could not be read:
// exit 2 with the reason on stderr blocks the call on every host; with
// --on-error allow, {} lets it run.
func refuseUnanswerable(stdout, stderr io.Writer, failClosed bool, err error) error {
	fmt.Fprintf(stderr, "auditchain hook: %v\n", err)
	if !failClosed {
		fmt.Fprint(stdout, "{}\n")
		return nil
	}
	fmt.Fprintln(stderr, "auditchain hook: refused: it fails closed")
	return &exitError{code: 2}
}

// hookOptions are the flags every hook command shares.
type hookOptions struct {
	url, key, spool string
}

func hookFlags(fs *flag.FlagSet, getenv func(string) string) *hookOptions {
	o := &hookOptions{key: getenv("AUDITCHAIN_API_KEY")}
	config.SecretVar(fs, &o.url, "url", getenv("AUDITCHAIN_URL"), "", "the auditchain service (AUDITCHAIN_URL)")
	fs.StringVar(&o.spool, "spool", envOr(getenv, "AUDITCHAIN_HOOK_SPOOL", hook.DefaultSpoolDir()), "directory of events waiting to be sent")
	return o
}

// spoolDir is the account's spool under --spool: events spooled with one
// service and key are only ever sent with them.
func (o *hookOptions) spoolDir() string { return hook.AccountSpoolDir(o.spool, o.url, o.key) }

// service is the client of the configured service, surface hook. One retry
// at most: the deadline is short and the spool keeps what is not sent.
func (o *hookOptions) service(now func() time.Time) (*hook.ClientService, error) {
	if o.url == "" || o.key == "" {
		return nil, errors.New("AUDITCHAIN_URL and AUDITCHAIN_API_KEY must be set")
	}
	c, err := client.New(o.url, o.key, client.WithSurface(client.SurfaceHook), client.WithClock(now),
		client.WithRetries(1, time.Second))
	return &hook.ClientService{C: c, TipFile: filepath.Join(o.spoolDir(), "tip.json")}, err
}

// unreachable is the Service when no client could be made: every call fails,
// so events go to the spool.
type unreachable struct{ err error }

func (u unreachable) GateCall(context.Context, api.ToolCallRequest) (*api.ToolCallResponse, error) {
	return nil, u.err
}
func (u unreachable) Append(context.Context, *api.EventInput) error { return u.err }
func (u unreachable) Tip(context.Context) (*api.ChainTip, error)    { return nil, u.err }
func (u unreachable) AppendBatch(context.Context, []api.EventInput) (*api.BatchResponse, error) {
	return nil, u.err
}

func hookFlushCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("hook flush", "usage: auditchain hook flush [--url URL] [--spool DIR]\n\nSends the events earlier hook runs spooled while the service was unreachable.\n")
	o := hookFlags(fs, getenv)
	if err := parseLeading(fs, args, stdout, stderr); err != nil {
		return err
	}
	svc, err := o.service(time.Now)
	if err != nil {
		return err
	}
	sp := &hook.Spool{Dir: o.spoolDir()}
	res, err := sp.Flush(ctx, svc)
	if err != nil {
		return fmt.Errorf("flush %s: %w", sp.Dir, err)
	}
	if res.Skipped {
		return fmt.Errorf("flush %s: another flush holds the spool; try again", sp.Dir)
	}
	return printJSON(stdout, map[string]any{"spool": sp.Dir, "sent": res.Sent, "left": res.Left, "held": res.Held})
}

func hookInstallCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("hook install", "usage: auditchain hook install --host HOST [--write] [--project | --user] [--dir DIR] [--exe CMD]\n\nPrints (or with --write merges) the host's settings block that runs auditchain hook.\n")
	host := fs.String("host", "", "the agent host: "+strings.Join(hook.HostNames(), ", "))
	user := fs.Bool("user", false, "the user's settings file (under the home directory)")
	fs.Bool("project", true, "the project's settings file (under --dir; the default)")
	dir := fs.String("dir", "", "the project directory (default: the working directory)")
	write := fs.Bool("write", false, "merge the block into the settings file (otherwise only print it)")
	exe := fs.String("exe", "auditchain", "the auditchain command the host runs")
	if err := parseLeading(fs, args, stdout, stderr); err != nil {
		return err
	}
	block, err := hook.Settings(*host, hook.Command(*exe, *host))
	if err != nil {
		return err
	}
	base := *dir
	if *user {
		if base, err = os.UserHomeDir(); err != nil {
			return err
		}
	} else if base == "" {
		if base, err = os.Getwd(); err != nil {
			return err
		}
	}
	path, err := hook.SettingsPath(*host, base)
	if err != nil {
		return err
	}
	out, err := hook.Render(block)
	if err != nil {
		return err
	}
	if !*write {
		fmt.Fprintf(stderr, "auditchain hook install: merge this into %s (or run again with --write)\n", path)
		_, err = stdout.Write(out)
		return err
	}
	if _, err := hook.Install(path, block); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "auditchain hook install: merged into %s\n", path)
	_, err = stdout.Write(out)
	return err
}

func envDuration(getenv func(string) string, name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}
