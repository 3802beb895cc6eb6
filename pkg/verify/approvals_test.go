package verify_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/checkpoint"
	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/pkg/verify"
)

// sealedChain is events as the service would store them (linked, hashed,
// their tree sealed in one block by the service key): a chain whose every
// integrity check passes, whatever the events say.
func sealedChain(t *testing.T, events []verify.HashedEvent) *chain {
	t.Helper()
	c := &chain{tree: &merkle.HashStore{}}
	signer, err := checkpoint.NewSigner(verify.Origin(goldenUser), serviceKey)
	if err != nil {
		t.Fatal(err)
	}
	var prev *string
	for i, e := range events {
		e.Sequence, e.PrevHash = int64(i), prev
		e.EventID = fmt.Sprintf("evt-ap-%03d", i)
		e.TS = ptr(fmt.Sprintf("2026-11-28T10:00:%02d+00:00", i))
		ph, err := verify.PayloadHash(&e)
		if err != nil {
			t.Fatal(err)
		}
		c.events = append(c.events, verify.ExportEvent{HashedEvent: e, PayloadHash: ph})
		leaf, _ := verify.HashBytes(ph)
		if err := c.tree.Append(leaf); err != nil {
			t.Fatal(err)
		}
		prev = &c.events[i].PayloadHash
	}
	b, err := signer.Seal(nil, uint64(len(events)), c.tree.Root())
	if err != nil {
		t.Fatal(err)
	}
	c.blocks = []checkpoint.Block{b}
	return c
}

func rawOf(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// approvalStory is a held call, its approval by another key, and the
// approved call run once, as the service writes them; tamper changes it
// before it is sealed.
func approvalStory(t *testing.T, tamper func(evs []verify.HashedEvent) []verify.HashedEvent) []byte {
	t.Helper()
	digest := strings.Repeat("ab", 32)
	call := func(decision, gate string) verify.HashedEvent {
		return verify.HashedEvent{EventType: "tool_call", Decision: ptr(decision), Tool: ptr("shell"),
			Raw: rawOf(t, map[string]any{"approval_id": "ap-1", "gate_status": gate, "subagent": "deployer", "tool_input_sha256": digest})}
	}
	granted := verify.HashedEvent{EventType: "approval.granted", Tool: ptr("shell"), Raw: rawOf(t, map[string]any{
		"approval_id": "ap-1", "subagent": "deployer", "tool": "shell", "args_sha256": digest, "call_event_id": "evt-ap-000",
		"requested_by": map[string]any{"identity": "key-agent", "kind": "api_key"},
		"approver":     map[string]any{"identity": "key-person", "kind": "api_key"}, "expires_at": "2026-11-28T10:10:00+00:00"})}
	evs := []verify.HashedEvent{call("ask", "approval_pending"), granted, call("allow", "authorized")}
	if tamper != nil {
		evs = tamper(evs)
	}
	c := sealedChain(t, evs)
	return c.export(t, 0, int64(len(c.events)))
}

// The verifier proves an approved call from the export alone, and names
// each way the record can fail to prove it.
func TestVerifyExportChecksApprovals(t *testing.T) {
	rep, err := verify.VerifyExport(strings.NewReader(string(approvalStory(t, nil))), servicePub)
	if err != nil || rep.ApprovedCalls != 1 {
		t.Fatalf("honest story: %+v, %v", rep, err)
	}
	setRaw := func(e *verify.HashedEvent, key string, v any) {
		var m map[string]any
		if err := json.Unmarshal(e.Raw, &m); err != nil {
			t.Fatal(err)
		}
		m[key] = v
		e.Raw = rawOf(t, m)
	}
	for _, tc := range []struct {
		name   string
		tamper func(evs []verify.HashedEvent) []verify.HashedEvent
		seq    int64
		want   string
	}{
		{"no approval event", func(evs []verify.HashedEvent) []verify.HashedEvent {
			return []verify.HashedEvent{evs[0], evs[2]}
		}, 1, "no approval.granted event earlier"},
		{"the approval after the call", func(evs []verify.HashedEvent) []verify.HashedEvent {
			return []verify.HashedEvent{evs[0], evs[2], evs[1]}
		}, 1, "no approval.granted event earlier"},
		{"approved by the caller", func(evs []verify.HashedEvent) []verify.HashedEvent {
			setRaw(&evs[1], "approver", map[string]any{"identity": "key-agent", "kind": "api_key"})
			return evs
		}, 1, "the identity that made the call"},
		{"another digest", func(evs []verify.HashedEvent) []verify.HashedEvent {
			setRaw(&evs[2], "tool_input_sha256", strings.Repeat("cd", 32))
			return evs
		}, 2, "is not the approved call"},
		{"another tool", func(evs []verify.HashedEvent) []verify.HashedEvent {
			evs[2].Tool = ptr("curl")
			return evs
		}, 2, "is not the approved call"},
		{"used twice", func(evs []verify.HashedEvent) []verify.HashedEvent {
			return append(evs, evs[2])
		}, 3, "used a second time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := verify.VerifyExport(strings.NewReader(string(approvalStory(t, tc.tamper))), servicePub)
			var ve *verify.Error
			if !errors.As(err, &ve) || ve.Kind != verify.KindApproval || ve.Sequence != tc.seq || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %s at sequence %d naming %q", err, verify.KindApproval, tc.seq, tc.want)
			}
		})
	}
	// A fragment that starts after the approval counts the call unchecked.
	c := sealedChain(t, []verify.HashedEvent{{EventType: "note", Raw: rawOf(t, map[string]any{"n": 1})},
		{EventType: "tool_call", Decision: ptr("allow"), Tool: ptr("shell"),
			Raw: rawOf(t, map[string]any{"approval_id": "ap-9", "subagent": "d", "tool_input_sha256": strings.Repeat("ab", 32)})}})
	rep, err = verify.VerifyExport(strings.NewReader(string(c.export(t, 1, 2))), servicePub)
	if err != nil || rep.ApprovalsUnchecked != 1 || rep.ApprovedCalls != 0 {
		t.Fatalf("fragment: %+v, %v", rep, err)
	}
}
