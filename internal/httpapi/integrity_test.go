package httpapi_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/gowebpki/jcs"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/verify"
)

func init() {
	// The export is NDJSON; the OpenAPI check reads it as an opaque string.
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", openapi3filter.FileBodyDecoder)
	openapi3filter.RegisterBodyDecoder("text/markdown", openapi3filter.FileBodyDecoder) // legal texts
}

// integChain appends events to one account through the API, keeping the tip.
type integChain struct {
	e      *env
	user   string
	token  string
	n      int64
	tip    *string
	hashes []string // payload_hash by sequence
	ids    []string
}

func newIntegChain(e *env, email string) *integChain {
	user, token := e.account(email)
	return &integChain{e: e, user: user, token: token}
}

// add appends the next event; machine and key are optional (key signs raw).
func (c *integChain) add(t *testing.T, machine string, key ed25519.PrivateKey) map[string]any {
	t.Helper()
	raw := json.RawMessage(fmt.Sprintf(`{"action":"tool_call","n":%d,"note":"<é>"}`, c.n))
	id := fmt.Sprintf("evt-%s-%04d", c.user[len(c.user)-12:], c.n)
	body := map[string]any{"event_id": id, "event_type": "tool_call", "sequence": c.n, "prev_hash": c.tip, "raw": raw,
		"tool": "Bash", "decision": "allow"}
	if machine != "" {
		body["machine_id"] = machine
	}
	if key != nil {
		canon, err := jcs.Transform(raw)
		if err != nil {
			t.Fatal(err)
		}
		body["signature"] = base64.StdEncoding.EncodeToString(ed25519.Sign(key, canon))
	}
	r := c.e.do("POST", "/v1/events", c.token, body)
	if r.Status != http.StatusOK {
		t.Fatalf("append %d: %d %s", c.n, r.Status, r.Body)
	}
	ev := r.JSON(t)["event"].(map[string]any)
	h := ev["payload_hash"].(string)
	c.tip = &h
	c.hashes = append(c.hashes, h)
	c.ids = append(c.ids, id)
	c.n++
	return ev
}

func (c *integChain) addN(t *testing.T, n int) {
	for range n {
		c.add(t, "", nil)
	}
}

func (c *integChain) registerKey(t *testing.T, machine string) ed25519.PrivateKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := c.e.do("PUT", "/v1/machines/"+machine+"/signing-key", c.token, map[string]any{"public_key": base64.StdEncoding.EncodeToString(pub)})
	if r.Status != http.StatusOK {
		t.Fatalf("register key: %d %s", r.Status, r.Body)
	}
	// The registration is on the chain: a machine.signing_key event.
	tip := c.e.do("GET", "/v1/chain/tip", c.token, nil).JSON(t)
	if tip["sequence"] != float64(c.n) {
		t.Fatalf("after a key registration the tip is %v, want the registration at %d", tip, c.n)
	}
	h := tip["payload_hash"].(string)
	c.tip = &h
	c.hashes = append(c.hashes, h)
	c.ids = append(c.ids, tip["event_id"].(string))
	c.n++
	return priv
}

