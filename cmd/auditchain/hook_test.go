package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/hook"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
	"github.com/auditchain/auditchain/pkg/verify"
	"github.com/gowebpki/jcs"
)

// hookProcess runs `auditchain hook args…` as a process of its own (this
// test binary re-executed, see TestMain), with stdin and the environment
// env, as an agent host runs it.
func hookProcess(t *testing.T, env map[string]string, stdin string, args ...string) (stdout, stderr string, exit int) {
	t.Helper()
	argv, _ := json.Marshal(append([]string{"hook"}, args...))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childServeEnv+"="+string(argv))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		exit = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), exit
}

// hookWorld is a real server, an account with a grant for the main agent
// ("worker": Bash and Read, 10 calls) and one for a sub-agent ("reviewer":
// Read, 5 calls), and the hook's environment.
type hookWorld struct {
	s    *httpapitest.Server
	c    *client.Client
	env  map[string]string
	user string
}

func newHookWorld(t *testing.T, dsn string) *hookWorld {
	t.Helper()
	s := httpapitest.Start(t, dsn, apptest.Options{})
	user, token := s.Account(t, "hook-e2e@example.com")
	c, err := client.New(s.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	expires := client.FormatTimestamp(time.Now().Add(24 * time.Hour))
	for _, g := range []api.CreateGrantRequest{
		{GrantID: strp("g-a11"), Subagent: new("worker"), ExpiresAt: new(expires), MaxToolCalls: new(int64(10)), AllowedTools: []string{"Bash", "Read"}},
		{GrantID: strp("g-b22"), Subagent: new("reviewer"), ExpiresAt: new(expires), MaxToolCalls: new(int64(5)), AllowedTools: []string{"Read"}},
	} {
		if _, err := c.CreateGrant(context.Background(), g); err != nil {
			t.Fatal(err)
		}
	}
	return &hookWorld{s: s, c: c, env: map[string]string{"AUDITCHAIN_URL": s.URL, "AUDITCHAIN_API_KEY": token,
		"AUDITCHAIN_HOOK_SPOOL": t.TempDir(), "AUDITCHAIN_HOOK_AGENT": "worker"}, user: user}
}

func strp(s string) *string { return &s }

// claudeCall is Claude Code's stdin for event of tool tool_use_id.
func claudeCall(event, toolUseID, tool string, input any, extra map[string]any) string {
	m := map[string]any{"session_id": "sess-e2e", "transcript_path": "/tmp/t.jsonl", "cwd": "/work/p", "permission_mode": "default",
		"hook_event_name": event, "tool_name": tool, "tool_input": input, "tool_use_id": toolUseID}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// uses reads the meter of a sub-agent's grant.
func (w *hookWorld) uses(t *testing.T, subagent string) int64 {
	t.Helper()
	st, err := w.c.GrantStatus(context.Background(), api.GrantStatusQuery{Subagent: subagent})
	if err != nil {
		t.Fatal(err)
	}
	return st.Uses
}

// exported reads the account's export: its events by id.
func (w *hookWorld) exported(t *testing.T) map[string]verify.ExportEvent {
	t.Helper()
	var buf bytes.Buffer
	if err := w.c.Export(context.Background(), nil, nil, &buf); err != nil {
		t.Fatal(err)
	}
	out := map[string]verify.ExportEvent{}
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Kind  string              `json:"kind"`
			Event *verify.ExportEvent `json:"event"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		if line.Kind == verify.LineEvent {
			if _, dup := out[line.Event.EventID]; dup {
				t.Fatalf("event %s stored twice", line.Event.EventID)
			}
			out[line.Event.EventID] = *line.Event
		}
	}
	return out
}

// calls reads the record's tool_call and tool_result events.
func (w *hookWorld) calls(t *testing.T) (calls, results []verify.ExportEvent) {
	t.Helper()
	for _, e := range w.exported(t) {
		switch e.EventType {
		case "tool_call":
			calls = append(calls, e)
		case "tool_result":
			results = append(results, e)
		}
	}
	return calls, results
}

// verifyOffline checks the whole export against the service key: hashes,
// links, blocks.
func (w *hookWorld) verifyOffline(t *testing.T) verify.Report {
	t.Helper()
	return w.verifyOfflineAbove(t, 0)
}

// verifyOfflineAbove is verifyOffline for a chain on which a client's batch
// row took the tip to top (a row may leave a gap, CONTRACT.md "Batch"): the
// one gap just below top is allowed (none when top is 0); every hash, link
// and block is checked.
func (w *hookWorld) verifyOfflineAbove(t *testing.T, top int64) verify.Report {
	t.Helper()
	ctx := context.Background()
	pub, err := w.c.ServicePublicKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := w.c.VerifyExport(ctx, pub)
	gapBelowTop := top > 0 && len(rep.Gaps) == 1 && rep.Gaps[0].MissingTo == top-1
	var ve *verify.Error
	if gapBelowTop && errors.As(err, &ve) && ve.Kind == verify.KindGap {
		err = nil
	}
	if err != nil || len(rep.Breaks) > 0 || (len(rep.Gaps) > 0 && !gapBelowTop) {
		t.Fatalf("offline verification: %v, breaks %v, gaps %v", err, rep.Breaks, rep.Gaps)
	}
	return rep
}

func digest(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = jcs.Transform(b); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// The hook binary against a real server: the main agent's call and a
// sub-agent's call are each gated by their own grant and metered there; each
// call and result is on the chain with the hashes an auditor recomputes from
// what the host saw, the result linked to its call; the chain verifies
// offline.
func TestHookEndToEnd(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		w := newHookWorld(t, dsn)
		bash := map[string]any{"command": "go test ./...", "timeout": 120000}
		read := map[string]any{"file_path": "/work/p/main.go"}
		bashOut := map[string]any{"stdout": "ok", "stderr": "", "interrupted": false}
		steps := []struct {
			stdin string
			want  string
		}{
			{claudeCall("PreToolUse", "toolu_1", "Bash", bash, nil), "{}\n"},
			{claudeCall("PostToolUse", "toolu_1", "Bash", bash, map[string]any{"tool_response": bashOut}), "{}\n"},
			{claudeCall("PreToolUse", "toolu_2", "Read", read, map[string]any{"agent_id": "a-1", "agent_type": "reviewer"}), "{}\n"},
			{claudeCall("PostToolUseFailure", "toolu_2", "Read", read, map[string]any{"agent_id": "a-1", "agent_type": "reviewer", "error": "no such file"}), "{}\n"},
			// The sub-agent's grant does not allow Bash: refused, on the record.
			{claudeCall("PreToolUse", "toolu_3", "Bash", bash, map[string]any{"agent_id": "a-1", "agent_type": "reviewer"}), ""},
		}
		for i, s := range steps {
			out, errOut, exit := hookProcess(t, w.env, s.stdin, "--host", "claude-code")
			if exit != 0 || (s.want != "" && out != s.want) {
				t.Fatalf("step %d: exit %d, stdout %q, stderr %s", i, exit, out, errOut)
			}
			if s.want == "" && !strings.Contains(out, `"permissionDecision":"deny"`) {
				t.Fatalf("step %d: %s", i, out)
			}
		}
		// A main agent no grant covers: the policy (record) allows it, and the
		// record says which rule decided.
		if out, errOut, exit := hookProcess(t, w.env, claudeCall("PreToolUse", "toolu_4", "Read", read, nil), "--host", "claude-code",
			"--agent", "stranger"); exit != 0 || out != "{}\n" {
			t.Fatalf("main agent without a grant: exit %d, stdout %q, stderr %s", exit, out, errOut)
		}
		if u := w.uses(t, "worker"); u != 1 {
			t.Errorf("worker's grant metered %d uses, want 1", u)
		}
		if u := w.uses(t, "reviewer"); u != 1 {
			t.Errorf("reviewer's grant metered %d uses, want 1 (the refused Bash call is not metered)", u)
		}

		evs := w.exported(t)
		call1, res1 := evs[hook.EventID("claude-code", "sess-e2e", "toolu_1", api.EventToolCall)], evs[hook.EventID("claude-code", "sess-e2e", "toolu_1", api.EventToolResult)]
		call2, res2 := evs[hook.EventID("claude-code", "sess-e2e", "toolu_2", api.EventToolCall)], evs[hook.EventID("claude-code", "sess-e2e", "toolu_2", api.EventToolResult)]
		call3 := evs[hook.EventID("claude-code", "sess-e2e", "toolu_3", api.EventToolCall)]
		for _, e := range []verify.ExportEvent{call1, res1, call2, res2, call3} {
			if e.EventID == "" {
				t.Fatalf("an event is missing from the chain: %v", evs)
			}
			if h, err := verify.PayloadHash(&e.HashedEvent); err != nil || h != e.PayloadHash {
				t.Errorf("%s: payload_hash %s, recomputed %s (%v)", e.EventID, e.PayloadHash, h, err)
			}
		}
		checkRaw := func(e verify.ExportEvent, want map[string]any) {
			t.Helper()
			var raw map[string]any
			if err := json.Unmarshal(e.Raw, &raw); err != nil {
				t.Fatal(err)
			}
			for k, v := range want {
				if raw[k] != v {
					t.Errorf("%s raw.%s = %v, want %v (raw %s)", e.EventID, k, raw[k], v, e.Raw)
				}
			}
			if strings.Contains(string(e.Raw), "go test") || strings.Contains(string(e.Raw), "main.go") {
				t.Errorf("%s raw holds input text: %s", e.EventID, e.Raw)
			}
		}
		checkRaw(call1, map[string]any{"tool_input_sha256": digest(t, bash), "subagent": "worker", "gate_status": "authorized",
			"grant_id": "g-a11", "host": "claude-code", "session_id": "sess-e2e", "tool_use_id": "toolu_1"})
		checkRaw(res1, map[string]any{"tool_response_sha256": digest(t, bashOut), "failed": false})
		checkRaw(call2, map[string]any{"tool_input_sha256": digest(t, read), "subagent": "reviewer", "agent_id": "a-1", "grant_id": "g-b22"})
		checkRaw(res2, map[string]any{"tool_response_sha256": digest(t, "no such file"), "failed": true})
		checkRaw(call3, map[string]any{"subagent": "reviewer", "gate_status": "tool_not_allowed"})
		call4 := evs[hook.EventID("claude-code", "sess-e2e", "toolu_4", api.EventToolCall)]
		checkRaw(call4, map[string]any{"subagent": "stranger", "gate_status": "no_grant", "no_grant": "allow"})
		for _, c := range []struct {
			e        verify.ExportEvent
			decision string
		}{{call1, "allow"}, {call2, "allow"}, {call3, "deny"}, {call4, "allow"}} {
			if c.e.EventType != "tool_call" || c.e.Decision == nil || *c.e.Decision != c.decision || c.e.ParentID != nil {
				t.Errorf("%s: type %s decision %v parent %v", c.e.EventID, c.e.EventType, c.e.Decision, c.e.ParentID)
			}
		}
		for _, r := range []struct{ res, call verify.ExportEvent }{{res1, call1}, {res2, call2}} {
			if r.res.EventType != "tool_result" || r.res.ParentID == nil || *r.res.ParentID != r.call.EventID || r.res.Sequence <= r.call.Sequence {
				t.Errorf("%s does not follow and name its call %s", r.res.EventID, r.call.EventID)
			}
		}
		// Surface hook on every hook event.
		res, err := w.c.Search(context.Background(), api.SearchRequest{EventTypes: []string{"tool_call", "tool_result"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range res.Results {
			if e.Surface != client.SurfaceHook {
				t.Errorf("%s has surface %q", e.EventID, e.Surface)
			}
		}
		w.verifyOffline(t)
	})
}

// A client's batch row takes the tip to 2^52, the highest sequence a client
// may choose: the hook goes on recording above it, nothing spooled — the
// tool_call through POST /v1/tool-calls, the tool_result through POST
// /v1/events/append, both numbered by the service — each event linked to
// the one before. The hook's key holds only the scopes docs/hooks.md names
// (grants, events:write): it reads nothing.
func TestHookRecordsAbove2To52(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		w := newHookWorld(t, dsn)
		top := *pushTipTo2To52(t, w.s.URL, w.env["AUDITCHAIN_API_KEY"]).Sequence
		key, err := w.c.CreateKey(context.Background(), api.CreateKeyRequest{Scopes: []string{"grants", "events:write"}})
		if err != nil {
			t.Fatal(err)
		}
		env := maps.Clone(w.env)
		env["AUDITCHAIN_API_KEY"] = key.APIKey
		bash := map[string]any{"command": "make"}
		for _, stdin := range []string{claudeCall("PreToolUse", "toolu_t1", "Bash", bash, nil),
			claudeCall("PostToolUse", "toolu_t1", "Bash", bash, map[string]any{"tool_response": "done"})} {
			if out, errOut, exit := hookProcess(t, env, stdin, "--host", "claude-code"); exit != 0 || out != "{}\n" {
				t.Fatalf("exit %d, stdout %q, stderr %s", exit, out, errOut)
			}
		}
		spool := hook.AccountSpoolDir(env["AUDITCHAIN_HOOK_SPOOL"], w.s.URL, key.APIKey)
		if files, _ := filepath.Glob(filepath.Join(spool, "*", "*.json")); len(files) != 0 {
			t.Fatalf("spooled or held: %v; want nothing: the service takes the events above 2^52", files)
		}
		evs := w.exported(t)
		call := evs[hook.EventID("claude-code", "sess-e2e", "toolu_t1", api.EventToolCall)]
		res := evs[hook.EventID("claude-code", "sess-e2e", "toolu_t1", api.EventToolResult)]
		if call.Sequence != top+1 || res.Sequence != top+2 || res.ParentID == nil || *res.ParentID != call.EventID {
			t.Fatalf("call %s at %d, result %s at %d; want them at %d and %d", call.EventID, call.Sequence, res.EventID, res.Sequence, top+1, top+2)
		}
		w.verifyOfflineAbove(t, top)
	})
}

// Hook processes of one account race for the chain tip: each follows the
// service's expected_prev_hash, so every call is metered once and recorded
// once, and the chain stays continuous.
func TestHookConcurrentCallsKeepOneChain(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		w := newHookWorld(t, dsn)
		const n = 6
		var wg sync.WaitGroup
		errs := make(chan string, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				in := claudeCall("PreToolUse", fmt.Sprintf("toolu_c%d", i), "Bash", map[string]any{"command": "true", "i": i}, nil)
				if out, errOut, exit := hookProcess(t, w.env, in, "--host", "claude-code"); exit != 0 || out != "{}\n" {
					errs <- fmt.Sprintf("call %d: exit %d, %s %s", i, exit, out, errOut)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		if u := w.uses(t, "worker"); u != n {
			t.Errorf("%d uses metered, want %d", u, n)
		}
		evs := w.exported(t)
		calls := 0
		for _, e := range evs {
			if e.EventType == "tool_call" {
				calls++
			}
		}
		if calls != n {
			t.Errorf("%d tool_call events, want %d", calls, n)
		}
		w.verifyOffline(t)
	})
}

// lossyService stores an event and then loses its answer.
type lossyService struct{ hook.Service }

func (l lossyService) AppendNext(ctx context.Context, ev *api.EventInput) error {
	if err := l.Service.AppendNext(ctx, ev); err != nil {
		return err
	}
	return errors.New("connection reset (the answer was lost)")
}

// interleavingService lets another writer append at the tip the flush's
// first event was stored at, before the second is sent.
type interleavingService struct {
	hook.Service
	other *client.Client
	sent  int
}

func (s *interleavingService) AppendNext(ctx context.Context, ev *api.EventInput) error {
	if s.sent++; s.sent == 2 {
		if _, err := s.other.Append(ctx, client.Event{EventType: "note", Raw: map[string]any{"by": "another writer"}}); err != nil {
			return err
		}
	}
	return s.Service.AppendNext(ctx, ev)
}

// spoolResults puts n tool_result rows, prefix-0 to prefix-(n-1), a second
// apart, into sp, each changed by edit first when edit is not nil.
func spoolResults(t *testing.T, sp *hook.Spool, prefix string, n int, edit func(i int, ev *api.EventInput)) {
	t.Helper()
	for i := range n {
		ts := client.FormatTimestamp(time.Date(2026, 11, 27, 1, 0, i, 0, time.UTC))
		ev := &api.EventInput{EventID: new(fmt.Sprintf("%s-%d", prefix, i)), EventType: new(api.EventToolResult),
			Raw: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), TS: &ts}
		if edit != nil {
			edit(i, ev)
		}
		if err := sp.Put(ev); err != nil {
			t.Fatal(err)
		}
	}
}

// A flush racing another writer never leaves a stored row linked to one
// that is not: the service numbers each row at the tip it finds, after the
// other writer's event, and the chain verifies offline with every row once.
func TestHookFlushKeepsLinksWhenAnotherWriterAppends(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		w := newHookWorld(t, dsn)
		ctx := context.Background()
		sp := &hook.Spool{Dir: t.TempDir()}
		spoolResults(t, sp, "evt-spooled", 3, nil)
		other, err := client.New(w.s.URL, w.env["AUDITCHAIN_API_KEY"])
		if err != nil {
			t.Fatal(err)
		}
		svc := &interleavingService{Service: &hook.ClientService{C: w.c}, other: other}
		res, err := sp.Flush(ctx, svc)
		if err != nil || res.Sent != 3 || res.Left != 0 || svc.sent != 3 {
			t.Fatalf("flush: %+v, %v (%d rows sent)", res, err, svc.sent)
		}
		evs := w.exported(t)
		var note int64 = -1
		for _, e := range evs {
			if e.EventType == "note" {
				note = e.Sequence
			}
		}
		for i := range 3 {
			e, ok := evs[fmt.Sprintf("evt-spooled-%d", i)]
			if !ok || (e.Sequence > note) != (i > 0) {
				t.Fatalf("spooled row %d: %+v; the other writer's event is at %d, after row 0 and before the others", i, e, note)
			}
		}
		w.verifyOffline(t)
	})
}

// A spool an earlier version wrote: its files carry the sequence and
// prev_hash that version gave each event at a flush ("assigned"), and one
// of them was stored by the batch route before its answer was lost. The
// flush sends both without their place: the stored one is answered with
// itself, where it is, the other goes on at the tip (its prev_hash here is
// one no event has, so a place sent would break the chain).
func TestHookFlushSendsAnEarlierVersionsSpool(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		w := newHookWorld(t, dsn)
		ctx := context.Background()
		tip, err := w.c.Tip(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ts := "2026-11-27T01:00:00.000000Z"
		rows := []api.EventInput{
			{EventID: new("evt-old-0"), EventType: new(api.EventToolResult), Sequence: new(*tip.Sequence + 1), PrevHash: tip.PayloadHash, Raw: json.RawMessage(`{"n":0}`), TS: &ts},
			{EventID: new("evt-old-1"), EventType: new(api.EventToolResult), Sequence: new(*tip.Sequence + 2), PrevHash: strp("sha256:" + strings.Repeat("0", 64)), Raw: json.RawMessage(`{"n":1}`), TS: &ts},
		}
		if res, err := w.c.AppendBatch(ctx, api.BatchRequest{Events: rows[:1]}); err != nil || res.Ingested != 1 {
			t.Fatalf("the first row, stored before its answer was lost: %+v, %v", res, err)
		}
		stored := w.exported(t)["evt-old-0"]
		sp := &hook.Spool{Dir: t.TempDir()}
		for i, r := range rows {
			b, _ := json.Marshal(map[string]any{"assigned": true, "event": r})
			if err := os.MkdirAll(filepath.Join(sp.Dir, "events"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(sp.Dir, "events", fmt.Sprintf("20261127T0100000%d-%s.json", i, *r.EventID)), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		res, err := sp.Flush(ctx, &hook.ClientService{C: w.c})
		if err != nil || res.Sent != 2 || res.Left != 0 || res.Held != 0 {
			t.Fatalf("flush: %+v, %v; want both sent", res, err)
		}
		evs := w.exported(t)
		if again := evs["evt-old-0"]; again.Sequence != stored.Sequence || again.PayloadHash != stored.PayloadHash {
			t.Errorf("the stored row: at %d, then at %d", stored.Sequence, again.Sequence)
		}
		if next := evs["evt-old-1"]; next.Sequence != stored.Sequence+1 || next.PrevHash == nil || *next.PrevHash != stored.PayloadHash {
			t.Errorf("the other row at %d after %v, want %d after %s", next.Sequence, next.PrevHash, stored.Sequence+1, stored.PayloadHash)
		}
		w.verifyOffline(t)
	})
}

// A row the service refuses for itself is held out of the way: the rows
// after it are stored, linked; a hook run's flush sends only a few rows.
func TestHookFlushHoldsARefusedRow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		w := newHookWorld(t, dsn)
		ctx := context.Background()
		sp := &hook.Spool{Dir: t.TempDir()}
		spoolResults(t, sp, "evt-held", 4, func(i int, ev *api.EventInput) {
			if i == 1 {
				ev.EventType = new(strings.Repeat("x", 300)) // over the service's bound: refused
			}
		})
		svc := &hook.ClientService{C: w.c}
		if res, err := sp.FlushUpTo(ctx, svc, 1); err != nil || res.Sent != 1 || res.Left != 3 {
			t.Fatalf("a flush of one row: %+v, %v", res, err)
		}
		res, err := sp.Flush(ctx, svc)
		if err != nil || res.Sent != 2 || res.Held != 1 || res.Left != 0 {
			t.Fatalf("flush: %+v, %v; want 2 sent, 1 held, none left", res, err)
		}
		if held, _ := filepath.Glob(filepath.Join(sp.Dir, "held", "*.json")); len(held) != 1 || !strings.Contains(held[0], "evt-held-1") {
			t.Fatalf("held: %v", held)
		}
		evs := w.exported(t)
		for _, id := range []string{"evt-held-0", "evt-held-2", "evt-held-3"} {
			if _, ok := evs[id]; !ok {
				t.Errorf("%s is not on the chain", id)
			}
		}
		w.verifyOffline(t)
	})
}

// An outage: the hook refuses the call (fail closed) and spools its events;
// meanwhile another hook records a call and a client's batch row takes the
// tip to 2^52, the highest sequence a client may choose. A flush whose
// answer is lost leaves the events spooled, the next flush stores nothing
// twice (the resend is answered with the event stored at its place), the
// events go on above 2^52 (the service numbers them), and the chain
// verifies offline.
func TestHookOutageSpoolsThenFlushesOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		w := newHookWorld(t, dsn)
		// The hooks reach the service through a front that, while down is
		// set, drops every connection: the same URL, unreachable.
		target, _ := url.Parse(w.s.URL)
		proxy := httputil.NewSingleHostReverseProxy(target)
		var isDown atomic.Bool
		front := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if isDown.Load() {
				panic(http.ErrAbortHandler)
			}
			proxy.ServeHTTP(rw, r)
		}))
		defer front.Close()
		w.env["AUDITCHAIN_URL"] = front.URL
		spool := hook.AccountSpoolDir(w.env["AUDITCHAIN_HOOK_SPOOL"], front.URL, w.env["AUDITCHAIN_API_KEY"])
		down := w.env
		isDown.Store(true)
		input := map[string]any{"command": "make"}
		out, _, exit := hookProcess(t, down, claudeCall("PreToolUse", "toolu_o1", "Bash", input, nil), "--host", "claude-code")
		if exit != 0 || !strings.Contains(out, `"permissionDecision":"deny"`) || !strings.Contains(out, "fails closed") {
			t.Fatalf("during the outage: exit %d, %s", exit, out)
		}
		if out, _, _ = hookProcess(t, down, claudeCall("PostToolUse", "toolu_o2", "Bash", input, map[string]any{"tool_response": "done"}),
			"--host", "claude-code"); out != "{}\n" {
			t.Fatalf("after-tool during the outage: %s", out)
		}
		files, _ := filepath.Glob(filepath.Join(spool, "events", "*.json"))
		if len(files) != 2 {
			t.Fatalf("%d spooled files, want 2", len(files))
		}
		isDown.Store(false)
		// Before the flush, another call reaches the service (from a process
		// with a spool of its own, which does not flush this one): the chain
		// moves on.
		other := map[string]string{}
		for k, v := range w.env {
			other[k] = v
		}
		other["AUDITCHAIN_HOOK_SPOOL"] = t.TempDir()
		if out, _, _ := hookProcess(t, other, claudeCall("PreToolUse", "toolu_o3", "Read", map[string]any{"file_path": "x"}, nil),
			"--host", "claude-code"); out != "{}\n" {
			t.Fatalf("%s", out)
		}
		top := *pushTipTo2To52(t, w.s.URL, w.env["AUDITCHAIN_API_KEY"]).Sequence
		// A flush whose first event is stored but whose answer is lost: the
		// events stay spooled.
		sp := &hook.Spool{Dir: spool}
		if _, err := sp.Flush(context.Background(), lossyService{&hook.ClientService{C: w.c}}); err == nil {
			t.Fatal("the lossy flush reported no error")
		}
		if rows, _ := filepath.Glob(filepath.Join(spool, "events", "*.json")); len(rows) != 2 {
			t.Fatalf("%d files left after a flush without an answer, want 2", len(rows))
		}
		var lost verify.ExportEvent
		for _, e := range w.exported(t) {
			if e.Sequence > top {
				lost = e
			}
		}
		if lost.EventID == "" {
			t.Fatal("the lossy flush stored nothing")
		}
		stdout, errOut, exit := hookProcess(t, w.env, "", "flush")
		if exit != 0 {
			t.Fatalf("hook flush: exit %d: %s", exit, errOut)
		}
		var res struct{ Sent, Left, Held int }
		if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Sent != 2 || res.Left != 0 || res.Held != 0 {
			t.Fatalf("hook flush: %s (%v); want both sent", stdout, err)
		}
		if rows, _ := filepath.Glob(filepath.Join(spool, "events", "*.json")); len(rows) != 0 {
			t.Fatalf("%d files left after the flush", len(rows))
		}
		evs := w.exported(t)
		call := evs[hook.EventID("claude-code", "sess-e2e", "toolu_o1", api.EventToolCall)]
		if call.Decision == nil || *call.Decision != "deny" || !strings.Contains(string(call.Raw), `"hook_error"`) {
			t.Errorf("the refused call's record: %+v %s", call.Decision, call.Raw)
		}
		if res := evs[hook.EventID("claude-code", "sess-e2e", "toolu_o2", api.EventToolResult)]; res.EventID == "" {
			t.Error("the spooled result is not on the chain")
		}
		if again := evs[lost.EventID]; again.Sequence != lost.Sequence || again.PayloadHash != lost.PayloadHash {
			t.Errorf("the event whose answer was lost: at %d, then at %d after the resend", lost.Sequence, again.Sequence)
		}
		for _, id := range []string{call.EventID, hook.EventID("claude-code", "sess-e2e", "toolu_o2", api.EventToolResult)} {
			if evs[id].Sequence <= top {
				t.Errorf("spooled %s at %d, want it above the client's row at %d", id, evs[id].Sequence, top)
			}
		}
		if u := w.uses(t, "worker"); u != 1 {
			t.Errorf("%d uses metered, want 1 (the refused call is not metered)", u)
		}
		n := len(evs)
		// Flushing again sends nothing; the chain holds each event once.
		if stdout, _, _ := hookProcess(t, w.env, "", "flush"); !strings.Contains(stdout, `"sent": 0`) {
			t.Errorf("a second flush: %s", stdout)
		}
		if len(w.exported(t)) != n {
			t.Error("the second flush stored events")
		}
		w.verifyOfflineAbove(t, top)
	})
}

// hookInstallRun runs `auditchain hook <args>` in-process with HOME and
// CODEX_HOME in a throwaway tree.
func hookInstallRun(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	err = hookCmd(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), err
}

// install merges into an existing settings file without disturbing its
// other hooks, with this program's absolute path by default; --dry-run
// names every file it would touch with the change and writes nothing;
// installing again changes nothing; an unknown host is answered with the
// known ones.
func TestHookInstallCommand(t *testing.T) {
	root := t.TempDir()
	dir, home := filepath.Join(root, "p"), filepath.Join(root, "h")
	env := map[string]string{"HOME": home}
	path := filepath.Join(dir, ".claude", "settings.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	existing := `{"model": "opus", "hooks": {"PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "gofmt -w ."}]}]}}`
	if err := os.WriteFile(path, []byte(existing), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := hookInstallRun(t, env, "install", "--host", "codex", "--dir", dir, "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"would write " + filepath.Join(home, ".codex", "config.toml"), "would write " + filepath.Join(dir, ".codex", "hooks.json"),
		"+trusted_hash = \"sha256:", "+[projects.", "+        \"matcher\": \".*\"", "@@ -0,0 +1,"} {
		if !strings.Contains(out, want) {
			t.Errorf("the dry run does not show %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".codex")); !os.IsNotExist(err) {
		t.Fatal("the dry run wrote files")
	}
	if _, _, err := hookInstallRun(t, env, "install", "--host", "claude-code", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(path)
	out, _, err = hookInstallRun(t, env, "install", "--host", "claude-code", "--dir", dir)
	if second, _ := os.ReadFile(path); err != nil || string(second) != string(first) || !strings.Contains(out, "nothing to change") {
		t.Fatalf("installing again: %v, %s\n%s\n%s", err, out, first, second)
	}
	var doc struct {
		Model string `json:"model"`
		Hooks map[string][]struct {
			Hooks []struct{ Command string } `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(first, &doc); err != nil {
		t.Fatal(err)
	}
	self, _ := filepath.Abs(os.Args[0])
	post := doc.Hooks["PostToolUse"]
	if doc.Model != "opus" || len(post) != 2 || post[0].Hooks[0].Command != "gofmt -w ." ||
		post[1].Hooks[0].Command != self+" hook --host claude-code" || len(doc.Hooks["PreToolUse"]) != 1 {
		t.Fatalf("merged file:\n%s", first)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the file's mode changed: %v", fi.Mode())
	}
	_, _, err = hookInstallRun(t, env, "install", "--host", "claude", "--dir", dir)
	if err == nil || !strings.Contains(err.Error(), "claude-code, codex, gemini, cursor") {
		t.Errorf("--host claude: %v", err)
	}
	if _, _, err := hookInstallRun(t, env, "uninstall", "--host", "claude-code", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); strings.Contains(string(b), "hook --host") || !strings.Contains(string(b), "gofmt") {
		t.Fatalf("after uninstall:\n%s", b)
	}
}

// geminiCall is Gemini CLI's stdin for event at the host's timestamp ts.
func geminiCall(event, ts, tool string, input any, extra map[string]any) string {
	m := map[string]any{"session_id": "sess-gm", "transcript_path": "/tmp/chat.json", "cwd": "/work/p", "hook_event_name": event,
		"timestamp": ts, "tool_name": tool, "tool_input": input}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// Gemini sends no tool-use id. With two hook commands installed (a user
// and a project install naming the binary differently), Gemini runs both
// for each event, at once, with the same stdin: the call is still metered
// once and recorded once, and its result once, naming it. A refused call
// leaves no pairing file behind (Gemini runs no AfterTool for it).
func TestHookGeminiTwoInstallsRecordOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		w := newHookWorld(t, dsn)
		input := map[string]any{"command": "ls"}
		both := func(stdin string) {
			t.Helper()
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if out, errOut, exit := hookProcess(t, w.env, stdin, "--host", "gemini"); exit != 0 || out != "{}\n" {
						t.Errorf("exit %d, stdout %q, stderr %q", exit, out, errOut)
					}
				}()
			}
			wg.Wait()
		}
		both(geminiCall("BeforeTool", "2026-11-28T10:00:00.000Z", "Bash", input, nil))
		both(geminiCall("AfterTool", "2026-11-28T10:00:01.000Z", "Bash", input, map[string]any{"tool_response": map[string]any{"llmContent": "a b"}}))
		// The same command again later is another call.
		both(geminiCall("BeforeTool", "2026-11-28T10:00:05.000Z", "Bash", input, nil))
		both(geminiCall("AfterTool", "2026-11-28T10:00:06.000Z", "Bash", input, map[string]any{"tool_response": map[string]any{"llmContent": "a b c"}}))
		if u := w.uses(t, "worker"); u != 2 {
			t.Errorf("worker's grant metered %d uses, want 2", u)
		}
		calls, results := w.calls(t)
		if len(calls) != 2 || len(results) != 2 {
			t.Fatalf("%d tool_call and %d tool_result events, want 2 and 2", len(calls), len(results))
		}
		parents := map[string]bool{}
		for _, r := range results {
			if r.ParentID == nil {
				t.Fatalf("result %s names no parent", r.EventID)
			}
			parents[*r.ParentID] = true
		}
		for _, c := range calls {
			if !parents[c.EventID] {
				t.Errorf("no result names call %s", c.EventID)
			}
		}
		// A refused call (Read is not in the sub-agent's grant) leaves no
		// pairing file.
		refusedEnv := map[string]string{}
		for k, v := range w.env {
			refusedEnv[k] = v
		}
		refusedEnv["AUDITCHAIN_HOOK_AGENT"] = "reviewer"
		if out, _, _ := hookProcess(t, refusedEnv, geminiCall("BeforeTool", "2026-11-28T10:01:00.000Z", "Bash", input, nil), "--host", "gemini"); !strings.Contains(out, `"decision":"deny"`) {
			t.Fatalf("the reviewer's Bash call: %s", out)
		}
		calls2 := filepath.Join(hook.AccountSpoolDir(w.env["AUDITCHAIN_HOOK_SPOOL"], w.s.URL, w.env["AUDITCHAIN_API_KEY"]), "calls")
		ents, _ := os.ReadDir(calls2)
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".taken") {
				t.Errorf("pairing file %s left behind", e.Name())
			}
		}
		w.verifyOffline(t)
	})
}

// hook doctor says in one line per check what will happen: all well after an
// install (the command answers, Codex's trust matches), and a failure for
// each thing that stops the hook: no install, a hook changed since Codex
// trusted it, Gemini's redaction stripping the key, the service down.
func TestHookDoctor(t *testing.T) {
	w := newHookWorld(t, storetest.DSN(t, storetest.SQLite))
	root := t.TempDir()
	dir, home := filepath.Join(root, "p"), filepath.Join(root, "h")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": home, "PATH": os.Getenv("PATH")}
	for k, v := range w.env {
		env[k] = v
	}
	doctor := func(host string) (string, error) {
		t.Helper()
		out, _, err := hookInstallRun(t, env, "doctor", "--host", host, "--dir", dir)
		return out, err
	}
	if out, err := doctor("codex"); err == nil || !strings.Contains(out, "FAIL settings") {
		t.Fatalf("doctor before any install: %v\n%s", err, out)
	}
	if _, _, err := hookInstallRun(t, env, "install", "--host", "codex", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	out, err := doctor("codex")
	if err != nil {
		t.Fatalf("doctor after install: %v\n%s", err, out)
	}
	for _, want := range []string{"ok   settings", "ok   command", "trusts the hook on PostToolUse, PreToolUse", "Codex trusts the project",
		"ok   call", "ok   service"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor does not say %q:\n%s", want, out)
		}
	}
	// Someone edits the installed hook: Codex no longer trusts it.
	hooksPath := filepath.Join(dir, ".codex", "hooks.json")
	b, _ := os.ReadFile(hooksPath)
	if err := os.WriteFile(hooksPath, []byte(strings.Replace(string(b), `"timeout": 10`, `"timeout": 20`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := doctor("codex"); err == nil || !strings.Contains(out, "changed since trusted") {
		t.Errorf("doctor after an edit: %v\n%s", err, out)
	}
	// Gemini with GITHUB_SHA set and a settings file without the allow-list.
	if _, _, err := hookInstallRun(t, env, "install", "--host", "gemini", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(dir, ".gemini", "settings.json")
	b, _ = os.ReadFile(settings)
	var doc map[string]any
	json.Unmarshal(b, &doc)
	delete(doc, "security")
	b, _ = json.Marshal(doc)
	os.WriteFile(settings, b, 0o644)
	env["GITHUB_SHA"] = "abc"
	if out, err := doctor("gemini"); err == nil || !strings.Contains(out, "FAIL environment Gemini's redaction is on and strips AUDITCHAIN_URL and AUDITCHAIN_API_KEY") {
		t.Errorf("doctor with the key redacted: %v\n%s", err, out)
	}
	env["AUDITCHAIN_URL"] = "http://127.0.0.1:1"
	if out, err := doctor("claude-code"); err == nil || !strings.Contains(out, "FAIL service") {
		t.Errorf("doctor with the service down: %v\n%s", err, out)
	}
}
