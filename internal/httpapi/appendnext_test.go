package httpapi_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/verify"
)

// POST /v1/events/append: an event the service numbers at the tip
// (docs/decisions/record.md "Append at the tip").

// next is a body of POST /v1/events/append: an event without its place.
func next(id string, extra ...any) map[string]any {
	m := map[string]any{"event_id": id, "event_type": "tool_result"}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

// appendNextOK appends at the tip and returns the answer.
func (e *env) appendNextOK(key string, body map[string]any, headers ...string) map[string]any {
	e.t.Helper()
	r := e.do("POST", "/v1/events/append", key, body, headers...)
	if r.Status != http.StatusOK || r.Header.Get("Idempotent-Replayed") != "" {
		e.t.Fatalf("append at the tip %v: %d %v %s", body["event_id"], r.Status, r.Header, r.Body)
	}
	return r.JSON(e.t)
}

func eventOf(resp map[string]any) map[string]any { return resp["event"].(map[string]any) }

// The service places the event after whatever the tip is — nothing, a
// client's event with a gap, its own event — in the same append as POST
// /v1/events: the stored event, its hash, the quota, the surface, the stream
// frame, the Merkle leaf and the dedup advisory are an append's.
func TestAppendAtTipNumbersTheEvent(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("next@example.com")
		s := e.openStream(key)
		if name, _ := s.next(t); name != "ready" {
			t.Fatalf("first frame %s", name)
		}
		raw := map[string]any{"tool_input": map[string]any{"path": "/etc/hosts"}}
		r0 := e.appendNextOK(key, next("evt-n0", "event_type", "tool_call", "tool", "read_file", "decision", "allow", "raw", raw), "X-SVC-Surface", "hook")
		got := eventOf(r0)
		if r0["status"] != "appended" || got["sequence"] != float64(0) || got["prev_hash"] != nil || got["user_id"] != user ||
			got["surface"] != "hook" || got["api_key_id"] == nil || got["machine_sequence"] != float64(0) {
			t.Fatalf("first event: %v", r0)
		}
		ts := got["ts"].(string)
		want, _ := verify.PayloadHash(&verify.HashedEvent{EventID: "evt-n0", EventType: "tool_call", Sequence: 0,
			Raw: json.RawMessage(`{"tool_input":{"path":"/etc/hosts"}}`), Decision: ptr("allow"), Tool: ptr("read_file"), TS: &ts})
		if got["payload_hash"] != want {
			t.Fatalf("payload_hash %v, recomputed %v", got["payload_hash"], want)
		}
		if q := r0["quota"].(map[string]any); q["used_today"] != float64(1) {
			t.Fatalf("quota %v", q)
		}
		if name, data := s.next(t); name != "event" || !strings.Contains(data, `"evt-n0"`) || !strings.Contains(data, `"sequence":0`) {
			t.Fatalf("frame %s %s", name, data)
		}
		// After a client's event that left a gap, and after the service's own.
		h5 := hashOf(e.appendOK(key, ev("evt-c5", 5, hashOf(r0))))
		r6 := e.appendNextOK(key, next("evt-n6", "ts", "2026-11-21T13:00:00+02:00"))
		if g := eventOf(r6); g["sequence"] != float64(6) || g["prev_hash"] != h5 || g["ts"] != "2026-11-21T13:00:00+02:00" || g["surface"] != "rest" {
			t.Fatalf("after a client event at 5: %v", g)
		}
		e.grant(key, map[string]any{"subagent": "w", "expires_at": e.clock.Now().Add(time.Hour).Format(time.RFC3339), "max_tool_calls": 1})
		granted := e.tip(key)
		r8 := e.appendNextOK(key, next("evt-n8", "event_type", "tool_call", "tool", "read_file", "raw", raw))
		if g := eventOf(r8); g["sequence"] != float64(8) || g["prev_hash"] != granted["payload_hash"] {
			t.Fatalf("after the service's grant.created at %v: %v", granted["sequence"], g)
		}
		// The same read again, within the window: the advisory an append gives.
		if adv, ok := r8["dedup_advisory"].(map[string]any); !ok || adv["cached_from_event_id"] != "evt-n0" {
			t.Fatalf("dedup advisory: %v", r8["dedup_advisory"])
		}
		for _, id := range []string{"evt-c5", "evt-n6", "grant", "evt-n8"} {
			name, data := s.next(t)
			if name != "event" || (id != "grant" && !strings.Contains(data, `"`+id+`"`)) {
				t.Fatalf("frame for %s: %s %s", id, name, data)
			}
		}
		// The chain and the tree hold: each event is a leaf with a proof.
		if v := e.do("GET", "/v1/chain/verify", key, nil).JSON(t); v["valid"] != true {
			t.Fatalf("verify: %v", v)
		}
		if r := e.do("GET", "/v1/chain/proof/inclusion?event_id=evt-n8", key, nil); r.Status != 200 || r.JSON(t)["leaf_index"] != float64(4) {
			t.Fatalf("inclusion proof of the numbered event: %d %s", r.Status, r.Body)
		}
		if tip := e.tip(key); tip["sequence"] != float64(8) || tip["event_count"] != float64(5) {
			t.Fatalf("tip %v", tip)
		}
	})
}

