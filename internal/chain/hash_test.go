package chain

import (
	"encoding/json"
	"testing"

	"github.com/auditchain/auditchain/pkg/verify"
)

// The append path's fast hash must be exactly the reference hash.
func TestPayloadHashMatchesReference(t *testing.T) {
	s := func(v string) *string { return &v }
	cases := []verify.HashedEvent{
		{EventID: "evt-1", EventType: "tool_call", Sequence: 0, TS: s("2026-11-21T00:00:00Z")},
		{EventID: "evt-2", EventType: "tool_call", Sequence: 7, PrevHash: s("sha256:00"), Tool: s("Bash"),
			Raw: json.RawMessage(`{"z":1,"a":{"y":[1,2.50,"\u00e9"],"b":null},"n":1e3}`), Decision: s("allow"), TS: s("2026-11-21T00:00:00.5+01:00")},
		{EventID: "evt-3", EventType: "t\"q\\\n\u2028", Sequence: 1 << 54, MachineID: s("m"), Signature: s("c2ln"), SignatureKey: s("k"), TS: s("x")},
		{EventID: "evt-4", EventType: "t", Sequence: 3, Raw: json.RawMessage(`{"b":"\ud83d\ude00","a":"\u0001"}`), TS: s("x")},
	}
	for i := range cases {
		got, err := PayloadHash(&cases[i])
		want, werr := verify.PayloadHash(&cases[i])
		if got != want || (err == nil) != (werr == nil) {
			t.Errorf("case %d: PayloadHash = %q, %v; verify.PayloadHash = %q, %v", i, got, err, want, werr)
		}
	}
}
