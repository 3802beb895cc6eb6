package httpapi_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/verify"
)

// ev builds an event body.
func ev(id string, seq int64, prev any, extra ...any) map[string]any {
	m := map[string]any{"event_id": id, "event_type": "tool_call", "sequence": seq, "prev_hash": prev}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

// appendOK appends and returns the stored event's payload_hash.
func (e *env) appendOK(key string, body map[string]any, headers ...string) map[string]any {
	e.t.Helper()
	r := e.do("POST", "/v1/events", key, body, headers...)
	if r.Status != 200 {
		e.t.Fatalf("append %v: %d %s", body["event_id"], r.Status, r.Body)
	}
	return r.JSON(e.t)
}

func hashOf(resp map[string]any) string {
	return resp["event"].(map[string]any)["payload_hash"].(string)
}

// tip reads GET /v1/chain/tip.
func (e *env) tip(key string) map[string]any {
	e.t.Helper()
	return e.do("GET", "/v1/chain/tip", key, nil).JSON(e.t)
}

func TestAppendGenesisAndContinuity(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("a@example.com")
		r0 := e.appendOK(key, ev("evt-0", 0, nil, "raw", map[string]any{"b": 2, "a": 1}, "tool", "read_file", "decision", "allow"),
			"X-SVC-Surface", "sdk")
		got := r0["event"].(map[string]any)
		if r0["status"] != "appended" || got["user_id"] != user || got["api_key_id"] == nil || got["machine_sequence"] != float64(0) || got["surface"] != "sdk" {
			t.Fatalf("response: %v", r0)
		}
		// ts set by the server in the spec's form, and payload_hash recomputed
		// independently per CONTRACT.md.
		ts := got["ts"].(string)
		if !strings.HasSuffix(ts, "+00:00") {
			t.Fatalf("server ts %q lacks +00:00", ts)
		}
		want, _ := verify.PayloadHash(&verify.HashedEvent{EventID: "evt-0", EventType: "tool_call", Sequence: 0,
			Raw: json.RawMessage(`{"a":1,"b":2}`), Decision: ptr("allow"), Tool: ptr("read_file"), TS: &ts})
		if got["payload_hash"] != want {
			t.Fatalf("payload_hash %v, recomputed %v", got["payload_hash"], want)
		}
		if q := r0["quota"].(map[string]any); q["used_today"] != float64(1) || q["limit"] != float64(10000) || q["remaining"] != float64(9999) {
			t.Fatalf("quota %v", q)
		}
		if ep := r0["epoch"].(map[string]any); ep["scheme"] != "svc-epoch-v1" || ep["date_utc"] != "2026-11-21" {
			t.Fatalf("epoch %v", ep)
		}
		h0 := hashOf(r0)
		// A later sequence with a gap is allowed (heal reports gaps); the link must hold.
		r1 := e.appendOK(key, ev("evt-1", 5, h0, "ts", "2026-11-21T13:00:00+02:00"))
		if r1["event"].(map[string]any)["ts"] != "2026-11-21T13:00:00+02:00" {
			t.Fatal("client ts not stored as sent")
		}
		tip := e.tip(key)
		if tip["sequence"] != float64(5) || tip["payload_hash"] != hashOf(r1) || tip["event_id"] != "evt-1" {
			t.Fatalf("tip %v", tip)
		}
	})
}

func TestAppendErrorsStoreNothing(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("a@example.com")
		// Genesis errors.
		wantProblem(t, e.do("POST", "/v1/events", key, ev("evt-g", 0, "sha256:"+strings.Repeat("0", 64))), 409, "prev_hash_for_genesis")
		m := wantProblem(t, e.do("POST", "/v1/events", key, ev("evt-g", 3, nil)), 409, "non_monotonic_sequence")
		if m["expected_sequence"] != float64(0) {
			t.Fatalf("expected_sequence = %v", m["expected_sequence"])
		}
		if tip := e.tip(key); tip["sequence"] != nil || tip["event_count"] != float64(0) {
			t.Fatalf("refused genesis stored something: %v", tip)
		}
		h0 := hashOf(e.appendOK(key, ev("evt-0", 0, nil)))
		h1 := hashOf(e.appendOK(key, ev("evt-1", 1, h0)))

		cases := []struct {
			name   string
			body   any
			hdr    []string
			status int
			code   string
		}{
			{"stale prev_hash", ev("evt-x", 2, h0), nil, 409, "prev_hash_mismatch"},
			{"null prev_hash after genesis", ev("evt-x", 2, nil), nil, 409, "prev_hash_mismatch"},
			{"sequence not above the last", ev("evt-x", 1, h1), nil, 409, "non_monotonic_sequence"},
			{"same id, other content", ev("evt-1", 1, h0, "tool", "other"), nil, 409, "event_id_conflict"},
			{"missing event_type", map[string]any{"event_id": "evt-x", "sequence": 2, "prev_hash": h1}, nil, 422, "validation_error"},
			{"missing sequence", map[string]any{"event_id": "evt-x", "event_type": "t", "prev_hash": h1}, nil, 422, "validation_error"},
			{"sequence not an integer", ev("evt-x", 2, h1, "sequence", 2.5), nil, 422, "validation_error"},
			{"bad decision", ev("evt-x", 2, h1, "decision", "maybe"), nil, 422, "validation_error"},
			{"raw not an object", ev("evt-x", 2, h1, "raw", []int{1}), nil, 422, "validation_error"},
			{"client payload_hash", ev("evt-x", 2, h1, "payload_hash", h1), nil, 422, "validation_error"},
			{"client user_id", ev("evt-x", 2, h1, "user_id", "u"), nil, 422, "validation_error"},
			{"bad ts", ev("evt-x", 2, h1, "ts", "yesterday"), nil, 422, "validation_error"},
			{"bad surface", ev("evt-x", 2, h1), []string{"X-SVC-Surface", "carrier-pigeon"}, 422, "validation_error"},
			{"bad event_id", ev("nope", 2, h1), nil, 422, "validation_error"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				m := wantProblem(t, e.do("POST", "/v1/events", key, c.body, c.hdr...), c.status, c.code)
				if c.code == "prev_hash_mismatch" && m["expected_prev_hash"] != h1 {
					t.Fatalf("expected_prev_hash = %v, want %s", m["expected_prev_hash"], h1)
				}
			})
		}
		if tip := e.tip(key); tip["sequence"] != float64(1) || tip["payload_hash"] != h1 || tip["event_count"] != float64(2) {
			t.Fatalf("a refused append stored something: %v", tip)
		}
	})
}