// The place is the service's: a body naming it (even as null), or carrying
// payload_hash, is 422 naming the field, and nothing is written; the rest
// of the body is checked as POST /v1/events checks it.
func TestAppendAtTipRefusesAPlace(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("place@example.com")
		h0 := hashOf(e.appendNextOK(key, next("evt-0")))
		cases := []struct {
			name  string
			body  any
			hdr   []string
			field string
		}{
			{"sequence", next("evt-x", "sequence", 1), nil, "sequence"},
			{"sequence at 2^52", next("evt-x", "sequence", domain.MaxClientSequence), nil, "sequence"},
			{"prev_hash", next("evt-x", "prev_hash", h0), nil, "prev_hash"},
			{"prev_hash null", next("evt-x", "prev_hash", nil), nil, "prev_hash"},
			{"payload_hash", next("evt-x", "payload_hash", h0), nil, "payload_hash"},
			{"missing event_id", map[string]any{"event_type": "t"}, nil, "event_id"},
			{"bad event_id", next("nope"), nil, "event_id"},
			{"missing event_type", map[string]any{"event_id": "evt-x"}, nil, "event_type"},
			{"bad decision", next("evt-x", "decision", "maybe"), nil, "decision"},
			{"raw not an object", next("evt-x", "raw", []int{1}), nil, "raw"},
			{"bad ts", next("evt-x", "ts", "yesterday"), nil, "ts"},
			{"unknown field", next("evt-x", "user_id", "u"), nil, "user_id"},
			{"bad surface", next("evt-x"), []string{"X-SVC-Surface", "carrier-pigeon"}, "X-SVC-Surface"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				m := wantProblem(t, e.do("POST", "/v1/events/append", key, c.body, c.hdr...), 422, "validation_error")
				if !namesField(m, c.field) {
					t.Fatalf("the answer does not name %s: %v", c.field, m)
				}
			})
		}
		m := wantProblem(t, e.do("POST", "/v1/events/append", key, next("evt-x", "sequence", 1)), 422, "validation_error")
		if msg := fmt.Sprint(m["errors"]); !strings.Contains(msg, "set by the service") {
			t.Fatalf("the answer does not say the service sets the sequence: %v", m)
		}
		if tip := e.tip(key); tip["event_count"] != float64(1) {
			t.Fatalf("a refused append stored something: %v", tip)
		}
	})
}

