package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/hosttest"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// Per-call approvals through the real hosts (docs/hooks.md "Approvals"): an
// approval rule holds the host's shell tool; the host runs this test binary
// as its hook, whose wait stays below the host's hook timeout (install
// writes 10 s: --timeout 9s, --approval-wait 7s, set through the hook's
// environment as an operator would); another identity (a key holding only
// the approvals capability) decides through the API. The host's own
// behaviour decides each test: the file its tool made, how many times, and
// what it sent back to the model.

// approvalHosts are the hosts the approval tests drive, with what install
// names them, the tool name their hook reports for the shell, the host's
// flags, and how the hook is installed.
var approvalHosts = []struct {
	host     hosttest.Host
	hookHost string
	tool     string
	flags    []string
}{
	{hosttest.Claude, "claude-code", "Bash", []string{"--allowedTools", "Bash"}},
	{hosttest.CodexCLI, "codex", "Bash", []string{"--sandbox", "danger-full-access"}},
	{hosttest.GeminiCLI, "gemini", "run_shell_command", []string{"--approval-mode", "yolo"}},
}

// approvalWorld is a host world whose main agent may call tool 5 times, an
// approval rule holding tool, and a person: another key of the account
// with only the approvals capability.
func approvalWorld(t *testing.T, dsn, tool string) (*hostWorld, *client.Client) {
	t.Helper()
	w := newHostWorldOn(t, dsn, grant("main", 5, tool))
	if _, err := w.c.CreateApprovalRule(context.Background(), api.ApprovalRuleRequest{Subagent: new("main"), Tool: new(tool)}); err != nil {
		t.Fatal(err)
	}
	person, err := client.New(w.s.URL, w.s.Key(t, w.user, api.CreateKeyRequest{Scopes: []string{"approvals"}}))
	if err != nil {
		t.Fatal(err)
	}
	return w, person
}

// approveOnAsk listens to the account's live events (watcher's key) and, as soon as a
// tool_call is recorded ask (the hook holds the call and waits), has the
// person approve the one pending approval. It returns once listening; the
// channel delivers the approval's id, or the error.
func approveOnAsk(t *testing.T, watcher, person *client.Client) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- watcher.Stream(ctx, func(m client.StreamMessage) error {
			switch {
			case m.Kind == "ready" && !m.Reconnected:
				close(ready)
			case m.Kind == "event" && m.Event.EventType == "tool_call" && m.Event.Decision != nil && *m.Event.Decision == api.DecisionAsk:
				l, err := person.Approvals(ctx, api.ApprovalPending, 0)
				if err != nil {
					return err
				}
				if len(l.Approvals) != 1 {
					return errors.New("the held call left no single pending approval")
				}
				if _, err := person.Approve(ctx, l.Approvals[0].ApprovalID, new("approved while the hook waits")); err != nil {
					return err
				}
				return client.ErrStopStream
			}
			return nil
		})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the live stream ended before it listened: %v", err)
	}
	return done
}

// checkApprovedOnce checks the record of one approved call: one use
// metered, the held call recorded ask and the call recorded allow with the
// approval id, an approval.granted naming the person's key (not the
// hook's), the approval used, and the export proving one approved call.
func checkApprovedOnce(t *testing.T, w *hostWorld, person *client.Client) {
	t.Helper()
	if u := w.uses(t, "main"); u != 1 {
		t.Errorf("%d uses metered, want 1", u)
	}
	l, err := person.Approvals(context.Background(), "", 0)
	if err != nil || len(l.Approvals) != 1 {
		t.Fatalf("approvals: %+v %v, want one", l, err)
	}
	ap := l.Approvals[0]
	if ap.Status != api.ApprovalUsed || ap.DecidedBy == nil || ap.DecidedBy.Identity == ap.RequestedBy.Identity || ap.DecidedBy.Kind != "api_key" {
		t.Errorf("the approval: %+v (decided by %+v)", ap, ap.DecidedBy)
	}
	calls, results := w.calls(t)
	decisions := map[string]int{}
	for _, c := range calls {
		decisions[*c.Decision]++
		if raw := rawOf(t, c); raw["approval_id"] != ap.ApprovalID {
			t.Errorf("the %s tool_call names approval %v, want %s", *c.Decision, raw["approval_id"], ap.ApprovalID)
		}
	}
	if len(calls) != 2 || decisions[api.DecisionAsk] != 1 || decisions[api.DecisionAllow] != 1 || len(results) != 1 {
		t.Errorf("recorded %v tool_calls and %d tool_results, want one ask, one allow and one result", decisions, len(results))
	}
	granted := 0
	for _, e := range w.exported(t) {
		if e.EventType == api.EventApprovalGranted {
			granted++
			approver, _ := rawOf(t, e)["approver"].(map[string]any)
			if approver["identity"] != ap.DecidedBy.Identity {
				t.Errorf("approval.granted names %v, want the person's key %s", approver, ap.DecidedBy.Identity)
			}
		}
	}
	if granted != 1 {
		t.Errorf("%d approval.granted events, want 1", granted)
	}
	if rep := w.verifyOffline(t); rep.ApprovedCalls != 1 {
		t.Errorf("the export proves %d approved calls, want 1", rep.ApprovedCalls)
	}
}

