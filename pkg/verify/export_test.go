package verify_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/auditchain/auditchain/internal/checkpoint"
	"github.com/auditchain/auditchain/internal/cputime"
	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/pkg/verify"
)

var update = flag.Bool("update", false, "rewrite the golden exports in testdata/")

const goldenUser = "0190f3a2-7c4e-7000-8000-00000000c0de"

func seedKey(seed string) ed25519.PrivateKey {
	s := sha256.Sum256([]byte(seed))
	return ed25519.NewKeyFromSeed(s[:])
}

var (
	serviceKey = seedKey("auditchain golden service key")
	servicePub = serviceKey.Public().(ed25519.PublicKey)
	ciKey1     = seedKey("auditchain golden machine m-ci key 1")
	ciKey2     = seedKey("auditchain golden machine m-ci key 2")
)

func ptr(s string) *string { return &s }

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// chain is an account as the service would hold it: events in leaf order,
// the stored Merkle hashes, sealed blocks and the machine key history.
type chain struct {
	events []verify.ExportEvent
	tree   *merkle.HashStore
	blocks []checkpoint.Block
	keys   []verify.ExportMachineKey
}

// goldenChain builds a deterministic 34-event account: unsigned events from
// m-laptop (one carrying a signature with no key registered), signed events
// from m-ci whose key is registered at sequence 6 and rotated at 20, a
// governance event and a chain_repair event from the service (no machine),
// and blocks sealed at sizes 4, 10, 18, 25 and 30 (the last 4 events unsealed).
func goldenChain(t testing.TB) *chain {
	t.Helper()
	c := &chain{tree: &merkle.HashStore{}}
	c.keys = []verify.ExportMachineKey{
		{MachineID: "m-ci", PublicKey: b64(ciKey1.Public().(ed25519.PublicKey)), RegisteredAt: "2025-06-01T12:00:05+00:00", EffectiveFromSequence: 6},
		{MachineID: "m-ci", PublicKey: b64(ciKey2.Public().(ed25519.PublicKey)), RegisteredAt: "2025-06-01T12:00:19+00:00", EffectiveFromSequence: 20},
	}
	seal := map[int]bool{4: true, 10: true, 18: true, 25: true, 30: true}
	signer, err := checkpoint.NewSigner(verify.Origin(goldenUser), serviceKey)
	if err != nil {
		t.Fatal(err)
	}
	var prev *string
	for seq := range 34 {
		e := verify.HashedEvent{
			EventID:   fmt.Sprintf("evt-%016x", 0xa000+seq),
			EventType: "tool_call",
			Sequence:  int64(seq),
			PrevHash:  prev,
			TS:        ptr(fmt.Sprintf("2025-06-01T12:00:%02d+00:00", seq)),
			Decision:  ptr("allow"),
			Tool:      ptr("Bash"),
			MachineID: ptr("m-laptop"),
		}
		e.Raw = json.RawMessage(fmt.Sprintf(`{"args_hash": "sha256:%064x", "n": %d, "note": "line\nbreak <&> é"}`, seq*7919, seq))
		switch {
		case seq == 3:
			e.Signature = ptr(b64(ed25519.Sign(seedKey("unregistered"), []byte("x"))))
		case seq == 12:
			e.EventType, e.MachineID, e.Tool, e.Decision = "governance.proposed", nil, nil, nil
			e.Raw = json.RawMessage(`{"proposal_id":"prop-1","kind":"deny_scope","subject":{"subagent":"builder","tool":"Bash"}}`)
		case seq == 17:
			e.EventType, e.MachineID, e.Tool, e.Decision = "chain_repair", nil, nil, nil
			e.Raw = json.RawMessage(`{"finding":"signature_failure","sequence":9,"repair_of":"evt-000000000000a009"}`)
		case seq >= 6 && seq%2 == 0:
			key := ciKey1
			if seq >= 20 {
				key = ciKey2
			}
			if seq%4 == 0 {
				e.EventType, e.ParentID = "tool_result", ptr(fmt.Sprintf("evt-%016x", 0xa000+seq-1))
			}
			e.MachineID = ptr("m-ci")
			canon, err := jcs.Transform(e.Raw)
			if err != nil {
				t.Fatal(err)
			}
			e.Signature = ptr(b64(ed25519.Sign(key, canon)))
			e.SignatureKey = ptr(verify.Fingerprint(key.Public().(ed25519.PublicKey)))
		}
		ph, err := verify.PayloadHash(&e)
		if err != nil {
			t.Fatal(err)
		}
		c.events = append(c.events, verify.ExportEvent{HashedEvent: e, PayloadHash: ph})
		leaf, _ := verify.HashBytes(ph)
		if err := c.tree.Append(leaf); err != nil {
			t.Fatal(err)
		}
		prev = &c.events[len(c.events)-1].PayloadHash
		if seal[seq+1] {
			var last *checkpoint.Block
			if len(c.blocks) > 0 {
				last = &c.blocks[len(c.blocks)-1]
			}
			b, err := signer.Seal(last, uint64(seq+1), c.tree.Root())
			if err != nil {
				t.Fatal(err)
			}
			c.blocks = append(c.blocks, b)
		}
	}
	return c
}