// The body is read with the route's own keys: a place field is met, where
// it stands in the body, as a field the route does not take, whatever its
// value (so a badly typed sequence is still the service's field, and a
// problem after it is not the one answered), and an empty event_id or
// event_type reads as missing.
func TestAppendAtTipReadsItsOwnKeys(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("keys@example.com")
		cases := []struct {
			name, body, field, message string
		}{
			{"sequence of the wrong type", `{"event_id":"evt-x","event_type":"t","sequence":"one"}`, "sequence", "set by the service"},
			{"sequence before a bad event_id", `{"sequence":1,"event_id":5,"event_type":"t"}`, "sequence", "set by the service"},
			{"bad event_id before sequence", `{"event_id":5,"sequence":1,"event_type":"t"}`, "event_id", "must be a string"},
			{"payload_hash of the wrong type", `{"event_id":"evt-x","event_type":"t","payload_hash":[1]}`, "payload_hash", "computed by the service"},
			{"empty event_id", `{"event_id":"","event_type":"t"}`, "event_id", "required"},
			{"empty event_type", `{"event_id":"evt-x","event_type":""}`, "event_type", "required"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				m := wantProblem(t, e.do("POST", "/v1/events/append", key, c.body), 422, "validation_error")
				errs, _ := m["errors"].([]any)
				if len(errs) != 1 {
					t.Fatalf("want one field error, got %v", m)
				}
				fe := errs[0].(map[string]any)
				if fe["field"] != c.field || !strings.Contains(fmt.Sprint(fe["message"]), c.message) {
					t.Fatalf("want %s %q, got %v", c.field, c.message, fe)
				}
			})
		}
	})
}

// Idempotent on event_id: a resend of the same content is answered with the
// stored event at the place it took (header Idempotent-Replayed: true, the
// quota not charged), even after other events; other content under the id
// is 409 event_id_conflict.
func TestAppendAtTipReplayAndConflict(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("replay@example.com")
		body := next("evt-r", "tool", "bash", "raw", map[string]any{"result_sha256": "ab"}, "ts", "2026-11-21T12:00:00+00:00")
		first := e.appendNextOK(key, body)
		e.appendNextOK(key, next("evt-after"))
		e.clock.Advance(time.Minute)
		r := e.do("POST", "/v1/events/append", key, body)
		if r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("resend: %d %v %s", r.Status, r.Header, r.Body)
		}
		again := r.JSON(t)
		if eventOf(again)["sequence"] != float64(0) || hashOf(again) != hashOf(first) || again["status"] != "appended" {
			t.Fatalf("resend answered %v, stored %v", again, first)
		}
		if q := again["quota"].(map[string]any); q["used_today"] != float64(2) {
			t.Fatalf("the resend was charged: %v", q)
		}
		// Without ts both times: the service's ts of the first attempt.
		noTS := next("evt-nots", "raw", map[string]any{"k": 1})
		stored := e.appendNextOK(key, noTS)
		e.clock.Advance(time.Minute)
		if r := e.do("POST", "/v1/events/append", key, noTS); r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" || hashOf(r.JSON(t)) != hashOf(stored) {
			t.Fatalf("resend without ts: %d %s", r.Status, r.Body)
		}
		// An event first sent through POST /v1/events, resent here.
		tip := e.tip(key)
		placed := e.appendOK(key, ev("evt-placed", int64(tip["sequence"].(float64))+1, tip["payload_hash"], "ts", "2026-11-21T12:00:00+00:00"))
		if r := e.do("POST", "/v1/events/append", key, next("evt-placed", "event_type", "tool_call", "ts", "2026-11-21T12:00:00+00:00")); r.Status != 200 ||
			r.Header.Get("Idempotent-Replayed") != "true" || hashOf(r.JSON(t)) != hashOf(placed) {
			t.Fatalf("resend of an event placed by the client: %d %s", r.Status, r.Body)
		}
		count := e.tip(key)["event_count"]
		for name, other := range map[string]map[string]any{
			"other raw":     next("evt-r", "tool", "bash", "raw", map[string]any{"result_sha256": "cd"}, "ts", "2026-11-21T12:00:00+00:00"),
			"other ts":      next("evt-r", "tool", "bash", "raw", map[string]any{"result_sha256": "ab"}, "ts", "2026-11-21T12:00:01+00:00"),
			"other type":    next("evt-r", "event_type", "note", "tool", "bash", "raw", map[string]any{"result_sha256": "ab"}, "ts", "2026-11-21T12:00:00+00:00"),
			"without tool":  next("evt-r", "raw", map[string]any{"result_sha256": "ab"}, "ts", "2026-11-21T12:00:00+00:00"),
			"client's type": next("evt-placed", "ts", "2026-11-21T12:00:00+00:00"),
		} {
			m := wantProblem(t, e.do("POST", "/v1/events/append", key, other), 409, "event_id_conflict")
			if _, ok := m["sequence"]; !ok {
				t.Fatalf("%s: the conflict does not name the stored sequence: %v", name, m)
			}
		}
		if after := e.tip(key)["event_count"]; after != count {
			t.Fatalf("a replay or a conflict stored something: %v, was %v", after, count)
		}
	})
}

