package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// history is a client's record as it would import it: events at chosen
// sequences, each with the ts it sends, so that it knows every payload_hash.
type history struct {
	events map[int64]map[string]any
	hashes map[int64]string
}

// newHistory builds the events at seqs (in increasing order), each linked to
// the event just below it when that one exists, except the links in bad
// (a garbage string, a wrong hash or null, as an import of a damaged record
// has).
func newHistory(t *testing.T, seqs []int64, bad map[int64]*string) *history {
	t.Helper()
	h := &history{events: map[int64]map[string]any{}, hashes: map[int64]string{}}
	ts := "2026-11-20T08:00:00.000000+00:00"
	for _, seq := range seqs {
		var prev *string
		if p, ok := h.hashes[seq-1]; ok {
			prev = &p
		}
		if b, ok := bad[seq]; ok {
			prev = b
		}
		id := fmt.Sprintf("evt-h%d", seq)
		raw := json.RawMessage(fmt.Sprintf(`{"n":%d}`, seq))
		hash, err := verify.PayloadHash(&verify.HashedEvent{EventID: id, EventType: "tool_call", Sequence: seq, PrevHash: prev, Raw: raw, TS: &ts})
		if err != nil {
			t.Fatal(err)
		}
		h.hashes[seq] = hash
		h.events[seq] = map[string]any{"event_id": id, "event_type": "tool_call", "sequence": seq, "prev_hash": prev, "raw": raw, "ts": ts}
	}
	return h
}

// wantContinuity is what links and gaps in sequence order must report for
// the sequences present and their prev_hash (the definitions of SPEC.md
// "Heal records", computed apart, by sorting).
func wantContinuity(events map[int64]map[string]any, hashes map[int64]string) ([]verify.Gap, []verify.Break) {
	var seqs []int64
	for s := range events {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	gaps, breaks := []verify.Gap{}, []verify.Break{}
	for i, s := range seqs {
		prev, _ := events[s]["prev_hash"].(*string)
		switch {
		case i == 0 && s > 0:
			gaps = append(gaps, verify.Gap{MissingFrom: 0, MissingTo: s - 1})
		case i == 0 && prev != nil:
			breaks = append(breaks, verify.Break{Sequence: s, EventID: events[s]["event_id"].(string), FoundPrevHash: prev})
		case i > 0 && s > seqs[i-1]+1:
			after := seqs[i-1]
			gaps = append(gaps, verify.Gap{AfterSequence: &after, MissingFrom: after + 1, MissingTo: s - 1})
		case i > 0 && (prev == nil || *prev != hashes[seqs[i-1]]):
			expected := hashes[seqs[i-1]]
			breaks = append(breaks, verify.Break{Sequence: s, EventID: events[s]["event_id"].(string), ExpectedPrevHash: &expected, FoundPrevHash: prev})
		}
	}
	return gaps, breaks
}

// Batch rows are checked for shape only (SPEC.md, CONTRACT.md "Batch"): rows
// at 10, 3 and 7 on an empty account, one with a prev_hash that is no hash,
// are all stored, the tip is the highest sequence, and a resend skips all
// three; a single append then continues from the tip.
func TestBatchRowsAreCheckedForShapeOnly(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("shape@example.com")
		rows := []any{ev("evt-10", 10, nil), ev("evt-3", 3, "garbage"), ev("evt-7", 7, nil)}
		res := e.do("POST", "/v1/events/batch", key, map[string]any{"events": rows}).JSON(t)
		if res["ingested"] != float64(3) || res["skipped"] != float64(0) || len(res["errors"].([]any)) != 0 {
			t.Fatalf("batch at 10, 3, 7: %v", res)
		}
		tip := e.tip(key)
		if tip["sequence"] != float64(10) || tip["event_id"] != "evt-10" || tip["event_count"] != float64(3) {
			t.Fatalf("tip %v, want sequence 10 of 3 events", tip)
		}
		res = e.do("POST", "/v1/events/batch", key, map[string]any{"events": rows}).JSON(t)
		if res["ingested"] != float64(0) || res["skipped"] != float64(3) || len(res["errors"].([]any)) != 0 {
			t.Fatalf("resend: %v", res)
		}
		stored := e.do("GET", "/v1/events/evt-3", key, nil).JSON(t)["event"].(map[string]any)
		if stored["prev_hash"] != "garbage" {
			t.Fatalf("prev_hash stored as %v, want as sent", stored["prev_hash"])
		}
		e.appendOK(key, ev("evt-11", 11, tip["payload_hash"]))
		// An unused sequence below the tip is still taken; a used one is not.
		res = e.do("POST", "/v1/events/batch", key, map[string]any{"events": []any{ev("evt-4", 4, nil), ev("evt-x", 7, nil)}}).JSON(t)
		errs := res["errors"].([]any)
		if res["ingested"] != float64(1) || len(errs) != 1 || errs[0].(map[string]any)["code"] != "sequence_taken" ||
			errs[0].(map[string]any)["index"] != float64(1) {
			t.Fatalf("rows at 4 and a taken 7: %v", res)
		}
		if tip := e.tip(key); tip["sequence"] != float64(11) || tip["event_count"] != float64(5) {
			t.Fatalf("tip after a row below it: %v", tip)
		}
	})
}

