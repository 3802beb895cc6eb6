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
	"reflect"
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
	return chainRotatingTo(t, ciKey2.Public().(ed25519.PublicKey), func(msg []byte) []byte { return ed25519.Sign(ciKey2, msg) })
}

// chainRotatingTo is goldenChain with m-ci's second key pub, whose events
// sign signs.
func chainRotatingTo(t testing.TB, pub ed25519.PublicKey, sign func([]byte) []byte) *chain {
	t.Helper()
	c := &chain{tree: &merkle.HashStore{}}
	c.keys = []verify.ExportMachineKey{
		{MachineID: "m-ci", PublicKey: b64(ciKey1.Public().(ed25519.PublicKey)), RegisteredAt: "2025-06-01T12:00:05+00:00", EffectiveFromSequence: 6, EffectiveFromLeaf: 6},
		{MachineID: "m-ci", PublicKey: b64(pub), RegisteredAt: "2025-06-01T12:00:19+00:00", EffectiveFromSequence: 20, EffectiveFromLeaf: 20},
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
			keyPub, keySign := ciKey1.Public().(ed25519.PublicKey), func(msg []byte) []byte { return ed25519.Sign(ciKey1, msg) }
			if seq >= 20 {
				keyPub, keySign = pub, sign
			}
			if seq%4 == 0 {
				e.EventType, e.ParentID = "tool_result", ptr(fmt.Sprintf("evt-%016x", 0xa000+seq-1))
			}
			e.MachineID = ptr("m-ci")
			canon, err := jcs.Transform(e.Raw)
			if err != nil {
				t.Fatal(err)
			}
			e.Signature = ptr(b64(keySign(canon)))
			e.SignatureKey = ptr(verify.Fingerprint(keyPub))
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
// for a fragment (with the sequence and payload_hash of leaf start-1), the
// anchor block (the last block at or below start) with a consistency proof,
// then keys, events and blocks in leaf order, and the first block past end
// with a consistency proof so the tail is signed too.
func (c *chain) export(t testing.TB, start, end int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	treeSize := uint64(len(c.events)) // the service's: the tree the range is cut from
	w, err := verify.NewExportWriter(&buf, verify.ExportHeader{
		UserID: goldenUser, ServiceKeyID: verify.Fingerprint(servicePub),
		ServicePublicKey: b64(servicePub), Start: uint64(start), ExportedAt: "2025-06-02T00:00:00+00:00",
		TreeSize: &treeSize,
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
		last := c.events[start-1]
		must(w.WriteFrontier(verify.ExportFrontier{TreeSize: uint64(start), Hashes: hs, LastLeafProof: p,
			LastLeafSequence: &last.Sequence, LastLeafPayloadHash: &last.PayloadHash}))
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
		if k.EffectiveFromLeaf <= start {
			must(w.WriteMachineKey(k))
		}
	}
	for i := start; i < end; i++ {
		for _, k := range c.keys {
			if k.EffectiveFromLeaf == i && i > start {
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

// lastCheckpointLine is the last checkpoint line of an export, as Report.LastCheckpoint gives it.
func lastCheckpointLine(t *testing.T, export []byte) *verify.ExportCheckpoint {
	t.Helper()
	var last *verify.ExportCheckpoint
	for line := range bytes.Lines(export) {
		var l struct{ Checkpoint *verify.ExportCheckpoint }
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatal(err)
		}
		if l.Checkpoint != nil {
			last = l.Checkpoint
		}
	}
	if last == nil {
		t.Fatal("the export has no checkpoint")
	}
	return last
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
		Gaps: []verify.Gap{}, Breaks: []verify.Break{}, Whole: true, LastCheckpoint: lastCheckpointLine(t, full),
	}
	if !reflect.DeepEqual(rep, want) {
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
		SignaturesVerified: 7, FirstBlock: 1, LastBlock: 4, LastCheckpoint: lastCheckpointLine(t, frag),
		CoveringCheckpoint: lastCheckpointLine(t, frag), Gaps: []verify.Gap{}, Breaks: []verify.Break{},
	}
	if !reflect.DeepEqual(rep, want) {
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
			// The checkpoint covering the fragment is the first block at or
			// past its end (sizes 4, 10, 18, 25, 30), even when a larger one
			// ties the range to the newer tree after it; none past 30.
			if start == end {
				continue
			}
			want := int64(-1)
			for i, size := range []int64{4, 10, 18, 25, 30} {
				if size >= end {
					want = int64(i)
					break
				}
			}
			switch got := rep.CoveringCheckpoint; {
			case want < 0 && got != nil:
				t.Fatalf("fragment [%d,%d) ends past every block, yet block %d covers it", start, end, got.Block)
			case want >= 0 && (got == nil || got.Block != want):
				t.Fatalf("fragment [%d,%d): covering checkpoint %+v, want block %d", start, end, got, want)
			}
		}
	}
}

// Exports written before effective_from_leaf and the frontier's last leaf
// existed (the golden files of the previous writer) still verify, with the
// same reports: keys are not checked against a leaf, and the fragment's
// lowest sequence is not linked to leaf start-1.
func TestLegacyGoldenExports(t *testing.T) {
	for _, name := range []string{"export.ndjson", "fragment.ndjson"} {
		legacy, err := os.ReadFile(filepath.Join("testdata", "legacy-"+name))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(legacy, []byte("effective_from_leaf")) || bytes.Contains(legacy, []byte("last_leaf_sequence")) {
			t.Fatalf("legacy-%s carries the new fields", name)
		}
		current, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := verify.VerifyExport(bytes.NewReader(legacy), servicePub)
		if err != nil {
			t.Fatalf("legacy-%s: %v", name, err)
		}
		want, err := verify.VerifyExport(bytes.NewReader(current), servicePub)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("legacy-%s report\n got %+v\nwant %+v", name, got, want)
		}
	}
}

// storedChain is an account whose events were stored in the given sequence
// order (leaf i holds sequence order[i]), as batch ingest may store them:
// each event's prev_hash is the payload_hash of the previous sequence when
// that is present (null otherwise), unless link says otherwise, and a
// block is sealed at each size in seal.
func storedChain(t testing.TB, order []int64, link map[int64]*string, seal ...int) *chain {
	t.Helper()
	c := &chain{tree: &merkle.HashStore{}}
	events := map[int64]verify.ExportEvent{}
	for _, seq := range slices.Sorted(slices.Values(order)) {
		e := verify.HashedEvent{EventID: fmt.Sprintf("evt-%016x", 0xb000+seq), EventType: "tool_call", Sequence: seq,
			Raw: json.RawMessage(fmt.Sprintf(`{"n":%d}`, seq))}
		if p, ok := events[seq-1]; ok {
			e.PrevHash = &p.PayloadHash
		}
		if l, ok := link[seq]; ok {
			e.PrevHash = l
		}
		ph, err := verify.PayloadHash(&e)
		if err != nil {
			t.Fatal(err)
		}
		events[seq] = verify.ExportEvent{HashedEvent: e, PayloadHash: ph}
	}
	signer, err := checkpoint.NewSigner(verify.Origin(goldenUser), serviceKey)
	if err != nil {
		t.Fatal(err)
	}
	for i, seq := range order {
		e := events[seq]
		c.events = append(c.events, e)
		leaf, _ := verify.HashBytes(e.PayloadHash)
		if err := c.tree.Append(leaf); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(seal, i+1) {
			var last *checkpoint.Block
			if len(c.blocks) > 0 {
				last = &c.blocks[len(c.blocks)-1]
			}
			b, err := signer.Seal(last, uint64(i+1), c.tree.Root())
			if err != nil {
				t.Fatal(err)
			}
			c.blocks = append(c.blocks, b)
		}
	}
	return c
}

// lineOf is the 1-based line of the event with sequence seq.
func lineOf(t *testing.T, export []byte, seq int64) int64 {
	t.Helper()
	return int64(find(t, lines(export), "event", seq)) + 1
}

// A chain stored out of sequence order, continuous in sequence order: its
// full export verifies, the tree rebuilt in line order against the signed
// roots and the links judged in sequence order. Every fragment passes its
// integrity checks; its continuity findings are those of its own events
// and leaf start-1, sorted (nothing below the lowest): a sequence stored
// at a leaf outside the fragment reads as a gap in it.
func TestOutOfOrderChain(t *testing.T) {
	order := []int64{0, 1, 2, 5, 3, 4, 6, 7, 9, 8, 12, 10, 11, 13, 15, 14}
	c := storedChain(t, order, nil, 4, 8, 13, 16)
	full := c.export(t, 0, int64(len(order)))
	rep, err := verify.VerifyExport(bytes.NewReader(full), servicePub)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Events != 16 || rep.FirstSequence != 0 || rep.LastSequence != 15 || rep.SignedSize != 16 || rep.Checkpoints != 4 ||
		len(rep.Gaps) != 0 || len(rep.Breaks) != 0 || rep.RootHash != c.tree.Root() {
		t.Fatalf("report %+v", rep)
	}
	n := int64(len(order))
	for start := int64(0); start <= n; start++ {
		for end := start; end <= n; end++ {
			export := c.export(t, start, end)
			rep, err := verify.VerifyExport(bytes.NewReader(export), servicePub)
			// What sort-then-scan finds: the fragment's sequences and leaf
			// start-1's, holes above the lowest (all links are right).
			known := slices.Clone(order[start:end])
			if start > 0 {
				known = append(known, order[start-1])
			}
			slices.Sort(known)
			wantGaps := []verify.Gap{}
			for i := 1; i < len(known); i++ {
				if known[i] > known[i-1]+1 {
					wantGaps = append(wantGaps, verify.Gap{AfterSequence: i64(known[i-1]), MissingFrom: known[i-1] + 1, MissingTo: known[i] - 1})
				}
			}
			if rep.TreeSize != uint64(end) || rep.Events != end-start || !reflect.DeepEqual(rep.Gaps, wantGaps) || len(rep.Breaks) != 0 {
				t.Fatalf("fragment [%d,%d): %v %+v, want gaps %s", start, end, err, rep, jsn(wantGaps))
			}
			if start < end {
				lo, hi := slices.Min(order[start:end]), slices.Max(order[start:end])
				if rep.FirstSequence != lo || rep.LastSequence != hi {
					t.Fatalf("fragment [%d,%d): sequences %d..%d, want %d..%d", start, end, rep.FirstSequence, rep.LastSequence, lo, hi)
				}
			}
			// Only an export of every leaf fails on a gap: in a part, a
			// missing sequence may be stored at a leaf outside it.
			if whole := start == 0 && end == n; rep.Whole != whole || len(wantGaps) == 0 || !whole {
				if err != nil || rep.Whole != whole {
					t.Fatalf("fragment [%d,%d): %v, whole %v", start, end, err, rep.Whole)
				}
				continue
			}
			// The first gap is the error, on the line of the event above it
			// (the frontier line when that is leaf start-1).
			g := wantGaps[0]
			wantLine := int64(2)
			if above := g.MissingTo + 1; start == 0 || above != order[start-1] {
				wantLine = lineOf(t, export, above)
			}
			var e *verify.Error
			if !errors.As(err, &e) || e.Kind != verify.KindGap || e.Sequence != g.MissingFrom || e.Block != -1 || e.Line != wantLine {
				t.Fatalf("fragment [%d,%d): %v, want gap at %d on line %d", start, end, err, g.MissingFrom, wantLine)
			}
		}
	}
}

// Findings of a chain stored out of order, with holes and broken links: all
// listed, the first in sequence order returned once integrity passes.
func TestOutOfOrderFindings(t *testing.T) {
	bad := ptr("sha256:" + strings.Repeat("ab", 32))
	for _, tc := range []struct {
		name   string
		link   map[int64]*string
		kind   verify.Kind
		seq    int64
		breaks []int64
	}{
		{"gaps only", nil, verify.KindGap, 2, nil},
		{"a break before the first gap", map[int64]*string{1: nil, 4: bad}, verify.KindPrevHash, 1, []int64{1, 4}},
		{"a break after the first gap", map[int64]*string{7: bad}, verify.KindGap, 2, []int64{7}},
		{"genesis not null", map[int64]*string{0: bad}, verify.KindPrevHash, 0, []int64{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			order := []int64{0, 3, 1, 7, 4, 9, 6} // 2, 5 and 8 missing
			c := storedChain(t, order, tc.link, 3, 7)
			export := c.export(t, 0, int64(len(order)))
			rep, err := verify.VerifyExport(bytes.NewReader(export), servicePub)
			wantGaps := []verify.Gap{
				{AfterSequence: i64(1), MissingFrom: 2, MissingTo: 2},
				{AfterSequence: i64(4), MissingFrom: 5, MissingTo: 5},
				{AfterSequence: i64(7), MissingFrom: 8, MissingTo: 8},
			}
			bySeq := map[int64]verify.ExportEvent{}
			for _, e := range c.events {
				bySeq[e.Sequence] = e
			}
			wantBreaks := []verify.Break{}
			for _, s := range tc.breaks {
				b := verify.Break{Sequence: s, EventID: bySeq[s].EventID, FoundPrevHash: bySeq[s].PrevHash}
				if s > 0 {
					b.ExpectedPrevHash = ptr(bySeq[s-1].PayloadHash)
				}
				wantBreaks = append(wantBreaks, b)
			}
			if !reflect.DeepEqual(rep.Gaps, wantGaps) || !reflect.DeepEqual(rep.Breaks, wantBreaks) {
				t.Fatalf("gaps %s breaks %s, want %s %s", jsn(rep.Gaps), jsn(rep.Breaks), jsn(wantGaps), jsn(wantBreaks))
			}
			if rep.SignedSize != 7 || rep.FirstSequence != 0 || rep.LastSequence != 9 {
				t.Fatalf("report %+v", rep)
			}
			// A break is on the line of its event; a gap on the line of the
			// event just above it (3 for the gap at 2).
			var wantLine int64
			if tc.kind == verify.KindGap {
				wantLine = lineOf(t, export, tc.seq+1)
			} else {
				wantLine = lineOf(t, export, tc.seq)
			}
			var e *verify.Error
			if !errors.As(err, &e) || e.Kind != tc.kind || e.Sequence != tc.seq || e.Line != wantLine {
				t.Fatalf("VerifyExport = %v, want %s at %d on line %d", err, tc.kind, tc.seq, wantLine)
			}
		})
	}
}

// Tampering with an export of a chain stored out of order.
func TestOutOfOrderTampered(t *testing.T) {
	order := []int64{0, 1, 2, 5, 3, 4, 6, 7, 9, 8}
	c := storedChain(t, order, nil, 4, 8, 10)
	full := lines(c.export(t, 0, int64(len(order))))
	for _, tc := range []struct {
		name   string
		mutate func(ls []string) []string
		kind   verify.Kind
		seq    int64
		block  int64
		gaps   []verify.Gap
	}{
		// Block 1 (size 8) then follows 7 leaves: a gap at the lowest hole.
		{"event inside the disorder deleted", func(ls []string) []string {
			i := find(t, ls, "event", 3)
			return slices.Delete(ls, i, i+1)
		}, verify.KindGap, 3, -1, []verify.Gap{{AfterSequence: i64(2), MissingFrom: 3, MissingTo: 3}}},
		// No hole below the highest: just above it.
		{"highest event before a block deleted", func(ls []string) []string {
			i := find(t, ls, "event", 7)
			return slices.Delete(ls, i, i+1)
		}, verify.KindGap, 7, -1, nil},
		// A sequence on two lines is tampering, reported at once.
		{"event repeated on a later line", func(ls []string) []string {
			return slices.Insert(ls, find(t, ls, "event", 4)+1, ls[find(t, ls, "event", 5)])
		}, verify.KindSequence, 5, -1, nil},
		// Two lines swapped: continuity holds, the signed root does not.
		{"leaf order changed", func(ls []string) []string {
			i, j := find(t, ls, "event", 5), find(t, ls, "event", 3)
			ls[i], ls[j] = ls[j], ls[i]
			return ls
		}, verify.KindMerkleRoot, -1, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := verify.VerifyExport(bytes.NewReader(join(tc.mutate(slices.Clone(full)))), servicePub)
			var e *verify.Error
			if !errors.As(err, &e) || e.Kind != tc.kind || e.Sequence != tc.seq || e.Block != tc.block || e.Line <= 0 {
				t.Fatalf("VerifyExport = %v, want %s at sequence %d block %d", err, tc.kind, tc.seq, tc.block)
			}
			if tc.gaps == nil {
				tc.gaps = []verify.Gap{}
			}
			if !reflect.DeepEqual(rep.Gaps, tc.gaps) || len(rep.Breaks) != 0 {
				t.Fatalf("gaps %s breaks %s, want %s", jsn(rep.Gaps), jsn(rep.Breaks), jsn(tc.gaps))
			}
		})
	}
}

// effective_from_leaf orders the key lines; effective_from_sequence is
// informational, and an export without effective_from_leaf is not checked.
func TestMachineKeyEffectiveFromLeaf(t *testing.T) {
	c := goldenChain(t)
	full := string(c.export(t, 0, int64(len(c.events))))
	for _, tc := range []struct {
		name, old, new string
		ok             bool
	}{
		{"as written", "", "", true},
		{"effective_from_sequence off", `"effective_from_sequence":20,`, `"effective_from_sequence":33,`, true},
		{"effective_from_leaf absent", `,"effective_from_leaf":20`, ``, true},
		{"effective_from_leaf earlier", `"effective_from_leaf":20`, `"effective_from_leaf":3`, true},
		{"effective_from_leaf later than the line", `"effective_from_leaf":20`, `"effective_from_leaf":21`, false},
		{"effective_from_leaf negative", `"effective_from_leaf":20`, `"effective_from_leaf":-1`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := full
			if tc.old != "" {
				if !strings.Contains(in, tc.old) {
					t.Fatalf("export lacks %s", tc.old)
				}
				in = strings.Replace(in, tc.old, tc.new, 1)
			}
			_, err := verify.VerifyExport(strings.NewReader(in), servicePub)
			var e *verify.Error
			if tc.ok != (err == nil) || (err != nil && (!errors.As(err, &e) || e.Kind != verify.KindFormat)) {
				t.Fatalf("VerifyExport = %v, want ok %v or a format error", err, tc.ok)
			}
		})
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
		// findings are the Report's Gaps and Breaks, from the mutated
		// lines; nil: none.
		findings func(t *testing.T, ls []string) ([]verify.Gap, []verify.Break)
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
			// Block 1 (size 10) follows 9 events: a gap, located at the
			// missing sequence, which the report lists too.
			name: "event line deleted", base: full, kind: verify.KindGap, seq: 7, block: -1,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "event", 7)
				return append(ls[:i], ls[i+1:]...)
			},
			findings: func(t *testing.T, ls []string) ([]verify.Gap, []verify.Break) {
				return []verify.Gap{{AfterSequence: i64(6), MissingFrom: 7, MissingTo: 7}}, nil
			},
		},
		{
			// Events may be stored in any sequence order now, and links are
			// judged in sequence order, so two swapped lines are no gap (it
			// was KindGap at 14): continuity is intact, and the swap is
			// caught by the signed root of the first block covering it,
			// rebuilt in line order.
			name: "two events swapped", base: full, kind: verify.KindMerkleRoot, seq: -1, block: 2,
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
			// A broken link no longer stops the stream (it was KindPrevHash
			// at 5): integrity comes first, and the rewritten event's new
			// payload_hash fails block 1's signed root. Both links it
			// broke, into 5 and out of it into 6, are in the report.
			name: "prev_hash rewritten, payload_hash recomputed", base: full, kind: verify.KindMerkleRoot, seq: -1, block: 1,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "event", 5)
				e := decodeEvent(t, ls[i])
				e.PrevHash = ptr(c.events[2].PayloadHash)
				ls[i] = encodeEvent(t, e)
				rehash(t, ls, i, false)
				return ls
			},
			findings: func(t *testing.T, ls []string) ([]verify.Gap, []verify.Break) {
				return nil, []verify.Break{
					{Sequence: 5, EventID: c.events[5].EventID, ExpectedPrevHash: &c.events[4].PayloadHash, FoundPrevHash: &c.events[2].PayloadHash},
					{Sequence: 6, EventID: c.events[6].EventID, ExpectedPrevHash: ptr(payloadAt(t, ls, 5)), FoundPrevHash: &c.events[5].PayloadHash},
				}
			},
		},
		{
			// As above: was KindPrevHash at 0; now block 0's root, with the
			// genesis break (expected null) and the one into 1 listed.
			name: "genesis with a prev_hash", base: full, kind: verify.KindMerkleRoot, seq: -1, block: 0,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "event", 0)
				e := decodeEvent(t, ls[i])
				e.PrevHash = ptr(c.events[5].PayloadHash)
				ls[i] = encodeEvent(t, e)
				rehash(t, ls, i, false)
				return ls
			},
			findings: func(t *testing.T, ls []string) ([]verify.Gap, []verify.Break) {
				return nil, []verify.Break{
					{Sequence: 0, EventID: c.events[0].EventID, FoundPrevHash: &c.events[5].PayloadHash},
					{Sequence: 1, EventID: c.events[1].EventID, ExpectedPrevHash: ptr(payloadAt(t, ls, 0)), FoundPrevHash: &c.events[0].PayloadHash},
				}
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
			// The signature is an integrity failure and wins; the link into
			// 9 it broke is listed.
			findings: func(t *testing.T, ls []string) ([]verify.Gap, []verify.Break) {
				return nil, []verify.Break{
					{Sequence: 9, EventID: c.events[9].EventID, ExpectedPrevHash: ptr(payloadAt(t, ls, 8)), FoundPrevHash: &c.events[8].PayloadHash},
				}
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
				s, _ := checkpoint.NewSigner(verify.Origin("someone-else"), serviceKey)
				n, _ := s.SignBlock(4, c.blocks[0].Root, nil)
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
			// The frontier line now carries leaf 11's payload_hash, proven
			// against the frontier's own root there and then: a changed
			// frontier hash fails on its line (it was block 1, the anchor,
			// which still catches it when the line lacks those fields: next case).
			name: "fragment frontier tampered", base: frag, kind: verify.KindMerkleRoot, seq: -1, block: -1,
			mutate: func(t *testing.T, ls []string) []string {
				other, _ := merkle.Root(3, c.tree)
				hs, _ := merkle.Frontier(12, c.tree)
				ls[1] = strings.Replace(ls[1], hs[1].String(), other.String(), 1)
				return ls
			},
		},
		{
			name: "fragment frontier tampered, without the last leaf", base: frag, kind: verify.KindMerkleRoot, seq: -1, block: 1,
			mutate: func(t *testing.T, ls []string) []string {
				other, _ := merkle.Root(3, c.tree)
				hs, _ := merkle.Frontier(12, c.tree)
				ls[1] = stripLastLeaf(t, strings.Replace(ls[1], hs[1].String(), other.String(), 1))
				return ls
			},
		},
		{
			name: "fragment frontier's last leaf payload_hash replaced", base: frag, kind: verify.KindMerkleRoot, seq: -1, block: -1,
			mutate: func(t *testing.T, ls []string) []string {
				ls[1] = strings.Replace(ls[1], c.events[11].PayloadHash, c.events[10].PayloadHash, 1)
				return ls
			},
		},
		{
			name: "fragment frontier's last leaf sequence inside the fragment", base: frag, kind: verify.KindSequence, seq: 13, block: -1,
			mutate: func(t *testing.T, ls []string) []string {
				ls[1] = strings.Replace(ls[1], `"last_leaf_sequence":11`, `"last_leaf_sequence":13`, 1)
				return ls
			},
		},
		{
			// Was KindPrevHash at 12 (the first event's prev_hash checked
			// against last_leaf_proof, stopping the stream). Now the link
			// is judged against the frontier's last leaf, sequence 11, and
			// reported as a break, while the rewritten event fails block
			// 2's signed root, an integrity failure that comes first.
			name: "fragment first prev_hash rewritten", base: frag, kind: verify.KindMerkleRoot, seq: -1, block: 2,
			mutate: func(t *testing.T, ls []string) []string {
				i := find(t, ls, "event", 12)
				e := decodeEvent(t, ls[i])
				e.PrevHash = ptr(c.events[9].PayloadHash)
				ls[i] = encodeEvent(t, e)
				rehash(t, ls, i, true)
				return ls
			},
			findings: func(t *testing.T, ls []string) ([]verify.Gap, []verify.Break) {
				return nil, []verify.Break{
					{Sequence: 12, EventID: c.events[12].EventID, ExpectedPrevHash: &c.events[11].PayloadHash, FoundPrevHash: &c.events[9].PayloadHash},
				}
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
			ls := tc.mutate(t, lines(tc.base))
			mutated := join(ls)
			rep, err := verify.VerifyExport(bytes.NewReader(mutated), pub)
			var e *verify.Error
			if !errors.As(err, &e) {
				t.Fatalf("VerifyExport = %v, want a *verify.Error", err)
			}
			if e.Kind != tc.kind || e.Sequence != tc.seq || e.Block != tc.block || e.Line <= 0 {
				t.Fatalf("got %v (kind %s seq %d block %d line %d), want kind %s seq %d block %d",
					err, e.Kind, e.Sequence, e.Block, e.Line, tc.kind, tc.seq, tc.block)
			}
			wantGaps, wantBreaks := []verify.Gap{}, []verify.Break{}
			if tc.findings != nil {
				g, b := tc.findings(t, ls)
				wantGaps, wantBreaks = append(wantGaps, g...), append(wantBreaks, b...)
			}
			if !reflect.DeepEqual(rep.Gaps, wantGaps) || !reflect.DeepEqual(rep.Breaks, wantBreaks) {
				t.Fatalf("report lists gaps %s breaks %s, want %s %s", jsn(rep.Gaps), jsn(rep.Breaks), jsn(wantGaps), jsn(wantBreaks))
			}
		})
	}
}