// export writes leaves [start, end) the way the service does: the frontier
// for a fragment, the anchor block (the last block at or below start) with a
// consistency proof, then keys, events and blocks in chain order, and the
// first block past end with a consistency proof so the tail is signed too.
func (c *chain) export(t testing.TB, start, end int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := verify.NewExportWriter(&buf, verify.ExportHeader{
		UserID: goldenUser, ServiceKeyID: verify.Fingerprint(servicePub),
		ServicePublicKey: b64(servicePub), Start: uint64(start), ExportedAt: "2025-06-02T00:00:00+00:00",
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	withProof := func(b checkpoint.Block, leaves int64) {
		lo, hi := min(int64(b.Size), leaves), max(int64(b.Size), leaves)
		p, err := merkle.ConsistencyProof(lo, hi, c.tree)
		must(err)
		must(w.WriteConsistency(verify.ExportConsistency{From: uint64(lo), To: uint64(hi), Proof: p}))
		must(w.WriteCheckpoint(b.Index, b.Note))
	}
	must(err)
	nextBlock := 0
	if start > 0 {
		hs, err := merkle.Frontier(start, c.tree)
		must(err)
		p, err := merkle.InclusionProof(start-1, start, c.tree)
		must(err)
		must(w.WriteFrontier(verify.ExportFrontier{TreeSize: uint64(start), Hashes: hs, LastLeafProof: p}))
		for nextBlock < len(c.blocks) && int64(c.blocks[nextBlock].Size) <= start {
			nextBlock++
		}
		if nextBlock > 0 { // the anchor block
			b := c.blocks[nextBlock-1]
			if int64(b.Size) == start {
				must(w.WriteCheckpoint(b.Index, b.Note))
			} else {
				withProof(b, start)
			}
		}
	}
	for _, k := range c.keys {
		if k.EffectiveFromSequence <= start {
			must(w.WriteMachineKey(k))
		}
	}
	for i := start; i < end; i++ {
		for _, k := range c.keys {
			if k.EffectiveFromSequence == i && i > start {
				must(w.WriteMachineKey(k))
			}
		}
		must(w.WriteEvent(&c.events[i]))
		for nextBlock < len(c.blocks) && int64(c.blocks[nextBlock].Size) == i+1 {
			must(w.WriteCheckpoint(c.blocks[nextBlock].Index, c.blocks[nextBlock].Note))
			nextBlock++
		}
	}
	if end < int64(len(c.events)) && nextBlock < len(c.blocks) {
		withProof(c.blocks[nextBlock], end)
	}
	must(w.Close())
	return buf.Bytes()
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/verify -run Golden -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the export the code writes now; if the format changed on purpose, run with -update", path)
	}
}

func TestGoldenExport(t *testing.T) {
	c := goldenChain(t)
	full := c.export(t, 0, int64(len(c.events)))
	golden(t, "export.ndjson", full)
	frag := c.export(t, 12, 28)
	golden(t, "fragment.ndjson", frag)
	if *update {
		if err := os.WriteFile(filepath.Join("testdata", "service_key.txt"), []byte(b64(servicePub)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	rep, err := verify.VerifyExport(bytes.NewReader(full), servicePub)
	if err != nil {
		t.Fatal(err)
	}
	want := verify.Report{
		UserID: goldenUser, Origin: verify.Origin(goldenUser),
		Events: 34, Checkpoints: 5, FirstSequence: 0, LastSequence: 33,
		TreeSize: 34, RootHash: c.tree.Root(), SignedSize: 30,
		SignaturesVerified: 13, UnverifiedSignatures: 1, FirstBlock: 0, LastBlock: 4,
	}
	if rep != want {
		t.Fatalf("full export report\n got %+v\nwant %+v", rep, want)
	}

	rep, err = verify.VerifyExport(bytes.NewReader(frag), servicePub)
	if err != nil {
		t.Fatal(err)
	}
	root16, _ := merkle.Root(28, c.tree)
	want = verify.Report{
		UserID: goldenUser, Origin: verify.Origin(goldenUser),
		Events: 16, Checkpoints: 4, FirstSequence: 12, LastSequence: 27,
		TreeSize: 28, RootHash: root16, SignedSize: 28,
		SignaturesVerified: 7, FirstBlock: 1, LastBlock: 4,
	}
	if rep != want {
		t.Fatalf("fragment report\n got %+v\nwant %+v", rep, want)
	}
}

// TestFragmentsEverywhere exports every [start, end) of the golden chain.
func TestFragmentsEverywhere(t *testing.T) {
	c := goldenChain(t)
	n := int64(len(c.events))
	for start := int64(0); start <= n; start++ {
		for end := start; end <= n; end++ {
			rep, err := verify.VerifyExport(bytes.NewReader(c.export(t, start, end)), servicePub)
			if err != nil {
				t.Fatalf("fragment [%d,%d): %v", start, end, err)
			}
			if rep.TreeSize != uint64(end) || rep.Events != end-start {
				t.Fatalf("fragment [%d,%d): %+v", start, end, rep)
			}
			if end < 30 && start < end && rep.SignedSize != uint64(end) {
				t.Fatalf("fragment [%d,%d) not fully signed: %+v", start, end, rep)
			}
		}
	}
}

// lines splits an export into lines (without newlines).
func lines(b []byte) []string { return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") }

func join(ls []string) []byte { return []byte(strings.Join(ls, "\n") + "\n") }

// find returns the index of the line of kind with the event sequence or block index n.
func find(t *testing.T, ls []string, kind string, n int64) int {
	t.Helper()
	for i, l := range ls {
		var v struct {
			Kind       string
			Event      *struct{ Sequence int64 }
			Checkpoint *struct{ Block int64 }
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatal(err)
		}
		if v.Kind == kind && ((v.Event != nil && v.Event.Sequence == n) || (v.Checkpoint != nil && v.Checkpoint.Block == n)) {
			return i
		}
	}
	t.Fatalf("no %s %d", kind, n)
	return 0
}

func decodeEvent(t *testing.T, l string) verify.ExportEvent {
	t.Helper()
	var v struct{ Event verify.ExportEvent }
	if err := json.Unmarshal([]byte(l), &v); err != nil {
		t.Fatal(err)
	}
	return v.Event
}

func encodeEvent(t *testing.T, e verify.ExportEvent) string {
	t.Helper()
	b, err := json.Marshal(struct {
		Kind  string             `json:"kind"`
		Event verify.ExportEvent `json:"event"`
	}{"event", e})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rehash recomputes payload_hash (and, when chained, every later prev_hash
// and payload_hash) after an event line was edited: a consistent forgery.
func rehash(t *testing.T, ls []string, from int, chained bool) {
	t.Helper()
	var prev *string
	for i := from; i < len(ls); i++ {
		if !strings.HasPrefix(ls[i], `{"kind":"event"`) {
			continue
		}
		e := decodeEvent(t, ls[i])
		if prev != nil {
			e.PrevHash = prev
		}
		ph, err := verify.PayloadHash(&e.HashedEvent)
		if err != nil {
			t.Fatal(err)
		}
		e.PayloadHash = ph
		ls[i] = encodeEvent(t, e)
		if !chained {
			return
		}
		prev = &e.PayloadHash
	}
}

func TestTamperedExports(t *testing.T) {
	c := goldenChain(t)
	full := c.export(t, 0, int64(len(c.events)))
	frag := c.export(t, 12, 28)
	for _, tc := range []struct {
		name     string
		base     []byte
		mutate   func(t *testing.T, ls []string) []string
		pub      ed25519.PublicKey
		kind     verify.Kind
		seq      int64
		block    int64
		wantLine bool
	}{
		{
			name: "one byte of an event changed", base: full, kind: verify.KindPayloadHash, seq: 7, block: -1,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "event", 7)
				ls[i] = strings.Replace(ls[i], `"tool":"Bash"`, `"tool":"Bask"`, 1)
				return ls
			},
		},
		{
			name: "event line deleted", base: full, kind: verify.KindGap, seq: 7, block: -1,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "event", 7)
				return append(ls[:i], ls[i+1:]...)
			},
		},
		{
			name: "two events swapped", base: full, kind: verify.KindGap, seq: 14, block: -1,
			mutate: func(t *testing.T, ls []string) []string {
				i, j := find(t, ls, "event", 14), find(t, ls, "event", 15)
				ls[i], ls[j] = ls[j], ls[i]
				return ls
			},
		},
		{
			name: "event duplicated", base: full, kind: verify.KindSequence, seq: 2, block: -1,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "event", 2)
				return append(ls[:i+1], ls[i:]...)
			},
		},
		{
			name: "prev_hash rewritten, payload_hash recomputed", base: full, kind: verify.KindPrevHash, seq: 5, block: -1,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "event", 5)
				e := decodeEvent(t, ls[i])
				e.PrevHash = ptr(c.events[2].PayloadHash)
				ls[i] = encodeEvent(t, e)
				rehash(t, ls, i, false)
				return ls
			},
		},
		{
			name: "genesis with a prev_hash", base: full, kind: verify.KindPrevHash, seq: 0, block: -1,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "event", 0)
				e := decodeEvent(t, ls[i])
				e.PrevHash = ptr(c.events[5].PayloadHash)
				ls[i] = encodeEvent(t, e)
				rehash(t, ls, i, false)
				return ls
			},
		},
		{
			name: "forged signature, payload_hash recomputed", base: full, kind: verify.KindSignature, seq: 8, block: -1,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "event", 8)
				e := decodeEvent(t, ls[i])
				canon, _ := jcs.Transform(e.Raw)
				e.Signature = ptr(b64(ed25519.Sign(seedKey("forger"), canon)))
				ls[i] = encodeEvent(t, e)
				rehash(t, ls, i, false)
				return ls
			},
		},
		{
			name: "signature stripped from a keyed machine's event", base: full, kind: verify.KindSignature, seq: 22, block: -1,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "event", 22)
				e := decodeEvent(t, ls[i])
				e.Signature = nil
				ls[i] = encodeEvent(t, e)
				rehash(t, ls, i, true)
				return ls
			},
		},
		{
			name: "old key after rotation", base: full, kind: verify.KindSignature, seq: 24, block: -1,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "event", 24)
				e := decodeEvent(t, ls[i])
				canon, _ := jcs.Transform(e.Raw)
				e.Signature = ptr(b64(ed25519.Sign(ciKey1, canon)))
				ls[i] = encodeEvent(t, e)
				rehash(t, ls, i, true)
				return ls
			},
		},
		{
			name: "history rewritten consistently", base: full, kind: verify.KindMerkleRoot, seq: -1, block: 1,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "event", 5)
				e := decodeEvent(t, ls[i])
				e.Decision = ptr("deny")
				ls[i] = encodeEvent(t, e)
				rehash(t, ls, i, true)
				return ls
			},
		},
		{
			name: "checkpoint root tampered", base: full, kind: verify.KindCheckpointSignature, seq: -1, block: 2,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "checkpoint", 2)
				root, _ := merkle.Root(17, c.tree)
				ls[i] = strings.Replace(ls[i], c.blocks[2].Root.String(), root.String(), 1)
				return ls
			},
		},
		{
			name: "checkpoint signature tampered", base: full, kind: verify.KindCheckpointSignature, seq: -1, block: 3,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "checkpoint", 3)
				j := strings.LastIndex(ls[i], `\n"`) - 10
				b := []byte(ls[i])
				b[j] = map[bool]byte{true: 'B', false: 'A'}[b[j] == 'A']
				ls[i] = string(b)
				return ls
			},
		},
		{
			name: "checkpoint deleted", base: full, kind: verify.KindBlockLink, seq: -1, block: 2,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "checkpoint", 1)
				return append(ls[:i], ls[i+1:]...)
			},
		},
		{
			name: "first checkpoint deleted", base: full, kind: verify.KindBlockLink, seq: -1, block: 1,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "checkpoint", 0)
				return append(ls[:i], ls[i+1:]...)
			},
		},
		{
			name: "checkpoint of another account", base: full, kind: verify.KindCheckpointOrigin, seq: -1, block: 0,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "checkpoint", 0)
				n, _ := checkpoint.Sign(verify.Origin("someone-else"), 4, c.blocks[0].Root, nil, serviceKey)
				b, _ := json.Marshal(map[string]any{"kind": "checkpoint", "checkpoint": verify.ExportCheckpoint{Block: 0, Note: string(n)}})
				ls[i] = string(b)
				return ls
			},
		},
		{
			name: "truncated", base: full, kind: verify.KindFormat, seq: -1, block: -1,
			mutate: func(t *testing.T, ls []string) []string { return ls[:len(ls)-1] },
		},
		{
			name: "another service key named in the header", base: full, pub: seedKey("x").Public().(ed25519.PublicKey),
			kind: verify.KindServiceKey, seq: -1, block: -1,
			mutate: func(t *testing.T, ls []string) []string { return ls },
		},
		{
			name: "another service key, none in the header", base: full, pub: seedKey("x").Public().(ed25519.PublicKey),
			kind: verify.KindCheckpointSignature, seq: -1, block: 0,
			mutate: func(t *testing.T, ls []string) []string {
				ls[0] = strings.Replace(ls[0], `"service_public_key":"`+b64(servicePub)+`",`, "", 1)
				return ls
			},
		},
		{
			name: "fragment frontier tampered", base: frag, kind: verify.KindMerkleRoot, seq: -1, block: 1,
			mutate: func(t *testing.T, ls []string) []string {
				other, _ := merkle.Root(3, c.tree)
				hs, _ := merkle.Frontier(12, c.tree)
				ls[1] = strings.Replace(ls[1], hs[1].String(), other.String(), 1)
				return ls
			},
		},
		{
			name: "fragment first prev_hash rewritten", base: frag, kind: verify.KindPrevHash, seq: 12, block: -1,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "event", 12)
				e := decodeEvent(t, ls[i])
				e.PrevHash = ptr(c.events[9].PayloadHash)
				ls[i] = encodeEvent(t, e)
				rehash(t, ls, i, true)
				return ls
			},
		},
		{
			name: "event before a checkpoint deleted", base: full, kind: verify.KindGap, seq: 17, block: -1,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "event", 17)
				return append(ls[:i], ls[i+1:]...)
			},
		},
		{
			name: "fragment first event rewritten consistently", base: frag, kind: verify.KindMerkleRoot, seq: -1, block: 2,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "event", 13)
				e := decodeEvent(t, ls[i])
				e.Tool = ptr("Edit")
				ls[i] = encodeEvent(t, e)
				rehash(t, ls, i, true)
				return ls
			},
		},
		{
			name: "fragment tail proof tampered", base: frag, kind: verify.KindMerkleRoot, seq: -1, block: 4,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "checkpoint", 4) - 1
				p, _ := merkle.ConsistencyProof(28, 30, c.tree)
				ls[i] = strings.Replace(ls[i], p[0].String(), c.blocks[0].Root.String(), 1)
				return ls
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub := tc.pub
			if pub == nil {
				pub = servicePub
			}
			mutated := join(tc.mutate(t, lines(tc.base)))
			_, err := verify.VerifyExport(bytes.NewReader(mutated), pub)
			var e *verify.Error
			if !errors.As(err, &e) {
				t.Fatalf("VerifyExport = %v, want a *verify.Error", err)
			}
			if e.Kind != tc.kind || e.Sequence != tc.seq || e.Block != tc.block || e.Line <= 0 {
				t.Fatalf("got %v (kind %s seq %d block %d line %d), want kind %s seq %d block %d",
					err, e.Kind, e.Sequence, e.Block, e.Line, tc.kind, tc.seq, tc.block)
			}
		})
	}
}