// A shuffled history with gaps and bad links, imported in several batches and
// continued with single appends, is a record like any other: the tree holds
// every event in stored order, the chain verifies, proofs of rows stored
// below the tip verify, the export verifies offline with exactly the gaps and
// breaks a sort of the history gives, heal scans the same findings with the
// root ok, writes one repair for each, and skips them all the next time.
func TestImportedHistoryVerifiesAndHeals(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("import@example.com")
		r := rand.New(rand.NewPCG(17, 26))
		var seqs []int64
		for s := int64(0); s < 90; s++ {
			if s != 13 && (s < 27 || s > 29) && s != 44 && s != 0 {
				seqs = append(seqs, s)
			}
		}
		hist := newHistory(t, seqs, map[int64]*string{20: ptr("garbage"), 51: ptr("sha256:" + fmt.Sprintf("%064x", 51)), 70: nil})
		shuffled := slices.Clone(seqs)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		var storedOrder []int64 // sequences in leaf order
		for len(shuffled) > 0 {
			n := min(len(shuffled), 5+r.IntN(25))
			part := shuffled[:n]
			shuffled = shuffled[n:]
			var rows []any
			for _, s := range part {
				rows = append(rows, hist.events[s])
			}
			res := e.do("POST", "/v1/events/batch", key, map[string]any{"events": rows}).JSON(t)
			if res["ingested"] != float64(n) || len(res["errors"].([]any)) != 0 {
				t.Fatalf("import batch of %d: %v", n, res)
			}
			sorted := slices.Clone(part)
			slices.Sort(sorted)
			storedOrder = append(storedOrder, sorted...)
		}
		// Single appends on top of the imported tip.
		for i := range 3 {
			tip := e.tip(key)
			seq := int64(tip["sequence"].(float64)) + 1
			res := e.appendOK(key, ev(fmt.Sprintf("evt-top%d", i), seq, tip["payload_hash"]))
			got := res["event"].(map[string]any)
			hist.events[seq] = map[string]any{"event_id": got["event_id"], "prev_hash": ptr(tip["payload_hash"].(string))}
			hist.hashes[seq] = got["payload_hash"].(string)
			storedOrder = append(storedOrder, seq)
		}
		wantGaps, wantBreaks := wantContinuity(hist.events, hist.hashes)
		if len(wantGaps) != 4 || len(wantBreaks) < 3 {
			t.Fatalf("the history should hold 4 gaps and 3 breaks at least: %v %v", wantGaps, wantBreaks)
		}

		// The tree holds every event in stored order, and the chain verifies.
		ref := rfc6962.DefaultHasher
		var leaves [][]byte
		for _, s := range storedOrder {
			b, _ := verify.HashBytes(hist.hashes[s])
			leaves = append(leaves, b)
		}
		size := int64(len(leaves))
		if v := e.do("GET", "/v1/chain/verify", key, nil).JSON(t); v["valid"] != true || num(v["tree_size"]) != size {
			t.Fatalf("chain verify: %v", v)
		}
		// Inclusion of a row stored below the tip (sequence 1 was in a later batch than higher ones).
		leaf := slices.Index(storedOrder, 1)
		p := e.do("GET", fmt.Sprintf("/v1/chain/proof/inclusion?event_id=evt-h1&tree_size=%d", size), key, nil).JSON(t)
		if num(p["leaf_index"]) != int64(leaf) {
			t.Fatalf("evt-h1 at leaf %v, stored at %d", p["leaf_index"], leaf)
		}
		if err := proof.VerifyInclusion(ref, uint64(leaf), uint64(size), ref.HashLeaf(leaves[leaf]), b64s(t, p["proof"]), b64(t, p["root_hash"])); err != nil {
			t.Fatalf("inclusion of a row stored below the tip: %v", err)
		}

		// The export verifies offline: integrity whole, continuity as computed apart.
		exp := e.do("GET", "/v1/chain/export", key, nil).Body
		rep, err := verify.VerifyExport(bytes.NewReader(exp), e.app.ServicePublicKey())
		if rep.TreeSize != uint64(size) || rep.SignedSize != uint64(size) || rep.Events != size {
			t.Fatalf("export report %+v", rep)
		}
		if !reflect.DeepEqual(rep.Gaps, wantGaps) || !reflect.DeepEqual(rep.Breaks, wantBreaks) {
			t.Fatalf("export findings:\n gaps %v\n breaks %v\nwant\n gaps %v\n breaks %v", rep.Gaps, rep.Breaks, wantGaps, wantBreaks)
		}
		if !isKind(err, verify.KindGap) || !rep.Whole { // the first finding in sequence order is the gap at 0
			t.Fatalf("export verification: %v (whole %v), want the first finding, a gap", err, rep.Whole)
		}
		// A part of the tree lists its gaps (a missing sequence may sit at a
		// leaf outside it) and fails on its breaks only.
		part, err := verify.VerifyExport(bytes.NewReader(e.do("GET", "/v1/chain/export?from=20&to=60", key, nil).Body), e.app.ServicePublicKey())
		if part.Whole || part.Events != 40 || (err != nil && !isKind(err, verify.KindPrevHash)) {
			t.Fatalf("export of leaves 20..60: %v, %+v", err, part)
		}

		// Heal scans the same findings, with the root in leaf order ok.
		scan := e.do("POST", "/v1/heal/scan", key, map[string]any{}).JSON(t)
		var sr api.HealScan
		remarshal(t, scan, &sr)
		healGaps, healBreaks := make([]api.HealGap, len(wantGaps)), make([]api.HealBreak, len(wantBreaks))
		for i, g := range wantGaps {
			healGaps[i] = api.HealGap(g)
		}
		for i, b := range wantBreaks {
			healBreaks[i] = api.HealBreak(b)
		}
		if sr.MerkleRootStatus != "ok" || sr.TotalEvents != size || !reflect.DeepEqual(sr.Gaps, healGaps) || !reflect.DeepEqual(sr.Breaks, healBreaks) {
			t.Fatalf("heal scan: %+v (detail %v)\nwant gaps %v breaks %v", sr, ptrText(sr.MerkleRootDetail), healGaps, healBreaks)
		}
		run := e.do("POST", "/v1/heal/run", key, map[string]any{"dry_run": false}).JSON(t)
		findings := float64(len(wantGaps) + len(wantBreaks))
		if run["written"] != findings || run["skipped"] != float64(0) || run["merkle_root_status"] != "ok" {
			t.Fatalf("heal run: %v", run)
		}
		again := e.do("POST", "/v1/heal/run", key, map[string]any{"dry_run": false}).JSON(t)
		if again["written"] != float64(0) || again["skipped"] != findings {
			t.Fatalf("second heal run: %v", again)
		}
		// The repairs went on at the tip; the record still verifies.
		if v := e.do("GET", "/v1/chain/verify", key, nil).JSON(t); v["valid"] != true || num(v["tree_size"]) != size+int64(findings) {
			t.Fatalf("chain verify after heal: %v", v)
		}
		rep, _ = verify.VerifyExport(bytes.NewReader(e.do("GET", "/v1/chain/export", key, nil).Body), e.app.ServicePublicKey())
		if rep.TreeSize != uint64(size)+uint64(findings) || rep.SignedSize != rep.TreeSize || !reflect.DeepEqual(rep.Gaps, wantGaps) {
			t.Fatalf("export after heal: %+v", rep)
		}
	})
}