func (c *integChain) verifyChain(t *testing.T) map[string]any {
	t.Helper()
	r := c.e.do("GET", "/v1/chain/verify", c.token, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("verify: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)
}

func (c *integChain) export(t *testing.T, query string) []byte {
	t.Helper()
	r := c.e.do("GET", "/v1/chain/export"+query, c.token, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("export%s: %d %s", query, r.Status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("export Content-Type %q", ct)
	}
	return r.Body
}

// reference is transparency-dev's in-memory tree over the chain's leaves.
func (c *integChain) reference(t *testing.T) *testonly.Tree {
	t.Helper()
	ref := testonly.New(rfc6962.DefaultHasher)
	for _, h := range c.hashes {
		b, err := verify.HashBytes(h)
		if err != nil {
			t.Fatal(err)
		}
		ref.AppendData(b)
	}
	return ref
}

func b64(t *testing.T, v any) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(v.(string))
	if err != nil {
		t.Fatalf("not base64: %v", v)
	}
	return b
}

func b64s(t *testing.T, v any) [][]byte {
	t.Helper()
	var out [][]byte
	for _, x := range v.([]any) {
		out = append(out, b64(t, x))
	}
	return out
}

func num(v any) int64 { return int64(v.(float64)) }

func TestIntegrityProofsVerifyIndependently(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		c := newIntegChain(e, "proofs@example.com")
		pub := e.app.ServicePublicKey()
		// Blocks sealed on demand at sizes 1, 5, 8 and 13.
		for _, upTo := range []int64{1, 5, 8, 13} {
			c.addN(t, int(upTo-c.n))
			if v := c.verifyChain(t); v["valid"] != true || num(v["tree_size"]) != upTo {
				t.Fatalf("verify at %d: %v", upTo, v)
			}
		}
		ref := c.reference(t)
		h := rfc6962.DefaultHasher

		r := e.do("GET", "/v1/chain/blocks?limit=3", c.token, nil)
		page := r.JSON(t)
		if r.Status != 200 || num(page["count"]) != 3 || num(page["next_cursor"]) != 3 || page["origin"] != verify.Origin(c.user) {
			t.Fatalf("blocks page 1: %d %s", r.Status, r.Body)
		}
		blocks := page["blocks"].([]any)
		page = e.do("GET", "/v1/chain/blocks?limit=3&cursor=3", c.token, nil).JSON(t)
		if page["next_cursor"] != nil || num(page["count"]) != 1 {
			t.Fatalf("blocks page 2: %v", page)
		}
		blocks = append(blocks, page["blocks"].([]any)...)
		var prev *string
		for i, bv := range blocks {
			b := bv.(map[string]any)
			size := uint64(num(b["tree_size"]))
			if num(b["index"]) != int64(i) || size != []uint64{1, 5, 8, 13}[i] {
				t.Fatalf("block %d: %v", i, b)
			}
			cp, err := verify.OpenCheckpoint([]byte(b["note"].(string)), pub, verify.Origin(c.user))
			if err != nil {
				t.Fatalf("block %d note: %v", i, err)
			}
			if !bytes.Equal(cp.Root[:], ref.HashAt(size)) || b["root_hash"] != cp.Root.String() {
				t.Fatalf("block %d root %s, reference %x", i, cp.Root, ref.HashAt(size))
			}
			if bh := verify.BlockHash([]byte(b["note"].(string))); b["block_hash"] != bh.String() {
				t.Fatalf("block %d hash", i)
			}
			if (prev == nil) != (b["prev_block_hash"] == nil) || (prev != nil && *prev != b["prev_block_hash"]) {
				t.Fatalf("block %d prev link %v, want %v", i, b["prev_block_hash"], prev)
			}
			s := b["block_hash"].(string)
			prev = &s
		}

		for _, size := range []int64{1, 2, 5, 7, 8, 13} {
			for idx := int64(0); idx < size; idx++ {
				r := e.do("GET", fmt.Sprintf("/v1/chain/proof/inclusion?event_id=%s&tree_size=%d", c.ids[idx], size), c.token, nil)
				if r.Status != 200 {
					t.Fatalf("inclusion %d in %d: %d %s", idx, size, r.Status, r.Body)
				}
				p := r.JSON(t)
				leaf, _ := verify.HashBytes(c.hashes[idx])
				if lh := b64(t, p["leaf_hash"]); !bytes.Equal(lh, h.HashLeaf(leaf)) || num(p["leaf_index"]) != idx {
					t.Fatalf("inclusion %d in %d: leaf %x", idx, size, lh)
				}
				root := b64(t, p["root_hash"])
				if !bytes.Equal(root, ref.HashAt(uint64(size))) {
					t.Fatalf("root of %d = %x, recomputed from the events %x", size, root, ref.HashAt(uint64(size)))
				}
				if err := proof.VerifyInclusion(h, uint64(idx), uint64(size), h.HashLeaf(leaf), b64s(t, p["proof"]), root); err != nil {
					t.Fatalf("inclusion %d in %d rejected by transparency-dev: %v", idx, size, err)
				}
				isBlock := size == 1 || size == 5 || size == 8 || size == 13
				if (p["checkpoint"] != nil) != isBlock {
					t.Fatalf("inclusion in %d: checkpoint %v", size, p["checkpoint"])
				}
				if isBlock {
					cp, err := verify.OpenCheckpoint([]byte(p["checkpoint"].(map[string]any)["note"].(string)), pub, verify.Origin(c.user))
					if err != nil || !bytes.Equal(cp.Root[:], root) || cp.Size != uint64(size) {
						t.Fatalf("inclusion in %d: checkpoint does not sign the root: %v", size, err)
					}
				}
			}
			for first := int64(0); first <= size; first++ {
				r := e.do("GET", fmt.Sprintf("/v1/chain/proof/consistency?first=%d&second=%d", first, size), c.token, nil)
				if r.Status != 200 {
					t.Fatalf("consistency %d→%d: %d %s", first, size, r.Status, r.Body)
				}
				p := r.JSON(t)
				r1, r2 := b64(t, p["first_root"]), b64(t, p["second_root"])
				if !bytes.Equal(r1, ref.HashAt(uint64(first))) || !bytes.Equal(r2, ref.HashAt(uint64(size))) {
					t.Fatalf("consistency %d→%d: roots differ from the recomputation", first, size)
				}
				if err := proof.VerifyConsistency(h, uint64(first), uint64(size), b64s(t, p["proof"]), r1, r2); err != nil {
					t.Fatalf("consistency %d→%d rejected by transparency-dev: %v", first, size, err)
				}
			}
		}

		// Defaults: the newest block's size.
		p := e.do("GET", "/v1/chain/proof/inclusion?event_id="+c.ids[3], c.token, nil).JSON(t)
		if num(p["tree_size"]) != 13 || p["checkpoint"] == nil {
			t.Fatalf("default inclusion: %v", p)
		}
		p = e.do("GET", "/v1/chain/proof/consistency?first=5", c.token, nil).JSON(t)
		if num(p["second"]) != 13 || p["first_checkpoint"] == nil || p["second_checkpoint"] == nil {
			t.Fatalf("default consistency: %v", p)
		}

		// Bad parameters.
		for _, tc := range []struct {
			path   string
			status int
			code   string
		}{
			{"/v1/chain/proof/inclusion", 400, app.CodeInvalidEventID},
			{"/v1/chain/proof/inclusion?event_id=" + c.ids[3] + "&tree_size=3", 400, app.CodeInvalidTreeSize},
			{"/v1/chain/proof/inclusion?event_id=" + c.ids[3] + "&tree_size=14", 400, app.CodeInvalidTreeSize},
			{"/v1/chain/proof/inclusion?event_id=" + c.ids[3] + "&tree_size=x", 400, app.CodeInvalidTreeSize},
			{"/v1/chain/proof/inclusion?event_id=evt-nope", 404, "event_not_found"},
			{"/v1/chain/proof/consistency", 400, app.CodeInvalidTreeSize},
			{"/v1/chain/proof/consistency?first=6&second=5", 400, app.CodeInvalidTreeSize},
			{"/v1/chain/proof/consistency?first=1&second=99", 400, app.CodeInvalidTreeSize},
			{"/v1/chain/proof/consistency?first=-1", 400, app.CodeInvalidTreeSize},
			{"/v1/chain/blocks?limit=0", 400, app.CodeInvalidLimit},
			{"/v1/chain/blocks?limit=1001", 400, app.CodeInvalidLimit},
			{"/v1/chain/blocks?cursor=-1", 400, app.CodeInvalidCursor},
			{"/v1/chain/export?from=5&to=4", 400, app.CodeInvalidRange},
			{"/v1/chain/export?to=14", 400, app.CodeInvalidRange},
			{"/v1/chain/export?from=a", 400, app.CodeInvalidRange},
		} {
			wantProblem(t, e.do("GET", tc.path, c.token, nil), tc.status, tc.code)
		}

		// Another account's event is not found; its chain is its own.
		other := newIntegChain(e, "other@example.com")
		other.addN(t, 2)
		wantProblem(t, e.do("GET", "/v1/chain/proof/inclusion?event_id="+c.ids[0], other.token, nil), 404, "event_not_found")
		// An event without raw (stored null) exports and verifies too.
		if r := e.do("POST", "/v1/events", other.token, map[string]any{"event_id": "evt-noraw", "event_type": "note", "sequence": 2, "prev_hash": other.tip}); r.Status != 200 {
			t.Fatalf("append without raw: %d %s", r.Status, r.Body)
		}
		if v := other.verifyChain(t); v["valid"] != true || num(v["blocks"]) != 2 || num(v["tree_size"]) != 3 { // sizes 2 (sealed by the inclusion call) and 3
			t.Fatalf("other account: %v", v)
		}
		if rep, err := verify.VerifyExport(bytes.NewReader(other.export(t, "")), pub); err != nil || rep.Events != 3 || rep.SignedSize != 3 {
			t.Fatalf("other account export: %v %+v", err, rep)
		}

		// An empty chain verifies, has no blocks and exports to nothing.
		empty := newIntegChain(e, "empty@example.com")
		if v := empty.verifyChain(t); v["valid"] != true || num(v["blocks"]) != 0 || v["first_bad_block"] != nil || v["reason"] != nil {
			t.Fatalf("empty chain: %v", v)
		}
		if rep, err := verify.VerifyExport(bytes.NewReader(empty.export(t, "")), pub); err != nil || rep.Events != 0 {
			t.Fatalf("empty export: %v %+v", err, rep)
		}
	})
}