func TestMalformedExports(t *testing.T) {
	c := goldenChain(t)
	full := lines(c.export(t, 0, 8))
	for _, tc := range []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"not JSON", "hello\n"},
		{"no header", strings.Join(full[1:], "\n")},
		{"unknown kind", full[0] + "\n" + `{"kind":"evnt","evnt":{}}` + "\n"},
		{"kind without member", full[0] + "\n" + `{"kind":"event"}` + "\n"},
		{"two members", full[0] + "\n" + `{"kind":"end","end":{},"event":{}}` + "\n"},
		{"line after end", strings.Join(full, "\n") + "\n" + full[1] + "\n"},
		{"fragment without frontier", strings.Replace(full[0], `"start":0`, `"start":3`, 1) + "\n" + strings.Join(full[1:], "\n")},
		{"frontier in a full export", full[0] + "\n" + `{"kind":"frontier","frontier":{"tree_size":0,"hashes":[],"last_leaf_proof":[]}}` + "\n"},
		{"wrong format version", strings.Replace(full[0], verify.ExportFormat, "auditchain-export/v0", 1)},
		{"origin not the user's", strings.Replace(full[0], `"origin":"auditchain/`, `"origin":"other/`, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := verify.VerifyExport(strings.NewReader(tc.in), servicePub)
			var e *verify.Error
			if !errors.As(err, &e) || e.Kind != verify.KindFormat {
				t.Fatalf("VerifyExport = %v, want a format error", err)
			}
		})
	}
}