func remarshal(t *testing.T, from, to any) {
	t.Helper()
	b, err := json.Marshal(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, to); err != nil {
		t.Fatal(err)
	}
}

// The checks run in CONTRACT.md's order: an account over its daily quota gets
// 429 daily_quota_exceeded whatever it sends — a stale prev_hash, a bad shape,
// a body that is not JSON, a resend, a batch of rows all refused — while a
// body over the size limits is still 413 and nothing is written.
func TestOverTheQuotaEveryAppendIs429(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.DailyEventQuota = 2 })
		_, key := e.account("order@example.com")
		first := e.appendOK(key, ev("evt-0", 0, nil))
		e.appendOK(key, ev("evt-1", 1, hashOf(first)))
		for name, req := range map[string]struct {
			path string
			body any
		}{
			"stale prev_hash":     {"/v1/events", ev("evt-2", 2, hashOf(first))},
			"missing event_type":  {"/v1/events", map[string]any{"event_id": "evt-2", "sequence": 2}},
			"sequence over 2^52":  {"/v1/events", ev("evt-2", math.MaxInt64, nil)},
			"payload_hash sent":   {"/v1/events", ev("evt-2", 2, nil, "payload_hash", hashOf(first))},
			"a resend":            {"/v1/events", ev("evt-0", 0, nil)},
			"not JSON":            {"/v1/events", `{"event_id":`},
			"batch of bad rows":   {"/v1/events/batch", map[string]any{"events": []any{map[string]any{"event_id": "evt-2"}}}},
			"batch resent":        {"/v1/events/batch", map[string]any{"events": []any{ev("evt-0", 0, nil)}}},
			"batch not an object": {"/v1/events/batch", `[1,2]`},
		} {
			wantProblem(t, e.do("POST", req.path, key, req.body), 429, "daily_quota_exceeded")
			if tip := e.tip(key); tip["event_count"] != float64(2) {
				t.Fatalf("%s: %v", name, tip)
			}
		}
		big := make([]any, 501)
		for i := range big {
			big[i] = ev(fmt.Sprintf("evt-b%d", i), int64(i), nil)
		}
		wantProblem(t, e.do("POST", "/v1/events/batch", key, map[string]any{"events": big}), 413, "batch_too_large")
	})
}