func TestIdempotentRetry(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("a@example.com")
		first := e.appendOK(key, ev("evt-0", 0, nil, "raw", map[string]any{"k": "v"}))
		e.clock.Advance(time.Minute)
		// The same event again (ts omitted both times) is answered with the stored one.
		r := e.do("POST", "/v1/events", key, ev("evt-0", 0, nil, "raw", map[string]any{"k": "v"}))
		if r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry: %d %s", r.Status, r.Body)
		}
		if r.JSON(t)["event"].(map[string]any)["ts"] != first["event"].(map[string]any)["ts"] || hashOf(r.JSON(t)) != hashOf(first) {
			t.Fatal("retry answered a different event")
		}
		if tip := e.tip(key); tip["event_count"] != float64(1) {
			t.Fatalf("retry stored a second copy: %v", tip)
		}
		if q := r.JSON(t)["quota"].(map[string]any); q["used_today"] != float64(1) {
			t.Fatalf("retry counted against the quota: %v", q)
		}
	})
}

func TestDailyQuota(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.DailyEventQuota = 3 })
		_, key := e.account("a@example.com")
		prev := any(nil)
		for i := 0; i < 3; i++ {
			prev = hashOf(e.appendOK(key, ev(fmt.Sprintf("evt-%d", i), int64(i), prev)))
		}
		r := e.do("POST", "/v1/events", key, ev("evt-3", 3, prev))
		m := wantProblem(t, r, 429, "daily_quota_exceeded")
		if r.Header.Get("Retry-After") != "43200" {
			t.Fatalf("Retry-After = %q, want 43200 (12 hours to 00:00 UTC)", r.Header.Get("Retry-After"))
		}
		if q := m["quota"].(map[string]any); q["remaining"] != float64(0) || q["used_today"] != float64(3) {
			t.Fatalf("quota member %v", q)
		}
		// Batch rows count against the same quota, all or nothing.
		wantProblem(t, e.do("POST", "/v1/events/batch", key, map[string]any{"events": []any{ev("evt-b", 10, nil)}}), 429, "daily_quota_exceeded")
		if tip := e.tip(key); tip["event_count"] != float64(3) {
			t.Fatalf("over-quota event stored: %v", tip)
		}
		// The quota resets at 00:00 UTC.
		e.clock.Advance(12*time.Hour - time.Second)
		wantProblem(t, e.do("POST", "/v1/events", key, ev("evt-3", 3, prev)), 429, "daily_quota_exceeded")
		e.clock.Advance(time.Second)
		if r := e.appendOK(key, ev("evt-3", 3, prev)); r["quota"].(map[string]any)["used_today"] != float64(1) {
			t.Fatalf("after reset: %v", r["quota"])
		}
	})
}

func signRaw(t testing.TB, priv ed25519.PrivateKey, raw any) string {
	b, _ := json.Marshal(raw)
	c, err := jcs.Transform(b)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(ed25519.Sign(priv, c))
}