func i64(n int64) *int64 { return &n }

// payloadAt is the payload_hash on the event line of sequence seq.
func payloadAt(t *testing.T, ls []string, seq int64) string {
	t.Helper()
	return decodeEvent(t, ls[find(t, ls, "event", seq)]).PayloadHash
}

// stripLastLeaf removes last_leaf_sequence and last_leaf_payload_hash from
// a frontier line, as an export written before they existed.
func stripLastLeaf(t *testing.T, line string) string {
	t.Helper()
	var l struct {
		Kind     string                `json:"kind"`
		Frontier verify.ExportFrontier `json:"frontier"`
	}
	if err := json.Unmarshal([]byte(line), &l); err != nil || l.Kind != "frontier" || l.Frontier.LastLeafSequence == nil {
		t.Fatalf("not a frontier line with its last leaf: %v %s", err, line)
	}
	l.Frontier.LastLeafSequence, l.Frontier.LastLeafPayloadHash = nil, nil
	b, _ := json.Marshal(l)
	return string(b)
}

func TestMalformedExports(t *testing.T) {
	c := goldenChain(t)
	full := lines(c.export(t, 0, 8))
	frag := lines(c.export(t, 3, 8))
	keyed := lines(c.export(t, 0, 10))
	for _, l := range [][]string{frag, keyed} {
		if _, err := verify.VerifyExport(bytes.NewReader(join(l)), servicePub); err != nil {
			t.Fatalf("base export: %v", err)
		}
	}
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
		{"frontier with a last leaf sequence alone", strings.Join(frag[:1], "\n") + "\n" +
			strings.Replace(frag[1], `,"last_leaf_payload_hash":"`+c.events[2].PayloadHash+`"`, "", 1) + "\n" + strings.Join(frag[2:], "\n")},
		{"frontier with a last leaf payload_hash alone", strings.Join(frag[:1], "\n") + "\n" +
			strings.Replace(frag[1], `"last_leaf_sequence":2,`, "", 1) + "\n" + strings.Join(frag[2:], "\n")},
		{"frontier with a malformed last leaf payload_hash", strings.Join(frag[:1], "\n") + "\n" +
			strings.Replace(frag[1], c.events[2].PayloadHash, "sha256:00", 1) + "\n" + strings.Join(frag[2:], "\n")},
		{"frontier with a negative last leaf sequence", strings.Join(frag[:1], "\n") + "\n" +
			strings.Replace(frag[1], `"last_leaf_sequence":2,`, `"last_leaf_sequence":-1,`, 1) + "\n" + strings.Join(frag[2:], "\n")},
		{"machine key in force before its leaf", strings.Replace(strings.Join(keyed, "\n"), `"effective_from_leaf":6`, `"effective_from_leaf":7`, 1)},
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
			// Sequence 1201's prev_hash no longer links: a break, which does
			// not stop the stream; block 1 (size 2000) then fails its root
			// in order, and the forgery's earlier line still wins.
			rehash(t, ls, forge(ls, 1200), false)
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

func jsn(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The sequence beside a fragment's last leaf is not covered by the proof: a
// lowered one reads as a hole once integrity passes, and in a fragment (a
// part of the tree, where a missing sequence may sit at a leaf outside it)
// a hole is listed, not a failure; the whole export of the same chain judges
// gaps.
func TestFragmentLastLeafSequenceIsAHint(t *testing.T) {
	c := goldenChain(t)
	ls := lines(c.export(t, 12, 28))
	ls[1] = strings.Replace(ls[1], `"last_leaf_sequence":11`, `"last_leaf_sequence":5`, 1)
	rep, err := verify.VerifyExport(bytes.NewReader(join(ls)), servicePub)
	want := []verify.Gap{{AfterSequence: i64(5), MissingFrom: 6, MissingTo: 11}}
	if err != nil || rep.Whole || !reflect.DeepEqual(rep.Gaps, want) || len(rep.Breaks) != 0 {
		t.Fatalf("fragment with a lowered last leaf sequence: %v, whole %v, gaps %v", err, rep.Whole, rep.Gaps)
	}
}

// Whether an export is whole is decided by what is signed: the header's
// tree_size is informational, so a whole export with a gap still fails
// however large a tree_size claims the tree is, and a tree_size below the
// leaves exported is malformed.
func TestHeaderTreeSizeCannotHideAGap(t *testing.T) {
	order := []int64{0, 3, 1, 7, 4, 9, 6} // 2, 5 and 8 missing
	c := storedChain(t, order, nil, 3, 7)
	ls := lines(c.export(t, 0, int64(len(order))))
	for _, tc := range []struct {
		treeSize string
		kind     verify.Kind
	}{{"99", verify.KindGap}, {"0", verify.KindFormat}} {
		mutated := slices.Clone(ls)
		mutated[0] = strings.Replace(mutated[0], `"tree_size":7`, `"tree_size":`+tc.treeSize, 1)
		if mutated[0] == ls[0] {
			t.Fatalf("the header has no tree_size to change: %s", ls[0])
		}
		rep, err := verify.VerifyExport(bytes.NewReader(join(mutated)), servicePub)
		if !isKind(err, tc.kind) || (tc.kind == verify.KindGap && !rep.Whole) {
			t.Fatalf("tree_size %s: %v (whole %v), want %s", tc.treeSize, err, rep.Whole, tc.kind)
		}
	}
}

func isKind(err error, k verify.Kind) bool {
	var e *verify.Error
	return errors.As(err, &e) && e.Kind == k
}
