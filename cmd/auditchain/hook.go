package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
  auditchain hook install --host HOST [--project | --user] [--dir DIR] [--exe PATH] [--dry-run]
  auditchain hook uninstall --host HOST [--project | --user] [--dir DIR] [--dry-run]
  auditchain hook doctor --host HOST [--project | --user] [--dir DIR]

hosts: claude-code, codex, gemini, cursor
environment: AUDITCHAIN_URL, AUDITCHAIN_API_KEY (required); AUDITCHAIN_HOOK_AGENT,
AUDITCHAIN_HOOK_POLICY, AUDITCHAIN_HOOK_ON_ERROR, AUDITCHAIN_HOOK_TIMEOUT, AUDITCHAIN_HOOK_APPROVAL_WAIT,
AUDITCHAIN_HOOK_SEND_ARGS_TEXT (1 or true), AUDITCHAIN_HOOK_SPOOL stand for the flags of the same name; AUDITCHAIN_HOOK_DEBUG=1 copies the diagnostics (hook.log in
the spool directory) to stderr.
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
			return hookInstallCmd(args[1:], getenv, stdout, stderr)
		case "uninstall":
			return hookUninstallCmd(args[1:], getenv, stdout, stderr)
		case "doctor":
			return hookDoctorCmd(ctx, args[1:], getenv, stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("hook", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), hookUsage); fs.PrintDefaults() }
	host := fs.String("host", "", "the agent host: "+strings.Join(hook.HostNames(), ", "))
	o := hookFlags(fs, getenv)
	agent := fs.String("agent", envOr(getenv, "AUDITCHAIN_HOOK_AGENT", "main"), "the sub-agent name the main agent's calls are gated as")
	policy := fs.String("policy", envOr(getenv, "AUDITCHAIN_HOOK_POLICY", "record"), "a main-agent call no grant covers: record (allow, on the record), ask, or deny")
	onError := fs.String("on-error", envOr(getenv, "AUDITCHAIN_HOOK_ON_ERROR", "deny"), "when the hook cannot decide: deny (fail closed) or allow")
	timeout := new(time.Duration)
	config.DurationVar(fs, timeout, "timeout", envDuration(getenv, "AUDITCHAIN_HOOK_TIMEOUT", 5*time.Second), "deadline of one hook call, well under the host's timeout")
	approvalWait := new(time.Duration)
	config.DurationVar(fs, approvalWait, "approval-wait", envDuration(getenv, "AUDITCHAIN_HOOK_APPROVAL_WAIT", 0),
		"how long a call held for a person's approval waits for the decision, within --timeout (0: refuse it at once, naming the approval)")
	sendArgsText := fs.Bool("send-args-text", envBool(getenv, "AUDITCHAIN_HOOK_SEND_ARGS_TEXT"),
		"send the tool's input as text with each call, shown to whoever approves a call an approval rule holds, kept only while it is pending (off: the service sees only its digest)")
	// stderr carries nothing but a refusal's one-line reason (Codex shows a
	// blocking hook's whole stderr to the model): the usage a bad flag
	// prints goes to the diagnostics.
	var usage bytes.Buffer
	perr := parseLeading(fs, args, stdout, &usage)
	diag := newDiagLog(o.spool, getenv, stderr)
	defer diag.Close()
	diag.Write(usage.Bytes())
	if perr != nil {
		if errors.Is(perr, errHelpShown) {
			return perr // --help: usage on stdout, exit 0
		}
		// No host answer can be formed: exit 2 blocks the call on every host.
		return refuseUnanswerable(stdout, stderr, diag, true, perr)
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
		return refuseUnanswerable(stdout, stderr, diag, failClosed, err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	in, err := io.ReadAll(io.LimitReader(stdin, maxHookStdin))
	if err != nil {
		return refuseUnanswerable(stdout, stderr, diag, failClosed, fmt.Errorf("read stdin: %w", err))
	}
	call, err := h.Parse(in)
	if err != nil {
		return refuseUnanswerable(stdout, stderr, diag, failClosed, err)
	}
	if call.Phase == hook.PhaseOther {
		return answer(h, call, hook.Verdict{Decision: api.DecisionAllow}, stdout, stderr)
	}
	now := time.Now
	r := &hook.Runner{MainAgent: *agent, Policy: pol, Spool: &hook.Spool{Dir: o.spoolDir()}, Now: now, Log: diag,
		ApprovalWait: *approvalWait, SendArgsText: *sendArgsText}
	svc, err := o.service(now)
	var v hook.Verdict
	if err == nil {
		r.Service = svc
		v, err = r.Handle(ctx, call)
	} else {
		// Not configured: no account to record for, so nothing to spool
		// either (the refusal says why).
		r.Service, r.Spool = unreachable{err}, nil
	}
	if err != nil {
		fmt.Fprintf(diag, "auditchain hook: %v\n", err)
		v = hook.Verdict{Decision: api.DecisionDeny, Reason: "auditchain: refused: " + undecided(err) + "; the hook fails closed"}
		if !failClosed {
			v = hook.Verdict{Decision: api.DecisionAllow}
		}
		r.Refused(ctx, call, v.Decision, err)
	}
	aerr := answer(h, call, v, stdout, stderr)
	if err == nil && r.Spool.Pending() {
		// The service answered: send what earlier runs spooled, within
		// what is left of the deadline.
		if res, ferr := r.Spool.FlushUpTo(ctx, svc, hookFlushRows); ferr != nil {
			fmt.Fprintf(diag, "auditchain hook: flush the spool: %v\n", ferr)
		} else if res.Sent > 0 {
			fmt.Fprintf(diag, "auditchain hook: flushed %d spooled events (%d left)\n", res.Sent, res.Left)
		}
	}
	return aerr
}

// newDiagLog is the hook's diagnostics: hook.log in the spool directory,
// and stderr too when AUDITCHAIN_HOOK_DEBUG is set (1, true).
func newDiagLog(spool string, getenv func(string) string, stderr io.Writer) *hook.DiagLog {
	d := &hook.DiagLog{Dir: spool}
	if v := getenv("AUDITCHAIN_HOOK_DEBUG"); v != "" && v != "0" && v != "false" {
		d.Also = stderr
	}
	return d
}

// errNotConfigured: the hook's environment lacks the service or the key.
var errNotConfigured = errors.New("AUDITCHAIN_URL and AUDITCHAIN_API_KEY must be set")

// undecided says, in a few words fit for the model to read, why the hook
// could not decide: never the service's address, an event id or the spool
// (those go to the diagnostics).
func undecided(err error) string {
	var ce *client.Error
	switch {
	case errors.Is(err, errNotConfigured):
		return "AUDITCHAIN_URL and AUDITCHAIN_API_KEY are not set in the hook's environment"
	case errors.Is(err, context.DeadlineExceeded):
		return "the auditchain service did not answer in time"
	case errors.As(err, &ce):
		return fmt.Sprintf("the auditchain service answered %d %s", ce.Status, ce.Code)
	}
	return "the auditchain service is unreachable"
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

// refuseUnanswerable answers a call whose flags, host or stdin could not be
// read: exit 2 with a one-line reason on stderr blocks the call on every
// host; with --on-error allow, {} lets it run.
func refuseUnanswerable(stdout, stderr, diag io.Writer, failClosed bool, err error) error {
	fmt.Fprintf(diag, "auditchain hook: %v\n", err)
	if !failClosed {
		fmt.Fprint(stdout, "{}\n")
		return nil
	}
	fmt.Fprintln(stderr, hook.OneLine("auditchain hook: refused: "+err.Error()+"; the hook fails closed"))
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
		return nil, errNotConfigured
	}
	c, err := client.New(o.url, o.key, client.WithSurface(client.SurfaceHook), client.WithClock(now),
		client.WithRetries(1, time.Second))
	return &hook.ClientService{C: c}, err
}

// unreachable is the Service when no client could be made: every call fails,
// so events go to the spool.
type unreachable struct{ err error }

func (u unreachable) GateCall(context.Context, api.ToolCallRequest) (*api.ToolCallResponse, error) {
	return nil, u.err
}
func (u unreachable) AppendNext(context.Context, *api.EventInput) error { return u.err }
func (u unreachable) Approval(context.Context, string, time.Duration) (*api.Approval, error) {
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

// hookScope reads the flags that name an install: the host and the scope.
type hookScope struct {
	host, dir string
	user      bool
}

func hookScopeFlags(fs *flag.FlagSet) *hookScope {
	sc := &hookScope{}
	fs.StringVar(&sc.host, "host", "", "the agent host: "+strings.Join(hook.HostNames(), ", "))
	fs.BoolVar(&sc.user, "user", false, "the user's settings (under the home directory)")
	fs.Bool("project", true, "the project's settings (under --dir; the default)")
	fs.StringVar(&sc.dir, "dir", "", "the project directory (default: the working directory)")
	return sc
}

// target is the install the flags name; the project directory is absolute
// with symlinks resolved, as the host's working directory reads it.
func (sc *hookScope) target(getenv func(string) string) (hook.Target, error) {
	if _, err := hook.HostByName(sc.host); err != nil {
		return hook.Target{}, usageError{err}
	}
	t := hook.Target{Host: sc.host, User: sc.user, Getenv: getenv, Home: getenv("HOME")}
	if t.Home == "" {
		var err error
		if t.Home, err = os.UserHomeDir(); err != nil {
			return t, err
		}
	}
	dir := sc.dir
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return t, err
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return t, err
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	t.Dir = dir
	return t, nil
}

// selfPath is the absolute path of this program as the shell found it (a
// symlink on PATH stays a symlink, so an upgrade behind it keeps working).
var selfPath = func() (string, error) {
	if p, err := exec.LookPath(os.Args[0]); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs, nil
		}
	}
	return os.Executable()
}

