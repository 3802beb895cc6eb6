package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
)

// The hook workloads: `auditchain hook --host claude-code` run as a process
// per operation, as an agent host runs it around each tool call. hook: before
// the tool — process start, the gate's answer, one use metered, the
// tool_call appended. hook-result: after it — process start, the
// tool_result appended. An operation is one invocation that answered `{}`
// (for hook: authorized) with exit 0.

// hookSetup gives every account a grant for benchSubagent and returns an
// operation that runs the hook binary (Options.HookExe, default this
// executable) with a call of its own for event (PreToolUse or PostToolUse)
// on the worker's accounts.
func hookSetup(event string) setupFunc {
	return func(ctx context.Context, e *env) (func(w *worker) opFunc, error) { return hookOp(ctx, e, event) }
}

func hookOp(ctx context.Context, e *env, event string) (func(w *worker) opFunc, error) {
	if _, err := benchGrants(ctx, e); err != nil {
		return nil, err
	}
	exe := e.o.HookExe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	spool, err := os.MkdirTemp("", "auditchain-bench-hook-")
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { os.RemoveAll(spool) })
	var response string // the tool's output, after the tool
	if event == "PostToolUse" {
		response = `"tool_response":{"stdout":"ok","stderr":"","interrupted":false},`
	}
	return func(w *worker) opFunc {
		s := newChainState(e, w.id)
		n := 0
		return func(ctx context.Context, w *worker) (int, error) {
			a, _ := s.pick()
			n++
			stdin := `{"session_id":"` + e.prefix + `","transcript_path":"/dev/null","cwd":"/","permission_mode":"default",` +
				`"hook_event_name":"` + event + `","tool_name":"bash","tool_input":{"command":"true","n":` + strconv.Itoa(n) + `},` + response +
				`"tool_use_id":"w` + strconv.Itoa(w.id) + "-" + strconv.Itoa(n) + `"}`
			cmd := exec.CommandContext(ctx, exe, "hook", "--host", "claude-code")
			// AUDITCHAIN_HOOK_DEBUG: the hook's diagnostics on stderr too
			// (by default they only go to its hook.log), which the check
			// below reads.
			cmd.Env = append(os.Environ(), "AUDITCHAIN_URL="+w.c.base, "AUDITCHAIN_API_KEY="+e.accounts[a].key,
				"AUDITCHAIN_HOOK_AGENT="+benchSubagent, "AUDITCHAIN_HOOK_SPOOL="+spool, "AUDITCHAIN_HOOK_DEBUG=1")
			cmd.Stdin = bytes.NewReader([]byte(stdin))
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				return 0, fmt.Errorf("hook: %v: %s", err, firstLine(errb.Bytes()))
			}
			if out.String() != "{}\n" {
				return 0, errors.New("hook did not answer {} (authorized): " + firstLine(out.Bytes()))
			}
			if errb.Len() > 0 {
				// A diagnostic means an event was spooled, not recorded.
				return 0, errors.New("hook: " + firstLine(errb.Bytes()))
			}
			e.stored.Add(1)
			return 1, nil
		}
	}, nil
}

func firstLine(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