// CONTRACT.md "Batch"'s order holds: body limits (413), then the daily
// quota (429 whatever the body: not JSON, a place sent, a bad shape, a bad
// signature, a resend), then the body's own checks.
func TestAppendAtTipQuotaFirst(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.DailyEventQuota = 2 })
		_, key := e.account("quota@example.com")
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		if r := e.do("PUT", "/v1/machines/m1/signing-key", key, map[string]any{"public_key": b64key(pub)}); r.Status != 200 {
			t.Fatalf("register: %d %s", r.Status, r.Body)
		}
		first := next("evt-q0", "raw", map[string]any{"n": 0}, "ts", "2026-11-21T12:00:00+00:00")
		e.appendNextOK(key, first)
		e.appendNextOK(key, next("evt-q1"))
		wantProblem(t, e.do("POST", "/v1/events/append", key, `{"event_id":"evt-big","event_type":"t","raw":{"pad":"`+
			strings.Repeat("x", int(e.cfg.MaxBodyBytes))+`"}}`), 413, "body_too_large")
		for name, body := range map[string]any{
			"valid":         next("evt-q2"),
			"not JSON":      `{"event_id":`,
			"a sequence":    next("evt-q2", "sequence", 3),
			"prev_hash":     next("evt-q2", "prev_hash", nil),
			"bad shape":     next("nope"),
			"unsigned":      next("evt-q2", "machine_id", "m1"),
			"a resend":      first,
			"other content": next("evt-q0"),
		} {
			r := e.do("POST", "/v1/events/append", key, body)
			wantProblem(t, r, 429, "daily_quota_exceeded")
			if r.Header.Get("Retry-After") != "43200" {
				t.Fatalf("%s: Retry-After %q", name, r.Header.Get("Retry-After"))
			}
		}
		if tip := e.tip(key); tip["event_count"] != float64(3) {
			t.Fatalf("over the quota, something was stored: %v", tip)
		}
		// The next UTC day: the resend is answered, the rest as the body says.
		e.clock.Advance(12 * time.Hour)
		if r := e.do("POST", "/v1/events/append", key, first); r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("resend on the next day: %d %s", r.Status, r.Body)
		}
		wantProblem(t, e.do("POST", "/v1/events/append", key, next("evt-q2", "sequence", 3)), 422, "validation_error")
		wantProblem(t, e.do("POST", "/v1/events/append", key, next("evt-q2", "machine_id", "m1")), 401, "event_signature_invalid")
	})
}

// A machine with a registered key signs raw, which the numbering does not
// touch: the client signs before it knows the place, and the service checks
// it as on POST /v1/events (401 unsigned or badly signed, nothing stored).
func TestAppendAtTipChecksTheSignature(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("signed@example.com")
		pub, priv, _ := ed25519.GenerateKey(rand.Reader)
		if r := e.do("PUT", "/v1/machines/m1/signing-key", key, map[string]any{"public_key": b64key(pub)}); r.Status != 200 {
			t.Fatalf("register: %d %s", r.Status, r.Body)
		}
		raw := map[string]any{"exit": 0}
		_, other, _ := ed25519.GenerateKey(rand.Reader)
		for name, body := range map[string]map[string]any{
			"unsigned":       next("evt-s", "machine_id", "m1", "raw", raw),
			"another key":    next("evt-s", "machine_id", "m1", "raw", raw, "signature", signRaw(t, other, raw)),
			"another raw":    next("evt-s", "machine_id", "m1", "raw", map[string]any{"exit": 1}, "signature", signRaw(t, priv, raw)),
			"not base64 sig": next("evt-s", "machine_id", "m1", "raw", raw, "signature", "@@@"),
		} {
			m := wantProblem(t, e.do("POST", "/v1/events/append", key, body), 401, "event_signature_invalid")
			if m["machine_id"] != "m1" {
				t.Fatalf("%s: %v", name, m)
			}
		}
		if e.tip(key)["event_count"] != float64(1) {
			t.Fatal("an unverified event was stored")
		}
		signed := e.appendNextOK(key, next("evt-s", "machine_id", "m1", "raw", raw, "signature", signRaw(t, priv, raw), "signature_key", verify.Fingerprint(pub)))
		if g := eventOf(signed); g["sequence"] != float64(1) || g["machine_sequence"] != float64(0) || g["signature"] != signRaw(t, priv, raw) {
			t.Fatalf("signed event: %v", g)
		}
		// Another machine, without a key, needs no signature.
		e.appendNextOK(key, next("evt-m2", "machine_id", "m2"))
	})
}