func TestSignedEvents(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("a@example.com")
		pub, priv, _ := ed25519.GenerateKey(rand.Reader)
		// Unsigned events from the machine are fine until it registers a key.
		h0 := hashOf(e.appendOK(key, ev("evt-0", 0, nil, "machine_id", "m1")))
		wantProblem(t, e.do("PUT", "/v1/machines/m1/signing-key", key, map[string]any{"public_key": "not base64!"}), 422, "validation_error")
		wantProblem(t, e.do("PUT", "/v1/machines/m1/signing-key", key, map[string]any{"public_key": base64.StdEncoding.EncodeToString([]byte("short"))}), 422, "validation_error")
		wantProblem(t, e.do("PUT", "/v1/machines/m1/signing-key", key, map[string]any{}), 422, "validation_error")
		if m := e.do("GET", "/v1/machines", key, nil).JSON(t)["machines"].([]any)[0].(map[string]any); m["current_fingerprint"] != nil || len(m["keys"].([]any)) != 0 {
			t.Fatalf("a refused key registration stored a key: %v", m)
		}
		r := e.do("PUT", "/v1/machines/m1/signing-key", key, map[string]any{"public_key": base64.StdEncoding.EncodeToString(pub)})
		if r.Status != 200 || r.JSON(t)["fingerprint"] != verify.Fingerprint(pub) {
			t.Fatalf("register: %d %s", r.Status, r.Body)
		}
		// The registration is the chain's event 1 (machine.signing_key).
		h0 = e.tip(key)["payload_hash"].(string)
		raw := map[string]any{"cmd_hash": "sha256:abc", "n": 1}
		// Unsigned: the answer says the signature is missing (same code).
		m := wantProblem(t, e.do("POST", "/v1/events", key, ev("evt-1", 2, h0, "machine_id", "m1", "raw", raw)), 401, "event_signature_invalid")
		if d := m["detail"].(string); !strings.Contains(d, "no signature") || strings.Contains(d, "does not verify") {
			t.Fatalf("unsigned event: detail %q", d)
		}
		_, other, _ := ed25519.GenerateKey(rand.Reader)
		m = wantProblem(t, e.do("POST", "/v1/events", key, ev("evt-1", 2, h0, "machine_id", "m1", "raw", raw, "signature", signRaw(t, other, raw))), 401, "event_signature_invalid")
		if d := m["detail"].(string); !strings.Contains(d, "does not verify") {
			t.Fatalf("badly signed event: detail %q", d)
		}
		wantProblem(t, e.do("POST", "/v1/events", key, ev("evt-1", 2, h0, "machine_id", "m1", "raw", raw, "signature", "@@@")), 401, "event_signature_invalid")
		if e.tip(key)["event_count"] != float64(2) {
			t.Fatal("an unverified event was stored")
		}
		signed := e.appendOK(key, ev("evt-1", 2, h0, "machine_id", "m1", "raw", raw, "signature", signRaw(t, priv, raw), "signature_key", verify.Fingerprint(pub)))
		if signed["event"].(map[string]any)["machine_sequence"] != float64(1) {
			t.Fatalf("machine_sequence = %v", signed["event"].(map[string]any)["machine_sequence"])
		}
		// Other machines are unaffected; the listing shows fingerprints only.
		e.appendOK(key, ev("evt-2", 3, hashOf(signed), "machine_id", "m2"))
		list := e.do("GET", "/v1/machines", key, nil)
		if strings.Contains(string(list.Body), base64.StdEncoding.EncodeToString(pub)) {
			t.Fatal("machine listing shows the public key itself")
		}
		if n := list.JSON(t)["count"]; n != float64(2) {
			t.Fatalf("machines count = %v: %s", n, list.Body)
		}
	})
}

func TestBatch(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("a@example.com")
		big := make([]any, 501)
		for i := range big {
			big[i] = ev(fmt.Sprintf("evt-%d", i), int64(i), nil)
		}
		m := wantProblem(t, e.do("POST", "/v1/events/batch", key, map[string]any{"events": big}), 413, "batch_too_large")
		if m["received"] != float64(501) {
			t.Fatalf("received = %v", m["received"])
		}
		wantProblem(t, e.do("POST", "/v1/events/batch", key, map[string]any{"client_machine": "m"}), 422, "validation_error")
		if e.tip(key)["event_count"] != float64(0) {
			t.Fatal("a refused batch stored something")
		}
		rows := []any{
			ev("evt-0", 0, nil), ev("evt-1", 1, "sha256:"+strings.Repeat("a", 64)), // continuity is not checked
			map[string]any{"event_id": "evt-2", "sequence": 2}, // no event_type
			ev("evt-3", 3, nil, "decision", "nope"),
			ev("evt-0", 0, nil), // duplicate within the batch
			ev("evt-5", 5, nil, "payload_hash", "sha256:"+strings.Repeat("b", 64)),
		}
		r := e.do("POST", "/v1/events/batch", key, map[string]any{"client_machine": "laptop", "events": rows})
		if r.Status != 200 {
			t.Fatalf("batch: %d %s", r.Status, r.Body)
		}
		res := r.JSON(t)
		if res["ingested"] != float64(2) || res["skipped"] != float64(0) || len(res["errors"].([]any)) != 4 || res["client_machine"] != "laptop" {
			t.Fatalf("batch result %s", r.Body)
		}
		if rate := res["rate"].(map[string]any); rate["limit"] != float64(100) || rate["count"] != float64(6) {
			t.Fatalf("rate %v", rate)
		}
		// Again: idempotent on event_id.
		res = e.do("POST", "/v1/events/batch", key, map[string]any{"events": rows[:2]}).JSON(t)
		if res["ingested"] != float64(0) || res["skipped"] != float64(2) {
			t.Fatalf("repeat: %v", res)
		}
		// A sequence stored under another event_id is refused per row
		// (CONTRACT.md "Batch": sequence_taken); nothing is stored for it.
		res = e.do("POST", "/v1/events/batch", key, map[string]any{"events": []any{ev("evt-9", 1, nil)}}).JSON(t)
		if errs := res["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["code"] != "sequence_taken" ||
			errs[0].(map[string]any)["index"] != float64(0) || res["ingested"] != float64(0) {
			t.Fatalf("taken sequence: %v", res)
		}
		if e.tip(key)["event_count"] != float64(2) {
			t.Fatalf("tip %v", e.tip(key))
		}
		// Rows all above the tip are stored without looking their ids up
		// first; a stored id among them (evt-1, now at sequence 21) is found by
		// the insert, and the rows are placed again: evt-20 stored, evt-1
		// refused, nothing of the first attempt left behind.
		res = e.do("POST", "/v1/events/batch", key, map[string]any{"events": []any{ev("evt-20", 20, nil), ev("evt-1", 21, nil)}}).JSON(t)
		if errs := res["errors"].([]any); res["ingested"] != float64(1) || len(errs) != 1 ||
			errs[0].(map[string]any)["code"] != "event_id_conflict" || errs[0].(map[string]any)["index"] != float64(1) {
			t.Fatalf("stored id above the tip: %v", res)
		}
		if tip := e.tip(key); tip["event_count"] != float64(3) || tip["event_id"] != "evt-20" {
			t.Fatalf("tip %v", tip)
		}
		// machine_sequence counts stored events only: the refused rows above
		// (evt-3, evt-5, the second evt-1) took no number, so the next event
		// is the fourth.
		tip := e.tip(key)
		next := e.appendOK(key, ev("evt-30", 30, tip["payload_hash"].(string)))
		if ms := next["event"].(map[string]any)["machine_sequence"]; ms != float64(3) {
			t.Fatalf("machine_sequence after the batch = %v, want 3", ms)
		}
	})
}