func hookInstallCmd(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("hook install", "usage: auditchain hook install --host HOST [--project | --user] [--dir DIR] [--exe PATH] [--dry-run]\n\nWrites what the host needs to run auditchain hook on every tool call: its hook settings, and the\ntrust entries Codex and Gemini require (docs/hooks.md). --dry-run shows each file's change instead.\n")
	sc := hookScopeFlags(fs)
	exe := fs.String("exe", "", "the auditchain program the host runs (default: this one, by absolute path)")
	dry := fs.Bool("dry-run", false, "show every file it would touch and the change, write nothing")
	if err := parseLeading(fs, args, stdout, stderr); err != nil {
		return err
	}
	t, err := sc.target(getenv)
	if err != nil {
		return err
	}
	if *exe == "" {
		if *exe, err = selfPath(); err != nil {
			return err
		}
	}
	t.Command = hook.Command(*exe, t.Host)
	changes, err := hook.PlanInstall(t)
	if err != nil {
		return err
	}
	if err := applyHookChanges(changes, *dry, stdout); err != nil {
		return err
	}
	for _, line := range installAdvice(t) {
		fmt.Fprintln(stdout, line)
	}
	return nil
}

func hookUninstallCmd(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("hook uninstall", "usage: auditchain hook uninstall --host HOST [--project | --user] [--dir DIR] [--dry-run]\n\nTakes out exactly what hook install added: its hook entries (recognised by the command\n`… hook --host HOST`, whatever the program's name) and the trust entries it wrote.\n")
	sc := hookScopeFlags(fs)
	dry := fs.Bool("dry-run", false, "show every file it would touch and the change, write nothing")
	if err := parseLeading(fs, args, stdout, stderr); err != nil {
		return err
	}
	t, err := sc.target(getenv)
	if err != nil {
		return err
	}
	changes, err := hook.PlanUninstall(t)
	if err != nil {
		return err
	}
	return applyHookChanges(changes, *dry, stdout)
}