// hostSession is a session of host with the hook installed as docs/hooks.md
// says (Gemini: a user install, which needs no folder trust) and the
// approval wait in the hook's environment.
func hostSession(t *testing.T, w *hostWorld, host hosttest.Host, hookHost string, srv *hosttest.Server, wait string) *hosttest.Session {
	t.Helper()
	s := w.session(t, host, srv)
	s.Setenv("AUDITCHAIN_HOOK_TIMEOUT", "9s")
	s.Setenv("AUDITCHAIN_HOOK_APPROVAL_WAIT", wait)
	install(t, s, "--host", hookHost, "--dir", s.Dir)
	return s
}

func TestHostApprovals(t *testing.T) {
	t.Parallel()
	for _, h := range approvalHosts {
		t.Run(string(h.host), func(t *testing.T) {
			t.Parallel()
			for _, store := range []storetest.Backend{storetest.SQLite, storetest.Postgres} {
				// The hook waits; the person approves during the wait; the
				// host's tool runs.
				t.Run(string(store)+"/approved-while-waiting", func(t *testing.T) {
					t.Parallel()
					w, person := approvalWorld(t, storetest.DSN(t, store), h.tool)
					srv := hosttest.NewServer(t, hosttest.Script{hosttest.Calls(h.host.Shell("touch approved")), hosttest.Text("finished")})
					s := hostSession(t, w, h.host, h.hookHost, srv, "7s")
					approved := approveOnAsk(t, w.c, person)
					out := s.Run(t, "Create the file.", h.flags...)
					if out.ExitCode != 0 {
						t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nserver:\n%s", out.ExitCode, out.Stdout, out.Stderr, srv.Log())
					}
					if err := <-approved; err != nil {
						t.Fatalf("approving: %v", err)
					}
					if !exists(s.Dir, "approved") {
						t.Errorf("the approved command did not run\n%s", srv.Log())
					}
					if res, ok := srv.Result(srv.Calls()[0].ID); !ok || strings.Contains(res.Output, "auditchain") {
						t.Errorf("the model was told %+v (found %v), want the tool's own result", res, ok)
					}
					checkApprovedOnce(t, w, person)
				})
				// Nobody decides before the deadline: the host refuses the
				// call and the model reads the approval's id and that it may
				// try again later; the person approves; the model's retry of
				// the same call runs, once.
				t.Run(string(store)+"/pending-then-retry", func(t *testing.T) {
					t.Parallel()
					w, person := approvalWorld(t, storetest.DSN(t, store), h.tool)
					call := h.host.Shell("echo once >> count")
					var told string
					var approveErr error
					srv := hosttest.NewServer(t, hosttest.ResponderFunc(func(r hosttest.Request) hosttest.Reply {
						switch r.CallsMade() {
						case 0:
							return hosttest.Calls(call)
						case 1:
							// The model read the refusal; a person approves
							// before the model tries again.
							if res := r.Results(); len(res) > 0 {
								told = res[len(res)-1].Output
							}
							l, err := person.Approvals(context.Background(), api.ApprovalPending, 0)
							if err == nil && len(l.Approvals) == 1 {
								_, err = person.Approve(context.Background(), l.Approvals[0].ApprovalID, nil)
							} else if err == nil {
								err = errors.New("no single pending approval")
							}
							approveErr = err
							return hosttest.Calls(call)
						}
						return hosttest.Text("finished")
					}))
					s := hostSession(t, w, h.host, h.hookHost, srv, "2s")
					out := s.Run(t, "Append the line.", h.flags...)
					if out.ExitCode != 0 {
						t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nserver:\n%s", out.ExitCode, out.Stdout, out.Stderr, srv.Log())
					}
					if approveErr != nil {
						t.Fatalf("approving: %v", approveErr)
					}
					l, err := person.Approvals(context.Background(), "", 0)
					if err != nil || len(l.Approvals) != 1 {
						t.Fatalf("approvals: %+v %v", l, err)
					}
					id := l.Approvals[0].ApprovalID
					if !strings.Contains(told, id) || !strings.Contains(told, "try the same call again later") {
						t.Errorf("the model was told %q, want the approval %s and that it may try again later", told, id)
					}
					b, _ := os.ReadFile(filepath.Join(s.Dir, "count"))
					if string(b) != "once\n" {
						t.Errorf("the command ran %q, want once\n%s", b, srv.Log())
					}
					calls := srv.Calls()
					if len(calls) != 2 {
						t.Fatalf("%d calls, want 2\n%s", len(calls), srv.Log())
					}
					// The hook held the first call for its wait (2 s, in whole
					// seconds of long-poll) before the host refused it.
					if turns := srv.Turns(); len(turns) < 2 || turns[1].At-turns[0].At < time.Second {
						t.Errorf("the host refused the held call without the hook waiting\n%s", srv.Log())
					}
					if res, ok := srv.Result(calls[1].ID); !ok || strings.Contains(res.Output, "auditchain") {
						t.Errorf("the retry's result %+v (found %v), want the tool's own", res, ok)
					}
					checkApprovedOnce(t, w, person)
				})
			}
		})
	}
}