// Rows that do not decode as events (an unknown field, a mistyped field,
// not an object) are named by index while the rows around them are stored:
// the one-pass decode of the body fails, and the rows are decoded one by one.
func TestBatchRowsThatDoNotDecode(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("a@example.com")
		rows := []any{
			ev("evt-0", 0, nil),
			ev("evt-1", 1, nil, "colour", "red"),
			ev("evt-2", 2, nil, "tool", 7),
			"evt-3",
			ev("evt-4", 4, nil),
		}
		r := e.do("POST", "/v1/events/batch", key, map[string]any{"client_machine": "laptop", "events": rows})
		if r.Status != 200 {
			t.Fatalf("batch: %d %s", r.Status, r.Body)
		}
		res := r.JSON(t)
		if res["ingested"] != float64(2) || res["client_machine"] != "laptop" {
			t.Fatalf("batch result %s", r.Body)
		}
		want := map[float64]string{1: "colour", 2: "tool", 3: ""}
		errs := res["errors"].([]any)
		if len(errs) != len(want) {
			t.Fatalf("errors %v, want rows 1, 2 and 3", errs)
		}
		for _, x := range errs {
			row := x.(map[string]any)
			field, ok := want[row["index"].(float64)]
			if !ok || row["code"] != "validation_error" || (field != "" && row["field"] != field) {
				t.Fatalf("row error %v, want index→field %v", row, want)
			}
		}
		if tip := e.tip(key); tip["event_count"] != float64(2) || tip["event_id"] != "evt-4" {
			t.Fatalf("tip %v", tip)
		}
	})
}

// A batch whose rows are all above the tip but which carries an id already
// stored (with other content: event_id_conflict) counts against the daily
// quota only its new rows: the lookup-free first placement counts every row,
// and a refusal there must not answer 429 before the lookup (found by a
// reviewer).
func TestBatchStoredIDAboveTheTipCountsOnlyNewRowsAgainstTheQuota(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.DailyEventQuota = 3 })
		_, key := e.account("a@example.com")
		r := e.do("POST", "/v1/events/batch", key, map[string]any{"events": []any{ev("evt-0", 0, nil), ev("evt-1", 1, nil)}})
		if r.Status != 200 || r.JSON(t)["ingested"] != float64(2) {
			t.Fatalf("first batch: %d %s", r.Status, r.Body)
		}
		// One quota unit left. evt-1 again, at sequence 11 (above the tip):
		// a conflict, not a new row; evt-10 is the only new row.
		r = e.do("POST", "/v1/events/batch", key, map[string]any{"events": []any{ev("evt-10", 10, nil), ev("evt-1", 11, nil)}})
		if r.Status != 200 {
			t.Fatalf("batch with one new row and one stored id, one quota unit left: %d %s", r.Status, r.Body)
		}
		res := r.JSON(t)
		errs := res["errors"].([]any)
		if res["ingested"] != float64(1) || len(errs) != 1 || errs[0].(map[string]any)["code"] != "event_id_conflict" {
			t.Fatalf("result %s", r.Body)
		}
		if q := res["quota"].(map[string]any); q["used_today"] != float64(3) || q["remaining"] != float64(0) {
			t.Fatalf("quota %v", q)
		}
		if tip := e.tip(key); tip["event_count"] != float64(3) || tip["event_id"] != "evt-10" {
			t.Fatalf("tip %v", tip)
		}
	})
}