// Many writers on one account, through POST /v1/events/append and POST
// /v1/events (following each 409 to the tip it names), at once — on
// PostgreSQL through two replicas, so that the optimistic appends meet
// stale heads: every event is stored once, the sequences are 0..n-1 with no
// gap or repeat, each prev_hash is the previous event's payload_hash, and
// the chain verifies.
func TestAppendAtTipConcurrentWithClientAppends(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, nil)
		replicas := []*env{e}
		if strings.HasPrefix(dsn, "postgres") {
			replicas = append(replicas, newEnv(t, dsn, nil))
		}
		_, key := e.account("many@example.com")
		const numbered, placed, each = 6, 3, 12
		var wg sync.WaitGroup
		errs := make(chan error, (numbered+placed)*each)
		for w := range numbered + placed {
			srv := replicas[w%len(replicas)].srv.URL
			wg.Go(func() {
				for i := range each {
					id := fmt.Sprintf("evt-w%d-%d", w, i)
					var err error
					if w < numbered {
						err = postOnce(srv, key, "/v1/events/append", next(id, "raw", map[string]any{"w": w, "i": i}))
					} else {
						err = appendFollowingTip(srv, key, id)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		total := (numbered + placed) * each
		evs := e.do("POST", "/v1/events/search", key, map[string]any{"limit": 1000}).JSON(t)["results"].([]any)
		if len(evs) != total {
			t.Fatalf("%d events stored, want %d", len(evs), total)
		}
		ids := map[string]bool{}
		var prev any
		for i := range evs { // newest first
			ev := evs[len(evs)-1-i].(map[string]any)
			if ev["sequence"] != float64(i) || ev["prev_hash"] != prev || ids[ev["event_id"].(string)] {
				t.Fatalf("event %d of the chain: %v (previous hash %v)", i, ev, prev)
			}
			ids[ev["event_id"].(string)] = true
			prev = ev["payload_hash"]
		}
		if v := e.do("GET", "/v1/chain/verify", key, nil).JSON(t); v["valid"] != true {
			t.Fatalf("verify: %v", v)
		}
	})
}

// postOnce sends body to path and wants 200 (from a goroutine: no t).
func postOnce(base, key, path string, body any) error {
	status, resp, err := post(base, key, path, body)
	if err == nil && status != 200 {
		err = fmt.Errorf("%s %v: %d %s", path, body, status, resp)
	}
	return err
}

// appendFollowingTip appends through POST /v1/events at the tip it reads,
// following each continuity refusal to the tip it names, as pkg/client does.
func appendFollowingTip(base, key, id string) error {
	tip, err := getJSON(http.DefaultClient, base+"/v1/chain/tip", key)
	if err != nil {
		return err
	}
	seq, prev := int64(0), tip["payload_hash"]
	if tip["sequence"] != nil {
		seq = num(tip["sequence"]) + 1
	}
	for range 1000 {
		status, resp, err := post(base, key, "/v1/events", ev(id, seq, prev))
		switch {
		case err != nil:
			return err
		case status == 200:
			return nil
		case status == 409 && resp["expected_prev_hash"] != nil:
			seq, prev = num(resp["last_sequence"])+1, resp["expected_prev_hash"]
		default:
			return fmt.Errorf("append %s at %d: %d %v", id, seq, status, resp)
		}
	}
	return fmt.Errorf("append %s: the tip moved 1000 times", id)
}

// post sends body to path and returns the answer's status and JSON.
func post(base, key, path string, body any) (int, map[string]any, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequest("POST", base+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%d %s: %w", resp.StatusCode, data, err)
	}
	return resp.StatusCode, m, nil
}