// buildSignedChain appends: 2 unsigned events, a machine key (its
// machine.signing_key event at 2), 3 signed events (3–5) and one from an
// unkeyed machine (6), a block, a key rotation (its event at 7), 3 signed
// events with the new key (8–10), 1 more unsigned one. 12 events, blocks at
// 7 and 12.
func buildSignedChain(t *testing.T, e *env, email string) *integChain {
	c := newIntegChain(e, email)
	c.addN(t, 2)
	k1 := c.registerKey(t, "m1")
	for range 3 {
		c.add(t, "m1", k1)
	}
	c.add(t, "m2", nil)
	c.verifyChain(t)
	k2 := c.registerKey(t, "m1")
	for range 3 {
		c.add(t, "m1", k2)
	}
	c.addN(t, 1)
	c.verifyChain(t)
	return c
}

func TestIntegrityExportVerifiesOffline(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		c := buildSignedChain(t, e, "export@example.com")
		pub := e.app.ServicePublicKey()

		full := c.export(t, "")
		rep, err := verify.VerifyExport(bytes.NewReader(full), pub)
		if err != nil {
			t.Fatalf("full export rejected: %v\n%s", err, full)
		}
		if rep.Events != 12 || rep.TreeSize != 12 || rep.SignedSize != 12 || rep.Checkpoints != 2 || rep.SignaturesVerified != 6 ||
			rep.FirstSequence != 0 || rep.LastSequence != 11 || rep.LastBlock != 1 {
			t.Fatalf("report %+v", rep)
		}
		if rep.RootHash != verify.Hash(c.reference(t).Hash()) {
			t.Fatalf("export root %s differs from the recomputation", rep.RootHash)
		}
		// A signed event still fails offline if its machine's key is withheld:
		// the machine_key lines are what the verifier checks against. Each
		// names the leaf it takes effect at: its registration's own event,
		// m1's first key after 2 events, its rotation after 7.
		var keyLeaves []int64
		for _, l := range exportLines[verify.ExportMachineKey](t, full, "machine_key") {
			keyLeaves = append(keyLeaves, l.EffectiveFromLeaf)
		}
		if !reflect.DeepEqual(keyLeaves, []int64{2, 7}) {
			t.Fatalf("machine_key lines take effect at leaves %v, want [2 7]", keyLeaves)
		}

		// A wrong service key is refused.
		otherPub, _, _ := ed25519.GenerateKey(nil)
		if _, err := verify.VerifyExport(bytes.NewReader(full), otherPub); !isKind(err, verify.KindServiceKey) {
			t.Fatalf("other service key: %v", err)
		}

		// Fragments verify against signed checkpoints.
		for _, tc := range []struct {
			query           string
			first, last     int64
			events          int64
			wantCheckpoints int64
		}{
			{"?from=2&to=9", 2, 8, 7, 2},   // no anchor block; the block of size 7 inside, 12 past the end
			{"?from=7", 7, 11, 5, 2},       // anchored on the block of size 7 exactly
			{"?from=9&to=12", 9, 11, 3, 2}, // anchored on size 7 through a consistency proof
			{"?from=0&to=4", 0, 3, 4, 1},   // the first block past the end covers the tail
			{"?from=12", -1, -1, 0, 1},     // nothing after the tip
			{"?from=5&to=5", -1, -1, 0, 1},
		} {
			body := c.export(t, tc.query)
			rep, err := verify.VerifyExport(bytes.NewReader(body), pub)
			if err != nil {
				t.Fatalf("fragment %s rejected: %v\n%s", tc.query, err, body)
			}
			if rep.Events != tc.events || rep.FirstSequence != tc.first || rep.LastSequence != tc.last || rep.Checkpoints != tc.wantCheckpoints ||
				len(rep.Gaps) != 0 || len(rep.Breaks) != 0 {
				t.Fatalf("fragment %s: %+v", tc.query, rep)
			}
			// The frontier names the event at leaf from-1, which the
			// verifier proved and linked the fragment to.
			if fs := exportLines[verify.ExportFrontier](t, body, "frontier"); len(fs) == 1 {
				f, last := fs[0], int64(fs[0].TreeSize)-1
				if f.LastLeafSequence == nil || *f.LastLeafSequence != last || f.LastLeafPayloadHash == nil || *f.LastLeafPayloadHash != c.hashes[last] {
					t.Fatalf("fragment %s: frontier's last leaf %v %v, want sequence %d %s", tc.query, f.LastLeafSequence, f.LastLeafPayloadHash, last, c.hashes[last])
				}
			} else if tc.query != "?from=0&to=4" {
				t.Fatalf("fragment %s: %d frontier lines", tc.query, len(fs))
			}
			if rep.SignedSize != rep.TreeSize {
				t.Fatalf("fragment %s: only %d of %d leaves signed", tc.query, rep.SignedSize, rep.TreeSize)
			}
		}
	})
}