// The same, where the batch's row count alone exceeds the daily quota
// (ConsumeQuota's n > limit path): 4 rows, 3 of them new, quota 3.
func TestBatchStoredIDAboveTheTipWithMoreRowsThanTheQuota(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.DailyEventQuota = 3 })
		_, key := e.account("a@example.com")
		if r := e.do("POST", "/v1/events/batch", key, map[string]any{"events": []any{ev("evt-0", 0, nil)}}); r.Status != 200 {
			t.Fatalf("first batch: %d %s", r.Status, r.Body)
		}
		e.clock.Advance(24 * time.Hour) // a new UTC day: the full quota again
		rows := []any{ev("evt-0", 10, nil)}
		for i := 1; i <= 3; i++ {
			rows = append(rows, ev(fmt.Sprintf("evt-%d", 10+i), int64(10+i), nil))
		}
		r := e.do("POST", "/v1/events/batch", key, map[string]any{"events": rows})
		if r.Status != 200 || r.JSON(t)["ingested"] != float64(3) {
			t.Fatalf("3 new rows + 1 stored id under a quota of 3: %d %s", r.Status, r.Body)
		}
	})
}

// A body that names "events" twice, or as "Events" (which encoding/json
// would match), is refused whole naming the key, and nothing is stored:
// taking the last array (as before issue 18) let a proxy that reads the
// first one disagree with the service.
func TestBatchWithEventsTwiceIsRefused(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("a@example.com")
		for _, c := range []struct{ body, field string }{
			{`{"events":[{"event_id":"evt-0","event_type":"tool_call","sequence":0,"tool":"rm -rf","decision":"deny"}],` +
				`"Events":[{"event_id":"evt-1","event_type":"tool_call","sequence":1}]}`, "Events"},
			{`{"events":[{"event_id":"evt-2","event_type":"tool_call","sequence":2}],"events":[null]}`, "events"},
		} {
			m := wantProblem(t, e.do("POST", "/v1/events/batch", key, c.body), 422, "validation_error")
			if errs, _ := m["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["field"] != c.field {
				t.Fatalf("errors = %v, want one naming %s", m["errors"], c.field)
			}
		}
		if n := e.do("GET", "/v1/chain/tip", key, nil).JSON(t)["event_count"]; n != float64(0) {
			t.Fatalf("event_count = %v after refused batches", n)
		}
	})
}

// A clock that ran ahead (here 30 days) and was then corrected must not take
// the daily quota away until that later date: SPEC.md "10,000 events today;
// resumes 00:00 UTC". PostgreSQL keeps a usage row per day; SQLite's head row
// keeps one day, and must start over at today (found by a reviewer).
func TestQuotaAfterAClockThatRanAheadIsCorrected(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.DailyEventQuota = 3 })
		_, key := e.account("a@example.com")
		// The clock runs 30 days ahead for a while: two events are written.
		e.clock.Advance(30 * 24 * time.Hour)
		prev := any(nil)
		seq := int64(0)
		for i := 0; i < 2; i++ {
			prev = hashOf(e.appendOK(key, ev(fmt.Sprintf("evt-ahead-%d", i), seq, prev)))
			seq++
		}
		// NTP corrects it: today again (2026-11-21 12:00 UTC).
		e.clock.Advance(-30 * 24 * time.Hour)
		for i := 0; i < 3; i++ {
			r := e.do("POST", "/v1/events", key, ev(fmt.Sprintf("evt-today-%d", i), seq, prev))
			if r.Status != 200 {
				t.Fatalf("today's event %d of a quota of 3 after the clock was corrected: %d %s", i+1, r.Status, r.Body)
			}
			if q := r.JSON(t)["quota"].(map[string]any); q["used_today"] != float64(i+1) {
				t.Errorf("event %d: quota %v, want used_today %d", i+1, q, i+1)
			}
			prev = hashOf(r.JSON(t))
			seq++
		}
	})
}

// Even when today's quota is used up, it resumes when the 429 says.
func TestQuotaResumesWhenThe429SaysAfterAClockCorrection(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.DailyEventQuota = 3 })
		_, key := e.account("a@example.com")
		e.clock.Advance(30 * 24 * time.Hour)
		prev := hashOf(e.appendOK(key, ev("evt-ahead", 0, nil)))
		seq := int64(1)
		e.clock.Advance(-30 * 24 * time.Hour)
		var r response
		for {
			r = e.do("POST", "/v1/events", key, ev(fmt.Sprintf("evt-%d", seq), seq, prev))
			if r.Status != 200 {
				break
			}
			prev = hashOf(r.JSON(t))
			seq++
		}
		wantProblem(t, r, 429, "daily_quota_exceeded")
		after, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Duration(after) * time.Second)
		if r := e.do("POST", "/v1/events", key, ev(fmt.Sprintf("evt-%d", seq), seq, prev)); r.Status != 200 {
			t.Fatalf("after Retry-After (%d s): %d %s", after, r.Status, r.Body)
		}
	})
}