// Client sequences above 2^52 are refused with 422 (CONTRACT.md "Batch"),
// single or batch; 2^52 itself is a client's to use, and the events the
// service numbers — a revocation, a gated tool call, an event appended at
// the tip (POST /v1/events/append), the MCP record_event tool over /v1/mcp —
// still go on after it.
func TestClientSequencesStopAt2To52(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("big@example.com")
		for _, seq := range []int64{domain.MaxClientSequence + 1, math.MaxInt64} {
			m := wantProblem(t, e.do("POST", "/v1/events", key, ev("evt-big", seq, nil)), 422, "validation_error")
			if errs := m["errors"].([]any); errs[0].(map[string]any)["field"] != "sequence" {
				t.Fatalf("sequence %d: %v", seq, m)
			}
		}
		res := e.do("POST", "/v1/events/batch", key, map[string]any{"events": []any{
			ev("evt-max", domain.MaxClientSequence, nil), ev("evt-over", domain.MaxClientSequence+1, nil), ev("evt-top", math.MaxInt64, nil)}}).JSON(t)
		errs := res["errors"].([]any)
		if res["ingested"] != float64(1) || len(errs) != 2 || errs[0].(map[string]any)["field"] != "sequence" || errs[1].(map[string]any)["index"] != float64(2) {
			t.Fatalf("batch around 2^52: %v", res)
		}
		if tip := e.tip(key); tip["sequence"] != float64(domain.MaxClientSequence) {
			t.Fatalf("tip %v", tip)
		}
		expires := e.clock.Now().Add(time.Hour).Format(time.RFC3339)
		g := e.grant(key, map[string]any{"subagent": "w", "expires_at": expires, "max_tool_calls": 5})
		if r := e.do("POST", "/v1/grants/"+grantIDOf(g)+"/revoke", key, map[string]any{"subagent": "w"}); r.Status != 200 {
			t.Fatalf("revoke after a tip at 2^52: %d %s", r.Status, r.Body)
		}
		if tip := e.tip(key); tip["sequence"] != float64(domain.MaxClientSequence+2) {
			t.Fatalf("the service's events after 2^52: tip %v", tip)
		}
		// A gated tool call (the hooks' and the MCP proxy's route) sends no
		// sequence: the service numbers it above the tip, cap or not.
		got := e.toolCall(key, toolCallBody("evt-tc-above", "w", "bash"))
		if ev := got["event"].(map[string]any); ev["sequence"] != float64(domain.MaxClientSequence+3) {
			t.Fatalf("tool call above 2^52: %v", got)
		}
		// So does an event appended at the tip (the MCP record_event tool's,
		// the hooks' results): the caller chooses no sequence; a resend is
		// answered with it.
		body := map[string]any{"event_id": "evt-at-tip", "event_type": "tool_result", "raw": map[string]any{"ok": true},
			"ts": "2026-11-21T12:00:00+00:00"}
		atTip := e.do("POST", "/v1/events/append", key, body)
		if atTip.Status != 200 || atTip.JSON(t)["event"].(map[string]any)["sequence"] != float64(domain.MaxClientSequence+4) {
			t.Fatalf("append at the tip above 2^52: %d %s", atTip.Status, atTip.Body)
		}
		if r := e.do("POST", "/v1/events/append", key, body); r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" ||
			hashOf(r.JSON(t)) != hashOf(atTip.JSON(t)) {
			t.Fatalf("resend above 2^52: %d %s", r.Status, r.Body)
		}
		// The MCP record_event tool over /v1/mcp records through that route:
		// its event goes on at the tip, linked to the one before.
		call := e.mcpPost(key, "2025-06-18", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"record_event",`+
			`"arguments":{"event_type":"note","raw":{"k":1}}}}`)
		var rpc struct {
			Result struct {
				IsError           bool                      `json:"isError"`
				StructuredContent struct{ Event api.Event } `json:"structuredContent"`
			} `json:"result"`
		}
		if err := json.Unmarshal(call.Body, &rpc); err != nil || call.Status != 200 || rpc.Result.IsError {
			t.Fatalf("record_event over /v1/mcp above 2^52: %d %s", call.Status, call.Body)
		}
		if got := rpc.Result.StructuredContent.Event; got.Sequence != domain.MaxClientSequence+5 || got.PrevHash == nil ||
			*got.PrevHash != hashOf(atTip.JSON(t)) || got.Surface != "mcp" {
			t.Fatalf("record_event above 2^52: %+v, want sequence %d after %s", got, domain.MaxClientSequence+5, hashOf(atTip.JSON(t)))
		}
		// A client's own next sequence is still refused there.
		m := wantProblem(t, e.do("POST", "/v1/events", key, ev("evt-next", domain.MaxClientSequence+6, e.tip(key)["payload_hash"])), 422, "validation_error")
		if errs := m["errors"].([]any); errs[0].(map[string]any)["field"] != "sequence" {
			t.Fatalf("a client sequence above 2^52: %v", m)
		}
	})
}

// Events stored at the tip take leaves in sequence order (the leaf-order
// reads rely on it): heal reads two such rows whose leaf positions were
// swapped as a damaged tree, while rows a batch stored below the tip (the
// import test above) are not.
func TestHealFindsTipLeavesOutOfOrder(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("leaves@example.com")
		prev := any(nil)
		for i := range 6 {
			prev = hashOf(e.appendOK(key, ev(fmt.Sprintf("evt-%d", i), int64(i), prev)))
		}
		account := accountOf(t, e.store, user)
		for _, q := range []string{`UPDATE events SET leaf_index = -1 WHERE account = $1 AND sequence = 2`,
			`UPDATE events SET leaf_index = 2 WHERE account = $1 AND sequence = 3`,
			`UPDATE events SET leaf_index = 3 WHERE account = $1 AND sequence = 2`} {
			if _, err := e.store.WriteDB().Exec(q, account); err != nil {
				t.Fatal(err)
			}
		}
		var sr api.HealScan
		remarshal(t, e.do("POST", "/v1/heal/scan", key, map[string]any{}).JSON(t), &sr)
		if sr.MerkleRootStatus != "mismatch" || sr.MerkleRootDetail == nil || !strings.Contains(*sr.MerkleRootDetail, "before the leaf") {
			t.Fatalf("heal scan of swapped tip leaves: %+v (detail %v)", sr, ptrText(sr.MerkleRootDetail))
		}
	})
}