// applyHookChanges writes the changes, or with dry shows them, one file at a
// time: what it does, then (dry) the diff.
func applyHookChanges(changes []hook.Change, dry bool, stdout io.Writer) error {
	verb, any := "wrote", false
	if dry {
		verb = "would write"
	}
	for _, c := range changes {
		if !c.Changed() {
			continue
		}
		any = true
		v := verb
		if c.After == nil {
			v = map[bool]string{true: "would remove", false: "removed"}[dry]
		}
		fmt.Fprintf(stdout, "%s %s\n", v, c.Path)
		for _, n := range c.Notes {
			fmt.Fprintf(stdout, "  %s\n", n)
		}
		if dry {
			hook.WriteDiff(stdout, c)
		}
	}
	if !any {
		fmt.Fprintln(stdout, "nothing to change")
		return nil
	}
	if dry {
		return nil
	}
	return hook.Apply(changes)
}

// installAdvice is what an install leaves to the user.
func installAdvice(t hook.Target) []string {
	out := []string{"the hook needs AUDITCHAIN_URL and AUDITCHAIN_API_KEY in the host's environment; check with: auditchain hook doctor --host " + t.Host + scopeArgs(t)}
	switch {
	case t.Host == "gemini" && !t.User:
		out = append(out, "gemini --skip-trust loads no project settings, hooks included: where runs use it, install with --user")
	case t.Host == "cursor":
		out = append(out, "Cursor was not run by auditchain's tests: its hook events and options are unverified (docs/hooks.md)")
	}
	return out
}