func TestBatchRateLimit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.BatchRateLimit = 10 })
		_, key := e.account("a@example.com")
		rows := func(from, n int) []any {
			out := make([]any, n)
			for i := range out {
				out[i] = ev(fmt.Sprintf("evt-%d", from+i), int64(from+i), nil)
			}
			return out
		}
		if r := e.do("POST", "/v1/events/batch", key, map[string]any{"events": rows(0, 8)}); r.Status != 200 {
			t.Fatalf("first batch: %d", r.Status)
		}
		r := e.do("POST", "/v1/events/batch", key, map[string]any{"events": rows(8, 5)})
		wantProblem(t, r, 429, "rate_limit_exceeded")
		if r.Header.Get("Retry-After") == "" {
			t.Fatal("no Retry-After")
		}
		if e.tip(key)["event_count"] != float64(8) {
			t.Fatal("rate-limited batch stored rows")
		}
		e.clock.Advance(time.Minute)
		if r := e.do("POST", "/v1/events/batch", key, map[string]any{"events": rows(8, 5)}); r.Status != 200 {
			t.Fatalf("after a minute: %d %s", r.Status, r.Body)
		}
	})
}

// The same 500-event batch sent 10 times concurrently: every id stored once,
// and each call accounts for all of its rows.
func TestBatchConcurrentRepeats(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.BatchRateLimit = 100000 })
		_, key := e.account("a@example.com")
		rows := make([]any, 500)
		for i := range rows {
			rows[i] = ev(fmt.Sprintf("evt-%d", i), int64(i), nil)
		}
		var wg sync.WaitGroup
		results := make([]map[string]any, 10)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := e.do("POST", "/v1/events/batch", key, map[string]any{"events": rows})
				if r.Status == 200 {
					results[i] = r.JSON(t)
				}
			}()
		}
		wg.Wait()
		ingested := 0
		for _, r := range results {
			if r == nil {
				t.Fatal("a batch call failed")
			}
			if n := r["ingested"].(float64) + r["skipped"].(float64) + float64(len(r["errors"].([]any))); n != 500 {
				t.Fatalf("ingested+skipped+errors = %v", n)
			}
			ingested += int(r["ingested"].(float64))
		}
		if ingested != 500 || e.tip(key)["event_count"] != float64(500) {
			t.Fatalf("ingested %d in total; tip %v", ingested, e.tip(key))
		}
	})
}

func TestSearchAndRead(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("a@example.com")
		_, otherKey := e.account("b@example.com")
		prev := any(nil)
		for i := 0; i < 60; i++ {
			tool, decision := "read_file", "allow"
			if i%3 == 0 {
				tool, decision = "bash", "deny"
			}
			typ := "tool_call"
			if i%2 == 1 {
				typ = "tool_result"
			}
			body := ev(fmt.Sprintf("evt-%02d", i), int64(i), prev, "event_type", typ, "tool", tool, "decision", decision,
				"ts", time.Date(2026, 11, 21, 10, i, 0, 0, time.UTC).Format(time.RFC3339), "raw", map[string]any{"secret": "s"},
				"signature", "c2ln", "signature_key", "k")
			prev = hashOf(e.appendOK(key, body))
		}
		e.appendOK(otherKey, ev("evt-00", 0, nil, "tool", "bash"))

		all := e.do("POST", "/v1/events/search", key, map[string]any{}).JSON(t)
		if all["count"] != float64(60) || all["results"].([]any)[0].(map[string]any)["sequence"] != float64(59) {
			t.Fatalf("search all: count %v", all["count"])
		}
		for _, res := range all["results"].([]any) {
			for _, hidden := range []string{"raw", "signature", "signature_key"} {
				if _, ok := res.(map[string]any)[hidden]; ok {
					t.Fatalf("search result shows %s", hidden)
				}
			}
		}
		page := e.do("POST", "/v1/events/search", key, map[string]any{"limit": 25, "cursor": 30, "tool": "bash", "decision": "deny", "event_types": []string{"tool_call"}}).JSON(t)
		for _, res := range page["results"].([]any) {
			r := res.(map[string]any)
			if r["tool"] != "bash" || r["decision"] != "deny" || r["event_type"] != "tool_call" || r["sequence"].(float64) >= 30 {
				t.Fatalf("filter leak: %v", r)
			}
		}
		if page["count"] != float64(5) { // sequences 0, 6, 12, 18, 24
			t.Fatalf("filtered count = %v", page["count"])
		}
		window := e.do("POST", "/v1/events/search", key, map[string]any{"after": "2026-11-21T10:10:00Z", "before": "2026-11-21T12:20:00+02:00"}).JSON(t)
		if window["count"] != float64(9) { // minutes 11..19
			t.Fatalf("time window count = %v", window["count"])
		}
		paged := e.do("POST", "/v1/events/search", key, map[string]any{"limit": 20}).JSON(t)
		if paged["next_cursor"] != float64(40) {
			t.Fatalf("next_cursor = %v", paged["next_cursor"])
		}
		wantProblem(t, e.do("POST", "/v1/events/search", key, map[string]any{"after": "noon"}), 400, "invalid_after")
		wantProblem(t, e.do("POST", "/v1/events/search", key, map[string]any{"before": "2026-13-01"}), 400, "invalid_before")
		wantProblem(t, e.do("POST", "/v1/events/search", key, map[string]any{"limit": 0}), 422, "validation_error")
		wantProblem(t, e.do("POST", "/v1/events/search", key, map[string]any{"limit": 1001}), 422, "validation_error")
		// U+0000 cannot be stored (PostgreSQL's text refuses it: the same 422
		// on both stores), nor sent in a PostgreSQL query.
		wantProblem(t, e.do("POST", "/v1/events", key, ev("evt-nul", 60, nil, "tool", "ba\u0000sh")), 422, "validation_error")
		for _, body := range []map[string]any{{"tool": "ba\u0000sh"}, {"decision": "\u0000"}, {"event_types": []string{"tool_call", "x\u0000"}}} {
			wantProblem(t, e.do("POST", "/v1/events/search", key, body), 422, "validation_error")
		}
		if n := e.do("POST", "/v1/events/search", key, map[string]any{"limit": 1000}).JSON(t)["count"]; n != float64(60) {
			t.Fatalf("limit 1000: %v", n)
		}

		one := e.do("GET", "/v1/events/evt-59", key, nil).JSON(t)
		anc := one["ancestry"].([]any)
		if len(anc) != 50 || anc[0].(map[string]any)["sequence"] != float64(58) || anc[49].(map[string]any)["sequence"] != float64(9) {
			t.Fatalf("ancestry: %d links", len(anc))
		}
		if _, ok := one["event"].(map[string]any)["raw"]; ok {
			t.Fatal("single read shows raw")
		}
		if n := len(e.do("GET", "/v1/events/evt-03", key, nil).JSON(t)["ancestry"].([]any)); n != 3 {
			t.Fatalf("ancestry of evt-03: %d", n)
		}
		wantProblem(t, e.do("GET", "/v1/events/evt-nope", key, nil), 404, "event_not_found")
		// Another account's id answers exactly like a missing one.
		foreign := e.do("GET", "/v1/events/evt-01", otherKey, nil)
		missing := e.do("GET", "/v1/events/evt-zz", otherKey, nil)
		wantProblem(t, foreign, 404, "event_not_found")
		if string(foreign.Body) != string(missing.Body) {
			t.Fatalf("foreign id answer %s differs from missing id answer %s", foreign.Body, missing.Body)
		}
		if n := e.do("POST", "/v1/events/search", otherKey, map[string]any{}).JSON(t)["count"]; n != float64(1) {
			t.Fatalf("search crossed accounts: %v", n)
		}
	})
}

