package main

import (
	"bytes"
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// The arguments' text through `auditchain hook` (docs/approvals.md "The
// arguments' text"): off by default, the approval has none; with
// AUDITCHAIN_HOOK_SEND_ARGS_TEXT=1 (or --send-args-text) the approver reads
// the input's RFC 8785 form, which hashes to the digest the approval binds;
// the record and the export hold only the digest either way. Both stores.
func TestHookSendsArgsTextOnlyWhenTold(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		w := newHookWorld(t, dsn)
		ctx := context.Background()
		person := w.holdBash(t)
		held := func(toolUseID, command string, env map[string]string, args ...string) *api.Approval {
			t.Helper()
			out, _, exit := hookProcess(t, env, claudeCall("PreToolUse", toolUseID, "Bash", map[string]any{"command": command, "b": 1}, nil),
				append([]string{"--host", "claude-code"}, args...)...)
			if exit != 0 || !strings.Contains(out, `"permissionDecision":"deny"`) {
				t.Fatalf("held call: exit %d %s", exit, out)
			}
			l, err := person.Approvals(ctx, api.ApprovalPending, 0)
			if err != nil || len(l.Approvals) == 0 {
				t.Fatalf("pending: %v %v", l, err)
			}
			ap, err := person.Approval(ctx, l.Approvals[0].ApprovalID, 0)
			if err != nil {
				t.Fatal(err)
			}
			return ap
		}

		if ap := held("toolu_t1", "echo OFF-BY-DEFAULT", w.env); ap.ArgsText != nil || ap.ArgsTextMatches != nil {
			t.Fatalf("default: the approval has text %q", *ap.ArgsText)
		}
		on := maps.Clone(w.env)
		on["AUDITCHAIN_HOOK_SEND_ARGS_TEXT"] = "1"
		ap := held("toolu_t2", "echo SENT-ON-REQUEST", on)
		if want := `{"b":1,"command":"echo SENT-ON-REQUEST"}`; ap.ArgsText == nil || *ap.ArgsText != want || ap.ArgsTextMatches == nil || !*ap.ArgsTextMatches {
			t.Fatalf("with the env: text %v matches %v, want %s", ap.ArgsText, ap.ArgsTextMatches, want)
		}
		ap = held("toolu_t3", "echo BY-THE-FLAG", w.env, "--send-args-text")
		if ap.ArgsText == nil || !strings.Contains(*ap.ArgsText, "BY-THE-FLAG") {
			t.Fatalf("with the flag: text %v", ap.ArgsText)
		}
		var buf bytes.Buffer
		if err := w.c.Export(ctx, nil, nil, &buf); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(buf.String(), "SENT-ON-REQUEST") || strings.Contains(buf.String(), "BY-THE-FLAG") {
			t.Fatal("the export holds the arguments' text")
		}
	})
}