// exportLines decodes the export's lines of one kind.
func exportLines[T any](t *testing.T, export []byte, kind string) []T {
	t.Helper()
	var out []T
	for _, l := range bytes.Split(bytes.TrimSpace(export), []byte("\n")) {
		var line map[string]json.RawMessage
		if err := json.Unmarshal(l, &line); err != nil {
			t.Fatal(err)
		}
		if string(line["kind"]) != `"`+kind+`"` {
			continue
		}
		var v T
		if err := json.Unmarshal(line[kind], &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func isKind(err error, k verify.Kind) bool {
	var ve *verify.Error
	return errors.As(err, &ve) && ve.Kind == k
}

// TestIntegrityTamperDetected changes the database behind the service's back
// and expects GET /v1/chain/verify to name the first block covering the
// change and the offline verifier, on a fresh export, the right sequence.
func TestIntegrityTamperDetected(t *testing.T) {
	type tamper struct {
		name      string
		apply     func(t *testing.T, e *env, c *integChain)
		wantBlock int64
		kind      verify.Kind
		seq       int64
		block     int64 // of the offline failure; -1 for an event failure
		// findings are the offline report's Gaps and Breaks (nil: none).
		findings func(t *testing.T, e *env, c *integChain) ([]verify.Gap, []verify.Break)
	}
	ctx := context.Background()
	exec := func(t *testing.T, e *env, q string, args ...any) {
		t.Helper()
		settleTail(t, e.store)
		if _, err := e.store.WriteDB().ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cases := []tamper{
		{"one byte of raw", func(t *testing.T, e *env, c *integChain) {
			exec(t, e, `UPDATE events SET raw = replace(raw, '"n":4', '"n":5') WHERE account = $1 AND sequence = 4`, accountOf(t, e.store, c.user))
		}, 0, verify.KindPayloadHash, 4, -1, nil},
		{"deleted row", func(t *testing.T, e *env, c *integChain) {
			exec(t, e, `DELETE FROM events WHERE account = $1 AND sequence = 8`, accountOf(t, e.store, c.user))
		}, 1, verify.KindGap, 8, -1, func(t *testing.T, e *env, c *integChain) ([]verify.Gap, []verify.Break) {
			after := int64(7)
			return []verify.Gap{{AfterSequence: &after, MissingFrom: 8, MissingTo: 8}}, nil
		}},
		// Events may now be stored in any sequence order (leaves in the
		// order they were stored) and links are judged in sequence order,
		// so sequences 3 and 2 at leaves 2 and 3 are no gap offline (it
		// was KindGap at 2): the links hold, and the swap is caught by
		// block 0's signed root, rebuilt in leaf order.
		{"swapped leaf positions", func(t *testing.T, e *env, c *integChain) {
			exec(t, e, `UPDATE events SET leaf_index = -1 WHERE account = $1 AND sequence = 2`, accountOf(t, e.store, c.user))
			exec(t, e, `UPDATE events SET leaf_index = 2 WHERE account = $1 AND sequence = 3`, accountOf(t, e.store, c.user))
			exec(t, e, `UPDATE events SET leaf_index = 3 WHERE account = $1 AND sequence = 2`, accountOf(t, e.store, c.user))
		}, 0, verify.KindMerkleRoot, -1, 0, nil},
		{"swapped sequences", func(t *testing.T, e *env, c *integChain) {
			exec(t, e, `UPDATE events SET sequence = -1 WHERE account = $1 AND sequence = 9`, accountOf(t, e.store, c.user))
			exec(t, e, `UPDATE events SET sequence = 9 WHERE account = $1 AND sequence = 10`, accountOf(t, e.store, c.user))
			exec(t, e, `UPDATE events SET sequence = 10 WHERE account = $1 AND sequence = -1`, accountOf(t, e.store, c.user))
		}, 1, verify.KindPayloadHash, 10, -1, nil},
		{"forged signature, payload_hash rewritten", func(t *testing.T, e *env, c *integChain) {
			ev, err := e.store.EventByID(ctx, nil, c.user, c.ids[5])
			if err != nil {
				t.Fatal(err)
			}
			_, forger, _ := ed25519.GenerateKey(nil)
			canon, _ := jcs.Transform(ev.Raw)
			sig := base64.StdEncoding.EncodeToString(ed25519.Sign(forger, canon))
			ts := ev.TS
			h, err := verify.PayloadHash(&verify.HashedEvent{EventID: ev.EventID, EventType: ev.EventType, Sequence: ev.Sequence,
				PrevHash: ev.PrevHash, Raw: ev.Raw, Decision: ev.Decision, Tool: ev.Tool, MachineID: ev.MachineID,
				ParentID: ev.ParentID, TS: &ts, Signature: &sig, SignatureKey: ev.SignatureKey})
			if err != nil {
				t.Fatal(err)
			}
			exec(t, e, `UPDATE events SET signature = $3, payload_hash = $4 WHERE account = $1 AND sequence = $2`, accountOf(t, e.store, c.user), 5, sig, h)
		}, 0, verify.KindSignature, 5, -1, func(t *testing.T, e *env, c *integChain) ([]verify.Gap, []verify.Break) {
			// The rewritten payload_hash breaks the link into 6; the
			// signature, an integrity failure, is still what is returned.
			ev, err := e.store.EventByID(ctx, nil, c.user, c.ids[5])
			if err != nil {
				t.Fatal(err)
			}
			return nil, []verify.Break{{Sequence: 6, EventID: c.ids[6], ExpectedPrevHash: &ev.PayloadHash, FoundPrevHash: &c.hashes[5]}}
		}},
	}
	eachEnv(t, func(t *testing.T, e *env) {
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c := buildSignedChain(t, e, fmt.Sprintf("tamper-%d@example.com", i)) // blocks 0 (size 7) and 1 (size 12)
				c.addN(t, 2)
				if v := c.verifyChain(t); v["valid"] != true || num(v["blocks"]) != 3 { // block 2 (size 14)
					t.Fatalf("before tamper: %v", v)
				}
				tc.apply(t, e, c)

				v := c.verifyChain(t)
				if v["valid"] != false || v["first_bad_block"] == nil || num(v["first_bad_block"]) != tc.wantBlock || v["reason"] != "merkle_root" {
					t.Fatalf("verify after tamper: %v", v)
				}
				if num(v["blocks"]) != tc.wantBlock {
					t.Fatalf("blocks verified before the bad one: %v", v["blocks"])
				}
				rep, err := verify.VerifyExport(bytes.NewReader(c.export(t, "")), e.app.ServicePublicKey())
				var ve *verify.Error
				if !errors.As(err, &ve) || ve.Kind != tc.kind || ve.Sequence != tc.seq || ve.Block != tc.block {
					t.Fatalf("offline verifier: %v, want %s at sequence %d block %d", err, tc.kind, tc.seq, tc.block)
				}
				wantGaps, wantBreaks := []verify.Gap{}, []verify.Break{}
				if tc.findings != nil {
					g, b := tc.findings(t, e, c)
					wantGaps, wantBreaks = append(wantGaps, g...), append(wantBreaks, b...)
				}
				if !reflect.DeepEqual(rep.Gaps, wantGaps) || !reflect.DeepEqual(rep.Breaks, wantBreaks) {
					t.Fatalf("offline report: gaps %+v breaks %+v, want %+v %+v", rep.Gaps, rep.Breaks, wantGaps, wantBreaks)
				}
			})
		}

		t.Run("row before a fragment deleted", func(t *testing.T) {
			// Leaf 8's row is gone: the fragment from leaf 9 is still
			// whole and verifies, its frontier without the last leaf (the
			// full export shows the gap).
			c := buildSignedChain(t, e, "fragment-seed-gone@example.com")
			exec(t, e, `DELETE FROM events WHERE account = $1 AND sequence = 8`, accountOf(t, e.store, c.user))
			body := c.export(t, "?from=9&to=12")
			f := exportLines[verify.ExportFrontier](t, body, "frontier")
			if len(f) != 1 || f[0].LastLeafSequence != nil || f[0].LastLeafPayloadHash != nil {
				t.Fatalf("frontier %+v", f)
			}
			if rep, err := verify.VerifyExport(bytes.NewReader(body), e.app.ServicePublicKey()); err != nil || rep.Events != 3 || len(rep.Gaps) != 0 {
				t.Fatalf("fragment: %v %+v", err, rep)
			}
			_, err := verify.VerifyExport(bytes.NewReader(c.export(t, "")), e.app.ServicePublicKey())
			var ve *verify.Error
			if !errors.As(err, &ve) || ve.Kind != verify.KindGap || ve.Sequence != 8 {
				t.Fatalf("full export: %v", err)
			}
		})
		t.Run("fragment's first link rewritten", func(t *testing.T) {
			// Sequence 9's prev_hash (and payload_hash, to match) rewritten:
			// a fragment from leaf 9 judges the link against leaf 8, named
			// by its frontier, and lists the break; the changed leaf fails
			// block 1's root first.
			c := buildSignedChain(t, e, "fragment-link@example.com")
			ev, err := e.store.EventByID(ctx, nil, c.user, c.ids[9])
			if err != nil {
				t.Fatal(err)
			}
			ts := ev.TS
			h, err := verify.PayloadHash(&verify.HashedEvent{EventID: ev.EventID, EventType: ev.EventType, Sequence: ev.Sequence,
				PrevHash: &c.hashes[3], Raw: ev.Raw, Decision: ev.Decision, Tool: ev.Tool, MachineID: ev.MachineID,
				ParentID: ev.ParentID, TS: &ts, Signature: ev.Signature, SignatureKey: ev.SignatureKey})
			if err != nil {
				t.Fatal(err)
			}
			exec(t, e, `UPDATE events SET prev_hash = $3, payload_hash = $4 WHERE account = $1 AND sequence = $2`, accountOf(t, e.store, c.user), 9, c.hashes[3], h)
			rep, err := verify.VerifyExport(bytes.NewReader(c.export(t, "?from=9&to=12")), e.app.ServicePublicKey())
			var ve *verify.Error
			if !errors.As(err, &ve) || ve.Kind != verify.KindMerkleRoot || ve.Block != 1 {
				t.Fatalf("offline verifier: %v", err)
			}
			want := []verify.Break{
				{Sequence: 9, EventID: c.ids[9], ExpectedPrevHash: &c.hashes[8], FoundPrevHash: &c.hashes[3]},
				{Sequence: 10, EventID: c.ids[10], ExpectedPrevHash: &h, FoundPrevHash: &c.hashes[9]},
			}
			if !reflect.DeepEqual(rep.Breaks, want) || len(rep.Gaps) != 0 {
				t.Fatalf("offline report: gaps %+v breaks %+v", rep.Gaps, rep.Breaks)
			}
		})
		t.Run("block note forged", func(t *testing.T) {
			c := buildSignedChain(t, e, "forged-note@example.com")
			exec(t, e, `UPDATE chain_blocks SET note = $2 WHERE user_id = $1 AND block_index = 1`, c.user,
				bytes.Replace(mustBlockNote(t, e, c.user, 1), []byte("\n12\n"), []byte("\n11\n"), 1))
			v := c.verifyChain(t)
			if v["valid"] != false || num(v["first_bad_block"]) != 1 || v["reason"] != "checkpoint_signature" {
				t.Fatalf("verify after forging a note: %v", v)
			}
			_, err := verify.VerifyExport(bytes.NewReader(c.export(t, "")), e.app.ServicePublicKey())
			var ve *verify.Error
			if !errors.As(err, &ve) || ve.Kind != verify.KindCheckpointSignature || ve.Block != 1 {
				t.Fatalf("offline verifier: %v", err)
			}
		})
		t.Run("stored tree rewritten", func(t *testing.T) {
			c := buildSignedChain(t, e, "tree-rows@example.com")
			// Every stored hash zeroed, each row keeping its length (a run of
			// up to four hashes on SQLite, one hash on PostgreSQL).
			zeroed := `decode(repeat('00', length(hash)), 'hex')`
			if e.store.Dialect == store.SQLite {
				zeroed = `zeroblob(length(hash))`
			}
			exec(t, e, `UPDATE merkle_hashes SET hash = `+zeroed+` WHERE account = $1`, accountOf(t, e.store, c.user))
			v := c.verifyChain(t)
			if v["valid"] != false || num(v["first_bad_block"]) != 0 || v["reason"] != "stored_tree" {
				t.Fatalf("verify after rewriting the stored tree: %v", v)
			}
		})
		t.Run("stored tree truncated", func(t *testing.T) {
			// Every row loses its last 8 bytes: a hash read from it is 24
			// bytes, neither a hash nor missing. On PostgreSQL a row is one
			// hash, so block 0 (size 7) reads a cut one. On SQLite the
			// single appends' rows are stored behind them as runs of up to
			// four, split where the writer happened to store them
			// (store/merkle_behind_sqlite.go): the first bad block is the
			// first whose root reads the last hash of a run, and one must.
			c := buildSignedChain(t, e, "tree-cut@example.com")
			exec(t, e, `UPDATE merkle_hashes SET hash = substr(hash, 1, length(hash) - 8) WHERE account = $1`, accountOf(t, e.store, c.user))
			v := c.verifyChain(t)
			wantBlock := int64(0)
			if e.store.Dialect == store.SQLite {
				wantBlock = -1
				for b, size := range []int64{7, 12} {
					if _, err := merkle.Root(size, e.store.HashReader(ctx, nil, c.user)); errors.Is(err, store.ErrMalformedHash) {
						wantBlock = int64(b)
						break
					}
				}
				if wantBlock < 0 {
					t.Fatal("no block's root reads a cut hash")
				}
				if d, _ := v["detail"].(string); !strings.Contains(d, "malformed") {
					t.Fatalf("verify after truncating the stored tree's rows: %v, want a malformed hash", v)
				}
			}
			if v["valid"] != false || num(v["first_bad_block"]) != wantBlock || v["reason"] != "stored_tree" {
				t.Fatalf("verify after truncating the stored tree's rows: %v", v)
			}
		})
	})
}

func mustBlockNote(t *testing.T, e *env, user string, index int64) []byte {
	t.Helper()
	var note []byte
	if err := e.store.DB().QueryRowContext(context.Background(), `SELECT note FROM chain_blocks WHERE user_id = $1 AND block_index = $2`, user, index).Scan(&note); err != nil {
		t.Fatal(err)
	}
	return note
}

// TestIntegrityTwoReplicas appends and seals from two replicas over one
// PostgreSQL database at once: the stored tree must equal the tree recomputed
// from the events, block indexes stay unique and the chain verifies.
func TestIntegrityTwoReplicas(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	e1 := newEnv(t, dsn, nil)
	e2 := newEnv(t, dsn, nil)
	user, token := e1.account("replicas@example.com")
	const workers, perWorker = 4, 25

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		e := []*env{e1, e2}[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := e.srv.Client()
			for i := 0; i < perWorker; {
				tipResp, err := getJSON(client, e.srv.URL+"/v1/chain/tip", token)
				if err != nil {
					errs <- err
					return
				}
				seq := int64(0)
				if tipResp["sequence"] != nil {
					seq = num(tipResp["sequence"]) + 1
				}
				body, _ := json.Marshal(map[string]any{"event_id": fmt.Sprintf("evt-w%d-%d", w, i), "event_type": "tool_call",
					"sequence": seq, "prev_hash": tipResp["payload_hash"], "raw": map[string]any{"w": w, "i": i}})
				req, _ := http.NewRequest("POST", e.srv.URL+"/v1/events", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-API-Key", token)
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					i++
				case 409: // lost the race for this sequence: retry on the new tip
				default:
					errs <- fmt.Errorf("append: %d", resp.StatusCode)
					return
				}
				if i%5 == 0 { // seal concurrently with the other replica's appends
					if _, err := getJSON(client, e.srv.URL+"/v1/chain/verify", token); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	v := e2.do("GET", "/v1/chain/verify", token, nil).JSON(t)
	if v["valid"] != true || num(v["tree_size"]) != workers*perWorker {
		t.Fatalf("verify: %v", v)
	}
	ctx := context.Background()
	ref := testonly.New(rfc6962.DefaultHasher)
	if err := e1.store.EventsFrom(ctx, user, 0, func(ev *store.Event) error {
		b, err := verify.HashBytes(ev.PayloadHash)
		ref.AppendData(b)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	p := e1.do("GET", "/v1/chain/proof/consistency?first=0", token, nil).JSON(t)
	if got := b64(t, p["second_root"]); !bytes.Equal(got, ref.Hash()) {
		t.Fatalf("stored root %x, recomputed from the events %x", got, ref.Hash())
	}
	var blocks, distinct, maxIndex int64
	if err := e1.store.DB().QueryRowContext(ctx, `SELECT count(*), count(DISTINCT block_index), max(block_index) FROM chain_blocks WHERE user_id = $1`, user).
		Scan(&blocks, &distinct, &maxIndex); err != nil {
		t.Fatal(err)
	}
	if blocks != distinct || maxIndex != blocks-1 || blocks < 2 {
		t.Fatalf("blocks %d, distinct indexes %d, max index %d", blocks, distinct, maxIndex)
	}
	var rows int64
	if err := e1.store.DB().QueryRowContext(ctx, `SELECT coalesce(sum(length(hash)), 0) / 32 FROM merkle_hashes WHERE account = $1`, accountOf(t, e1.store, user)).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if want := storedHashCount(workers * perWorker); rows != want {
		t.Fatalf("stored Merkle hashes %d, want %d", rows, want)
	}
}

// storedHashCount is tlog.StoredHashCount: 2n minus the set bits of n.
func storedHashCount(n int64) int64 {
	var ones int64
	for x := uint64(n); x != 0; x &= x - 1 {
		ones++
	}
	return 2*n - ones
}

func getJSON(client *http.Client, url, token string) (map[string]any, error) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-API-Key", token)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	var m map[string]any
	return m, json.NewDecoder(resp.Body).Decode(&m)
}