func TestPolicyProbeAndDedupAdvisory(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("a@example.com")
		probe := func(body map[string]any) map[string]any {
			r := e.do("POST", "/v1/policy/test", key, body)
			if r.Status != 200 {
				t.Fatalf("probe: %d %s", r.Status, r.Body)
			}
			return r.JSON(t)
		}
		input := map[string]any{"path": "/etc/hosts"}
		if p := probe(map[string]any{"tool": "read_file", "tool_input": input}); p["dedup_status"] != "miss" || p["would_hit"] != false {
			t.Fatalf("empty chain: %v", p)
		}
		if p := probe(map[string]any{"tool": "bash", "tool_input": input}); p["dedup_status"] != "uncacheable" {
			t.Fatalf("bash: %v", p)
		}
		first := e.appendOK(key, ev("evt-0", 0, nil, "tool", "read_file", "raw", map[string]any{"tool_input": input}))
		if _, ok := first["dedup_advisory"]; ok {
			t.Fatal("first call carries an advisory")
		}
		before := e.tip(key)
		p := probe(map[string]any{"tool": "read_file", "tool_input": map[string]any{"path": "/etc/hosts"}})
		if p["dedup_status"] != "hit" || p["would_hit"] != true || p["cached_from_event_id"] != "evt-0" || p["dedup_action"] != "reuse" {
			t.Fatalf("repeat probe: %v", p)
		}
		if p := probe(map[string]any{"tool": "read_file", "tool_input": input, "intent": "fresh"}); p["dedup_status"] != "bypass" || p["would_hit"] != false {
			t.Fatalf("fresh: %v", p)
		}
		// parent_event_id has no part in the decision (docs/decisions/dedup.md):
		// the whole answer is the same with any parent or none.
		for _, parent := range []any{"evt-0", "evt-unknown", nil} {
			withParent := probe(map[string]any{"tool": "read_file", "tool_input": input, "parent_event_id": parent})
			if !reflect.DeepEqual(withParent, p) {
				t.Fatalf("parent_event_id %v changed the answer:\n with    %v\n without %v", parent, withParent, p)
			}
		}
		bad := e.do("POST", "/v1/policy/test", key, map[string]any{"tool": "read_file", "parent_event_id": 7})
		if !strings.Contains(string(bad.Body), "parent_event_id") {
			t.Fatalf("a numeric parent_event_id: the error does not name the field: %s", bad.Body)
		}
		wantProblem(t, bad, 422, "validation_error")
		if after := e.tip(key); after["event_count"] != before["event_count"] {
			t.Fatal("the probe wrote something")
		}
		second := e.appendOK(key, ev("evt-1", 1, hashOf(first), "tool", "read_file", "raw", map[string]any{"tool_input": input}))
		adv, ok := second["dedup_advisory"].(map[string]any)
		if !ok || adv["cached_from_event_id"] != "evt-0" || adv["semantic_key"] != p["semantic_key"] {
			t.Fatalf("advisory: %v (probe key %v)", second["dedup_advisory"], p["semantic_key"])
		}
		// Outside the window in seconds: a miss.
		e.clock.Advance(301 * time.Second)
		if p := probe(map[string]any{"tool": "read_file", "tool_input": input}); p["dedup_status"] != "miss" {
			t.Fatalf("after the window: %v", p)
		}
		wantProblem(t, e.do("POST", "/v1/policy/test", key, map[string]any{"tool_input": input}), 422, "validation_error")
		wantProblem(t, e.do("POST", "/v1/policy/test", key, map[string]any{"tool": "x", "intent": "later"}), 422, "validation_error")
	})
}