func scopeArgs(t hook.Target) string {
	if t.User {
		return " --user"
	}
	return " --dir " + t.Dir
}

func hookDoctorCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("hook doctor", "usage: auditchain hook doctor --host HOST [--project | --user] [--dir DIR]\n\nRuns the host's hook path as far as it can offline, in this environment (run it where the host\nruns), and says in one line per check what will happen; exit 1 when a check fails.\n")
	sc := hookScopeFlags(fs)
	o := hookFlags(fs, getenv)
	agent := fs.String("agent", envOr(getenv, "AUDITCHAIN_HOOK_AGENT", "main"), "the sub-agent name the main agent's calls are gated as")
	if err := parseLeading(fs, args, stdout, stderr); err != nil {
		return err
	}
	t, err := sc.target(getenv)
	if err != nil {
		return err
	}
	checks := hook.Doctor(ctx, t, hook.DoctorEnv{Getenv: getenv, Environ: environ(getenv)})
	checks = append(checks, serviceCheck(ctx, o, *agent, getenv))
	failed := false
	for _, c := range checks {
		fmt.Fprintln(stdout, c)
		failed = failed || c.Status == hook.CheckFail
	}
	if failed {
		return &exitError{code: exitFailure}
	}
	return nil
}

// environ is the process's environment as getenv reads it (tests give run
// a getenv of their own).
func environ(getenv func(string) string) []string {
	var out []string
	seen := map[string]bool{}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		seen[k] = true
		if v := getenv(k); v != "" {
			out = append(out, k+"="+v)
		}
	}
	for _, k := range []string{"HOME", "PATH", "AUDITCHAIN_URL", "AUDITCHAIN_API_KEY", "AUDITCHAIN_HOOK_SPOOL", "CODEX_HOME", "GEMINI_CLI_HOME"} {
		if v := getenv(k); v != "" && !seen[k] {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// serviceCheck asks the service what the main agent's next call will meet.
func serviceCheck(ctx context.Context, o *hookOptions, agent string, getenv func(string) string) hook.Check {
	svc, err := o.service(time.Now)
	if err != nil {
		return hook.Check{Status: hook.CheckFail, Name: "service", Says: err.Error() + ": the hook refuses every call"}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := svc.C.GrantStatus(ctx, api.GrantStatusQuery{Subagent: agent})
	if err != nil {
		return hook.Check{Status: hook.CheckFail, Name: "service", Says: fmt.Sprintf("%s: %v: the hook refuses every call (it fails closed)", o.url, err)}
	}
	policy := envOr(getenv, "AUDITCHAIN_HOOK_POLICY", "record")
	says := fmt.Sprintf("%s answers; the main agent %q: %s", o.url, agent, st.Status)
	if st.Status == "no_grant" {
		says += fmt.Sprintf(", so its calls are decided by --policy %s", policy)
	} else if st.Reason != "" {
		says += ": " + st.Reason
	}
	return hook.Check{Status: hook.CheckOK, Name: "service", Says: says}
}

func envDuration(getenv func(string) string, name string, def time.Duration) time.Duration {
	if d, err := config.ParseDuration(getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// envBool reads a switch from the environment: 1 or true (any case) is on.
func envBool(getenv func(string) string, name string) bool {
	v, err := strconv.ParseBool(strings.TrimSpace(getenv(name)))
	return err == nil && v
}