// benchExport builds an n-event export of one machine, signed or not, with a
// block every 1,000 events; written once per size.
func benchExport(b testing.TB, n int, signed bool) []byte {
	b.Helper()
	tree := &merkle.HashStore{}
	signer, _ := checkpoint.NewSigner(verify.Origin(goldenUser), serviceKey)
	var buf bytes.Buffer
	w, _ := verify.NewExportWriter(&buf, verify.ExportHeader{UserID: goldenUser})
	if signed {
		_ = w.WriteMachineKey(verify.ExportMachineKey{MachineID: "m-ci", PublicKey: b64(ciKey1.Public().(ed25519.PublicKey))})
	}
	var prev *string
	var last *checkpoint.Block
	for seq := range n {
		e := verify.ExportEvent{HashedEvent: verify.HashedEvent{
			EventID: fmt.Sprintf("evt-%016x", seq), EventType: "tool_call", Sequence: int64(seq), PrevHash: prev,
			Raw:      json.RawMessage(fmt.Sprintf(`{"args_hash":"sha256:%064x","cwd":"/home/agent/project","n":%d}`, seq, seq)),
			Decision: ptr("allow"), Tool: ptr("Bash"), MachineID: ptr("m-ci"), TS: ptr("2025-06-01T12:00:00+00:00"),
		}}
		if signed {
			canon, _ := jcs.Transform(e.Raw)
			e.Signature = ptr(b64(ed25519.Sign(ciKey1, canon)))
		}
		e.PayloadHash, _ = verify.PayloadHash(&e.HashedEvent)
		leaf, _ := verify.HashBytes(e.PayloadHash)
		_ = tree.Append(leaf)
		_ = w.WriteEvent(&e)
		prev = &e.PayloadHash
		if (seq+1)%1000 == 0 {
			blk, err := signer.Seal(last, uint64(seq+1), tree.Root())
			if err != nil {
				b.Fatal(err)
			}
			last = &blk
			_ = w.WriteCheckpoint(blk.Index, blk.Note)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// Signatures are checked by the workers in chunks, out of order; the
// failure reported is still the one on the earliest line, whatever finishes
// first and whichever check (in order or in the pool) finds it.
func TestSignatureFailureOnEarliestLine(t *testing.T) {
	base := lines(benchExport(t, 3000, true))
	forge := func(ls []string, seq int64) int {
		i := find(t, ls, "event", seq)
		e := decodeEvent(t, ls[i])
		canon, _ := jcs.Transform(e.Raw)
		e.Signature = ptr(b64(ed25519.Sign(seedKey("forger"), canon)))
		ls[i] = encodeEvent(t, e)
		return i
	}
	for _, tc := range []struct {
		name    string
		mutate  func(ls []string) []string
		kind    verify.Kind
		seq     int64
		checked bool // SignaturesVerified must show the pool got that far
	}{
		{"later forgery finishes first", func(ls []string) []string {
			// Both before the first block (size 1000), whose root then fails
			// in order; the two chunks may be checked in either order.
			forge(ls, 990)
			rehash(t, ls, forge(ls, 700), true) // consistent hashes: only signatures and roots fail
			return ls
		}, verify.KindSignature, 700, false},
		{"forgery before a broken link", func(ls []string) []string {
			rehash(t, ls, forge(ls, 1200), false) // sequence 1201's prev_hash now fails in order
			return ls
		}, verify.KindSignature, 1200, true},
		{"broken link before a forgery", func(ls []string) []string {
			rehash(t, ls, forge(ls, 1800), false)
			i := find(t, ls, "event", 400)
			ls[i] = strings.Replace(ls[i], `"tool":"Bash"`, `"tool":"Bask"`, 1)
			return ls
		}, verify.KindPayloadHash, 400, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mutated := join(tc.mutate(slices.Clone(base)))
			rep, err := verify.VerifyExport(bytes.NewReader(mutated), servicePub)
			var e *verify.Error
			if !errors.As(err, &e) || e.Kind != tc.kind || e.Sequence != tc.seq {
				t.Fatalf("VerifyExport = %v, want %s at sequence %d", err, tc.kind, tc.seq)
			}
			if tc.checked && rep.SignaturesVerified < tc.seq {
				t.Fatalf("SignaturesVerified = %d, want at least the %d before the failure", rep.SignaturesVerified, tc.seq)
			}
		})
	}
}

func BenchmarkVerifyExport(b *testing.B) {
	for _, bc := range []struct {
		name   string
		n      int
		signed bool
	}{
		{"unsigned", 20000, false},
		{"signed", 5000, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			data := benchExport(b, bc.n, bc.signed)
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			cpu0, cpuOK := cputime.Process()
			for b.Loop() {
				rep, err := verify.VerifyExport(bytes.NewReader(data), servicePub)
				if err != nil || rep.Events != int64(bc.n) {
					b.Fatalf("%v %+v", err, rep)
				}
			}
			events := float64(bc.n) * float64(b.N)
			b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
			if cpu1, ok := cputime.Process(); ok && cpuOK {
				b.ReportMetric(float64((cpu1-cpu0).Microseconds())/events, "cpu-µs/event")
			}
		})
	}
}

// TestVerifyExportMemoryFlat streams a long export through a pipe, so the
// input is never held in memory, and samples the heap while verifying.
func TestVerifyExportMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("long stream")
	}
	n := int64(100_000)
	if raceEnabled {
		n = 10_000
	}
	pr, pw := io.Pipe()
	var peak uint64
	go func() {
		w, _ := verify.NewExportWriter(pw, verify.ExportHeader{UserID: goldenUser})
		var prev string
		var ms runtime.MemStats
		for seq := range n {
			e := verify.ExportEvent{HashedEvent: verify.HashedEvent{
				EventID: fmt.Sprintf("evt-%016x", seq), EventType: "tool_call", Sequence: int64(seq),
				Raw: json.RawMessage(fmt.Sprintf(`{"n":%d}`, seq)),
			}}
			if seq > 0 {
				p := prev
				e.PrevHash = &p
			}
			e.PayloadHash, _ = verify.PayloadHash(&e.HashedEvent)
			prev = e.PayloadHash
			_ = w.WriteEvent(&e)
			if seq%5000 == 0 {
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
		}
		pw.CloseWithError(w.Close())
	}()
	rep, err := verify.VerifyExport(pr, servicePub)
	if err != nil || rep.Events != n {
		t.Fatalf("%v %+v", err, rep)
	}
	t.Logf("peak heap in use over %d events: %d KiB", n, peak>>10)
	if peak > 64<<20 {
		t.Fatalf("heap grew to %d MiB", peak>>20)
	}
}