// sseReader reads frames of one stream.
type sseReader struct {
	resp   *http.Response
	cancel context.CancelFunc
	lines  *bufio.Scanner
}

func (e *env) openStream(key string) *sseReader {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/events/stream", nil)
	req.Header.Set("X-API-Key", key)
	resp, err := e.srv.Client().Do(req)
	if err != nil || resp.StatusCode != 200 {
		cancel()
		e.t.Fatalf("open stream: %v %v", resp, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		e.t.Fatalf("Content-Type %q", ct)
	}
	s := &sseReader{resp: resp, cancel: cancel, lines: bufio.NewScanner(resp.Body)}
	e.t.Cleanup(s.close)
	return s
}

func (s *sseReader) close() { s.cancel(); s.resp.Body.Close() }

// next returns the next frame's event name and data.
func (s *sseReader) next(t testing.TB) (string, string) {
	t.Helper()
	var name, data string
	for s.lines.Scan() {
		line := s.lines.Text()
		switch {
		case line == "" && name != "":
			return name, data
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	t.Fatalf("stream ended: %v", s.lines.Err())
	return "", ""
}

func TestStreamDeliversAppendsOnly(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("a@example.com")
		_, other := e.account("b@example.com")
		h0 := hashOf(e.appendOK(key, ev("evt-0", 0, nil))) // before the connection: never replayed
		s := e.openStream(key)
		if name, data := s.next(t); name != "ready" || !strings.Contains(data, user) {
			t.Fatalf("first frame %s %s", name, data)
		}
		e.appendOK(other, ev("evt-x", 0, nil)) // another account: never shown
		e.appendOK(key, ev("evt-1", 1, h0, "tool", "bash", "decision", "deny", "machine_id", "m"))
		name, data := s.next(t)
		var f map[string]any
		json.Unmarshal([]byte(data), &f)
		if name != "event" || f["event_id"] != "evt-1" || f["sequence"] != float64(1) || f["tool"] != "bash" || f["decision"] != "deny" || f["machine_id"] != "m" {
			t.Fatalf("frame %s %s", name, data)
		}
		// Batch rows are announced too.
		e.do("POST", "/v1/events/batch", key, map[string]any{"events": []any{ev("evt-2", 2, nil)}})
		if _, data := s.next(t); !strings.Contains(data, `"evt-2"`) {
			t.Fatalf("batch frame %s", data)
		}
	})
}

// With PostgreSQL, an append on one replica reaches listeners on every replica.
func TestStreamAcrossReplicas(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	a, b := newEnv(t, dsn, nil), newEnv(t, dsn, nil)
	_, key := a.account("a@example.com")
	onA, onB := a.openStream(key), b.openStream(key)
	onA.next(t)
	onB.next(t)
	b.appendOK(key, ev("evt-0", 0, nil))
	for name, s := range map[string]*sseReader{"origin replica": onB, "other replica": onA} {
		if kind, data := s.next(t); kind != "event" || !strings.Contains(data, `"evt-0"`) {
			t.Fatalf("%s got %s %s", name, kind, data)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// Events the service writes (grant.*, governance.*) never spend the client's
// daily quota, so a revocation works on an account that used its quota up.
func TestServiceEventsDoNotSpendTheQuota(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.DailyEventQuota = 2 })
		_, key := e.account("q@example.com")
		expires := e.clock.Now().Add(time.Hour).Format(time.RFC3339)
		g := e.grant(key, map[string]any{"subagent": "w", "expires_at": expires, "max_tool_calls": 5})
		tip := e.tip(key)
		prev := tip["payload_hash"]
		seq := int64(tip["sequence"].(float64))
		for i := 1; i <= 2; i++ {
			prev = hashOf(e.appendOK(key, ev(fmt.Sprintf("evt-q%d", i), seq+int64(i), prev)))
		}
		wantProblem(t, e.do("POST", "/v1/events", key, ev("evt-q3", seq+3, prev)), 429, "daily_quota_exceeded")
		r := e.do("POST", "/v1/grants/"+grantIDOf(g)+"/revoke", key, map[string]any{"subagent": "w"})
		if r.Status != 200 || r.JSON(t)["outcome"] != "revoked" {
			t.Fatalf("revoke over quota: %d %s", r.Status, r.Body)
		}
		if after := e.tip(key); after["event_count"].(float64) != tip["event_count"].(float64)+3 {
			t.Fatalf("grant.revoked not appended: %v", after)
		}
	})
}
